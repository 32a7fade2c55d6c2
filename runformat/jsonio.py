"""JSON files that are never seen half-written."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from runformat.textfile import text_encoding


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` to a temp file beside `path`, fsync it, then rename it over `path`."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the file from other readers
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=False, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def read_json(path: Path) -> dict[str, Any]:
    """The object in `path`; ValueError (one line) if it is unreadable or not a JSON object."""
    try:
        data = json.loads(decoded(Path(path).read_bytes()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def read_object(path: Path, name: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(the object, None); (None, None) when the file is absent; (None, a one-line warning naming the file
    as `name`, by default its file name) when it is unreadable or not a JSON object."""
    path = Path(path)
    name = name or path.name
    try:
        text = decoded(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{name} is unreadable ({_reason(exc)})"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"{name} is unreadable ({_reason(exc)})"
    return (data, None) if isinstance(data, dict) else (None, f"{name} is not a JSON object")


def decoded(raw: bytes) -> str:
    """A JSON file's text as the run's CSVs are read: UTF-8 with or without a byte-order mark (an editor
    on Windows writes one), or UTF-16 with its mark."""
    return raw.decode(text_encoding(raw))


def _reason(exc: Exception) -> str:
    """`JSONDecodeError: Expecting value: line 1 column 1 (char 0)`, `PermissionError: Permission denied`."""
    detail = exc.strerror if isinstance(exc, OSError) else (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
