"""Everything the report says about one run: `analyse_run(RunData, Prices, Thresholds) -> RunAnalysis`."""

from __future__ import annotations

from dataclasses import dataclass

from sizing import energy as en
from sizing import runchecks, signature, thermal
from sizing.bottleneck import Verdict, verdict
from sizing.model import (
    Prices,
    RunData,
    Thresholds,
    clip_window,
    gpu_indices,
    number,
    samples_in,
    train_windows,
)
from sizing.thermal import ThermalSummary, ThrottleSummary
from sizing.throughput import FROM_TOTALS, Throughput, min_smoothed_loss, throughput


@dataclass(frozen=True)
class RunAnalysis:
    run_id: str
    label: str
    kind: str
    workload: dict
    hardware: dict
    throughput: Throughput
    charged_gpus: tuple[int, ...]
    gpu_attribution: str
    steady_energy: en.Energy | None
    training_energy: en.Energy | None
    j_per_1k_examples: float | None
    j_per_1k_steps: float | None
    energy_usd_per_1k_examples: float | None
    hardware_usd_per_1k_examples: float | None
    thermal: tuple[ThermalSummary, ...]
    throttling: tuple[ThrottleSummary, ...]
    verdict: Verdict
    evaluation: dict
    min_smoothed_loss: float | None
    warnings: tuple[str, ...]
    incomplete: str | None = None  # why the run is not a complete measurement; None when it is
    steady_rate_mismatch: float | None = None  # vs training.json's steady_steps_per_s, a fraction

    @property
    def energy_is_estimate(self) -> bool:
        return bool(self.steady_energy and self.steady_energy.cpu_is_estimate)

    @property
    def workload_name(self) -> str:
        return signature.workload_name(self.workload)

    @property
    def hardware_name(self) -> str:
        return signature.hardware_name(self.hardware, self.kind)

    @property
    def total_usd_per_1k_examples(self) -> float | None:
        """Energy + hardware; None unless both are known (no price given is not $0)."""
        if self.energy_usd_per_1k_examples is None or self.hardware_usd_per_1k_examples is None:
            return None
        return self.energy_usd_per_1k_examples + self.hardware_usd_per_1k_examples


def charged_gpu_columns(run: RunData, kind: str) -> tuple[list[int], str]:
    """The gpu<i> column indices whose energy is the run's: the GPUs the training used."""
    if kind != "gpu":
        return [], "CPU run: no GPU charged"
    listed = [g for g in (run.meta.get("system") or {}).get("gpus") or [] if isinstance(g, dict)]
    if not listed:
        return gpu_indices(run.telemetry), "every GPU column (run.json lists no GPUs)"
    used, how = signature.used_gpus(run.meta, run.training_info)
    return [i for i, g in enumerate(listed) if g in used], how


def analyse_run(run: RunData, prices: Prices, thresholds: Thresholds) -> RunAnalysis:
    meta, info, telemetry = run.meta, run.training_info, run.telemetry
    kind = signature.device_kind(meta, info, telemetry)
    warnings = list(run.warnings)
    rate = throughput(run.training, info)
    warnings += runchecks.rate_problems(run.run_id, rate, info)
    incomplete = runchecks.incomplete_reason(meta, info)
    if rate.source == FROM_TOTALS:
        warnings.append(f"{run.run_id}: no step log (training.csv); throughput from training.json's totals")
    elif rate.steps_per_s is None:
        warnings.append(
            f"{run.run_id}: throughput unknown (no work counter: no training.csv or training.json)"
        )
    spans = train_windows(run.phases, telemetry)
    training_window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    steady = None
    if rate.steady_start_unix is not None and rate.steady_end_unix is not None:
        steady = clip_window((rate.steady_start_unix, rate.steady_end_unix), spans, telemetry)
    measured = samples_in(telemetry, steady)
    if measured.empty:
        if steady is not None:
            warnings.append(
                f"{run.run_id}: no telemetry samples in the steady state; using the training window"
            )
        measured = samples_in(telemetry, training_window)
    gpus, attribution = charged_gpu_columns(run, kind)
    if kind == "gpu" and "training.json names none" in attribution:
        warnings.append(
            f"{run.run_id}: energy charged for {attribution}; record gpu_uuids to charge only the used GPU"
        )
    hw = signature.hardware(meta, info, kind)
    tdp = prices.tdp_for(str(hw.get("host") or ""), str(hw.get("cpu_model") or ""))
    steady_energy = en.energy_in(telemetry, steady, gpus, tdp, prices.idle_fraction)
    training_energy = en.energy_in(telemetry, training_window, gpus, tdp, prices.idle_fraction)
    total = steady_energy.total_j if steady_energy else None
    window_s = steady_energy.window_s if steady_energy else 0.0
    per_k_examples = en.joules_per_1000(total, window_s, rate.examples_per_s)
    if (
        steady_energy is not None
        and steady_energy.cpu_j is None
        and (kind == "cpu" or steady_energy.gpu_j is not None)
    ):
        part = "; its energy counts the GPU board only" if kind == "gpu" else ""
        warnings.append(
            f"{run.run_id}: CPU energy not measured (no RAPL){part}; give a CPU TDP for an estimate"
        )
    if kind == "gpu" and steady_energy is not None and steady_energy.gpu_j is None:
        warnings.append(f"{run.run_id}: no GPU energy or power readings for the GPU(s) it used")
    interval = number(meta.get("interval_s"))
    in_training = samples_in(telemetry, training_window)
    baseline_mhz = thermal.cpu_frequency_baseline(in_training, thresholds)
    measured_throttles = [
        *thermal.gpu_throttling(measured, interval, gpus or None),
        thermal.cpu_frequency_drops(measured, thresholds, interval, baseline_mhz),
    ]
    training_throttles = [
        *thermal.gpu_throttling(in_training, interval),
        thermal.cpu_frequency_drops(in_training, thresholds, interval, baseline_mhz),
    ]
    return RunAnalysis(
        run_id=run.run_id,
        label=str(meta.get("label") or run.run_id),
        kind=kind,
        workload=signature.workload(info, kind),
        hardware=hw,
        throughput=rate,
        charged_gpus=tuple(gpus),
        gpu_attribution=attribution,
        steady_energy=steady_energy,
        training_energy=training_energy,
        j_per_1k_examples=per_k_examples,
        j_per_1k_steps=en.joules_per_1000(total, window_s, rate.steps_per_s),
        energy_usd_per_1k_examples=en.energy_usd(per_k_examples, prices),
        hardware_usd_per_1k_examples=en.hardware_usd_per_1000(
            en.hardware_price(kind, prices), rate.examples_per_s, prices
        ),
        thermal=tuple(thermal.temperature_summaries(in_training, thresholds.temp_threshold_c, interval)),
        throttling=tuple(training_throttles),
        verdict=verdict(kind, measured, gpus, measured_throttles, thresholds),
        evaluation=dict(run.evaluation),
        min_smoothed_loss=min_smoothed_loss(run.training),
        warnings=tuple(warnings),
        incomplete=incomplete,
        steady_rate_mismatch=runchecks.rate_mismatch(rate, info),
    )
