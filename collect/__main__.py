"""`python -m collect run|sample|timed ...`"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "import-prometheus":
        from collect.importers.prometheus import main as import_main

        return import_main(args[1:])
    if args and args[0] == "timed":
        try:
            from collect.timed import main as timed_main
        except ModuleNotFoundError as exc:
            if exc.name != "collect.timed":
                raise
            print(
                "collect: 'timed' is not available in this checkout (collect/timed.py is missing)",
                file=sys.stderr,
            )
            return 1
        return timed_main(args[1:])
    from collect.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
