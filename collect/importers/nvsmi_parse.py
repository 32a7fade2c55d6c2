"""Reading an nvidia-smi log: `--query-gpu` CSV (any fields, with or without header and units) or `dmon`
text, into samples of per-GPU readings keyed by the run format's column suffixes.

Times stay as the log wrote them (local wall-clock, no zone); collect.importers.nvsmi applies the offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from collect.importers.nvsmi_fields import (
    DESCRIPTION_FIELDS,
    DMON_FIELDS,
    DMON_GPM_FIELDS,
    DMON_GPM_UNIT,
    ID_FIELDS,
    PREFERRED,
    QUERY_FIELDS,
    REASON_BITS,
    TIME_FIELDS,
    Field,
    GpuLog,
    Line,
    NvsmiImportError,
    Value,
    is_unavailable,
    kept_column_suffix,
    parse_value,
    reason_active,
    reason_name,
    split_header_name,
)
from collect.importers.nvsmi_gpus import group_samples

QUERY_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")


@dataclass
class _Columns:
    """How each position of a line is read."""

    time: int | None = None
    gpu_id: tuple[int, str] | None = None
    readers: list[tuple[int, str, Field | None]] = field(default_factory=list)  # position, suffix, field
    reasons: list[tuple[int, int]] = field(default_factory=list)  # position, NVML bit
    descriptions: list[tuple[int, str]] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)


def parse_log(text: str, fields: Sequence[str] | None = None, gpus: int | None = None) -> GpuLog:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise NvsmiImportError("empty file: not an nvidia-smi log")
    ends_cleanly = text.endswith("\n")
    first = lines[0][1].strip()
    if first.startswith("#") and "gpu" in first.lstrip("#").lower().split():
        log, parsed = _parse_dmon(lines, ends_cleanly)
    elif first.startswith("#"):
        raise NvsmiImportError(
            f"line {lines[0][0]}: a '#' line without dmon's `gpu` column: not an nvidia-smi log"
        )
    else:
        log, parsed = _parse_query(lines, fields, ends_cleanly)
    if not parsed:
        raise NvsmiImportError("no readings after the header")
    group_samples(log, parsed, gpus)
    return log


# ----------------------------------------------------------------------------------------- --query-gpu


def _looks_like_header(cells: list[str]) -> bool:
    names = [split_header_name(cell)[0] for cell in cells]
    known = set(QUERY_FIELDS) | set(ID_FIELDS) | set(DESCRIPTION_FIELDS) | set(TIME_FIELDS)
    return any(name in known or reason_name(name) for name in names) and all(
        name and " " not in name and "/" not in name for name in names
    )


def _parse_query(
    lines: list[tuple[int, str]], fields: Sequence[str] | None, ends_cleanly: bool
) -> tuple[GpuLog, list[Line]]:
    first_cells = [cell.strip() for cell in lines[0][1].split(",")]
    has_header = _looks_like_header(first_cells)
    if has_header:
        header, body = first_cells, lines[1:]
    elif fields:
        header, body = list(fields), lines
    elif _moment(first_cells[0]) is not None:
        raise NvsmiImportError(
            "no header line (--format=csv,noheader): give the fields it was logged with, e.g. "
            "--fields timestamp,index,utilization.gpu,power.draw"
        )
    else:
        raise NvsmiImportError(
            f"line {lines[0][0]}: neither an nvidia-smi --query-gpu header nor a dmon header: "
            "not an nvidia-smi log"
        )
    names = [split_header_name(cell)[0] for cell in header]
    log = GpuLog("query-gpu csv" + ("" if has_header else " (no header; --fields)"), names)
    columns = _query_columns(header, log)
    if columns.time is None:
        raise NvsmiImportError("the log has no timestamp field: log with --query-gpu=timestamp,...")
    parsed: list[Line] = []
    for position, (number, raw) in enumerate(body):
        cells = [cell.strip() for cell in raw.split(",")]
        last = position == len(body) - 1
        if cells == first_cells and has_header:
            continue  # the same log appended twice: a repeated header
        if has_header and _looks_like_header(cells):
            raise NvsmiImportError(
                f"line {number}: a second header with other fields (two logs in one file?)"
            )
        problem = _line_problem(cells, len(header), columns.time, columns.gpu_id)
        if last and not ends_cleanly:
            problem = problem or "no line end: the log was cut while this line was written"
        if problem is None:
            parsed.append(_query_line(number, cells, columns))
        elif last:
            log.truncated_tail = f"line {number} is cut short ({problem}) and was left out"
        else:
            log.leave_out(number, problem, raw, len(body))
    return log, parsed


def _line_problem(
    cells: list[str], expected: int, time_position: int, gpu_id: tuple[int, str] | None
) -> str | None:
    if len(cells) != expected:
        return f"{len(cells)} fields, the header has {expected}"
    if _moment(cells[time_position]) is None:
        return f"{cells[time_position]!r} is not an nvidia-smi timestamp (YYYY/MM/DD HH:MM:SS.mmm)"
    if gpu_id is not None and (not cells[gpu_id[0]] or is_unavailable(cells[gpu_id[0]])):
        return f"its GPU {gpu_id[1]} is {cells[gpu_id[0]]!r}: not which GPU it is about"
    return None


def _query_columns(header: list[str], log: GpuLog) -> _Columns:
    columns = _Columns()
    names = [split_header_name(cell)[0] for cell in header]
    id_rank = ("index", "uuid", "pci_bus_id")
    for position, name in enumerate(names):
        if name in TIME_FIELDS:
            columns.time = position
        elif name in ID_FIELDS:
            kind = ID_FIELDS[name]
            columns.descriptions.append((position, kind))
            if columns.gpu_id is None or id_rank.index(kind) < id_rank.index(columns.gpu_id[1]):
                columns.gpu_id = (position, kind)
                log.identified_by = f"{name} column"
        elif name in DESCRIPTION_FIELDS:
            columns.descriptions.append((position, DESCRIPTION_FIELDS[name]))
        elif (reason := reason_name(name)) is not None:
            if reason == "active":
                _add_reader(columns, log, position, "throttle_reasons", None)
            elif reason in REASON_BITS:
                columns.reasons.append((position, REASON_BITS[reason]))
            else:
                _keep(columns, log, position, name)
        elif name in QUERY_FIELDS:
            preferred = PREFERRED.get(name)
            if preferred is not None and preferred in names:
                _keep(columns, log, position, name)
            else:
                _add_reader(columns, log, position, QUERY_FIELDS[name].suffix, QUERY_FIELDS[name])
        else:
            _keep(columns, log, position, name)
    if columns.reasons and not any(suffix == "throttle_reasons" for _, suffix, _ in columns.readers):
        log.suffixes.append("throttle_reasons")
        log.notes.append(
            "gpu<N>_throttle_reasons is built from the named clocks-event reasons in the log "
            "(no .active bitmask)"
        )
    log.kept = dict(columns.kept)
    return columns


def _add_reader(columns: _Columns, log: GpuLog, position: int, suffix: str, spec: Field | None) -> None:
    columns.readers.append((position, suffix, spec))
    if suffix not in log.suffixes:
        log.suffixes.append(suffix)


def _keep(columns: _Columns, log: GpuLog, position: int, name: str) -> None:
    suffix = kept_column_suffix(name)
    while suffix in log.suffixes or suffix in {spec.suffix for spec in QUERY_FIELDS.values()}:
        suffix += "_"
    columns.kept[name] = suffix
    _add_reader(columns, log, position, suffix, None)


def _query_line(number: int, cells: list[str], columns: _Columns) -> Line:
    assert columns.time is not None
    values: dict[str, Value] = {}
    for position, suffix, spec in columns.readers:
        values[suffix] = parse_value(cells[position], spec)
    if columns.reasons and "throttle_reasons" not in values:
        states = [(bit, reason_active(cells[position])) for position, bit in columns.reasons]
        known = [(bit, state) for bit, state in states if state is not None]
        values["throttle_reasons"] = sum(bit for bit, state in known if state) if known else None
    description = {
        kind: cells[position]
        for position, kind in columns.descriptions
        if not is_unavailable(cells[position])
    }
    gpu_id = cells[columns.gpu_id[0]] if columns.gpu_id else None
    moment = _moment(cells[columns.time])
    assert moment is not None
    return Line(number, moment, gpu_id, values, description)


def _moment(text: str) -> datetime | None:
    for layout in QUERY_TIME_FORMATS:
        try:
            return datetime.strptime(text.strip(), layout)
        except ValueError:
            continue
    return None


# ----------------------------------------------------------------------------------------------- dmon


def _parse_dmon(lines: list[tuple[int, str]], ends_cleanly: bool) -> tuple[GpuLog, list[Line]]:
    header = [name.lower() for name in lines[0][1].lstrip("#").split()]
    if "date" not in header or "time" not in header:
        raise NvsmiImportError(
            "dmon output without date and time columns: record with `nvidia-smi dmon -o DT` "
            "so each line has its time"
        )
    log = GpuLog("dmon", header, identified_by="gpu column (dmon)")
    date_at, time_at, gpu_at = header.index("date"), header.index("time"), header.index("gpu")
    units = _dmon_units(lines, len(header))
    readers: list[tuple[int, str, Field | None]] = []
    for position, name in enumerate(header):
        if position in (date_at, time_at, gpu_at):
            continue
        spec = _dmon_field(name, units[position] if units else None)
        suffix = spec.suffix if spec else kept_column_suffix(f"dmon_{name}")
        if spec is None:
            log.kept[name] = suffix
        readers.append((position, suffix, spec))
        log.suffixes.append(suffix)
    unknown = [
        name
        for name, unit in zip(header, units or [], strict=False)
        if unit.startswith(DMON_GPM_UNIT) and name not in DMON_GPM_FIELDS
    ]
    if unknown:
        log.notes.append(
            f"GPM metric columns without a run-format column, kept as logged: {', '.join(unknown)} "
            "(gpu<N>_dmon_<name>, nvidia-smi's unit)"
        )
    parsed: list[Line] = []
    body = lines[1:]
    for position, (number, raw) in enumerate(body):
        stripped = raw.strip()
        if stripped.startswith("#"):
            names = [name.lower() for name in stripped.lstrip("#").split()]
            if "gpu" in names and names != header:
                raise NvsmiImportError(
                    f"line {number}: a dmon header with other columns (two logs in one file?)"
                )
            continue
        cells = stripped.split()
        last = position == len(body) - 1
        moment = _dmon_moment(cells, date_at, time_at) if len(cells) == len(header) else None
        no_gpu = moment is not None and is_unavailable(cells[gpu_at])
        if moment is None or no_gpu or (last and not ends_cleanly):
            problem = (
                f"{len(cells)} columns, the header has {len(header)}"
                if len(cells) != len(header)
                else "no YYYYMMDD HH:MM:SS time"
                if moment is None
                else f"its gpu is {cells[gpu_at]!r}: not which GPU it is about"
                if no_gpu
                else "no line end: the log was cut while this line was written"
            )
            if last:
                log.truncated_tail = f"line {number} is cut short ({problem}) and was left out"
            else:
                log.leave_out(number, problem, raw, len(body))
            continue
        values = {suffix: parse_value(cells[at], spec) for at, suffix, spec in readers}
        parsed.append(Line(number, moment, cells[gpu_at], values, {"index": cells[gpu_at]}))
    return log, parsed


def _dmon_units(lines: list[tuple[int, str]], columns: int) -> list[str] | None:
    """dmon's units line (`#YYYYMMDD HH:MM:SS Idx W C ... GPM:% GPM:MiB/s`) right under the header."""
    if len(lines) < 2 or not lines[1][1].strip().startswith("#"):
        return None
    units = lines[1][1].strip().lstrip("#").split()
    return units if len(units) == columns and "gpu" not in [unit.lower() for unit in units] else None


def _dmon_field(name: str, unit: str | None) -> Field | None:
    """A dmon column's run-format field; a GPM metric's only where the units line, if any, says GPM."""
    if name in DMON_GPM_FIELDS:
        return DMON_GPM_FIELDS[name] if unit is None or unit.startswith(DMON_GPM_UNIT) else None
    return DMON_FIELDS.get(name)


def _dmon_moment(cells: list[str], date_at: int, time_at: int) -> datetime | None:
    try:
        return datetime.strptime(f"{cells[date_at]} {cells[time_at]}", "%Y%m%d %H:%M:%S")
    except ValueError:
        return None
