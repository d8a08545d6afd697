"""Entry point for ``rpent-tui`` and ``python -m rpent_tui`` (pyproject: ``rpent-tui = "rpent_tui.__main__:main"``)."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the rpent TUI (see ``rpent_tui.cli``); returns the exit status."""
    from rpent_tui.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
