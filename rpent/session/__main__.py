"""``python -m rpent.session serve DIR [--foreground] | stop SESSION | list`` (see ``rpent.session.process``)."""

import sys

from rpent.session.process import main

if __name__ == "__main__":
    sys.exit(main())
