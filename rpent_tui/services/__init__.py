"""The TUI's service layer: session, trio bridge, batching, readers, operator, commands (no Textual imports).

Import submodules directly (``from rpent_tui.services.session import Session``); this package
imports nothing at import time so that ``rpent_tui.services`` stays usable without Textual.
"""
