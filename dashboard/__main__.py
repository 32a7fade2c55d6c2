"""`python -m dashboard [--data-dir data] [--host 127.0.0.1] [--port 8050]` serves the app;
`python -m dashboard report ...` is an alias of `python -m sizing ...` (the sizing report)."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

from runformat.cli import OneLineParser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m dashboard",
        description="Serve the Dash app comparing the runs under DATA_DIR/runs and DATA_DIR/examples. "
        "`python -m dashboard report --help` for the sizing report.",
    )
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="default: data")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8050, help="default: 8050")
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port must be between 1 and 65535, got {args.port}")
    if not args.data_dir.is_dir():
        parser.error(f"--data-dir {args.data_dir} is not a directory")
    return args


def _cannot_listen(host: str, port: int) -> str | None:
    """Why a server could not listen on host:port (a name that does not resolve, an address not this
    machine's, a port in use or reserved), or None."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            probe.bind(address)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "report":
        from sizing import report_main

        return report_main(argv[1:], prog="python -m dashboard report")
    args = parse_args(argv)
    refused = _cannot_listen(args.host, args.port)
    if refused:  # before Flask, whose server prints its own lines and exits 1
        where = f"{args.host}:{args.port}"
        print(f"python -m dashboard: error: cannot serve on {where}: {refused}", file=sys.stderr)
        return 2
    from dashboard.app import create_app

    app = create_app(args.data_dir)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request (the refresh polls)
    print(
        f"dashboard: http://{args.host}:{args.port}/ over {args.data_dir.resolve()} (Ctrl-C to stop)",
        file=sys.stderr,
    )
    try:
        app.run(host=args.host, port=args.port, debug=False)
    except OSError as exc:
        print(
            f"python -m dashboard: cannot serve on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
