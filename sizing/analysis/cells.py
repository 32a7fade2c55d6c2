"""A CSV's columns as numbers, as the report and the dashboard read them (runformat.cells per cell)."""

from __future__ import annotations

import pandas as pd

from runformat.cells import cell_number, not_available

NAMED_COLUMNS = 3  # the columns a warning names, with one cell of each
CELL_CHARS = 32  # a cell shown longer is cut


def as_numbers(frame: pd.DataFrame, *, skip_headers: bool = True) -> tuple[pd.DataFrame, str | None]:
    """Every column as floats: a plain number as it is, a number in another tool's form
    (runformat.cells.cell_number) read, anything else unknown. And the one warning that says which columns
    held which, with a cell of each (without the file's name): a number read from text is said, and a cell
    lost is never silent. A row that repeats the header (a log appended to with its header) is skipped,
    said, unless skip_headers is off (some columns of a frame: its rows must stay)."""
    frame, headers = _without_header_rows(frame) if skip_headers else (frame, 0)
    columns: dict[str, pd.Series] = {}
    read: list[tuple[str, int, str]] = []
    lost: list[tuple[str, int, str]] = []
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            columns[name] = column.astype("float64")
            continue
        numbers = pd.to_numeric(column, errors="coerce").astype("float64")
        text = column.astype("string").str.strip()
        pending = numbers.isna() & column.notna() & ~text.fillna("").map(not_available).astype(bool)
        if pending.any():
            forms = {cell: cell_number(cell, str(name)) for cell in text[pending].unique()}
            found = text[pending].map(forms)
            numbers[pending] = found.astype("float64")
            _count(read, name, text[pending][found.notna()])
            _count(lost, name, text[pending][found.isna()])
        columns[name] = numbers
    parts = [
        f"{headers} repeated header line(s) skipped (a log appended to)" * bool(headers),
        f"{_total(read):,} cell(s) read as the numbers they write another way ({_named(read)})" * bool(read),
        f"{_total(lost):,} cell(s) that hold no number read as unknown ({_named(lost)})" * bool(lost),
    ]
    return pd.DataFrame(columns, index=frame.index), "; ".join(p for p in parts if p) or None


def _without_header_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if not text or len(text) < len(frame.columns):
        return frame, 0
    named = pd.Series(False, index=frame.index)
    header = pd.Series(True, index=frame.index)
    for name in frame.columns:
        same = frame[name].astype("string").str.strip().eq(str(name)).fillna(False).astype(bool)
        named |= same
        header &= same | frame[name].isna()
    header &= named
    return (frame[~header].reset_index(drop=True), int(header.sum())) if header.any() else (frame, 0)


def _count(found: list[tuple[str, int, str]], name: object, cells: pd.Series) -> None:
    if not cells.empty:
        found.append((str(name), int(cells.size), str(cells.iloc[0])))


def _total(found: list[tuple[str, int, str]]) -> int:
    return sum(count for _, count, _ in found)


def _named(found: list[tuple[str, int, str]]) -> str:
    shown = [f"{name} {_short(cell)!r}" for name, _, cell in found[:NAMED_COLUMNS]]
    more = len(found) - NAMED_COLUMNS
    return ", ".join(shown) + (f" and {more} more column(s)" if more > 0 else "")


def _short(cell: str) -> str:
    return cell if len(cell) <= CELL_CHARS else cell[: CELL_CHARS - 1] + "…"
