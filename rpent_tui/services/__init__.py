"""The TUI's service layer: trio bridge, batching, readers, operator, commands (no Textual imports).

Import submodules directly (``from rpent_tui.services.operator import TuiOperator``); the session
model lives in ``rpent.session``. This package imports nothing at import time so that ``rpent_tui.services`` stays usable without Textual.
"""
