"""Reusable widgets of the rpent TUI (log pane, transcript, camera frames, step timeline, meters)."""
