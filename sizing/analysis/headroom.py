"""How far a run was from its device's limit, and why: its MFU (analysis.mfu) and, for a GPU run, what its
profiling counters (NVML GPM, runformat.gpm) say limited it. Rules and numbers: sections.definitions
("MFU", "Why the GPU is not at its limit").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sizing.analysis import peaks
from sizing.analysis.bottleneck import (
    HOST_THREAD_TREE_CORES,
    PER_CPU,
    UNDETERMINED,
    HostThread,
    Verdict,
    host_thread,
)
from sizing.analysis.mfu import UNSTATED_DEVICES, mfu_of
from sizing.analysis.throughput import Throughput
from sizing.model import Thresholds, mean_of

# Why the GPU is not at its limit: each rule reads the mean over the measurement window of the charged
# GPUs' columns (averaged over those GPUs); the first rule that matches names the limit.
COMPUTE_BOUND_PIPE_PCT = 50.0  # tensor, or a non-tensor FP32/FP16/FP64 pipe, active at least this
MEMORY_BOUND_DRAM_PCT = 50.0  # DRAM active at least this …
MEMORY_BOUND_TENSOR_BELOW_PCT = 25.0  # … while tensor pipes are active less than this
LAUNCH_BOUND_UTIL_PCT = 80.0  # NVML util at least this …
LAUNCH_BOUND_SM_BELOW_PCT = 50.0  # … while SMs are active less than this
HOST_WAIT_UTIL_BELOW_PCT = 80.0  # NVML util (else graphics engine active) below this …
GPU_IDLE_UTIL_BELOW_PCT = 50.0  # no kernel running most of the time, with no host thread to blame

COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
LAUNCH_BOUND = "launch-bound"
HOST_WAIT = "waiting on the host"
IDLE_WAITING = "idle most of the time: waiting outside the GPU"
NO_SINGLE_LIMIT = "no single limit in the counters"
NOT_ATTRIBUTABLE = "not attributable: the board was not the run's alone"
MIG_PEAK_UNKNOWN = "a MIG slice: its share of the board's peak is not known"
FROM_UTILIZATION = "from utilization only"
GPU_NOT_RECORDED = "GPU activity not recorded"  # neither utilization nor a profiling counter in the window

COUNTERS = {
    "tensor_active_pct": "tensor active",
    "fp32_active_pct": "FP32 pipe active",
    "fp16_active_pct": "FP16 pipe active",
    "fp64_active_pct": "FP64 pipe active",
    "dram_active_pct": "DRAM active",
    "sm_active_pct": "SM active",
    "gr_engine_active_pct": "graphics engine active",
    "util_pct": "NVML util",
}
NON_TENSOR_PIPES = ("fp32_active_pct", "fp16_active_pct", "fp64_active_pct")


@dataclass(frozen=True)
class Headroom:
    kind: str  # "gpu" or "cpu"
    mfu: float | None  # achieved ÷ peak, a fraction; None with mfu_reason
    achieved_flops_per_s: float | None
    peak_flops_per_s: float | None  # every device charged
    math_dtype: str | None  # the peak's dtype key (sizing.analysis.peaks): fp32, tf32, fp16, bf16
    dtype_basis: str
    device: str | None
    devices: int
    peak_source: str
    mfu_is_lower_bound: bool
    mfu_reason: str | None
    flops_method: str | None
    limit: str | None  # why the GPU is not at its limit; None for a CPU run
    limit_from_counters: bool
    limit_evidence: str
    numbers: dict[str, float | None] = field(default_factory=dict)


def _pct(fraction: float) -> str:
    pct = fraction * 100
    return f"{pct:.2g} %" if 0 < pct < 0.1 else f"{pct:.1f} %"


def _counter_means(samples: pd.DataFrame, gpus: Sequence[int]) -> dict[str, float | None]:
    """Each counter's window mean, averaged over the GPUs that recorded it."""
    found: dict[str, float | None] = {}
    for suffix in COUNTERS:
        means = [m for i in gpus if (m := mean_of(samples, f"gpu{i}_{suffix}")) is not None]
        found[suffix] = float(np.mean(means)) if means else None
    return found


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} %"


def _at_least(value: float | None, bound: float) -> bool:
    return value is not None and value >= bound


def _below(value: float | None, bound: float) -> bool:
    return value is not None and value < bound


def _compute_bound(n: dict, t: Thresholds, thread: HostThread) -> str | None:
    if _at_least(n["tensor_active_pct"], COMPUTE_BOUND_PIPE_PCT):
        return f"tensor active {_f(n['tensor_active_pct'])} ≥ {COMPUTE_BOUND_PIPE_PCT:g} %"
    pipes = [(n[k], k) for k in NON_TENSOR_PIPES if _at_least(n[k], COMPUTE_BOUND_PIPE_PCT)]
    if pipes:
        value, key = max(pipes)
        return f"{COUNTERS[key]} {_f(value)} ≥ {COMPUTE_BOUND_PIPE_PCT:g} %"
    return None


def _high_while_low(n: dict, high: str, high_pct: float, low: str, low_pct: float) -> str | None:
    """'DRAM active 70.0 % ≥ 50 % with tensor active 5.0 % < 25 %' when both hold, else None."""
    if _at_least(n[high], high_pct) and _below(n[low], low_pct):
        return (f"{COUNTERS[high]} {_f(n[high])} ≥ {high_pct:g} % with {COUNTERS[low]} {_f(n[low])} < "
                f"{low_pct:g} %")  # fmt: skip
    return None


def _memory_bound(n: dict, t: Thresholds, thread: HostThread) -> str | None:
    return _high_while_low(n, "dram_active_pct", MEMORY_BOUND_DRAM_PCT, "tensor_active_pct",
                           MEMORY_BOUND_TENSOR_BELOW_PCT)  # fmt: skip


def _launch_bound(n: dict, t: Thresholds, thread: HostThread) -> str | None:
    found = _high_while_low(n, "util_pct", LAUNCH_BOUND_UTIL_PCT, "sm_active_pct", LAUNCH_BOUND_SM_BELOW_PCT)
    return f"busy, but many small kernels: SMs idle: {found}" if found else None


def _waiting_on_host(n: dict, t: Thresholds, thread: HostThread) -> str | None:
    busy, name = _gpu_busy(n)
    proc = n["proc_cpu_pct"]
    if thread.source == PER_CPU and proc is not None and proc < HOST_THREAD_TREE_CORES * 100:
        return None  # the saturated CPU is not the training's
    if _below(busy, HOST_WAIT_UTIL_BELOW_PCT) and thread.saturated():
        tree = f", the training's processes using {proc / 100:.1f} cores" if proc is not None else ""
        bound = f"{HOST_WAIT_UTIL_BELOW_PCT:g} %"
        return f"{name} {_f(busy)} < {bound} while {thread.text(t)} ({thread.rule()}){tree}"
    return None


def _gpu_busy(n: dict) -> tuple[float | None, str]:
    """NVML util, else the graphics engine's active share."""
    if n["util_pct"] is not None:
        return n["util_pct"], "NVML util"
    return n["gr_engine_active_pct"], "graphics engine active"


def _idle_waiting(n: dict, t: Thresholds, thread: HostThread) -> str | None:
    busy, name = _gpu_busy(n)
    if not _below(busy, GPU_IDLE_UTIL_BELOW_PCT):
        return None
    if thread.fraction is None:
        host = "host not recorded: cause unknown"
    else:
        host = (f"no host thread saturated ({thread.text(t)}): input, I/O, synchronisation or transfers, "
                "not one thread's arithmetic")  # fmt: skip
    return f"{name} {_f(busy)} < {GPU_IDLE_UTIL_BELOW_PCT:g} %: no kernel ran most of the time; {host}"


LIMIT_RULES = (
    (COMPUTE_BOUND, _compute_bound),
    (MEMORY_BOUND, _memory_bound),
    (LAUNCH_BOUND, _launch_bound),
    (HOST_WAIT, _waiting_on_host),
    (IDLE_WAITING, _idle_waiting),
)


def gpu_limit(
    samples: pd.DataFrame, gpus: Sequence[int], verdict: Verdict, thresholds: Thresholds
) -> tuple[str, bool, str, dict[str, float | None]]:
    """Why the GPU is not at its limit: (label, from the counters?, evidence with its numbers, numbers)."""
    n = _counter_means(samples, gpus)
    if all(value is None for value in n.values()):
        return GPU_NOT_RECORDED, False, "no GPU utilization or profiling counter in the window", n
    if all(n[k] is None for k in COUNTERS if k != "util_pct"):
        why = "; ".join(verdict.evidence) or "no rule matched"
        evidence = f"no GPU profiling counters (GPM) in the window; the utilization verdict: {why}"
        return f"{FROM_UTILIZATION}: {verdict.primary}", False, evidence, n
    thread = host_thread(samples, thresholds)
    n["host_thread_saturated_fraction"] = thread.fraction
    n["host_thread_busy_mean_pct"] = thread.mean_pct
    n["proc_cpu_pct"] = mean_of(samples, "proc_cpu_pct")
    counters = ", ".join(f"{COUNTERS[k]} {_f(v)}" for k, v in n.items() if k in COUNTERS and v is not None)
    for label, rule in LIMIT_RULES:
        why = rule(n, thresholds, thread)
        if why:
            return label, True, f"{why} ({counters})", n
    host = "host threads not recorded" if thread.fraction is None else thread.text(thresholds)
    return NO_SINGLE_LIMIT, True, f"{NO_SINGLE_LIMIT}: {counters}; {host}", n


def headroom(
    info: dict,
    system: dict,
    kind: str,
    gpu_names: Sequence[str],
    rate: Throughput,
    samples: pd.DataFrame,
    gpus: Sequence[int],
    verdict: Verdict,
    thresholds: Thresholds,
    mig_slice: bool = False,
    board_not_attributable: str | None = None,
    cpu_facts_doubt: str | None = None,
) -> Headroom:
    """The run's MFU and, for a GPU run, why its GPU is not at its limit. `mig_slice`: the run had a MIG
    slice, whose share of the board's peak is not known; `board_not_attributable`: why the board's
    counters are not the run's (a shared board or a slice: GPM counts the whole board); `cpu_facts_doubt`:
    why run.json's CPU facts may be another host's (mfu_of)."""
    found = mfu_of(info, system, kind, gpu_names, rate, len(gpus), cpu_facts_doubt)
    if mig_slice and kind == "gpu":
        found = {**found, "mfu": None, "mfu_reason": MIG_PEAK_UNKNOWN}
    if kind != "gpu":
        return Headroom(**found, limit=None, limit_from_counters=False, limit_evidence="")
    if board_not_attributable:
        evidence = f"the board's counters and utilization are not the run's ({board_not_attributable})"
        return Headroom(**found, limit=NOT_ATTRIBUTABLE, limit_from_counters=False, limit_evidence=evidence)
    label, from_counters, evidence, numbers = gpu_limit(samples, gpus, verdict, thresholds)
    return Headroom(**found, limit=label, limit_from_counters=from_counters, limit_evidence=evidence,
                    numbers=numbers)  # fmt: skip


def mfu_text(h: Headroom, mfu: float | None = None) -> str:
    """'ran at 0.3 % of the NVIDIA H100 80GB HBM3's dense TF32 peak (MFU)', or 'MFU not known (why)'."""
    mfu = h.mfu if mfu is None else mfu
    if mfu is None or h.math_dtype is None:
        return f"MFU not known ({h.mfu_reason or 'no reason recorded'})"
    dtype = peaks.DTYPE_NAMES.get(h.math_dtype, h.math_dtype)
    device = f"{h.devices} × {h.device}" if h.devices > 1 else f"the {h.device}"
    if h.kind == "cpu":
        bound = ("≥ ", ", a lower bound") if h.mfu_is_lower_bound else ("", "")
        return f"ran at {bound[0]}{_pct(mfu)} of {device}'s nominal {dtype} peak (MFU{bound[1]})"
    if h.mfu_is_lower_bound:  # world_size not recorded: every GPU that did work is in the peak
        bound = f"MFU, a lower bound: {UNSTATED_DEVICES}"
        return f"ran at ≥ {_pct(mfu)} of {device}'s dense {dtype} peak ({bound})"
    return f"ran at {_pct(mfu)} of {device}'s dense {dtype} peak (MFU)"


def limit_text(h: Headroom) -> str:
    """'why: launch-bound', 'why (from utilization only): GPU underused'; '' for a CPU run."""
    if h.limit is None:
        return ""
    if h.limit == NOT_ATTRIBUTABLE:
        return f"why: {NOT_ATTRIBUTABLE}"
    if h.limit == GPU_NOT_RECORDED:
        return f"why not known ({GPU_NOT_RECORDED}: no utilization or profiling counter in the window)"
    if h.limit_from_counters:
        return f"why: {h.limit}"
    verdict = h.limit.removeprefix(FROM_UTILIZATION + ": ")
    if verdict == UNDETERMINED:
        return f"why not known ({FROM_UTILIZATION}: no rule matched; profiling counters would tell)"
    return f"why ({FROM_UTILIZATION}): {verdict}"


def group_phrase(found: Sequence[Headroom | None]) -> str:
    """One headline phrase for a configuration's runs: the mean MFU (in how many runs it is known) and
    the why-labels."""
    runs = [h for h in found if h is not None]
    if not runs:
        return ""
    known = [h for h in runs if h.mfu is not None]
    if known:
        text = mfu_text(known[0], float(np.mean([h.mfu for h in known])))
        if len(known) < len(runs):
            text += f", known in {len(known)} of {len(runs)} runs"
    else:
        text = mfu_text(runs[0])
    whys = list(dict.fromkeys(w for h in runs if (w := limit_text(h))))
    return "; ".join([text, " / ".join(whys)] if whys else [text])


def headroom_json(h: Headroom | None) -> dict | None:
    if h is None:
        return None
    return {
        "mfu": h.mfu,
        "achieved_flops_per_s": h.achieved_flops_per_s,
        "peak_flops_per_s": h.peak_flops_per_s,
        "peak_device": h.device,
        "peak_devices": h.devices,
        "peak_source": h.peak_source,
        "math_dtype": h.math_dtype,
        "math_dtype_basis": h.dtype_basis,
        "mfu_is_lower_bound": h.mfu_is_lower_bound,
        "mfu_not_known_reason": h.mfu_reason,
        "flops_method": h.flops_method,
        "gpu_limit": h.limit,
        "gpu_limit_from_counters": h.limit_from_counters,
        "gpu_limit_evidence": h.limit_evidence or None,
        "counters": {k: v for k, v in h.numbers.items() if v is not None},
    }
