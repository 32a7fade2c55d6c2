"""`python3 -m runformat duration TEXT`: print the seconds in TEXT, or one line on stderr and exit 2.

Standard library only, so the entry-point scripts can check a duration before installing anything.
"""

from __future__ import annotations

import sys

from runformat.duration import parse_duration


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "duration":
        print("usage: python3 -m runformat duration DURATION", file=sys.stderr)
        return 2
    try:
        print(f"{parse_duration(argv[1]):g}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
