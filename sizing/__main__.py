"""`python -m sizing RUN... --out report.md|report.html|report.json` (see sizing.cli)."""

import sys

from sizing.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
