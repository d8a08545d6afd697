"""rpent_tui: the operator's workbench, a Textual terminal UI for rpent (``rpent-tui``).

``rpent_tui.services`` (trio bridge, batch, datasets, explore, images) imports no
Textual; ``rpent_tui.app`` holds the Textual app. Nothing is imported here, so importing the
package is cheap and Textual-free.
"""
