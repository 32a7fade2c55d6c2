"""Runs measured at the same time on one machine: each ran beside the other's load, so neither measured
its hardware alone. One machine: the same boot (run.json `system.boot_id_hash`), or, where a run does not
record its boot, the same host name, which different machines may share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from sizing.analysis import signature
from sizing.analysis.run import RunAnalysis


@dataclass(frozen=True)
class Overlap:
    first: str
    second: str
    seconds: float  # how long their measurement windows overlapped
    share: float  # of the shorter window
    same_boot: bool  # one machine for sure (one boot), else only one host name

    def text(self) -> str:
        where = "on one machine (one boot" if self.same_boot else "on hosts of one name (no boot recorded"
        line = (
            f"{self.first} and {self.second} were measured at the same time {where}; {self.seconds:,.0f} s, "
            f"{self.share:.0%} of the shorter measurement)"
        )
        if self.same_boot:
            return f"{line}: each ran beside the other's load"
        return f"{line}: if one machine, each ran beside the other's load"


def window(a: RunAnalysis) -> tuple[float, float] | None:
    found = a.measured_window
    return found if found is not None and found[1] > found[0] else None


def one_machine(a: dict, b: dict) -> bool | None:
    """True: one boot; None: one host name and no boot to tell; False: two machines (a boot or an identity
    differs, or two host names) or nothing to tell."""
    boot_a, boot_b = a.get("boot_id_hash"), b.get("boot_id_hash")
    if boot_a and boot_b:
        return boot_a == boot_b
    if signature.same_machine(a, b) is False:
        return False
    host = a.get("host")
    return None if host and host == b.get("host") else False


def overlaps(analyses: Sequence[RunAnalysis]) -> list[Overlap]:
    """Every pair of runs whose measurement windows overlap on one machine (or one host name)."""
    found = []
    for a, b in combinations(analyses, 2):
        machine = one_machine(a.hardware, b.hardware)
        first, second = window(a), window(b)
        if machine is False or first is None or second is None:
            continue
        seconds = min(first[1], second[1]) - max(first[0], second[0])
        if seconds > 0:
            shorter = min(first[1] - first[0], second[1] - second[0])
            found.append(Overlap(a.run_id, b.run_id, seconds, seconds / shorter, machine is True))
    return found
