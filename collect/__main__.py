"""`python -m collect run|sample|timed|import-... ...` (dispatched in collect.cli.main)."""

from __future__ import annotations

import sys

from collect.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
