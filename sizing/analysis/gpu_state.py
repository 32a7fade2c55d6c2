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

from sizing.analysis import pcie, peaks
from sizing.analysis.gpu_verdicts import SW_POWER_CAP, max_sm_clock_mhz
from sizing.model import RunData, Thresholds, number, samples_in, times_of, train_windows, values_of

SHARED = "not attributable: the GPU was shared"
MIG_SLICE = "board energy not attributable to the slice"
SHARED_UTILIZATION = "GPU utilization not attributable: the GPU was shared"
MIG_UTILIZATION = "board utilization not attributable to the slice"
MIG = "MIG"
CLOCKS_HELD = "clocks held by a setting"
SHARED_SETTING = "shared"
CLOCK_SETTING_BIT = 0x2  # NVML: clocks limited by the applications clocks or locked clocks setting
SHARED_BEFORE_UTIL_PCT = 10.0  # mean board utilization before the training that says another tenant
SHARED_BEFORE_MEM_BYTES = 2 * 2**30  # board memory before the training above an idle board's (< 1 GiB)
BEFORE_TRAINING_S = 60.0  # how far before the first `train` phase the board is read
POWER_CAP_MARGIN_W = 1.0  # a limit this far below the board's own default (gpu_state) is a cap
TABLE_POWER_MARGIN = 0.10  # without it, a limit this share below the model's datasheet board power
CLOCK_MARGIN_MHZ = 1.0  # an applications clock this far below its default is held
UNEXPLAINED_CLOCK_FRACTION = 0.75  # busy with no clocks-event reason this far below its max: a setting
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
    def held_low(self) -> dict[int, str]:
        """Per GPU index, why its clocks or power were held low by a setting."""
        return {g.index: g.held_low for g in self.gpus if g.held_low}

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(
            f"gpu{g.index} {line}" for g in self.gpus for line in (*g.mig, *g.shared, *g.settings_evidence)
        )


def _entries(value: object) -> list[dict]:
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _by_index(entries: list[dict], index: int) -> dict:
    return next((e for e in entries if number(e.get("index")) == index), {})


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
    others = [p for p in _entries(state.get("other_processes")) if number(p.get("index")) == index]
    for p in (p for p in others if _overlaps(p, window)):
        memory = number(p.get("used_memory_bytes"))
        held = f" holding {_gib(memory)}" if memory is not None else ""
        found.append(f"shared: another process on it (pid {p.get('pid')}, {p.get('name') or 'name unknown'}"
                     f"{held}; gpu_state.other_processes)")  # fmt: skip
    before = _by_index(_entries(state.get("before_training")), index)
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
    if _by_index(_entries(state.get("start")), index).get("mig_mode") == "enabled":
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


def _busy(samples: pd.DataFrame, index: int) -> np.ndarray:
    """Samples in which the GPU ran a kernel (all samples where utilization is not recorded)."""
    util = values_of(samples, f"gpu{index}_util_pct")
    return np.ones(len(samples), dtype=bool) if util is None else np.nan_to_num(util) > 0


def bit_fraction(samples: pd.DataFrame, index: int, bit: int) -> tuple[float | None, np.ndarray]:
    """The share of busy samples (with a clocks-event reading) that have `bit` set, and those samples."""
    reasons = values_of(samples, f"gpu{index}_throttle_reasons")
    if reasons is None:
        return None, np.zeros(len(samples), dtype=bool)
    read = _busy(samples, index) & np.isfinite(reasons)
    flagged = read & ((np.nan_to_num(reasons).astype(np.int64) & bit) != 0)
    return (float(flagged.sum() / read.sum()) if read.any() else None), flagged


def clock_setting_samples(
    samples: pd.DataFrame, index: int, gpu: dict
) -> tuple[float | None, np.ndarray, str]:
    """Busy samples whose clocks a setting holds: the clocks-event bit 0x2 (applications or locked clocks),
    or no reason at all (NVML: clocks as high as possible) with the SM clock ≤ UNEXPLAINED_CLOCK_FRACTION
    of its max. Their share of the busy samples with a reading, those samples, and how they were told."""
    fraction, flagged = bit_fraction(samples, index, CLOCK_SETTING_BIT)
    reasons, sm = (
        values_of(samples, f"gpu{index}_throttle_reasons"),
        values_of(samples, f"gpu{index}_sm_clock_mhz"),
    )
    sm_max = max_sm_clock_mhz(samples, index, gpu)
    if fraction is None or reasons is None or sm is None or not sm_max:
        return fraction, flagged, f"{int(flagged.sum())} with clocks-event bit 0x2"
    read = _busy(samples, index) & np.isfinite(reasons)
    with np.errstate(invalid="ignore"):
        unexplained = read & (reasons == 0) & (sm <= UNEXPLAINED_CLOCK_FRACTION * sm_max)
    how = f"{int(flagged.sum())} with clocks-event bit 0x2"
    if unexplained.any():
        how += (f", {int(unexplained.sum())} with no clocks-event reason at an SM clock ≤ "
                f"{UNEXPLAINED_CLOCK_FRACTION:.0%} of its max")  # fmt: skip
    held = flagged | unexplained
    return float(held.sum() / read.sum()), held, how


def power_cap(
    state: dict, samples: pd.DataFrame, gpu: dict, index: int
) -> tuple[float | None, float | None, str]:
    """The lowest limit the run records (telemetry's median over the training, gpu_state's at start and
    end, run.json's), the board's default (gpu_state, else the GPU model's board power in analysis.peaks)
    and where the default came from."""
    start = _by_index(_entries(state.get("start")), index)
    end = _by_index(_entries(state.get("end")), index)
    limits = values_of(samples, f"gpu{index}_power_limit_w")
    recorded = [
        float(np.nanmedian(limits)) if limits is not None else None,
        number(start.get("power_limit_w")),
        number(end.get("power_limit_w")),
        number(gpu.get("power_limit_w")),
    ]
    limit = min((w for w in recorded if w is not None and w > 0), default=None)
    default = number(start.get("power_limit_default_w")) or number(end.get("power_limit_default_w"))
    if default is not None:
        return limit, default, "its default (gpu_state)"
    entry = peaks.gpu_peaks(gpu.get("name"))
    if entry is None or entry.board_power_w is None:
        return limit, None, ""
    source = f"the {entry.model}'s lowest default board power (sizing/analysis/peaks.py)"
    return limit, entry.board_power_w, source


def settings_of(
    state: dict, samples: pd.DataFrame, gpu: dict, index: int, t: Thresholds
) -> tuple[float | None, list[str], list[str], str]:
    """(power cap W or None, clocks-held evidence, evidence of every setting, why held low or '')."""
    evidence, clocks, held = [], [], []
    limit, default, whence = power_cap(state, samples, gpu, index)
    # the board's own default (gpu_state), or a model's datasheet figure: only a limit well below it is a cap
    below = POWER_CAP_MARGIN_W if "gpu_state" in whence else TABLE_POWER_MARGIN * (default or 0.0)
    cap = limit if limit is not None and default is not None and limit < default - below else None
    capped_fraction, _ = bit_fraction(samples, index, SW_POWER_CAP)
    if cap is not None:
        evidence.append(f"power limit {cap:.0f} W, below {whence} {default:.0f} W")
        if capped_fraction is not None and capped_fraction >= t.throttled_sample_fraction:
            held.append(
                f"power capped at {cap:.0f} W (SW power cap bit in {capped_fraction:.0%} of busy samples)"
            )
    start = _by_index(_entries(state.get("start")), index)
    for what, now, default_mhz in (
        ("SM", number(start.get("applications_clock_sm_mhz")),
         number(start.get("default_applications_clock_sm_mhz"))),
        ("memory", number(start.get("applications_clock_mem_mhz")),
         number(start.get("default_applications_clock_mem_mhz"))),
    ):  # fmt: skip
        if now is not None and default_mhz is not None and now < default_mhz - CLOCK_MARGIN_MHZ:
            clocks.append(
                f"applications clock ({what}) {now:.0f} MHz, below its default {default_mhz:.0f} MHz"
            )
    held += clocks
    fraction, flagged, how = clock_setting_samples(samples, index, gpu)
    if fraction is not None and fraction >= t.throttled_sample_fraction:
        sm = values_of(samples, f"gpu{index}_sm_clock_mhz")
        sm_max = max_sm_clock_mhz(samples, index, gpu)
        held_mhz = (
            float(np.nanmean(sm[flagged])) if sm is not None and np.isfinite(sm[flagged]).any() else None
        )
        clock = f", SM clock {held_mhz:.0f} MHz" if held_mhz is not None else ""
        of_max = f" of its {sm_max:.0f} MHz max" if held_mhz is not None and sm_max else ""
        line = (f"clocks held by a setting in {fraction:.0%} of busy samples ≥ "
                f"{t.throttled_sample_fraction:.0%} ({how}{clock}{of_max})")  # fmt: skip
        clocks.append(line)
        if held_mhz is None or not sm_max or held_mhz < sm_max - CLOCK_MARGIN_MHZ:
            held.append(line)
    return cap, clocks, evidence + clocks, "; ".join(held)


def _system_gpus(meta: dict) -> list[dict]:
    system = meta.get("system")
    gpus = system.get("gpus") if isinstance(system, dict) else None
    return [g if isinstance(g, dict) else {} for g in gpus] if isinstance(gpus, list) else []


def read_gpu_state(
    run: RunData, kind: str, charged: Sequence[int], in_training: pd.DataFrame,
    window: tuple[float, float] | None, t: Thresholds,
) -> GpuState:  # fmt: skip
    """The findings for the GPUs charged to a GPU run (`in_training`: the training window's samples)."""
    recorded = isinstance(run.meta.get("gpu_state"), dict)
    if kind != "gpu":
        return GpuState((), recorded)
    state = run.meta["gpu_state"] if recorded else {}
    listed = _system_gpus(run.meta)
    found = []
    for index in charged:
        gpu = listed[index] if index < len(listed) else {}
        cap, clocks, evidence, held = settings_of(state, in_training, gpu, index, t)
        link = pcie.narrow_link([_by_index(_entries(state.get(when)), index) for when in ("start", "end")])
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
