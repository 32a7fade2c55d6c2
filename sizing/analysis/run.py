"""Everything the report says about one run: `analyse_run(RunData, Prices, Thresholds) -> RunAnalysis`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import pandas as pd

from sizing.analysis import energy as en
from sizing.analysis import gpu_state, jobcheck, money, runchecks, signature, spans, thermal
from sizing.analysis.bottleneck import Verdict, verdict
from sizing.analysis.gpu_verdicts import gpu_findings
from sizing.analysis.headroom import Headroom, headroom
from sizing.analysis.signature import listed_gpus
from sizing.analysis.step_counts import steps_outrun_their_times
from sizing.analysis.thermal import ThermalSummary, ThrottleSummary
from sizing.analysis.throughput import FROM_TOTALS, Throughput, min_smoothed_loss, throughput
from sizing.model import (
    Prices,
    RunData,
    Thresholds,
    clip_window,
    gpu_indices,
    mean_of,
    number,
    samples_in,
    times_of,
    train_windows,
)

NOT_RECORDED_GPUS = "training GPUs"  # run.json `not_recorded` key of imported GPU logs
Window = tuple[float, float] | None


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
    gpu_attribution_known: bool
    steady_energy: en.Energy | None
    training_energy: en.Energy | None
    j_per_1k_examples: float | None
    j_per_1k_steps: float | None
    energy_usd_per_1k_examples: float | None
    hardware_usd_per_1k_examples: float | None
    hardware_price: money.HardwarePrice
    thermal: tuple[ThermalSummary, ...]
    throttling: tuple[ThrottleSummary, ...]
    verdict: Verdict
    evaluation: dict
    min_smoothed_loss: float | None
    warnings: tuple[str, ...]
    incomplete: str | None = None  # why the run is not a complete measurement; None when it is
    steady_rate_mismatch: float | None = None  # vs training.json's steady_steps_per_s, a fraction
    headroom: Headroom | None = None  # MFU and why the GPU is not at its limit (sizing.analysis.headroom)
    gpu_state: gpu_state.GpuState = field(default_factory=gpu_state.GpuState)  # shared, MIG, caps, clocks
    # what the headline's caveats must carry (also among warnings): an assumed UTC offset, a short
    # shared span of merged recordings (sizing.analysis.spans)
    caveats: tuple[str, ...] = ()
    device_mismatch: str | None = None  # recorded for a GPU, trained on the CPU (signature)
    measurement_span: spans.MeasurementSpan | None = None  # the span the verdict's CPU and GPU columns share
    measured_window: tuple[float, float] | None = None  # the window the verdict read: steady, else training
    # GPUs the run does not count as its own that were busy over the measurement window: (index, mean util)
    busy_other_gpus: tuple[tuple[int, float], ...] = ()

    @property
    def energy_is_estimate(self) -> bool:
        energy = self.steady_energy or self.training_energy
        return bool(energy and energy.is_estimate)

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


WORKED_UTIL_PCT = 1.0  # a GPU whose mean utilization is below this did no work


def parallel_devices(info: dict, kind: str, telemetry: pd.DataFrame) -> int:
    """Devices trained data-parallel: training.json `world_size`, else a GPU run's GPUs that did work."""
    stated = number(info.get("world_size"))
    if stated is not None and stated >= 1:
        return int(stated)
    return max(1, len(busy_gpus(telemetry, gpu_indices(telemetry)))) if kind == "gpu" else 1


class Charged(NamedTuple):
    """The gpu<i> column indices whose energy is the run's (the GPUs the training used), how that was
    decided, whether the run says so (False: every GPU is charged because it does not), and training.json
    gpu_uuids that name none of run.json's GPUs."""

    columns: list[int]
    how: str
    known: bool
    unmatched_uuids: tuple[str, ...] = ()


def charged_gpu_columns(run: RunData, kind: str) -> Charged:
    if kind != "gpu":
        return Charged([], "CPU run: no GPU charged", True)
    listed = listed_gpus(run.meta)
    if not listed:
        columns = gpu_indices(run.telemetry)
        if len(columns) <= 1:
            return Charged(columns, "the only GPU column (run.json lists no GPUs)", True)
        return Charged(columns, f"all {len(columns)} GPU columns (run.json lists no GPUs)", False)
    not_recorded = run.meta.get("not_recorded")
    unknown = isinstance(not_recorded, dict) and NOT_RECORDED_GPUS in not_recorded
    if unknown and len(listed) > 1 and not run.training_info.get("gpu_uuids"):
        how = f"all {len(listed)} GPUs: which trained is not recorded (imported log)"
        return Charged(list(range(len(listed))), how, False)
    used, how = signature.used_gpus(run.meta, run.training_info)
    match = signature.match_uuids(run.training_info, listed)
    known = bool(match.named) or (len(listed) <= 1 and not match.unmatched)
    return Charged([i for i, g in enumerate(listed) if g in used], how, known, match.unmatched)


def busy_gpus(samples: pd.DataFrame, indices: Iterable[int]) -> list[tuple[int, float]]:
    """(index, mean utilization) of the GPUs among `indices` that did work in `samples`: a mean of
    WORKED_UTIL_PCT or more."""
    means = ((i, mean_of(samples, f"gpu{i}_util_pct")) for i in indices)
    return [(i, m) for i, m in means if m is not None and m >= WORKED_UTIL_PCT]


def charged_that_worked(charged: Charged, samples: pd.DataFrame) -> Charged:
    """With no record of which GPUs trained: those that did work in `samples` (busy_gpus) where others
    idled, so idle neighbours are neither charged, priced nor named, nor judged; otherwise `charged` (all
    of them too when none did work)."""
    busy = [i for i, _ in busy_gpus(samples, charged.columns)]
    if charged.known or len(charged.columns) < 2 or len(busy) in (0, len(charged.columns)):
        return charged
    idle = ", ".join(f"gpu{i}" for i in charged.columns if i not in busy)
    how = (f"the {len(busy)} of {len(charged.columns)} GPUs that did work ({idle} under "
           f"{WORKED_UTIL_PCT:g} % busy; which trained is not recorded)")  # fmt: skip
    return charged._replace(columns=busy, how=how)


def energy_warnings(run_id: str, kind: str, energy: en.Energy | None) -> list[str]:
    """What the energy figure lacks, and what its sources' checks found."""
    if energy is None:
        return []
    found = [f"{run_id}: {check}" for check in energy.checks]
    if energy.total_j is None and energy.not_attributable:
        pass  # said with its evidence (gpu_state.state_warnings)
    elif energy.total_j is None:
        found.append(f"{run_id}: energy not measured ({energy.missing})")
    elif energy.is_partial:
        found.append(
            f"{run_id}: its energy counts the GPU board only: CPU not measured ({energy.cpu_missing})"
        )
    return found


def one_node_warnings(run_id: str, meta: dict) -> list[str]:
    """A run that is one node of a multi-node training or Slurm job, sized alone: what it counts."""
    nodes = meta.get("nodes") if isinstance(meta.get("nodes"), dict) else {}
    system = meta.get("system") if isinstance(meta.get("system"), dict) else {}
    slurm = system.get("slurm") if isinstance(system.get("slurm"), dict) else {}
    if (number(nodes.get("nnodes")) or 1) > 1:
        training = f"data-parallel training {nodes.get('rdzv_id')}"
        which = f"{run_id}: node {nodes.get('node_rank')} of {nodes.get('nnodes')} of {training}"
        if nodes.get("node_rank") == 0:
            return [f"{which}: throughput is all nodes', energy and hardware this node's alone "
                    "(others uncounted)"]  # fmt: skip
        return [f"{which}: sized as this node alone; the step log is in node 0's run "
                f"({nodes.get('step_log')})"]  # fmt: skip
    if (number(slurm.get("nnodes")) or 1) > 1:
        return [
            f"{run_id}: node {slurm.get('node_rank')} of {slurm.get('nnodes')} of Slurm job "
            f"{slurm.get('job_id')}: sized as this node alone (the other nodes' work and energy not counted)"
        ]
    return []


def attributed(energy: en.Energy | None, state: gpu_state.GpuState) -> en.Energy | None:
    """The energy with the GPU board's marked not attributable where the GPU was shared or a MIG slice."""
    reason = state.not_attributable
    return replace(energy, not_attributable=reason) if energy is not None and reason else energy


def run_windows(
    run: RunData, rate: Throughput
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The training window (the `train` phases' hull, else the telemetry's span) and the steady state
    clipped to it and to the telemetry's span (None when there is none)."""
    training_window, _, steady = steady_windows(run, rate)
    return training_window, steady


def steady_windows(run: RunData, rate: Throughput) -> tuple[Window, Window, Window]:
    """The training window; the steady state within it; and that clipped to the telemetry's span."""
    spans = train_windows(run.phases, run.telemetry)
    training_window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    if rate.steady_start_unix is None or rate.steady_end_unix is None:
        return training_window, None, None
    steady = (rate.steady_start_unix, rate.steady_end_unix)
    return training_window, clip_window(steady, spans, None), clip_window(steady, spans, run.telemetry)


def steps_outside(rate: Throughput, training_window: tuple[float, float] | None) -> str | None:
    """Where the step log's steady steps fall wholly outside the training the collector recorded (a clock
    of its own, or another run's log): how far, and what that leaves unknown; None otherwise."""
    start, end = rate.steady_start_unix, rate.steady_end_unix
    if start is None or end is None or training_window is None:
        return None
    if start > training_window[1]:
        gap, side = start - training_window[1], "after"
    elif end < training_window[0]:
        gap, side = training_window[0] - end, "before"
    else:
        return None
    return (
        f"training.csv's steady steps fall {gap:,.0f} s {side} the training the collector recorded: their "
        "clocks disagree (or the log is another run's), so the steps' energy is not known and the verdict "
        "reads the whole training window"
    )


def cost_figures(
    energy: en.Energy | None, rate: Throughput, price: money.HardwarePrice, prices: Prices
) -> dict:
    """J and $ per 1,000 examples (and J per 1,000 steps) from the steady-state energy and throughput:
    the RunAnalysis fields a run and a multi-node job derive alike."""
    total = energy.total_j if energy else None
    window_s = energy.window_s if energy else 0.0
    per_k_examples = en.joules_per_1000(total, window_s, rate.examples_per_s)
    return {
        "j_per_1k_examples": per_k_examples,
        "j_per_1k_steps": en.joules_per_1000(total, window_s, rate.steps_per_s),
        "energy_usd_per_1k_examples": en.energy_usd(per_k_examples, prices),
        "hardware_usd_per_1k_examples": money.hardware_usd_per_1000(price.usd, rate.examples_per_s, prices),
        "hardware_price": price,
    }


def analyse_run(
    run: RunData, prices: Prices, thresholds: Thresholds, head_of_job: bool = False
) -> RunAnalysis:
    """`head_of_job`: node 0 of a multi-node training whose nodes are read together (sizing.analysis.jobs), so
    the one-node warning is left out."""
    meta, info, telemetry = run.meta, run.training_info, run.telemetry
    kind = signature.device_kind(meta, info, telemetry)
    counted_batch, batch_note, batch_doubt = runchecks.batch_in_doubt(
        run.training, info, parallel_devices(info, kind, telemetry)
    )
    info = {**info, "batch_size": counted_batch} if counted_batch else info
    warnings = list(run.warnings)
    if batch_note and not batch_doubt:
        warnings.append(f"{run.run_id}: {batch_note}")
    mismatch = signature.asked_for_a_gpu_ran_on_cpu(meta, info)
    if mismatch:
        warnings.append(f"{run.run_id}: {mismatch}")
    if not head_of_job:
        warnings += one_node_warnings(run.run_id, meta)
    rate = throughput(run.training, info)
    warnings += runchecks.rate_problems(run.run_id, rate, info)
    incomplete = runchecks.incomplete_reason(meta, info, run.phases)
    if rate.source == FROM_TOTALS:
        warnings.append(f"{run.run_id}: no step log (training.csv); throughput from training.json's totals")
    elif cut := runchecks.step_log_cut(run.training, info):
        warnings.append(f"{run.run_id}: {cut}")
    elif rate.steps_per_s is None and not rate.bursts and not jobcheck.is_job(info):  # a job says why below
        warnings.append(
            f"{run.run_id}: throughput unknown (no work counter: no training.csv or training.json)"
        )
    warnings += jobcheck.job_warnings(run.run_id, info, bool(rate.examples_per_s), bool(rate.steps_per_s))
    training_window, whole_steady, steady = steady_windows(run, rate)
    apart = steps_outside(rate, training_window)
    rose = runchecks.loss_rose(run.training)
    short = None if apart else runchecks.telemetry_short(whole_steady, steady)
    foreign = runchecks.foreign_run_json(meta, info)
    outrun = steps_outrun_their_times(run.training, info)
    notes = (batch_note if batch_doubt else None, apart, rose, short, foreign, outrun)
    unsure = [f"{run.run_id}: {note}" for note in notes if note]  # warned, caveats
    charged = charged_gpu_columns(run, kind)
    gpus, attribution, attribution_known = charged.columns, charged.how, charged.known
    measured, window = samples_in(telemetry, steady), steady
    if measured.empty:
        if steady is not None and not telemetry.empty:
            warnings.append(
                f"{run.run_id}: no telemetry samples in the steady state; using the training window"
            )
        measured, window = samples_in(telemetry, training_window), training_window
    span = spans.measurement_span(telemetry, meta, kind, gpus, window)
    measured = spans.verdict_samples(measured, span)
    gpus, attribution = charged_that_worked(charged, measured)[:2]
    judged = span.shared if span is not None and span.shared is not None else window  # a merged log's share
    gaps = runchecks.telemetry_gaps(times_of(measured), judged, number(meta.get("interval_s")))
    few = runchecks.few_samples(len(measured))
    unsure += [f"{run.run_id}: {note}" for note in (few, gaps) if note]
    training_window = spans.training_window(telemetry, meta, kind, gpus, run.phases, training_window)
    offsets = spans.time_caveats(run.run_id, meta)
    said, short = spans.span_warnings(run.run_id, span)
    warnings += offsets + said
    if not attribution_known:
        if uuids := charged.unmatched_uuids:
            unsure.append(
                f"{run.run_id}: training.json gpu_uuids ({', '.join(uuids)}) name no GPU the "
                f"collector recorded: the GPU measured ({attribution}) may not be the one that trained"
            )
        else:
            warnings.append(
                f"{run.run_id}: energy charged for {attribution}; record gpu_uuids to charge only the used "
                "GPU"
            )
    warnings += unsure
    state = gpu_state.read_gpu_state(
        run, kind, gpus, samples_in(telemetry, training_window), training_window, thresholds
    )
    if changed := state.changed_note:
        note = f"{run.run_id}: the GPU's settings changed while it trained ({changed}): its rate blends both"
        warnings.append(note)
        unsure.append(note)
    hw = signature.hardware(meta, info, kind, state.signature, None if attribution_known else gpus)
    sampled_cpus, cpus_note = runchecks.cpus_disagree(meta, telemetry)
    if cpus_note:
        hw = {**hw, "cpu_cores_logical": sampled_cpus}
        note = f"{run.run_id}: {cpus_note}"
        warnings.append(note)
        unsure.append(note)
    tdp = prices.tdp_for(str(hw.get("host") or ""), str(hw.get("cpu_model") or ""))
    interval = number(meta.get("interval_s"))
    steady_energy, training_energy = (
        attributed(en.energy_in(telemetry, window, gpus, tdp, prices.idle_fraction, kind == "gpu", interval),
                   state)
        for window in (steady, training_window)
    )  # fmt: skip
    warnings += gpu_state.state_warnings(run.run_id, state) + energy_warnings(run.run_id, kind, steady_energy)
    price = money.hardware_price(kind, hw, prices)
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
    analysis = RunAnalysis(
        run_id=run.run_id,
        label=str(meta.get("label") or run.run_id),
        kind=kind,
        workload=signature.workload(info, kind),
        hardware=hw,
        throughput=rate,
        charged_gpus=tuple(gpus),
        gpu_attribution=attribution,
        gpu_attribution_known=attribution_known,
        steady_energy=steady_energy,
        training_energy=training_energy,
        **cost_figures(steady_energy, rate, price, prices),
        thermal=tuple(thermal.temperature_summaries(in_training, thresholds.temp_threshold_c, interval)),
        throttling=tuple(training_throttles),
        verdict=verdict(
            kind,
            measured,
            gpus,
            measured_throttles,
            thresholds,
            gpu_findings(measured, gpus, listed_gpus(run.meta), thresholds, state.held_low),
            state.utilization_note,
        ),
        evaluation=dict(run.evaluation),
        min_smoothed_loss=min_smoothed_loss(run.training),
        warnings=tuple(warnings),
        incomplete=incomplete,
        steady_rate_mismatch=runchecks.rate_mismatch(rate, info),
        gpu_state=state,
        caveats=tuple(offsets + short + unsure),
        device_mismatch=mismatch,
        measurement_span=span,
        measured_window=window,
        busy_other_gpus=tuple(busy_gpus(measured, (i for i in gpu_indices(measured) if i not in gpus))),
    )
    system = meta.get("system") if isinstance(meta.get("system"), dict) else {}
    gpu_names = analysis.hardware.get("gpus") or []
    room = headroom(info, system, kind, gpu_names, rate, measured, gpus, analysis.verdict, thresholds,
                    mig_slice=state.mig, board_not_attributable=state.not_attributable,
                    cpu_facts_doubt=runchecks.CPU_FACTS_DOUBT if cpus_note else None)  # fmt: skip
    return replace(analysis, headroom=room)
