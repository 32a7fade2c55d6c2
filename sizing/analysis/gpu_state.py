"""The GPU's own state as the report reads it: shared with another tenant, a MIG slice, a power cap, clocks
held by a setting.

Every rule reads all the evidence a run carries: run.json `gpu_state` where the collector recorded it
(other processes, the board before the training, power limits, applications clocks, MIG mode), and
otherwise (and as well) telemetry.csv and run.json `system.gpus` / training.json. What cannot be known
is not claimed: NVML reports the board, so a tenant that came after the training started shows only in
`gpu_state.other_processes`, and a board busy before the training only in the samples before its first
`train` phase (after the training the board still shows its memory and lagging utilization).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sizing.analysis import pcie
from sizing.analysis.gpu_settings import entries, entry_of, setting_changes, settings_of
from sizing.analysis.signature import listed_gpus
from sizing.model import RunData, Thresholds, number, samples_in, times_of, train_windows, values_of

SHARED = "not attributable: the GPU was shared"
MIG_SLICE = "board energy not attributable to the slice"
SHARED_UTILIZATION = "GPU utilization not attributable: the GPU was shared"
MIG_UTILIZATION = "board utilization not attributable to the slice"
MIG = "MIG"
CLOCKS_HELD = "clocks held by a setting"
SHARED_SETTING = "shared"
SHARED_BEFORE_UTIL_PCT = 10.0  # mean board utilization before the training that says another tenant
SHARED_BEFORE_MEM_BYTES = 2 * 2**30  # board memory before the training above an idle board's (< 1 GiB)
BEFORE_TRAINING_S = 60.0  # how far before the first `train` phase the board is read
MIG_NAME = re.compile(r"\bMIG\b")


@dataclass(frozen=True)
class GpuStateFinding:
    """One charged GPU: why it was shared or a MIG slice, and the settings it ran under."""

    index: int
    shared: tuple[str, ...] = ()  # evidence, one phrase each
    mig: tuple[str, ...] = ()
    power_cap_w: float | None = None
    clocks_held: tuple[str, ...] = ()
    settings_evidence: tuple[str, ...] = ()
    held_low: str = ""  # why clocks or power were held low by a setting ('' when not)
    pcie_link: str | None = None  # 'PCIe x4 of x16': a link narrower than the board's (sizing.analysis.pcie)
    changed: tuple[str, ...] = ()  # settings that changed during the training (gpu_settings.setting_changes)

    @property
    def phrases(self) -> list[str]:
        """The canonical settings phrases that join the hardware signature."""
        found = [MIG] if self.mig else []
        if self.power_cap_w is not None:
            found.append(f"power cap {self.power_cap_w:.0f} W")
        if self.clocks_held:
            found.append(CLOCKS_HELD)
        if self.shared:
            found.append(SHARED_SETTING)
        if self.pcie_link:
            found.append(self.pcie_link)
        return found


@dataclass(frozen=True)
class GpuState:
    """The charged GPUs' findings and whether run.json had a `gpu_state`."""

    gpus: tuple[GpuStateFinding, ...] = ()
    recorded: bool = False
    tenants_unchecked: str | None = None  # why gpu_state could not tell other tenants' processes apart

    @property
    def shared(self) -> bool:
        return any(g.shared for g in self.gpus)

    @property
    def mig(self) -> bool:
        return any(g.mig for g in self.gpus)

    @property
    def not_attributable(self) -> str | None:
        """Why the GPU board energy is not the run's (None when it is)."""
        reasons = [r for r, found in ((MIG_SLICE, self.mig), (SHARED, self.shared)) if found]
        return "; ".join(reasons) or None

    @property
    def utilization_note(self) -> str | None:
        """Why the board's utilization is not the run's (None when it is)."""
        notes = [n for n, found in ((MIG_UTILIZATION, self.mig), (SHARED_UTILIZATION, self.shared)) if found]
        return "; ".join(notes) or None

    @property
    def signature(self) -> str | None:
        """'power cap 200 W', 'MIG', 'clocks held by a setting', 'shared', 'PCIe x4 of x16' (joined by '; ');
        a GPU whose phrases differ from the others' is named ('gpu1 power cap 200 W'); None: defaults."""
        per_gpu = [(g.index, g.phrases) for g in self.gpus if g.phrases]
        if not per_gpu:
            return None
        if len(per_gpu) == len(self.gpus) and all(p == per_gpu[0][1] for _, p in per_gpu):
            return "; ".join(per_gpu[0][1])
        return "; ".join(f"gpu{i} {phrase}" for i, phrases in per_gpu for phrase in phrases)

    @property
    def changed_note(self) -> str | None:
        """'gpu0 power limit 700 W → 300 W 45 s into the training': the settings changed while it trained."""
        changes = [f"gpu{g.index} {line}" for g in self.gpus for line in g.changed]
        return "; ".join(changes) or None

    @property
    def held_low(self) -> dict[int, str]:
        """Per GPU index, why its clocks or power were held low by a setting."""
        return {g.index: g.held_low for g in self.gpus if g.held_low}

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(
            f"gpu{g.index} {line}" for g in self.gpus for line in (*g.mig, *g.shared, *g.settings_evidence)
        )


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


def first_train_start(phases: pd.DataFrame) -> float | None:
    """The start of the first `train` phase in phases.csv (None without one)."""
    if phases.empty or not {"phase", "start_unix"} <= set(phases.columns):
        return None
    starts = pd.to_numeric(phases.loc[phases["phase"].astype(str) == "train", "start_unix"], errors="coerce")
    starts = starts[np.isfinite(starts)]
    return float(starts.min()) if len(starts) else None


def _overlaps(entry: dict, window: tuple[float, float] | None) -> bool:
    first, last = number(entry.get("first_seen_unix")), number(entry.get("last_seen_unix"))
    if window is None:
        return True
    return (last is None or last >= window[0]) and (first is None or first <= window[1])


def shared_evidence(
    state: dict, telemetry: pd.DataFrame, phases: pd.DataFrame, index: int,
    window: tuple[float, float] | None,
) -> list[str]:  # fmt: skip
    """Why GPU `index` was shared: other processes on it during the training, or the board busy before
    the training first touched it (gpu_state.before_training, or telemetry before the first `train`)."""
    found = []
    others = [p for p in entries(state.get("other_processes")) if number(p.get("index")) == index]
    for p in (p for p in others if _overlaps(p, window)):
        memory = number(p.get("used_memory_bytes"))
        held = f" holding {_gib(memory)}" if memory is not None else ""
        found.append(f"shared: another process on it (pid {p.get('pid')}, {p.get('name') or 'name unknown'}"
                     f"{held}; gpu_state.other_processes)")  # fmt: skip
    before = entry_of(state.get("before_training"), index)
    util, memory = number(before.get("util_pct")), number(before.get("mem_used_bytes"))
    processes = number(before.get("compute_processes"))
    if util is not None and util >= SHARED_BEFORE_UTIL_PCT:
        found.append(f"shared: {util:.0f} % busy before the training (≥ {SHARED_BEFORE_UTIL_PCT:g} %; "
                     "gpu_state.before_training)")  # fmt: skip
    if processes is not None and processes > 0:
        found.append(f"shared: {processes:.0f} compute process(es) on it before the training "
                     "(gpu_state.before_training)")  # fmt: skip
    if memory is not None and memory >= SHARED_BEFORE_MEM_BYTES:
        found.append(f"shared: {_gib(memory)} of its memory in use before the training "
                     f"(≥ {_gib(SHARED_BEFORE_MEM_BYTES)}; gpu_state.before_training)")  # fmt: skip
    return found + _busy_before_training(telemetry, phases, index)


def _busy_before_training(telemetry: pd.DataFrame, phases: pd.DataFrame, index: int) -> list[str]:
    """The board in telemetry.csv over the BEFORE_TRAINING_S before the first `train` phase: mean
    utilization ≥ SHARED_BEFORE_UTIL_PCT, or median used memory ≥ SHARED_BEFORE_MEM_BYTES."""
    start = first_train_start(phases)
    if start is None:
        return []
    times = times_of(telemetry)
    before = telemetry[(times < start) & (times >= start - BEFORE_TRAINING_S)]
    if before.empty:
        return []
    found = []
    util, memory = values_of(before, f"gpu{index}_util_pct"), values_of(before, f"gpu{index}_mem_used_bytes")
    span = f"{int(np.isfinite(util).sum()) if util is not None else 0} samples before the first train phase"
    if util is not None and (mean_util := float(np.nanmean(util))) >= SHARED_BEFORE_UTIL_PCT:
        found.append(f"shared: mean util {mean_util:.1f} % ≥ {SHARED_BEFORE_UTIL_PCT:g} % in the {span} "
                     "(telemetry)")  # fmt: skip
    if memory is not None and (held := float(np.nanmedian(memory))) >= SHARED_BEFORE_MEM_BYTES:
        found.append(f"shared: {_gib(held)} of its memory in use before the first train phase "
                     f"(median, ≥ {_gib(SHARED_BEFORE_MEM_BYTES)}; telemetry)")  # fmt: skip
    return found


def mig_evidence(state: dict, gpu: dict, training_info: dict, index: int) -> list[str]:
    """A MIG slice: MIG mode enabled at the start, a MIG device name or UUID in run.json or training.json."""
    found = []
    if entry_of(state.get("start"), index).get("mig_mode") == "enabled":
        found.append("MIG mode enabled (gpu_state)")
    name, uuid = gpu.get("name"), gpu.get("uuid")
    if isinstance(name, str) and MIG_NAME.search(name):
        found.append(f"a MIG device ({name}; run.json)")
    if isinstance(uuid, str) and uuid.startswith("MIG-"):
        found.append(f"a MIG device (UUID {uuid}; run.json)")
    uuids = training_info.get("gpu_uuids")
    if isinstance(uuids, list) and any(isinstance(u, str) and u.startswith("MIG-") for u in uuids):
        found.append("the training ran on a MIG device (MIG- UUID in training.json gpu_uuids)")
    names = training_info.get("gpu_names")
    named = [n for n in names if isinstance(n, str) and MIG_NAME.search(n)] if isinstance(names, list) else []
    if named:
        found.append(f"the training ran on a MIG device ({named[0]}; training.json gpu_names)")
    return found


def read_gpu_state(
    run: RunData, kind: str, charged: Sequence[int], in_training: pd.DataFrame,
    window: tuple[float, float] | None, t: Thresholds,
) -> GpuState:  # fmt: skip
    """The findings for the GPUs charged to a GPU run (`in_training`: the training window's samples)."""
    recorded = isinstance(run.meta.get("gpu_state"), dict)
    if kind != "gpu":
        return GpuState((), recorded)
    state = run.meta["gpu_state"] if recorded else {}
    listed = listed_gpus(run.meta)  # as charged_gpu_columns numbers them
    found = []
    for index in charged:
        gpu = listed[index] if index < len(listed) else {}
        cap, clocks, evidence, held = settings_of(state, in_training, gpu, index, t)
        link = pcie.narrow_link([entry_of(state.get(when), index) for when in ("start", "end")])
        evidence += [f"{link} at start and end ({pcie.WHERE})"] if link else []
        found.append(
            GpuStateFinding(
                index=index,
                shared=tuple(shared_evidence(state, run.telemetry, run.phases, index, window)),
                mig=tuple(mig_evidence(state, gpu, run.training_info, index)),
                power_cap_w=cap,
                clocks_held=tuple(clocks),
                settings_evidence=tuple(evidence),
                held_low=held,
                pcie_link=link,
                changed=tuple(setting_changes(state, in_training, index, window)),
            )
        )
    unchecked = None
    if state.get("processes_checked") is False:
        reason = state.get("processes_reason")
        unchecked = reason if isinstance(reason, str) and reason else "no reason recorded"
    return GpuState(tuple(found), recorded, unchecked)


def state_warnings(run_id: str, state: GpuState) -> list[str]:
    """One line per reason the GPU board's figures are not the run's."""
    found = []
    mig = [f"gpu{g.index} {line}" for g in state.gpus for line in g.mig]
    shared = [f"gpu{g.index} {line.removeprefix('shared: ')}" for g in state.gpus for line in g.shared]
    if mig:
        found.append(f"{run_id}: {MIG_SLICE} ({'; '.join(mig)}): J and $ per 1,000 examples unknown, and the "
                     "board's utilization is not the slice's")  # fmt: skip
    if shared:
        found.append(f"{run_id}: GPU energy and utilization {SHARED} ({'; '.join(shared)}): J and $ per "
                     "1,000 examples unknown (the whole board's energy is not charged)")  # fmt: skip
    if state.tenants_unchecked and not shared:
        found.append(f"{run_id}: other tenants' processes on the GPU were not checked "
                     f"({state.tenants_unchecked}): the board's energy and utilization are charged to the "
                     "run as if it had the GPU alone")  # fmt: skip
    return found


def state_json(state: GpuState) -> dict:
    """runs[].gpu_state in the JSON output (docs/sizing.schema.json)."""
    return {
        "recorded": state.recorded,
        "settings": state.signature,
        "shared": state.shared,
        "mig": state.mig,
        "energy_not_attributable": state.not_attributable,
        "utilization_not_attributable": state.utilization_note,
        "held_by_setting": {f"gpu{i}": why for i, why in state.held_low.items()},
        "evidence": list(state.evidence),
        "tenants_unchecked": state.tenants_unchecked,
    }


def gpu_state_of(run: RunData, kind: str, charged: Sequence[int], t: Thresholds | None = None) -> GpuState:
    """read_gpu_state over the run's training window (the `train` phases' hull, else its telemetry)."""
    spans = train_windows(run.phases, run.telemetry)
    window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    return read_gpu_state(run, kind, charged, samples_in(run.telemetry, window), window, t or Thresholds())
