"""Screens of the rpent TUI: Services, Run, Code policy editor, Trajectories, Flywheel export, and modals."""
