"""The bottleneck verdict of one run, with the numbers behind it (rules in sizing.sections.definitions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from runformat.columns import DISK_BUSIEST_BPS, PROC_READ_BPS, PROC_WRITE_BPS
from sizing.analysis.gpu_verdicts import GpuFinding
from sizing.analysis.thermal import CPU_BELOW_PEAK, ThrottleSummary
from sizing.model import Thresholds, core_indices, gpu_indices, mean_of

GPU_BOUND = "GPU-bound"
CPU_BOUND = "CPU-bound"
HOST_BOUND = "host-bound"
IO_BOUND = "I/O-bound"
GPU_UNDERUSED = "GPU underused"
THERMALLY_THROTTLED = "thermally throttled"
HW_SLOWDOWN = "HW slowdown"
CPU_CLOCK_BELOW_PEAK = "CPU clock below peak (cause unknown)"
UNDETERMINED = "undetermined"
IO_OWN_SHARE = 0.1  # a busy disk is the training's bottleneck only where its own I/O is this share or more


@dataclass(frozen=True)
class Verdict:
    primary: str
    labels: tuple[str, ...]
    evidence: tuple[str, ...]
    numbers: dict[str, float | None] = field(default_factory=dict)


def _fmt(value: float | None, unit: str = " %") -> str:
    return "n/a" if value is None else f"{value:.1f}{unit}"


def core_counts(samples: pd.DataFrame, thresholds: Thresholds) -> tuple[float | None, float | None, int]:
    """Per sample, how many logical CPUs were saturated and how many idle; means over samples; and n."""
    cores = core_indices(samples)
    if not cores or samples.empty:
        return None, None, len(cores)
    util = np.column_stack(
        [pd.to_numeric(samples[f"cpu{i}_util_pct"], errors="coerce").to_numpy(dtype=float) for i in cores]
    )
    rows = np.isfinite(util).any(axis=1)
    if not rows.any():
        return None, None, len(cores)
    util = util[rows]
    saturated = (util >= thresholds.core_saturated_pct).sum(axis=1)
    idle = (util < thresholds.core_idle_pct).sum(axis=1)
    return float(saturated.mean()), float(idle.mean()), len(cores)


@dataclass(frozen=True)
class HostThread:
    """How often one host thread of the training was saturated: from the training's busiest thread
    (`proc_busiest_thread_pct`) where recorded, else from per-CPU utilization, which misses a thread the
    kernel moves between CPUs."""

    fraction: float | None  # share of the samples with a saturated thread (None: not recorded)
    source: str  # BUSIEST_THREAD, PER_CPU or "" when neither is recorded
    mean_pct: float | None = None  # the busiest thread's mean busy % (BUSIEST_THREAD only)

    def saturated(self) -> bool:
        if self.fraction is not None and self.fraction >= HOST_THREAD_SAMPLE_FRACTION:
            return True
        return self.mean_pct is not None and self.mean_pct >= HOST_THREAD_BUSY_MEAN_PCT

    def text(self, t: Thresholds) -> str:
        what = "the training's busiest thread" if self.source == BUSIEST_THREAD else "a logical CPU"
        text = f"{what} ≥ {t.core_saturated_pct:g} % busy in {self.fraction:.0%} of samples"
        if self.mean_pct is not None:
            text += f", {self.mean_pct:.0f} % busy on average"
        return text

    def rule(self) -> str:
        """The bound that made saturated() true (or the first one, if neither)."""
        if self.mean_pct is not None and not (
            self.fraction is not None and self.fraction >= HOST_THREAD_SAMPLE_FRACTION
        ):
            return f"≥ {HOST_THREAD_BUSY_MEAN_PCT:g} % on average"
        return f"≥ {HOST_THREAD_SAMPLE_FRACTION:.0%}"


BUSIEST_THREAD = "proc_busiest_thread_pct"
PER_CPU = "cpu<i>_util_pct"
HOST_THREAD_SAMPLE_FRACTION = 0.5  # a host thread saturated in at least this share of samples
HOST_THREAD_TREE_CORES = 0.8  # per-CPU evidence: the training's processes use at least this many cores
# … or the training's busiest thread busy at least this on average. On an H100, one Python thread launching
# tiny kernels back to back left NVML util at 28 % (docs/gpu-evidence.md, calibration): a thread that feeds
# the GPU reads well below 100 % per sample while it holds the GPU back.
HOST_THREAD_BUSY_MEAN_PCT = 70.0


def host_thread(samples: pd.DataFrame, thresholds: Thresholds) -> HostThread:
    """Share of the samples in which one host thread was ≥ Thresholds.core_saturated_pct busy."""
    if BUSIEST_THREAD in samples:
        busiest = pd.to_numeric(samples[BUSIEST_THREAD], errors="coerce").to_numpy(dtype=float)
        busiest = busiest[np.isfinite(busiest)]
        if busiest.size:
            saturated = float((busiest >= thresholds.core_saturated_pct).mean())
            return HostThread(saturated, BUSIEST_THREAD, float(busiest.mean()))
    cores = core_indices(samples)
    if not cores or samples.empty:
        return HostThread(None, "")
    util = np.column_stack(
        [pd.to_numeric(samples[f"cpu{i}_util_pct"], errors="coerce").to_numpy(dtype=float) for i in cores]
    )
    rows = np.isfinite(util).any(axis=1)
    if not rows.any():
        return HostThread(None, "")
    saturated = (np.nan_to_num(util[rows], nan=0.0) >= thresholds.core_saturated_pct).any(axis=1)
    return HostThread(float(saturated.mean()), PER_CPU)


def utilization_numbers(samples: pd.DataFrame, gpus: Sequence[int], thresholds: Thresholds) -> dict:
    """Means over the samples: the least busy charged GPU (it limits data-parallel training), CPU,
    iowait, steal, disk, the training's tree."""
    per_gpu = [
        m for i in (gpus or gpu_indices(samples)) if (m := mean_of(samples, f"gpu{i}_util_pct")) is not None
    ]
    saturated, idle, cores = core_counts(samples, thresholds)
    thread = host_thread(samples, thresholds)
    return {
        "host_thread_saturated_fraction": thread.fraction,
        "host_thread_busy_mean_pct": thread.mean_pct,
        "gpu_util_pct": min(per_gpu) if per_gpu else None,
        "gpu_util_max_pct": max(per_gpu) if per_gpu else None,  # the busiest used GPU
        "cpu_util_pct": mean_of(samples, "cpu_util_pct"),
        "cpu_iowait_pct": mean_of(samples, "cpu_iowait_pct"),
        "cpu_steal_pct": mean_of(samples, "cpu_steal_pct"),
        "disk_util_pct": mean_of(samples, "disk_util_pct"),
        "proc_cpu_pct": mean_of(samples, "proc_cpu_pct"),
        "saturated_cores": saturated,
        "idle_cores": idle,
        "logical_cpus": float(cores) if cores else None,
        "swap_growth_bytes": growth_of(samples, "swap_used_bytes"),
        "proc_io_bps": summed_mean(samples, (PROC_READ_BPS, PROC_WRITE_BPS)),
        "disk_io_bps": mean_of(samples, DISK_BUSIEST_BPS)
        if DISK_BUSIEST_BPS in samples
        else summed_mean(samples, ("disk_read_bps", "disk_write_bps")),
    }


def summed_mean(samples: pd.DataFrame, columns: Sequence[str]) -> float | None:
    """The sum of the columns' means, over those recorded; None when none is."""
    means = [m for column in columns if (m := mean_of(samples, column)) is not None]
    return float(sum(means)) if means else None


def growth_of(samples: pd.DataFrame, column: str) -> float | None:
    """How much a level column rose over the samples: its highest reading less its first."""
    if column not in samples:
        return None
    values = pd.to_numeric(samples[column], errors="coerce").to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(values.max() - values[0]) if values.size >= 2 else None


def _io_bound(n: dict, t: Thresholds) -> tuple[str | None, str | None]:
    """(why the run is I/O-bound, why a busy disk is not its bottleneck): the second where the training's
    own storage I/O (proc_read_bps + proc_write_bps) was under IO_OWN_SHARE of the busiest disk's
    (disk_busiest_bps; where not recorded, of all disks')."""
    found = []
    if n["cpu_iowait_pct"] is not None and n["cpu_iowait_pct"] >= t.iowait_pct:
        found.append(f"mean iowait {_fmt(n['cpu_iowait_pct'])} ≥ {t.iowait_pct:g} %")
    if n["disk_util_pct"] is not None and n["disk_util_pct"] >= t.disk_saturated_pct:
        found.append(f"mean disk busy {_fmt(n['disk_util_pct'])} ≥ {t.disk_saturated_pct:g} %")
    if not found:
        return None, None
    own, disks = n["proc_io_bps"], n["disk_io_bps"]
    if own is None or not disks or own >= IO_OWN_SHARE * disks:
        return " and ".join(found), None
    return None, (
        f"{' and '.join(found)}, but the training's own storage I/O was {own / 1e6:,.1f} MB/s of the "
        f"disk's {disks / 1e6:,.1f} (< {IO_OWN_SHARE:.0%}, proc_read_bps + proc_write_bps): other processes "
        "kept the disk busy, not the training's bottleneck"
    )


def _some_cores_saturated(n: dict, t: Thresholds, thread: HostThread, kind: str) -> str | None:
    """Several CPUs saturated while others idle, or (a GPU run) one host thread saturated most of the time."""
    saturated, idle, proc = n["saturated_cores"], n["idle_cores"], n["proc_cpu_pct"]
    tree = f", the training's processes use {proc / 100:.1f} cores (proc_cpu_pct)" if proc is not None else ""
    several = saturated is not None and idle is not None and saturated >= 1 and idle >= 1
    if several and (proc is None or proc >= 0.8 * 100 * saturated):  # else they are not the training's
        return (
            f"{saturated:.1f} of {n['logical_cpus']:.0f} logical CPUs ≥ {t.core_saturated_pct:g} % busy "
            f"while {idle:.1f} are < {t.core_idle_pct:g} %{tree}"
        )
    if kind != "gpu" or not thread.saturated() or (idle is not None and idle < 1):
        return None
    if thread.source == PER_CPU and (proc is None or proc < HOST_THREAD_TREE_CORES * 100):
        return None  # a saturated CPU that may not be the training's
    spare = f" while {idle:.1f} logical CPUs are < {t.core_idle_pct:g} %" if idle is not None else ""
    return f"{thread.text(t)} ({thread.rule()}){spare}{tree}: one thread holds the rest"


def _no_host_cause(n: dict, thread: HostThread) -> str:
    """What 'no host or I/O cause' rests on."""
    if n["cpu_util_pct"] is None and thread.fraction is None:
        return "and the host not recorded (no CPU columns): cause unknown"
    if thread.fraction is None:
        return "with no host or I/O cause in the mean CPU utilization (per-CPU utilization not recorded)"
    if thread.source == PER_CPU:
        return ("with no host or I/O cause in per-CPU utilization (one saturated thread the kernel moves "
                "between CPUs would not show there)")  # fmt: skip
    return "with no host or I/O cause"


def verdict(
    kind: str,
    samples: pd.DataFrame,
    gpus: Sequence[int],
    throttles: Sequence[ThrottleSummary],
    t: Thresholds,
    gpu_findings: Sequence[GpuFinding] = (),
    gpu_not_attributable: str | None = None,
) -> Verdict:
    """`gpu_not_attributable`: why the board's utilization is not the run's (a shared GPU, a MIG slice;
    sizing.analysis.gpu_state): then no verdict is drawn from board figures."""
    n = utilization_numbers(samples, gpus, t)
    board_only = kind == "gpu" and bool(gpu_not_attributable)
    if board_only:
        n["gpu board util pct"], n["gpu_util_pct"] = n["gpu_util_pct"], None
    gpu, cpu = n["gpu_util_pct"], n["cpu_util_pct"]
    gpu_at_most = gpu if gpu is not None else n.get("gpu board util pct")  # a shared board's bounds the run's
    thread = host_thread(samples, t)
    (io, others_io), some_cores = _io_bound(n, t), _some_cores_saturated(n, t, thread, kind)
    main, why = UNDETERMINED, ""
    if kind == "gpu" and gpu is not None and gpu >= t.gpu_bound_util_pct:
        main, why = GPU_BOUND, f"mean GPU util {_fmt(gpu)} ≥ {t.gpu_bound_util_pct:g} %"
    elif kind == "cpu" and cpu is not None and cpu >= t.cpu_saturated_pct:
        main, why = CPU_BOUND, f"CPU run, mean CPU util {_fmt(cpu)} ≥ {t.cpu_saturated_pct:g} %"
    elif io:
        main, why = IO_BOUND, io
    elif kind == "gpu" and cpu is not None and cpu >= t.cpu_saturated_pct:
        main, why = HOST_BOUND, f"mean CPU util {_fmt(cpu)} ≥ {t.cpu_saturated_pct:g} % feeding the GPU"
    elif some_cores and (kind != "gpu" or gpu_at_most is not None):
        main, why = HOST_BOUND, some_cores
    elif kind == "gpu" and gpu is not None and gpu < t.gpu_underused_util_pct:
        main, why = (
            GPU_UNDERUSED,
            f"mean GPU util {_fmt(gpu)} < {t.gpu_underused_util_pct:g} % {_no_host_cause(n, thread)}",
        )
    if main not in (GPU_BOUND, GPU_UNDERUSED) and kind == "gpu" and gpu is not None:
        why = f"mean GPU util {_fmt(gpu)}; " + why if why else ""
    evidence = [why] if why else []
    if others_io:
        evidence.append(others_io)
    if main == UNDETERMINED and some_cores and kind == "gpu":
        evidence.append(
            f"{some_cores}; but the GPU's utilization was not recorded, and a thread waiting on the GPU "
            "spins busy too: host-bound or GPU-bound, not known"
        )
    elif main == UNDETERMINED:
        evidence.append(
            f"GPU {'not attributable' if board_only else _fmt(gpu)}, CPU {_fmt(cpu)}, "
            f"iowait {_fmt(n['cpu_iowait_pct'])}, "
            f"disk {_fmt(n['disk_util_pct'])}: no bottleneck rule matched"
            if samples is not None and not samples.empty
            else "no telemetry samples in the measurement window"
        )
    labels = [main] if main != UNDETERMINED else []
    if board_only:
        labels.append(str(gpu_not_attributable))
        evidence.append(_not_attributable_evidence(str(gpu_not_attributable), n["gpu board util pct"]))
        gpu_findings = [f for f in gpu_findings if not f.primary]
    labels, evidence = _with_gpu_findings(kind, labels, evidence, n, gpu_findings)
    for s in throttles:
        fraction = s.fraction
        if fraction is None:
            continue
        n[f"{s.source} {s.category} fraction"] = fraction
        if s.is_fault and fraction >= t.throttled_sample_fraction:
            label = THERMALLY_THROTTLED if s.is_thermal else HW_SLOWDOWN
            if label not in labels:
                labels.append(label)
            evidence.append(
                f"{s.source} {s.category} in {s.flagged_samples}/{s.samples} samples "
                f"({fraction:.1%} ≥ {t.throttled_sample_fraction:.0%}), {s.events} events"
                + (f" ({s.cause})" if s.cause else "")
            )
        elif s.category == CPU_BELOW_PEAK and fraction >= t.throttled_sample_fraction:
            labels.append(CPU_CLOCK_BELOW_PEAK)
            evidence.append(
                f"{s.category} in {s.flagged_samples}/{s.samples} busy samples ({fraction:.1%}); no thermal "
                "evidence (no throttle counter rise, no temperature at the threshold)"
            )
        elif (
            not s.is_fault
            and s.category.startswith("at power limit")
            and fraction > 0
            and not any(f.source == s.source for f in gpu_findings if "power limit" in f.evidence)
        ):
            evidence.append(
                f"{s.source} at its power limit in {fraction:.0%} of samples (a state, not a fault)"
            )
    labels = labels or [UNDETERMINED]
    return Verdict(labels[0], tuple(labels), tuple(evidence), n)


def _not_attributable_evidence(note: str, board_util_pct: float | None) -> str:
    board = f" (the board's mean util {_fmt(board_util_pct)} counts work that is not the run's)"
    return (f"{note}{board if board_util_pct is not None else ''}: no GPU-bound, GPU underused, busy but "
            "not computing or straggler verdict from board figures")  # fmt: skip


def _with_gpu_findings(
    kind: str, labels: list[str], evidence: list[str], n: dict, findings: Sequence[GpuFinding]
) -> tuple[list[str], list[str]]:
    """Power- and clock-aware GPU findings (analysis.gpu_verdicts): a primary one (straggler, busy but not
    computing) names the bottleneck in place of a utilization-only GPU verdict; all add their evidence."""
    if kind != "gpu" or not findings:
        return labels, evidence
    primary = next((f for f in findings if f.primary), None)
    if primary is not None and (not labels or labels[0] in (GPU_BOUND, GPU_UNDERUSED)):
        labels = [primary.label, *labels[1:]]
    for finding in findings:
        if finding.label and finding.label not in labels:
            labels.append(finding.label)
        evidence.append(finding.evidence)
        n.update(finding.numbers)
    return labels, evidence
