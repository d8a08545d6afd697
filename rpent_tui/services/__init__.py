"""The TUI's service layer: trio bridge, batch, datasets, explore, images (no Textual imports).

Import submodules directly (``from rpent_tui.services.trio_bridge import TrioBridge``); the session
model and the session's own services (operator, commands, batching, code cells, flywheel jobs,
supervised subprocesses) live in ``rpent.session``, the run-record readers in
``rpent.recording.run_readers``. This package imports nothing at import time so that ``rpent_tui.services`` stays usable without Textual.
"""
