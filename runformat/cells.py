"""One CSV cell as a number: the forms other tools write a number in, and the markers of "no reading".

A plain number is read by its reader (pandas, pyarrow); this module reads what those leave out:
- a number grouped in thousands, `"1,234.5"` (a spreadsheet's number format, quoted in a CSV);
- a number followed by its column's own unit, `45 %`, `250.1 W`, `1980 MHz`, `36 C`, `1,024 MiB` in a
  `_bytes` column (a value pasted from nvidia-smi or a monitoring page). Another unit is not converted;
- a framework's printout of one number, `tensor(0.53, device='cuda:0', grad_fn=<…>)`,
  `tf.Tensor(0.53, shape=(), dtype=float32)`, `np.float32(0.53)` (a loss written without `.item()`).

What stands for no reading (`N/A`, nvidia-smi's `[N/A]` and `[Not Supported]`, `-`) is unknown, not a
problem. Standard library only.
"""

from __future__ import annotations

import re

NOT_AVAILABLE = frozenset(
    {"", "-", "--", "n/a", "na", "nan", "-nan", "null", "none", "<na>", "#n/a", "[n/a]", "[not supported]",
     "not supported", "[unknown error]", "unknown", "err!", "[gpu is lost]"}
)  # fmt: skip  # compared lower-cased: a reading that is not there, or an nvidia-smi error placeholder

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_PRINTER = r"(?:tf\.Tensor|tensor|np\.(?:float|int)\d*|numpy\.(?:float|int)\d*)"
_PRINTOUT = re.compile(rf"{_PRINTER}\(\s*({_NUMBER})\s*[,)]")
_WITH_UNIT = re.compile(rf"({_GROUPED.pattern}|{_NUMBER})\s*([^\d\s].*)")

RATE_SUFFIX = "_per_s"
UNITS: dict[str, dict[str, float]] = {  # a column's suffix: the units its cells may carry, and their scale
    "_pct": {"%": 1.0},
    "_w": {"w": 1.0},
    "_mhz": {"mhz": 1.0},
    "_c": {"c": 1.0, "°c": 1.0, "℃": 1.0},
    "_j": {"j": 1.0},
    "_s": {"s": 1.0},
    "_bytes": {"b": 1.0, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30},
}


def not_available(text: str) -> bool:
    """Whether a cell stands for no reading (empty, `N/A`, `[Not Supported]`, …)."""
    return text.strip().lower() in NOT_AVAILABLE


def cell_number(text: str, column: str) -> float | None:
    """The number a cell of `column` holds in one of the forms above; None when it holds none."""
    cell = text.strip()
    try:
        return float(cell)
    except ValueError:
        pass
    if _GROUPED.fullmatch(cell):
        return float(cell.replace(",", ""))
    if printed := _PRINTOUT.match(cell):
        return float(printed.group(1))
    if (valued := _WITH_UNIT.fullmatch(cell)) and (scale := _unit_scale(column, valued.group(2))):
        return float(valued.group(1).replace(",", "")) * scale
    return None


def _unit_scale(column: str, unit: str) -> float | None:
    if column.endswith(RATE_SUFFIX):  # examples_per_s: a rate, not seconds
        return None
    units = next((u for suffix, u in UNITS.items() if column.endswith(suffix)), {})
    return units.get(unit.strip().lower())
