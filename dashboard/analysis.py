"""Sizing analysis: is the GPU worth it? Pure functions over the contents of run directories.

No Dash, no file access: every function takes plain DataFrames and dicts (the parsed `run.json`,
`training.json`, `eval.json`, `telemetry.csv`, `training.csv`, `phases.csv` of docs/run-format.md), so the
report CLI, the dashboard's Sizing page and the tests share one implementation.

The definitions every figure follows are in DEFINITIONS below; the report prints them verbatim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

HOURS_PER_YEAR = 8760.0
JOULES_PER_KWH = 3.6e6
DEFAULT_WARMUP_STEPS = 20
SHORT_RUN_STEPS = 3 * DEFAULT_WARMUP_STEPS
LOSS_WINDOW_STEPS = 20
# NVML clocks-event reasons that mean "slowed down by heat or power" (0x1 idle and 0x2/0x100 clock
# settings are not throttling; 0x10 sync boost is not either).
THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_HW_SLOWDOWN = 0x8
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
THROTTLE_HW_POWER_BRAKE = 0x80
THERMAL_OR_POWER_BITS = (
    THROTTLE_SW_POWER_CAP
    | THROTTLE_HW_SLOWDOWN
    | THROTTLE_SW_THERMAL
    | THROTTLE_HW_THERMAL
    | THROTTLE_HW_POWER_BRAKE
)

GPU_BOUND = "GPU-bound"
INPUT_BOUND = "input-bound"
THERMALLY_THROTTLED = "thermally throttled"
CPU_BOUND = "CPU-bound"
UNDETERMINED = "undetermined"

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "Warm-up",
        "the first `warmup_steps_excluded` steps of training.csv when training.json states it; "
        "otherwise, by the training workload's own rule, the first 20 steps, or the first third of the"
        " steps when there are fewer than 60; never less than the first step (whose time includes "
        "graph tracing).",
    ),
    (
        "Steady state",
        "from the end of the last warm-up step to the end of the last step. Steady steps/s = steps "
        "completed in that span / its wall-clock length (checkpoint saves and input stalls included: "
        "a real training run pays for them); examples/s = steps/s × batch size.",
    ),
    (
        "Training window",
        "the `train` phase(s) of phases.csv when present, else the whole telemetry. Measurement "
        "window: the steady state clipped to the training window and to the telemetry's span. "
        "Utilization means, verdicts and per-step energy use the measurement window; thermal figures "
        "and total energy use the training window.",
    ),
    (
        "Energy",
        "GPU from the NVML energy counter (`gpu<i>_energy_j`, summed over GPUs), else the trapezoidal"
        " integral of `gpu<i>_power_w`; CPU from the RAPL counter (`cpu_energy_j`), else, only when a"
        " CPU TDP is given, an ESTIMATE: TDP × `cpu_util_pct`/100, integrated. Counters are read by "
        "linear interpolation at the window's ends. J per 1,000 steps = mean power in the measurement"
        " window × 1,000 / steady steps/s. A CPU run counts CPU energy only (the baseline machine"
        " has no GPU to power, even when it was recorded on a GPU host).",
    ),
    (
        "Cost per 1,000 steps",
        "energy (kWh) × tariff + hardware price / (amortisation years × 8,760 h) × hours per 1,000 "
        "steps. The hardware price of a CPU run is the CPU (host) price; of a GPU run, host + GPU. A "
        "price not given counts as 0 (already owned). Amortisation assumes the hardware trains around"
        " the clock.",
    ),
    (
        "Speedup",
        "steady examples/s of a configuration / that of the baseline configuration (means over "
        "repeats; the baseline is the first CPU run unless one is named). Repeats = runs with the "
        "same device kind, hardware and training config; their spread is the sample standard "
        "deviation.",
    ),
    (
        "Break-even",
        "GPU price / value saved per GPU training hour, where one GPU hour saves (speedup − 1) hours "
        "of baseline time worth the value per hour each, plus the energy cost the baseline would have"
        " paid for that hour's steps minus the GPU run's. Never, when that saving is ≤ 0.",
    ),
    (
        "Time to N steps",
        "elapsed training time at the first row of training.csv with `step` ≥ N; beyond the last "
        "step, projected at the steady rate (marked *projected*).",
    ),
    (
        "Time to a target loss",
        "the first elapsed training time at which the trailing mean of `loss_total` over 20 steps "
        "(the whole run when shorter) is ≤ the target; by default the target is the highest of the "
        "runs' lowest smoothed losses, i.e. a loss every run reached.",
    ),
    (
        "Thermal",
        "peak temperature; time above the threshold = the sum of the sample intervals of samples at "
        "or above it; GPU throttle events = maximal runs of consecutive samples with a thermal or "
        "power slowdown bit of `gpu<i>_throttle_reasons` set (0x4 SW power cap, 0x8 HW slowdown, 0x20"
        " SW thermal, 0x40 HW thermal, 0x80 power brake); CPU frequency-drop events = runs of busy "
        "samples (`cpu_util_pct` ≥ 50 %) whose `cpu_freq_mhz` is ≥ 15 % below the run's baseline (the"
        " 90th percentile of `cpu_freq_mhz` in the training window).",
    ),
    (
        "Verdicts",
        "over the measurement window; GPU util is the mean `gpu<i>_util_pct` of the busiest GPU, CPU "
        "util the mean `cpu_util_pct` (all CPUs), disk util the mean `disk_util_pct`. Thermally "
        "throttled: GPU slowdown bits in ≥ 5 % of samples, or CPU frequency drops in ≥ 5 % of busy "
        "samples. GPU-bound: GPU run with mean GPU util ≥ 80 %. "
        "Input-bound: GPU run with mean GPU util < 50 % while mean CPU util ≥ 85 % or mean disk util "
        "≥ 80 %, or a CPU run under 85 % CPU with disk ≥ 80 %. CPU-bound: CPU run with mean CPU util "
        "≥ 85 %. The primary verdict is the bottleneck rule that matched; thermally throttled is "
        "added beside it and is primary when no bottleneck rule matched; otherwise undetermined. The "
        "numbers are always shown.",
    ),
)

_GPU_COLUMN = re.compile(r"^gpu(\d+)_")


@dataclass(frozen=True)
class Thresholds:
    """The verdict rules' numbers (see the module docstring)."""

    gpu_bound_util_pct: float = 80.0
    input_bound_gpu_util_pct: float = 50.0
    cpu_saturated_pct: float = 85.0
    disk_saturated_pct: float = 80.0
    throttled_sample_fraction: float = 0.05
    cpu_freq_drop_fraction: float = 0.15
    cpu_busy_pct: float = 50.0
    cpu_freq_baseline_quantile: float = 0.90
    temp_threshold_c: float = 80.0


@dataclass(frozen=True)
class Prices:
    """What the user tells us about money; None = not given."""

    tariff_per_kwh: float = 0.15
    gpu_price: float | None = None
    cpu_price: float | None = None
    amortise_years: float = 3.0
    value_per_hour: float | None = None
    cpu_tdp_w: float | None = None

    def problems(self) -> list[str]:
        """One line per invalid setting (empty when all are usable)."""
        checks = [
            ("tariff", self.tariff_per_kwh, True),
            ("GPU price", self.gpu_price, True),
            ("CPU price", self.cpu_price, True),
            ("amortisation years", self.amortise_years, False),
            ("value per hour", self.value_per_hour, True),
            ("CPU TDP", self.cpu_tdp_w, False),
        ]
        found = []
        for name, value, zero_ok in checks:
            if value is None:
                continue
            if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                bound = "≥ 0" if zero_ok else "> 0"
                found.append(f"{name} must be a number {bound}, got {value!r}")
        return found


@dataclass(frozen=True)
class RunData:
    """One run directory's parsed files; absent files are empty dicts / DataFrames."""

    run_id: str
    meta: dict
    training_info: dict
    evaluation: dict
    telemetry: pd.DataFrame
    training: pd.DataFrame
    phases: pd.DataFrame
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Throughput:
    steps_total: int
    steps_in_budget: int | None
    budget_s: float | None
    warmup_steps: int
    steady_steps: int
    steady_start_unix: float | None
    steady_end_unix: float | None
    steps_per_s: float | None
    batch_size: float | None
    examples_per_s: float | None
    first_step_s: float | None


@dataclass(frozen=True)
class Energy:
    """Energy in one window; `method` says where each number came from."""

    window_s: float
    gpu_j: float | None
    gpu_method: str | None
    cpu_j: float | None
    cpu_method: str | None

    @property
    def total_j(self) -> float | None:
        parts = [j for j in (self.gpu_j, self.cpu_j) if j is not None]
        return sum(parts) if parts else None

    @property
    def cpu_is_estimate(self) -> bool:
        return bool(self.cpu_method and self.cpu_method.startswith("ESTIMATE"))


@dataclass(frozen=True)
class Cost:
    energy_usd: float | None
    hardware_usd: float | None

    @property
    def total_usd(self) -> float | None:
        if self.energy_usd is None and self.hardware_usd is None:
            return None
        return (self.energy_usd or 0.0) + (self.hardware_usd or 0.0)


@dataclass(frozen=True)
class ThrottleSummary:
    source: str
    samples: int
    throttled_samples: int
    events: int
    throttled_s: float

    @property
    def fraction(self) -> float:
        return self.throttled_samples / self.samples if self.samples else 0.0


@dataclass(frozen=True)
class ThermalSummary:
    sensor: str
    peak_c: float
    time_above_s: float
    threshold_c: float


@dataclass(frozen=True)
class Verdict:
    primary: str
    labels: tuple[str, ...]
    evidence: tuple[str, ...]
    numbers: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TimeTo:
    seconds: float | None
    projected: bool = False
    step: float | None = None


@dataclass(frozen=True)
class RunAnalysis:
    run_id: str
    label: str
    kind: str
    hardware: str
    config: str
    throughput: Throughput
    steady_energy: Energy | None
    training_energy: Energy | None
    j_per_1000_steps: float | None
    gpu_j_per_1000_steps: float | None
    cpu_j_per_1000_steps: float | None
    cost_per_1000_steps: Cost
    thermal: tuple[ThermalSummary, ...]
    throttling: tuple[ThrottleSummary, ...]
    verdict: Verdict
    evaluation: dict
    min_smoothed_loss: float | None
    warnings: tuple[str, ...]


# --- run identity -----------------------------------------------------------------------------------


def device_kind(meta: dict, training_info: dict) -> str:
    """'gpu' when training ran on a GPU, else 'cpu' (training.json's device_used wins over run.json)."""
    used = training_info.get("device_used")
    if isinstance(used, str) and used.strip():
        return "cpu" if used.strip().upper() == "CPU" else "gpu"
    device = str(meta.get("device") or training_info.get("device_requested") or "cpu").lower()
    return "gpu" if device.startswith(("gpu", "cuda")) else "cpu"


def hardware_name(meta: dict, training_info: dict) -> str:
    """The accelerator that did the work: GPU name(s), or the CPU model."""
    system = meta.get("system") or {}
    if device_kind(meta, training_info) == "gpu":
        names = training_info.get("gpu_names") or [g.get("name") for g in system.get("gpus") or []]
        names = [str(n) for n in names if n]
        if names:
            return " + ".join(names)
        used = training_info.get("device_used")
        return str(used) if used else "GPU"
    return str(system.get("cpu_model") or "CPU")


def config_name(training_info: dict) -> str:
    """[framework/]preset/backbone/image size/batch/precision: the settings that must match to compare.

    The framework is named unless it is TensorFlow (the only one before the torch twin), so a torch
    run never counts as a repeat of, or a hardware comparison with, a TensorFlow run.
    """
    framework = training_info.get("framework")
    parts = [
        framework if framework and framework != "tensorflow" else None,
        training_info.get("preset"),
        training_info.get("backbone"),
        f"{training_info['image_size']}px" if training_info.get("image_size") else None,
        f"batch {training_info['batch_size']}" if training_info.get("batch_size") else None,
        training_info.get("precision"),
    ]
    return "/".join(str(p) for p in parts if p) or "unknown config"


def group_key(analysis: RunAnalysis) -> tuple[str, str, str]:
    """Runs with the same key are repeats of one configuration."""
    return (analysis.kind, analysis.hardware, analysis.config)


# --- throughput ---------------------------------------------------------------------------------------


def warmup_steps(step_count: int, training_info: dict) -> int:
    """Steps excluded as warm-up (module docstring); always leaves ≥ 1 steady step when step_count ≥ 2."""
    stated = training_info.get("warmup_steps_excluded")
    if isinstance(stated, (int, float)) and not isinstance(stated, bool) and stated >= 0:
        wanted = int(stated)
    else:
        wanted = DEFAULT_WARMUP_STEPS if step_count >= SHORT_RUN_STEPS else step_count // 3
    wanted = max(1, wanted)
    return min(wanted, max(step_count - 1, 0))


def _training_elapsed(training: pd.DataFrame, training_info: dict) -> np.ndarray:
    if "elapsed_s" in training and training["elapsed_s"].notna().all():
        return training["elapsed_s"].to_numpy(dtype=float)
    start = training_info.get("start_unix")
    times = training["time_unix"].to_numpy(dtype=float)
    if isinstance(start, (int, float)):
        return times - float(start)
    first_step = training["step_time_s"].to_numpy(dtype=float)[0] if "step_time_s" in training else 0.0
    return times - (times[0] - first_step)


def clean_training(training: pd.DataFrame) -> pd.DataFrame:
    """Rows with a time and a step, in time order."""
    if training.empty or "time_unix" not in training or "step" not in training:
        return training.iloc[0:0]
    rows = training.dropna(subset=["time_unix", "step"])
    return rows.sort_values("time_unix", kind="stable").reset_index(drop=True)


def batch_size(training: pd.DataFrame, training_info: dict) -> float | None:
    stated = training_info.get("batch_size")
    if isinstance(stated, (int, float)) and stated > 0:
        return float(stated)
    if {"examples_per_s", "step_time_s"} <= set(training.columns) and not training.empty:
        per_step = (training["examples_per_s"] * training["step_time_s"]).dropna()
        if not per_step.empty:
            return float(round(per_step.median()))
    return None


def throughput(training: pd.DataFrame, training_info: dict) -> Throughput:
    """Steady-state steps/s and examples/s, steps done and steps within the duration budget."""
    rows = clean_training(training)
    count = len(rows)
    budget = training_info.get("duration_budget_s")
    budget = float(budget) if isinstance(budget, (int, float)) and budget > 0 else None
    size = batch_size(rows, training_info)
    first_step = training_info.get("first_step_s")
    if count == 0:
        return Throughput(0, 0 if budget else None, budget, 0, 0, None, None, None, size, None, None)
    elapsed = _training_elapsed(rows, training_info)
    if not isinstance(first_step, (int, float)):
        first_step = float(elapsed[0])
    in_budget = int((elapsed <= budget).sum()) if budget else None
    warmup = warmup_steps(count, training_info)
    if count < 2:
        return Throughput(count, in_budget, budget, warmup, 0, None, None, None, size, None, first_step)
    times = rows["time_unix"].to_numpy(dtype=float)
    steps = rows["step"].to_numpy(dtype=float)
    start, end = times[warmup - 1], times[-1]
    steady_steps = int(steps[-1] - steps[warmup - 1])
    rate = float(steady_steps / (end - start)) if end > start and steady_steps > 0 else None
    examples = rate * size if rate is not None and size else None
    return Throughput(
        count,
        in_budget,
        budget,
        warmup,
        steady_steps,
        float(start),
        float(end),
        rate,
        size,
        examples,
        float(first_step),
    )


def time_to_steps(
    training: pd.DataFrame, training_info: dict, target_step: float, steady_steps_per_s: float | None
) -> TimeTo:
    """Elapsed training time when `step` first reaches target_step; projected at the steady rate beyond."""
    rows = clean_training(training)
    if rows.empty:
        return TimeTo(None)
    elapsed = _training_elapsed(rows, training_info)
    steps = rows["step"].to_numpy(dtype=float)
    reached = np.flatnonzero(steps >= target_step)
    if reached.size:
        return TimeTo(float(elapsed[reached[0]]), False, float(steps[reached[0]]))
    if not steady_steps_per_s:
        return TimeTo(None)
    remaining = (target_step - steps[-1]) / steady_steps_per_s
    return TimeTo(float(elapsed[-1] + remaining), True, float(target_step))


def smoothed_loss(training: pd.DataFrame, window: int = LOSS_WINDOW_STEPS) -> pd.Series:
    """Trailing mean of loss_total over `window` steps (the whole run when it is shorter)."""
    rows = clean_training(training)
    if rows.empty or "loss_total" not in rows:
        return pd.Series(dtype=float)
    losses = pd.to_numeric(rows["loss_total"], errors="coerce")
    size = max(1, min(window, int(losses.notna().sum())))
    return losses.rolling(size, min_periods=size).mean()


def time_to_loss(
    training: pd.DataFrame, training_info: dict, target_loss: float, window: int = LOSS_WINDOW_STEPS
) -> TimeTo:
    """Elapsed training time when the smoothed loss first falls to target_loss or below."""
    rows = clean_training(training)
    smooth = smoothed_loss(rows, window)
    if smooth.empty:
        return TimeTo(None)
    hits = np.flatnonzero(smooth.to_numpy(dtype=float) <= target_loss)
    if not hits.size:
        return TimeTo(None)
    elapsed = _training_elapsed(rows, training_info)
    return TimeTo(float(elapsed[hits[0]]), False, float(rows["step"].iloc[hits[0]]))


def min_smoothed_loss(training: pd.DataFrame, window: int = LOSS_WINDOW_STEPS) -> float | None:
    smooth = smoothed_loss(training, window).dropna()
    return float(smooth.min()) if not smooth.empty else None


def common_target_loss(minimum_losses: Iterable[float | None]) -> float | None:
    """The lowest smoothed loss that every run reached: the highest of the runs' minima."""
    reached = [m for m in minimum_losses if m is not None]
    return max(reached) if reached else None


def speedup(run_examples_per_s: float | None, baseline_examples_per_s: float | None) -> float | None:
    if not run_examples_per_s or not baseline_examples_per_s:
        return None
    return run_examples_per_s / baseline_examples_per_s


# --- windows ------------------------------------------------------------------------------------------


def train_windows(phases: pd.DataFrame, telemetry: pd.DataFrame) -> list[tuple[float, float]]:
    """The `train` phases' [start, end] spans, else the whole telemetry's span (empty without either)."""
    if not phases.empty and {"phase", "start_unix", "end_unix"} <= set(phases.columns):
        train = phases[phases["phase"].astype(str) == "train"]
        spans = [
            (float(s), float(e))
            for s, e in zip(
                pd.to_numeric(train["start_unix"], errors="coerce"),
                pd.to_numeric(train["end_unix"], errors="coerce"),
                strict=True,
            )
            if math.isfinite(s) and math.isfinite(e) and e > s
        ]
        if spans:
            return spans
    times = _telemetry_times(telemetry)
    if times.size >= 2 and times[-1] > times[0]:
        return [(float(times[0]), float(times[-1]))]
    return []


def _telemetry_times(telemetry: pd.DataFrame) -> np.ndarray:
    if telemetry.empty or "time_unix" not in telemetry:
        return np.array([])
    return pd.to_numeric(telemetry["time_unix"], errors="coerce").dropna().to_numpy(dtype=float)


def clip_window(
    window: tuple[float, float], spans: Sequence[tuple[float, float]], telemetry: pd.DataFrame
) -> tuple[float, float] | None:
    """`window` ∩ the training spans' hull ∩ the telemetry's span; None when empty."""
    start, end = window
    if spans:
        start, end = max(start, min(s for s, _ in spans)), min(end, max(e for _, e in spans))
    times = _telemetry_times(telemetry)
    if times.size:
        start, end = max(start, times[0]), min(end, times[-1])
    return (float(start), float(end)) if end > start else None


def samples_in(telemetry: pd.DataFrame, window: tuple[float, float] | None) -> pd.DataFrame:
    if window is None or telemetry.empty or "time_unix" not in telemetry:
        return telemetry.iloc[0:0]
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce")
    return telemetry[(times >= window[0]) & (times <= window[1])]


# --- energy -------------------------------------------------------------------------------------------


def counter_energy_j(times: np.ndarray, counter: np.ndarray, start: float, end: float) -> float | None:
    """Joules a cumulative counter advanced over [start, end], interpolating linearly between samples."""
    valid = np.isfinite(times) & np.isfinite(counter)
    times, counter = times[valid], counter[valid]
    if times.size < 2 or end <= start:
        return None
    start, end = max(start, times[0]), min(end, times[-1])
    if end <= start:
        return None
    return float(np.interp(end, times, counter) - np.interp(start, times, counter))


def integrated_energy_j(times: np.ndarray, power_w: np.ndarray, start: float, end: float) -> float | None:
    """Trapezoidal integral of power over [start, end] (interpolated at both ends)."""
    valid = np.isfinite(times) & np.isfinite(power_w)
    times, power_w = times[valid], power_w[valid]
    if times.size < 2:
        return None
    cumulative = np.concatenate([[0.0], np.cumsum(np.diff(times) * (power_w[1:] + power_w[:-1]) / 2)])
    return counter_energy_j(times, cumulative, start, end)


def gpu_indices(telemetry: pd.DataFrame) -> list[int]:
    found = {int(m.group(1)) for c in telemetry.columns if (m := _GPU_COLUMN.match(str(c)))}
    return sorted(found)


def _column(telemetry: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in telemetry:
        return None
    values = pd.to_numeric(telemetry[name], errors="coerce").to_numpy(dtype=float)
    return values if np.isfinite(values).sum() >= 2 else None


def gpu_energy_j(telemetry: pd.DataFrame, start: float, end: float) -> tuple[float | None, str | None]:
    """Sum over GPUs of the NVML counter's advance (else integrated power) and how it was measured."""
    if _telemetry_times(telemetry).size < 2:
        return None, None
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
    total, methods = 0.0, set()
    for index in gpu_indices(telemetry):
        counter = _column(telemetry, f"gpu{index}_energy_j")
        power = _column(telemetry, f"gpu{index}_power_w")
        joules, method = None, None
        if counter is not None:
            joules, method = counter_energy_j(times, counter, start, end), "NVML energy counter"
        if joules is None and power is not None:
            joules, method = integrated_energy_j(times, power, start, end), "integrated NVML power"
        if joules is None:
            return None, None
        total += joules
        methods.add(method)
    if not methods:
        return None, None
    return total, " + ".join(sorted(methods))


def cpu_energy_j(
    telemetry: pd.DataFrame, start: float, end: float, cpu_tdp_w: float | None
) -> tuple[float | None, str | None]:
    """RAPL package energy over the window, else TDP × utilization integrated (an estimate), else None."""
    if telemetry.empty or "time_unix" not in telemetry:
        return None, None
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
    counter = _column(telemetry, "cpu_energy_j")
    if counter is not None:
        joules = counter_energy_j(times, counter, start, end)
        if joules is not None:
            return joules, "RAPL"
    util = _column(telemetry, "cpu_util_pct")
    if cpu_tdp_w is None or util is None:
        return None, None
    joules = integrated_energy_j(times, cpu_tdp_w * util / 100.0, start, end)
    return (joules, f"ESTIMATE: {cpu_tdp_w:g} W TDP × CPU util") if joules is not None else (None, None)


def energy_in(
    telemetry: pd.DataFrame,
    window: tuple[float, float] | None,
    cpu_tdp_w: float | None,
    count_gpus: bool = True,
) -> Energy | None:
    """Energy over the window; GPUs left out when count_gpus is False (a CPU run)."""
    if window is None:
        return None
    start, end = window
    gpu_j, gpu_method = gpu_energy_j(telemetry, start, end) if count_gpus else (None, None)
    cpu_j, cpu_method = cpu_energy_j(telemetry, start, end, cpu_tdp_w)
    return Energy(end - start, gpu_j, gpu_method, cpu_j, cpu_method)


def joules_per_1000_steps(joules: float | None, window_s: float, steps_per_s: float | None) -> float | None:
    """Mean power over the window × the time 1,000 steps take at the steady rate."""
    if joules is None or not steps_per_s or window_s <= 0:
        return None
    return joules / window_s * 1000.0 / steps_per_s


def cost_per_1000_steps(
    j_per_1000: float | None, steps_per_s: float | None, hardware_price: float, prices: Prices
) -> Cost:
    """Energy at the tariff plus the hardware price amortised over its years of round-the-clock use."""
    energy = j_per_1000 / JOULES_PER_KWH * prices.tariff_per_kwh if j_per_1000 is not None else None
    hardware = None
    if steps_per_s and hardware_price > 0:
        hours = 1000.0 / steps_per_s / 3600.0
        hardware = hardware_price / (prices.amortise_years * HOURS_PER_YEAR) * hours
    elif steps_per_s:
        hardware = 0.0
    return Cost(energy, hardware)


def hardware_price(kind: str, prices: Prices) -> float:
    """What the run's hardware cost: the host (CPU price), plus the GPU for a GPU run; missing = 0."""
    host = prices.cpu_price or 0.0
    return host + (prices.gpu_price or 0.0) if kind == "gpu" else host


def break_even_hours(
    speedup_factor: float | None,
    gpu_price: float | None,
    value_per_hour: float | None,
    energy_saving_per_gpu_hour: float | None,
) -> float | None:
    """GPU training hours until the time (and energy) saved has paid the GPU's price; inf = never."""
    if speedup_factor is None or gpu_price is None:
        return None
    if value_per_hour is None and energy_saving_per_gpu_hour is None:
        return None
    saving = (speedup_factor - 1.0) * (value_per_hour or 0.0) + (energy_saving_per_gpu_hour or 0.0)
    if saving <= 0:
        return math.inf
    return gpu_price / saving


def energy_saving_per_gpu_hour(
    gpu_steps_per_s: float | None,
    gpu_energy_usd_per_1000: float | None,
    baseline_energy_usd_per_1000: float | None,
) -> float | None:
    """Energy cost the baseline would pay for one GPU hour's steps, minus what the GPU pays."""
    if not gpu_steps_per_s or gpu_energy_usd_per_1000 is None or baseline_energy_usd_per_1000 is None:
        return None
    steps_per_hour = gpu_steps_per_s * 3600.0
    return steps_per_hour / 1000.0 * (baseline_energy_usd_per_1000 - gpu_energy_usd_per_1000)


# --- thermal ------------------------------------------------------------------------------------------


def sample_intervals(times: np.ndarray, nominal_interval_s: float | None) -> np.ndarray:
    """How long each sample stands for: the time since the previous one (the first: the nominal tick)."""
    if times.size == 0:
        return times
    gaps = np.diff(times)
    first = nominal_interval_s if nominal_interval_s else (float(np.median(gaps)) if gaps.size else 0.0)
    return np.concatenate([[first], gaps])


def count_events(mask: np.ndarray) -> int:
    """Maximal runs of consecutive True values."""
    if mask.size == 0:
        return 0
    as_int = mask.astype(np.int8)
    return int(as_int[0] + np.count_nonzero(np.diff(as_int) == 1))


def temperature_summaries(
    telemetry: pd.DataFrame, threshold_c: float, nominal_interval_s: float | None
) -> list[ThermalSummary]:
    """Peak and time at or above threshold_c for the CPU sensor and every GPU."""
    if telemetry.empty or "time_unix" not in telemetry:
        return []
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
    intervals = sample_intervals(times, nominal_interval_s)
    sensors = ["cpu_temp_c"] + [f"gpu{i}_temp_c" for i in gpu_indices(telemetry)]
    found = []
    for name in sensors:
        if name not in telemetry:
            continue
        temps = pd.to_numeric(telemetry[name], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(temps).any():
            continue
        above = np.isfinite(temps) & (temps >= threshold_c)
        found.append(
            ThermalSummary(
                name.removesuffix("_temp_c"),
                float(np.nanmax(temps)),
                float(intervals[above].sum()),
                threshold_c,
            )
        )
    return found


def gpu_throttling(telemetry: pd.DataFrame, nominal_interval_s: float | None) -> list[ThrottleSummary]:
    """Per GPU: samples with a thermal/power slowdown bit, events and time throttled."""
    if telemetry.empty or "time_unix" not in telemetry:
        return []
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
    intervals = sample_intervals(times, nominal_interval_s)
    found = []
    for index in gpu_indices(telemetry):
        name = f"gpu{index}_throttle_reasons"
        if name not in telemetry:
            continue
        reasons = pd.to_numeric(telemetry[name], errors="coerce").to_numpy(dtype=float)
        valid = np.isfinite(reasons)
        if not valid.any():
            continue
        bits = np.where(valid, reasons, 0).astype(np.int64)
        throttled = valid & ((bits & THERMAL_OR_POWER_BITS) != 0)
        found.append(
            ThrottleSummary(
                f"gpu{index}",
                int(valid.sum()),
                int(throttled.sum()),
                count_events(throttled[valid]),
                float(intervals[throttled].sum()),
            )
        )
    return found


def cpu_frequency_drops(
    telemetry: pd.DataFrame,
    thresholds: Thresholds,
    nominal_interval_s: float | None,
    baseline_mhz: float | None = None,
) -> ThrottleSummary | None:
    """Busy samples whose CPU frequency is ≥ the drop fraction below the baseline (see module doc)."""
    needed = {"time_unix", "cpu_freq_mhz", "cpu_util_pct"}
    if telemetry.empty or not needed <= set(telemetry.columns):
        return None
    freq = pd.to_numeric(telemetry["cpu_freq_mhz"], errors="coerce").to_numpy(dtype=float)
    util = pd.to_numeric(telemetry["cpu_util_pct"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(freq).any():
        return None
    if baseline_mhz is None:
        baseline_mhz = float(np.nanquantile(freq, thresholds.cpu_freq_baseline_quantile))
    busy = np.isfinite(freq) & np.isfinite(util) & (util >= thresholds.cpu_busy_pct)
    dropped = busy & (freq <= baseline_mhz * (1.0 - thresholds.cpu_freq_drop_fraction))
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
    intervals = sample_intervals(times, nominal_interval_s)
    return ThrottleSummary(
        "cpu frequency",
        int(busy.sum()),
        int(dropped.sum()),
        count_events(dropped[busy]),
        float(intervals[dropped].sum()),
    )


def cpu_frequency_baseline(telemetry: pd.DataFrame, thresholds: Thresholds) -> float | None:
    if "cpu_freq_mhz" not in telemetry:
        return None
    freq = pd.to_numeric(telemetry["cpu_freq_mhz"], errors="coerce").dropna()
    return float(freq.quantile(thresholds.cpu_freq_baseline_quantile)) if not freq.empty else None


# --- verdict ------------------------------------------------------------------------------------------


def mean_of(telemetry: pd.DataFrame, columns: Sequence[str]) -> float | None:
    """Mean over samples and columns (e.g. all GPUs), ignoring empty cells; None when nothing is there."""
    present = [c for c in columns if c in telemetry]
    if not present or telemetry.empty:
        return None
    values = telemetry[present].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else None


def utilization_means(samples: pd.DataFrame) -> dict[str, float | None]:
    """Mean CPU and disk utilization, and the mean utilization of the busiest GPU."""
    per_gpu = [mean_of(samples, [f"gpu{i}_util_pct"]) for i in gpu_indices(samples)]
    known = [m for m in per_gpu if m is not None]
    return {
        "gpu_util_pct": max(known) if known else None,
        "cpu_util_pct": mean_of(samples, ["cpu_util_pct"]),
        "disk_util_pct": mean_of(samples, ["disk_util_pct"]),
    }


def _fmt(value: float | None, unit: str = " %") -> str:
    return "n/a" if value is None else f"{value:.1f}{unit}"


def _saturation_text(
    cpu: float | None, disk: float | None, cpu_saturated: bool, disk_saturated: bool, thresholds: Thresholds
) -> str:
    parts = []
    if cpu_saturated:
        parts.append(f"mean CPU util {_fmt(cpu)} ≥ {thresholds.cpu_saturated_pct:g} %")
    if disk_saturated:
        parts.append(f"mean disk util {_fmt(disk)} ≥ {thresholds.disk_saturated_pct:g} %")
    return " and ".join(parts)


def verdict(
    kind: str, means: dict[str, float | None], throttles: Sequence[ThrottleSummary], thresholds: Thresholds
) -> Verdict:
    """The bottleneck verdict and the numbers behind it (rules in the module docstring)."""
    gpu, cpu, disk = means.get("gpu_util_pct"), means.get("cpu_util_pct"), means.get("disk_util_pct")
    numbers: dict[str, float | None] = dict(means)
    evidence: list[str] = []
    throttled = [t for t in throttles if t.samples and t.fraction >= thresholds.throttled_sample_fraction]
    for t in throttles:
        numbers[f"{t.source} throttled fraction"] = t.fraction
    for t in throttled:
        evidence.append(
            f"{t.source}: throttled in {t.throttled_samples}/{t.samples} samples "
            f"({t.fraction:.1%} ≥ {thresholds.throttled_sample_fraction:.0%}), {t.events} events"
        )
    cpu_saturated = cpu is not None and cpu >= thresholds.cpu_saturated_pct
    disk_saturated = disk is not None and disk >= thresholds.disk_saturated_pct
    saturation = _saturation_text(cpu, disk, cpu_saturated, disk_saturated, thresholds)
    main = UNDETERMINED
    if kind == "gpu" and gpu is not None:
        if gpu >= thresholds.gpu_bound_util_pct:
            main = GPU_BOUND
            evidence.insert(0, f"mean GPU util {_fmt(gpu)} ≥ {thresholds.gpu_bound_util_pct:g} %")
        elif gpu < thresholds.input_bound_gpu_util_pct and (cpu_saturated or disk_saturated):
            main = INPUT_BOUND
            evidence.insert(
                0, f"mean GPU util {_fmt(gpu)} < {thresholds.input_bound_gpu_util_pct:g} % while {saturation}"
            )
        else:
            evidence.insert(
                0,
                f"mean GPU util {_fmt(gpu)}, CPU {_fmt(cpu)}, disk {_fmt(disk)}: no bottleneck rule matched",
            )
    elif kind == "cpu" and cpu is not None:
        if cpu_saturated:
            main = CPU_BOUND
            evidence.insert(0, f"CPU run, mean CPU util {_fmt(cpu)} ≥ {thresholds.cpu_saturated_pct:g} %")
        elif disk_saturated:
            main = INPUT_BOUND
            evidence.insert(
                0,
                f"CPU run, mean CPU util {_fmt(cpu)} < {thresholds.cpu_saturated_pct:g} % while {saturation}",
            )
        else:
            evidence.insert(
                0, f"CPU run, mean CPU util {_fmt(cpu)}, disk {_fmt(disk)}: no bottleneck rule matched"
            )
    elif kind == "gpu":
        evidence.insert(0, "GPU run without GPU utilization samples in the measurement window (no NVML?)")
    else:
        evidence.insert(0, "no CPU utilization samples in the measurement window")
    labels = [main] if main != UNDETERMINED else []
    if throttled:
        labels.append(THERMALLY_THROTTLED)
    labels = labels or [UNDETERMINED]
    primary = labels[0]
    return Verdict(primary, tuple(labels), tuple(evidence), numbers)


# --- one run, many runs -------------------------------------------------------------------------------


def _per_1000_steps(
    energy: Energy | None, steps_per_s: float | None
) -> tuple[float | None, float | None, float | None]:
    if energy is None:
        return None, None, None
    window_s = energy.window_s
    return (
        joules_per_1000_steps(energy.gpu_j, window_s, steps_per_s),
        joules_per_1000_steps(energy.cpu_j, window_s, steps_per_s),
        joules_per_1000_steps(energy.total_j, window_s, steps_per_s),
    )


def analyse_run(run: RunData, prices: Prices, thresholds: Thresholds) -> RunAnalysis:
    """Everything the report says about one run."""
    meta, info, telemetry = run.meta, run.training_info, run.telemetry
    kind = device_kind(meta, info)
    warnings = list(run.warnings)
    rate = throughput(run.training, info)
    if rate.steps_per_s is None:
        warnings.append(f"{run.run_id}: too few training steps for a steady-state rate")
    spans = train_windows(run.phases, telemetry)
    training_window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    steady = None
    if rate.steady_start_unix is not None and rate.steady_end_unix is not None:
        steady = clip_window((rate.steady_start_unix, rate.steady_end_unix), spans, telemetry)
    measured = samples_in(telemetry, steady)
    if measured.empty and steady is not None:
        warnings.append(f"{run.run_id}: no telemetry samples in the steady state; using the training window")
    if measured.empty:
        measured = samples_in(telemetry, training_window)
    interval = meta.get("interval_s") if isinstance(meta.get("interval_s"), (int, float)) else None
    steady_energy = energy_in(telemetry, steady, prices.cpu_tdp_w, count_gpus=kind == "gpu")
    training_energy = energy_in(telemetry, training_window, prices.cpu_tdp_w, count_gpus=kind == "gpu")
    gpu_per_k, cpu_per_k, total_per_k = _per_1000_steps(steady_energy, rate.steps_per_s)
    if kind == "gpu" and gpu_per_k is None:
        warnings.append(f"{run.run_id}: no GPU energy or power readings")
    if cpu_per_k is None:
        counted = "; its energy figures count the GPU only" if gpu_per_k is not None else ""
        warnings.append(
            f"{run.run_id}: CPU energy not measured (no RAPL){counted}; give a CPU TDP for an estimate"
        )
    cost = cost_per_1000_steps(total_per_k, rate.steps_per_s, hardware_price(kind, prices), prices)
    in_training = samples_in(telemetry, training_window)
    throttles = gpu_throttling(measured, interval)
    baseline_mhz = cpu_frequency_baseline(in_training, thresholds)
    cpu_drops = cpu_frequency_drops(measured, thresholds, interval, baseline_mhz)
    if cpu_drops is not None:
        throttles.append(cpu_drops)
    thermal_throttles = gpu_throttling(in_training, interval)
    training_cpu_drops = cpu_frequency_drops(in_training, thresholds, interval, baseline_mhz)
    if training_cpu_drops is not None:
        thermal_throttles.append(training_cpu_drops)
    return RunAnalysis(
        run_id=run.run_id,
        label=str(meta.get("label") or run.run_id),
        kind=kind,
        hardware=hardware_name(meta, info),
        config=config_name(info),
        throughput=rate,
        steady_energy=steady_energy,
        training_energy=training_energy,
        j_per_1000_steps=total_per_k,
        gpu_j_per_1000_steps=gpu_per_k,
        cpu_j_per_1000_steps=cpu_per_k,
        cost_per_1000_steps=cost,
        thermal=tuple(temperature_summaries(in_training, thresholds.temp_threshold_c, interval)),
        throttling=tuple(thermal_throttles),
        verdict=verdict(kind, utilization_means(measured), throttles, thresholds),
        evaluation=dict(run.evaluation),
        min_smoothed_loss=min_smoothed_loss(run.training),
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class Spread:
    mean: float | None
    std: float | None
    minimum: float | None
    maximum: float | None
    count: int


def spread(values: Iterable[float | None]) -> Spread:
    """Mean, sample standard deviation (n − 1; None for one value), min and max of the known values."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return Spread(None, None, None, None, 0)
    std = float(np.std(known, ddof=1)) if len(known) > 1 else None
    return Spread(float(np.mean(known)), std, min(known), max(known), len(known))


@dataclass(frozen=True)
class GroupSummary:
    """One configuration (its repeats averaged) compared with the baseline configuration."""

    kind: str
    hardware: str
    config: str
    run_ids: tuple[str, ...]
    steps_per_s: Spread
    examples_per_s: Spread
    j_per_1000_steps: Spread
    energy_usd_per_1000: Spread
    hardware_usd_per_1000: Spread
    total_usd_per_1000: Spread
    speedup: float | None
    is_baseline: bool
    break_even_gpu_hours: float | None
    energy_saving_per_gpu_hour: float | None

    @property
    def name(self) -> str:
        return f"{self.kind.upper()} {self.hardware} · {self.config}"


def group_runs(analyses: Sequence[RunAnalysis]) -> list[list[RunAnalysis]]:
    """Repeats of the same configuration together, in first-seen order."""
    groups: dict[tuple[str, str, str], list[RunAnalysis]] = {}
    for analysis in analyses:
        groups.setdefault(group_key(analysis), []).append(analysis)
    return list(groups.values())


def pick_baseline(analyses: Sequence[RunAnalysis], baseline_run_id: str | None = None) -> RunAnalysis | None:
    """The named run, else the first CPU run, else the first run."""
    if not analyses:
        return None
    if baseline_run_id is not None:
        return next((a for a in analyses if a.run_id == baseline_run_id), None)
    return next((a for a in analyses if a.kind == "cpu"), analyses[0])


def compare(
    analyses: Sequence[RunAnalysis], prices: Prices, baseline_run_id: str | None = None
) -> list[GroupSummary]:
    """Per configuration: means and spread over repeats, speedup and break-even against the baseline's."""
    baseline_run = pick_baseline(analyses, baseline_run_id)
    groups = group_runs(analyses)
    baseline_key = group_key(baseline_run) if baseline_run else None
    base_group = next((g for g in groups if group_key(g[0]) == baseline_key), None)
    base_examples = spread(a.throughput.examples_per_s for a in base_group).mean if base_group else None
    base_energy = spread(a.cost_per_1000_steps.energy_usd for a in base_group).mean if base_group else None
    summaries = []
    for group in groups:
        first = group[0]
        examples = spread(a.throughput.examples_per_s for a in group)
        steps = spread(a.throughput.steps_per_s for a in group)
        energy_usd = spread(a.cost_per_1000_steps.energy_usd for a in group)
        factor = speedup(examples.mean, base_examples)
        is_baseline = group_key(first) == baseline_key
        saving, even = None, None
        if first.kind == "gpu" and not is_baseline:
            saving = energy_saving_per_gpu_hour(steps.mean, energy_usd.mean, base_energy)
            even = break_even_hours(factor, prices.gpu_price, prices.value_per_hour, saving)
        summaries.append(
            GroupSummary(
                kind=first.kind,
                hardware=first.hardware,
                config=first.config,
                run_ids=tuple(a.run_id for a in group),
                steps_per_s=steps,
                examples_per_s=examples,
                j_per_1000_steps=spread(a.j_per_1000_steps for a in group),
                energy_usd_per_1000=energy_usd,
                hardware_usd_per_1000=spread(a.cost_per_1000_steps.hardware_usd for a in group),
                total_usd_per_1000=spread(a.cost_per_1000_steps.total_usd for a in group),
                speedup=factor,
                is_baseline=is_baseline,
                break_even_gpu_hours=even,
                energy_saving_per_gpu_hour=saving,
            )
        )
    return summaries
