"""The incremental CSV parse behind dashboard.runs: each file parsed once per change of (mtime, size).

A file that only grew (a run in progress) is parsed from where the previous read stopped, a partial last
line waits for the next read, and a big file's parse is also kept as Parquet outside data/
(dashboard.parsecache). Problems become one-line warnings in the frame's `attrs["warnings"]`.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from dashboard import parsecache
from runformat.textfile import csv_text, needs_decoding, packed_copy, unpacked
from sizing.analysis.cells import as_numbers

WARNINGS_ATTR = "warnings"


@dataclass
class _CsvEntry:
    identity: tuple[int, int]
    stamp: tuple[int, int]
    consumed: int
    header: list[str]
    frame: pd.DataFrame
    warnings: list[str]
    packed: Path | None = None  # the compressed copy it was read from: parsed whole again on any change


class CsvCache:
    """Parsed CSVs keyed by path; re-parsed when (mtime, size) change, only the new bytes when it grew."""

    def __init__(self, max_entries: int = 12) -> None:
        self._entries: OrderedDict[Path, _CsvEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._max_entries = max_entries

    def read(self, path: Path, *, numeric: bool, required: bool = True) -> pd.DataFrame:
        packed = None
        try:
            stat = path.stat()
        except OSError:
            packed = packed_copy(path)
            if packed is None:
                return with_warnings(pd.DataFrame(), [f"{path.name} is missing"] if required else [])
            stat = packed.stat()
        identity, stamp = (stat.st_dev, stat.st_ino), (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            entry = self._entries.get(path)
            other = entry is None or entry.packed != packed or entry.identity != identity
            if packed is not None:
                if other or entry.stamp != stamp:
                    entry = _parse_packed(path, packed, identity, numeric)
            elif other or stat.st_size < entry.consumed:
                entry = _from_sidecar(path, identity, stamp) if numeric else None
                entry = entry or _parse_whole_and_keep(path, identity, stamp, numeric)
            elif entry.stamp != stamp:
                entry = _parse_appended(path, entry, numeric)
            entry.stamp = stamp
            self._entries[path] = entry
            self._entries.move_to_end(path)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
            return with_warnings(_without_empty_unnamed(entry.frame), entry.warnings)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _without_empty_unnamed(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without the empty columns a header's empty names stand for (a comma ending each line)."""
    unnamed = [c for c in frame.columns if str(c).startswith("Unnamed: ") and frame[c].isna().all()]
    return frame.drop(columns=unnamed) if unnamed else frame


def _from_sidecar(path: Path, identity: tuple[int, int], stamp: tuple[int, int]) -> _CsvEntry | None:
    kept = parsecache.load(path, identity, stamp)
    if kept is None:
        return None
    return _CsvEntry(identity, stamp, kept["consumed"], kept["header"], kept["frame"], list(kept["warnings"]))


def _parse_whole_and_keep(
    path: Path, identity: tuple[int, int], stamp: tuple[int, int], numeric: bool
) -> _CsvEntry:
    entry = _parse_whole(path, identity, numeric)
    if numeric and entry.consumed <= stamp[1] and entry.header:
        parsecache.store_later(
            path, identity, stamp, entry.frame, entry.consumed, entry.header, entry.warnings
        )
    return entry


def _parse_packed(path: Path, packed: Path, identity: tuple[int, int], numeric: bool) -> _CsvEntry:
    """A file found only as a compressed copy (an archived run), decompressed and parsed whole."""
    raw, note = unpacked(packed)
    if raw is None:
        return _CsvEntry(identity, (0, 0), 0, [], pd.DataFrame(), [note], packed=packed)
    entry = _parse_whole(path, identity, numeric, raw)
    entry.warnings.insert(0, note)
    entry.packed = packed
    return entry


def _parse_whole(path: Path, identity: tuple[int, int], numeric: bool, raw: bytes | None = None) -> _CsvEntry:
    """The file (or `raw`, its bytes) parsed from its start; one an editor or a spreadsheet saved (a
    byte-order mark, UTF-16, `;` or tabs between cells) read as sizing reads it, whole: such a file is not a
    run in progress."""
    raw = _read_bytes(path, 0) if raw is None else raw
    if not needs_decoding(raw):
        return _parse_whole_bytes(path, identity, raw, numeric)
    text, note = csv_text(raw, path.name)
    entry = _parse_whole_bytes(path, identity, text.encode("utf-8"), numeric)
    entry.consumed = len(raw)
    entry.warnings += [note] if note else []
    return entry


def _parse_whole_bytes(path: Path, identity: tuple[int, int], raw: bytes, numeric: bool) -> _CsvEntry:
    newline = raw.find(b"\n")
    header_bytes = raw if newline < 0 else raw[:newline]
    names = [name.strip() for name in header_bytes.decode("utf-8", "replace").strip().split(",")]
    header = [name or f"Unnamed: {i}" for i, name in enumerate(names)] if any(names) else []  # as pandas
    entry = _CsvEntry(identity, (0, 0), 0, header, pd.DataFrame(columns=header), [])
    if newline < 0 or not _is_valid_header(header):
        problem = "is empty" if not raw.strip() else "has no valid header line"
        entry.warnings.append(f"{path.name} {problem}")
        entry.header, entry.frame = [], pd.DataFrame()
        entry.consumed = len(raw)
        return entry
    entry.consumed = newline + 1
    return _parse_appended_bytes(path, entry, raw, newline + 1, numeric)


def _parse_appended(path: Path, entry: _CsvEntry, numeric: bool) -> _CsvEntry:
    if not entry.header:
        return _parse_whole(path, entry.identity, numeric)
    return _parse_appended_bytes(path, entry, _read_bytes(path, entry.consumed), 0, numeric)


def _parse_appended_bytes(path: Path, entry: _CsvEntry, raw: bytes, start: int, numeric: bool) -> _CsvEntry:
    """Parse the complete lines of raw[start:] onto `entry`; a partial last line waits for the next read."""
    last_newline = raw.rfind(b"\n", start)
    cut = last_newline + 1 if last_newline >= 0 else start
    complete, partial = memoryview(raw)[start:cut], raw[cut:]
    entry.warnings = [w for w in entry.warnings if "truncated last line" not in w]
    if partial.strip():
        entry.warnings.append(f"{path.name}: truncated last line ignored")
    entry.consumed += len(complete)
    if not len(complete):
        return entry
    parsed, problems = _parse_lines(complete, entry.header, numeric)
    entry.warnings.extend(f"{path.name}: {problem}" for problem in problems)
    entry.frame = parsed if entry.frame.empty else pd.concat([entry.frame, parsed], ignore_index=True)
    return entry


def _parse_lines(data: memoryview, header: list[str], numeric: bool) -> tuple[pd.DataFrame, list[str]]:
    if not numeric:
        return _parse_text_lines(bytes(data), header)
    bad_rows: list[int] = []

    def skip_bad_row(row: pacsv.InvalidRow) -> str:
        bad_rows.append(row.number or 0)
        return "skip"

    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pacsv.ReadOptions(column_names=header),
            parse_options=pacsv.ParseOptions(invalid_row_handler=skip_bad_row, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.float64())),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _parse_numeric_slowly(bytes(data), header)
    problems = [f"{len(bad_rows)} malformed row(s) skipped"] if bad_rows else []
    return table.to_pandas(), problems


def _parse_numeric_slowly(data: bytes, header: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The tolerant path for files with cells that are not plain numbers: read as sizing reads them."""
    frame, problems = _parse_text_lines(data, header)
    frame, cells = as_numbers(frame)
    return frame, problems + ([cells] if cells else [])


def _parse_text_lines(data: bytes, header: list[str]) -> tuple[pd.DataFrame, list[str]]:
    bad_lines: list[list[str]] = []

    def keep_count(line: list[str]) -> None:
        bad_lines.append(line)

    frame = pd.read_csv(
        io.BytesIO(data),
        names=header,
        header=None,
        dtype=str,
        keep_default_na=False,
        na_values=[""],
        engine="python",
        skipinitialspace=True,  # "a, b" as another tool writes it
        on_bad_lines=keep_count,
        encoding_errors="replace",
    )
    problems = [f"{len(bad_lines)} malformed row(s) skipped"] if bad_lines else []
    return frame, problems


def _read_bytes(path: Path, offset: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read()


def _is_valid_header(header: list[str]) -> bool:
    return (
        bool(header)
        and all(name and name.isprintable() for name in header)
        and len(set(header)) == len(header)
    )


def with_warnings(frame: pd.DataFrame, warnings: Sequence[str]) -> pd.DataFrame:
    frame.attrs[WARNINGS_ATTR] = list(warnings)
    return frame


def warnings_of(frame: pd.DataFrame) -> list[str]:
    return list(frame.attrs.get(WARNINGS_ATTR, []))
