"""Every verdict threshold of docs/sizing.md, pinned on both sides of its boundary (issue 35, item 3).

Think mutation testing: flipping `>=` to `>` fails a test that puts a value exactly on the boundary, and
one just past it; moving a constant fails test_every_threshold_has_its_documented_value (and, for those
in the definitions, test_sizing_docs). The boundary tests name each constant (`coverage.MAX_GAP_INTERVALS`)
so that they follow a deliberate change, made here and in docs/sizing.md together.

Inventory: every threshold a verdict compares against (`- name = value: the rule`), then where both sides
of it are pinned (`here`: this module and test_sizing_thresholds_rates.py; `file::words` a test of
tests/analysis/test_sizing_<file>.py whose name holds those words). The tests below read this list.

- Thresholds.gpu_bound_util_pct = 80: GPU-bound, the least busy used GPU ≥ it. Pinned: here
- Thresholds.gpu_underused_util_pct = 50: GPU underused <; a straggler's peers ≥. Pinned: here
- Thresholds.cpu_saturated_pct = 85: CPU-bound, and host-bound for a GPU run, CPU ≥. Pinned: here
- Thresholds.core_saturated_pct = 90: a saturated logical CPU or thread ≥; cpu_freq_mhz judged while the
  CPU is ≥. Pinned: here; verdicts::busiest_training_thread_shows; headroom::waiting_on_the_host_at
- Thresholds.core_idle_pct = 50: an idle logical CPU <. Pinned: here
- Thresholds.disk_saturated_pct = 80: I/O-bound, disk busy ≥. Pinned: here
- bottleneck.IO_OWN_SHARE = 0.1: a busy disk or iowait is I/O-bound only where the training's own storage I/O
  (where recorded) is ≥ this share of the busiest disk's. Pinned: here
- Thresholds.iowait_pct = 20: I/O-bound, iowait ≥. Pinned: here
- Thresholds.throttled_sample_fraction = 0.05: a throttle or clock label, at the power limit, clocks or
  power held, in ≥ this share of samples. Pinned: here; verdicts::thermal_label_flips_at_five;
  gpu_state::clock_setting_bit_in_enough; gpu_state::sw_power_cap_bit_in_enough
- Thresholds.cpu_freq_drop_fraction = 0.15: a drop, busy-core frequency ≤ peak × (1 − it). Pinned: here
- Thresholds.cpu_busy_pct = 50: a busy core for the frequency rule ≥. Pinned: here
- Thresholds.cpu_freq_baseline_quantile = 0.9: the frequency peak, a quantile (no side). Pinned: here
- Thresholds.temp_threshold_c = 80: time at or above it; thermal evidence ≥. Pinned: here
- Thresholds.weak_baseline_cpu_fraction = 0.5: weak baseline, CPUs used (or host busy) <. Pinned: here
- Thresholds.steal_pct = 5: weak baseline, steal >. Pinned: here
- validity.OTHERS_SHARE = 0.25: a weak baseline's contended host, and a GPU run's (a caveat), CPUs busy
  outside the training ≥ it of the host's (and ≥ 1). Pinned: here; imperfect_runs::host_kept_busy
- Thresholds.small_host_logical_cpus = 4: weak baseline, logical CPUs ≤. Pinned: here
- validity.SWAP_GROWTH_BYTES = 1073741824: weak baseline, swap in use grew by ≥. Pinned: here
- validity.IDLE_GPU_UTIL_PCT = 1: a GPU option whose busiest used GPU averaged < it did no work.
  Pinned: decision::gpu_that_did_no_work
- bottleneck.HOST_THREAD_SAMPLE_FRACTION = 0.5: one thread saturated in ≥ this share of samples.
  Pinned: verdicts::thread_saturated_in_half_the_samples; headroom::waiting_on_the_host_at
- bottleneck.HOST_THREAD_TREE_CORES = 0.8: per-CPU evidence needs the training to use ≥ this many cores
  (and ≥ it per saturated CPU for several). Pinned: here; headroom::waiting_on_the_host_at
- bottleneck.HOST_THREAD_BUSY_MEAN_PCT = 70: the busiest thread busy ≥ it on average.
  Pinned: verdicts::thread_busy_most_of_the_time; headroom::busy_thread_or_an_idle_gpu_at
- coverage.COMPLETE_COVERAGE = 0.95: a source gives a figure at coverage ≥; telemetry covering less of the
  measurement window, or its span less of the steady state, is a caveat. Pinned: here
- coverage.MAX_GAP_INTERVALS = 3: readings ≤ this many of the source's intervals apart cover the gap.
  Pinned: here
- coverage.LOCAL_SPACINGS = 21: an interval is judged against the median of this many spacings around it.
  Pinned: gaps::a_changed_interval_keeps_each_parts_limit
- energy.ESTIMATE_SPACING_S = 1: integrated power is an ESTIMATE at a spacing ≥. Pinned: here
- energy.CROSS_CHECK_TOLERANCE = 0.1: a counter and integrated power flagged apart by >. Pinned: here
- energy.MIN_VALID_W = 1: a measured source averaging < it is ignored. Pinned: here
- bursts.BURST_GAP_S = 0.001: rows less than it apart came in one write (runformat.bursts).
  Pinned: bursts::gap_of_the_burst_limit
- bursts.BURST_ROW_SHARE = 0.5: a step log in bursts, ≥ this share of its row gaps within bursts.
  Pinned: bursts::share_of_gaps_within_bursts
- bursts.BURST_TIME_SHARE = 0.1: …and those gaps < this share of its span. Pinned: bursts::time_within_bursts
- bursts.MANY_BURSTS = 100: a job's step log in fewer bursts is said (warnings, the job's summary).
  Pinned: bursts::said_below_many_bursts
- bursts.MERGE_SHARE = 0.1: bursts closer than it × the mean gap between bursts are one.
  Pinned: bursts::merge_share_of_the_mean_gap
- energy.MAX_BOARD_W = 2000: a GPU source averaging > it is ignored (power limit unknown). Pinned: here
- energy.POWER_LIMIT_SLACK = 1.5: a GPU source averaging > it × the power limit is ignored. Pinned: here
- gpu_state.SHARED_BEFORE_UTIL_PCT = 10: shared, util before the training ≥.
  Pinned: gpu_state::before_the_first_train_phase_busy; gpu_state::gpu_state_before_training
- gpu_state.SHARED_BEFORE_MEM_BYTES = 2147483648: shared, memory before the training ≥.
  Pinned: gpu_state::board_memory_before_the_training
- gpu_state.BEFORE_TRAINING_S = 60: the span read before the training. Pinned: gpu_state::only_the_minute
- gpu_settings.POWER_CAP_MARGIN_W = 1: a cap, the limit more than it below the default.
  Pinned: gpu_state::power_limit_below_the_boards_own_default
- gpu_settings.TABLE_POWER_MARGIN = 0.1: a cap, more than it below the model's board power.
  Pinned: gpu_state::a_tenth_below_the_models_board_power
- gpu_settings.CLOCK_MARGIN_MHZ = 1: clocks held, an applications clock more than it below default.
  Pinned: gpu_state::applications_clocks_below_their_default; gpu_state::locked_at_their_max
- gpu_settings.UNEXPLAINED_CLOCK_FRACTION = 0.75: clocks held, no reason at an SM clock ≤ it × max.
  Pinned: gpu_state::no_reason_far_below_the_max_clock
- gpu_verdicts.POWER_LIMIT_MARGIN = 0.05: at the power limit, power ≥ (1 − it) × limit. Pinned: here
- gpu_verdicts.BUSY_UTIL_PCT = 80: busy but not computing, util ≥. Pinned: here
- gpu_verdicts.NOT_COMPUTING_POWER_FRACTION = 0.35: busy but not computing, power ≤ it × limit.
  Pinned: here
- gpu_verdicts.STRAGGLER_GAP_PCT = 30: a straggler, ≥ this many points below every other GPU. Pinned: here
- headroom.COMPUTE_BOUND_PIPE_PCT = 50: compute-bound, a pipe ≥. Pinned: headroom::each_counter_rule
- headroom.MEMORY_BOUND_DRAM_PCT = 50: memory-bound, DRAM ≥. Pinned: headroom::each_counter_rule
- headroom.MEMORY_BOUND_TENSOR_BELOW_PCT = 25: memory-bound, tensor <. Pinned: headroom::each_counter_rule
- headroom.LAUNCH_BOUND_UTIL_PCT = 80: launch-bound, util ≥. Pinned: headroom::each_counter_rule
- headroom.LAUNCH_BOUND_SM_BELOW_PCT = 50: launch-bound, SM active <. Pinned: headroom::each_counter_rule
- headroom.HOST_WAIT_UTIL_BELOW_PCT = 80: waiting on the host, util <.
  Pinned: headroom::waiting_on_the_host_at; headroom::graphics_engine_judges
- headroom.GPU_IDLE_UTIL_BELOW_PCT = 50: idle, waiting outside the GPU, util <.
  Pinned: headroom::busy_thread_or_an_idle_gpu_at
- runchecks.RATE_MISMATCH_FRACTION = 0.05: the steady rate vs training.json's warned >. Pinned: here
- runchecks.LOSS_ROSE_FACTOR = 1.25: the loss rose (a caveat), the last reads' mean > it × the first's.
  Pinned: here
- runchecks.RECORDS_SLACK_S = 60: a run.json whose start is more than it after the training began, or
  whose end more than it before, is another run's (a caveat). Pinned: here
- runchecks.BATCH_DOUBT_SHARE = 0.1: a step log whose `examples` count is this share or more off
  training.json's batch_size is read by its count (a caveat). Pinned: here
- runchecks.MIN_VERDICT_SAMPLES = 5: a verdict on fewer samples in its window is a guess (a caveat).
  Pinned: here
- validate.GPU_PCT_MAX = 101: a GPU's percentage above it reads as empty. Pinned: here
- validate.WORKING_POWER_FACTOR = 1.5: a GPU's utilization never above 1, some cell between 0 and 1, reads
  as unknown (a fraction) where its power's 95th percentile is at least it × its 5th. Pinned:
  fraction_cells::fractions_read_as_unknown_where_the_power_rose
- validate.BLANK_MIN = 140737488355328: any other telemetry cell ≥ it (a counter's blank) reads as empty.
  Pinned: here
- coarse_times.MAX_GUESSED_STEP_S = 10: a time_unix rounded to a power of ten above it, with no start_unix
  that fits, is not read; at or below it, rebuilt from elapsed_s with each session's median offset.
  Pinned: coarse_times::guess_stops_past
- coarse_times.UNREADABLE_FIT_S = 1: time_unix cells that read as no number are rebuilt as start_unix +
  elapsed_s where the readable rows lie within it of that (median). Pinned:
  coarse_times::rebuilt_only_where_the_start_fits
- coarse_times.ZONE_STEP_S = 900: a step log whose time_unix − elapsed_s is its start_unix off by a whole
  multiple of it (within UNREADABLE_FIT_S) is on a local-time clock, moved. Pinned:
  coarse_times::whole_quarter_hour_within_the_fit
- coarse_times.MAX_ZONE_OFFSET_S = 50400: … by at most it. Pinned:
  coarse_times::whole_quarter_hour_within_the_fit
- coarse_times.ZONE_FIT_SLACK_S = 60: a step log without elapsed_s fits its training's span within it either
  side, moved by a whole number of quarter hours. Pinned: local_time::within_the_zone_fit_slack
- records.MIN_FLOPS_PER_EXAMPLE = 100000: a FLOP count per training example below it (a count in GFLOPs)
  gives no MFU, said. Pinned: here
- clock_steps.MAX_CLOCK_STEPS = 3: a telemetry file whose time goes back at most this many times (a
  counter going on, or the step log set back as far) is on a clock set back, mended; more often, its rows
  are sorted. Pinned: clock_steps::most_steps_a_clock_takes
- clock_steps.MATCH_SLACK_S = 1: a telemetry step back is the step log's within max(it, MATCH_SHARE × the
  step) plus the step log's row interval. Pinned: clock_steps::step_log_within_the_match_slack
- clock_steps.MATCH_SHARE = 0.05: … or within this share of the step. Pinned:
  clock_steps::step_log_within_the_match_slack
- step_counts.MIN_EPOCH_ROWS = 2: a step log whose step starts again, each time at least this many rows
  after the last, while the run goes on, is a count within each epoch, read as one running count.
  Pinned: step_counts::epochs_of_at_least_the_min_epoch_rows
- step_counts.EXAMPLES_ROW_SHARE = 0.9: a step column advancing by the batch in at least this share of its
  rows, each row one step, counts examples, divided by the batch. Pinned:
  step_counts::rows_advancing_by_the_batch_in_the_row_share
- step_counts.ONE_STEP_MIN_RATIO = 0.8: … each row one step: the rows' time over their step_time_s at
  least it. Pinned: step_counts::one_step_a_row_within_the_ratio
- step_counts.ONE_STEP_MAX_RATIO = 1.25: … and at most it.
  Pinned: step_counts::one_step_a_row_within_the_ratio
- step_counts.STEPS_MATCH_SHARE = 0.02: … or training.json's global_step the column's last value over the
  batch within this share of it. Pinned: step_counts::training_json_steps_within_the_match_share
- step_counts.MAX_STEPS_PER_STEP_TIME = 1.5: a step log whose median row advances its step more than this
  × its step_time_s fits in its time since the row before is in doubt (a caveat). Pinned:
  step_counts::faster_than_its_step_times_allow
- step_counts.MIN_TIMED_ROWS = 10: … judged on at least this many timed rows. Pinned:
  step_counts::without_enough_step_times
- step_counts.MS_RATIO_SHARE = 0.1: a step log whose median row advances its step a thousand times (within
  this share) what its step_time_s fits in its time since the row before is timed in milliseconds, read in
  seconds. Pinned: step_counts::step_times_in_milliseconds_within_the_ms_ratio_share
- sessions.GAP_MIN_S = 30: a new session, a pause > max(it, …). Pinned: here
- sessions.GAP_FACTOR = 20: … and > this many typical row intervals. Pinned: here
- sessions.STEP_JUMP_FACTOR = 10: a new session, the step jumps > it × its stride. Pinned: here
- sessions.BATCHES = 10: at most this many batch means. Pinned: here
- sessions.MIN_ROWS_PER_BATCH = 5: each batch ≥ this many rows. Pinned: here
- sessions.DRIFT_WARN_FRACTION = 0.05: not stationary, thirds apart by >. Pinned: here
- sessions.PAUSE_FACTOR = 10: a pause, a stride of steps ≥ this many times the median stride's pace.
  Pinned: here
- sessions.PAUSE_SHARE = 0.1: pauses said when the time they held past the median pace is ≥ this share
  of the steady time. Pinned: here; imperfect_runs::pause_that_took_a_share
- speedup.REPEATS_DISAGREE_FRACTION = 0.1: repeats disagree, fastest > (1 + it) × slowest, or their
  within-run intervals part. Pinned: here
- throughput.DEFAULT_WARMUP_STEPS = 20: the warm-up steps. Pinned: analysis::warmup_rule
- throughput.SHORT_RUN_STEPS = 60: below it the warm-up is a third. Pinned: analysis::warmup_rule
- model.HOURS_PER_YEAR = 8760: break-even and scaling payback within the life (hours ≤ amortisation
  years × it × utilisation), never when the saving is ≤ 0, without a value of time cannot tell.
  Pinned: here; analysis::break_even_edge_cases
- decision.FAR_BELOW_PEAK_MFU = 0.1: the Decision says the speedup measures the code feeding the GPU
  below it (new in issue 35). Pinned: decision::far_below
"""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import reference_cpu, telemetry_frame

from sizing.analysis import bottleneck as b
from sizing.analysis import coverage, runchecks, thermal, validity
from sizing.analysis import gpu_verdicts as gv
from sizing.analysis.run import WORKED_UTIL_PCT, analyse_run, busy_gpus
from sizing.model import Prices, Thresholds

T = Thresholds()
TESTS = Path(__file__).parent
BELOW = 0.01  # the step just past a boundary; the boundary itself is hit exactly


def inventory() -> list[tuple[str, float, list[str]]]:
    """(threshold, documented value, the tests named as pinning it) from the module's docstring."""
    entries = re.split(r"\n- ", __doc__.split("\n\n- ", 1)[1])
    found = []
    for entry in entries:
        name, value = re.match(r"(\S+) = (\S+):", entry).groups()
        found.append((name, float(value), re.findall(r"(\w+)::(\w+)", entry)))
    return found


def resolve(name: str) -> float:
    owner, attribute = name.split(".")
    if owner == "Thresholds":
        return getattr(T, attribute)
    packages = {
        "model": "sizing", "decision": "sizing.sections", "bursts": "runformat", "records": "runformat"
    }  # fmt: skip
    package = packages.get(owner, "sizing.analysis")
    return getattr(importlib.import_module(f"{package}.{owner}"), attribute)


def test_every_threshold_has_its_documented_value() -> None:
    found = inventory()
    assert len(found) == 91
    moved = {name: resolve(name) for name, value, _ in found if resolve(name) != value}
    assert not moved, f"moved (change docs/sizing.md and this inventory with it): {moved}"


def test_every_test_the_inventory_names_exists() -> None:
    missing = []
    for name, _, pinned in inventory():
        for module, words in pinned:
            text = (TESTS / f"test_sizing_{module}.py").read_text(encoding="utf-8")
            if not re.search(rf"def test_\w*{words}\w*\(", text):
                missing.append(f"{name}: {module}::{words}")
    assert not missing, missing


def judge(kind: str, samples: int = 20, throttles: tuple = (), **columns: object) -> b.Verdict:
    return b.verdict(kind, telemetry_frame(0.0, samples, **columns), [], list(throttles), T)


def cores(n: int, busy: dict[int, float], rest: float = 2.0) -> dict[str, float]:
    return {f"cpu{i}_util_pct": busy.get(i, rest) for i in range(n)}


# Verdicts (sizing.analysis.bottleneck)


@pytest.mark.parametrize(
    ("kind", "columns", "expected"),
    [
        ("gpu", {"gpu0_util_pct": T.gpu_bound_util_pct, "cpu_util_pct": 20.0}, b.GPU_BOUND),
        ("gpu", {"gpu0_util_pct": T.gpu_bound_util_pct - BELOW, "cpu_util_pct": 20.0}, b.UNDETERMINED),
        ("gpu", {"gpu0_util_pct": T.gpu_underused_util_pct - BELOW, "cpu_util_pct": 20.0}, b.GPU_UNDERUSED),
        ("gpu", {"gpu0_util_pct": T.gpu_underused_util_pct, "cpu_util_pct": 20.0}, b.UNDETERMINED),
        ("cpu", {"cpu_util_pct": T.cpu_saturated_pct}, b.CPU_BOUND),
        ("cpu", {"cpu_util_pct": T.cpu_saturated_pct - BELOW}, b.UNDETERMINED),
        ("gpu", {"gpu0_util_pct": 60.0, "cpu_util_pct": T.cpu_saturated_pct}, b.HOST_BOUND),
        ("gpu", {"gpu0_util_pct": 60.0, "cpu_util_pct": T.cpu_saturated_pct - BELOW}, b.UNDETERMINED),
        ("cpu", {"cpu_util_pct": 30.0, "cpu_iowait_pct": T.iowait_pct}, b.IO_BOUND),
        ("cpu", {"cpu_util_pct": 30.0, "cpu_iowait_pct": T.iowait_pct - BELOW}, b.UNDETERMINED),
        ("cpu", {"cpu_util_pct": 30.0, "disk_util_pct": T.disk_saturated_pct}, b.IO_BOUND),
        ("cpu", {"cpu_util_pct": 30.0, "disk_util_pct": T.disk_saturated_pct - BELOW}, b.UNDETERMINED),
    ],
)
def test_each_utilization_rule_at_and_just_past_its_boundary(kind: str, columns: dict, expected: str) -> None:
    assert judge(kind, **columns).primary == expected


@pytest.mark.parametrize(
    ("own_bps", "expected"),
    [
        (b.IO_OWN_SHARE * 1e8, b.IO_BOUND),
        (np.nextafter(b.IO_OWN_SHARE * 1e8, 0), b.GPU_UNDERUSED),
        (None, b.IO_BOUND),
    ],
)
def test_a_busy_disk_is_the_trainings_bottleneck_from_its_own_share_of_the_io(own_bps, expected: str) -> None:
    """A disk kept 90 % busy by another process (a backup) read "I/O-bound" for a training that reads
    nothing: where the training's own I/O is recorded and under IO_OWN_SHARE of the disk's, it is not."""
    own = {} if own_bps is None else {"proc_read_bps": own_bps, "proc_write_bps": 0.0}
    found = judge("gpu", gpu0_util_pct=30.0, cpu_util_pct=20.0, disk_util_pct=90.0, disk_read_bps=1e8, **own)
    assert found.primary == expected
    assert any("other processes kept the disk busy" in e for e in found.evidence) is (expected != b.IO_BOUND)


def test_a_busy_disk_is_judged_by_the_busiest_disks_own_traffic_where_recorded() -> None:
    """The training reads 40 MB/s from the disk it saturates while another process streams 500 MB/s to a
    second disk: against all disks' 540 MB/s its share is 7 %, against the busiest disk's 50 MB/s 80 %."""
    host = {"gpu0_util_pct": 30.0, "cpu_util_pct": 20.0, "disk_util_pct": 90.0, "disk_read_bps": 5.4e8}
    training = {"proc_read_bps": 4e7, "proc_write_bps": 0.0}
    assert judge("gpu", **host, **training).primary == b.GPU_UNDERUSED  # all disks': not the training's
    assert judge("gpu", **host, **training, disk_busiest_bps=5e7).primary == b.IO_BOUND


@pytest.mark.parametrize(
    ("busy_pct", "idle_pct", "proc_cpu_pct", "expected"),
    [
        (T.core_saturated_pct, 2.0, 200.0, b.HOST_BOUND),  # 2 of 8 CPUs saturated, 6 idle
        (T.core_saturated_pct - BELOW, 2.0, 200.0, b.UNDETERMINED),  # none saturated
        (95.0, T.core_idle_pct - BELOW, 200.0, b.HOST_BOUND),
        (95.0, T.core_idle_pct, 200.0, b.UNDETERMINED),  # none idle: the whole host is in use
        (95.0, 2.0, 2 * 100 * b.HOST_THREAD_TREE_CORES, b.HOST_BOUND),  # the training uses 0.8 core each
        (95.0, 2.0, 2 * 100 * b.HOST_THREAD_TREE_CORES - BELOW, b.UNDETERMINED),  # not the training's
    ],
)
def test_the_saturated_core_rule_at_its_boundaries(
    busy_pct: float, idle_pct: float, proc_cpu_pct: float, expected: str
) -> None:
    """Several logical CPUs saturated in every sample while others idle; the count boundary (a mean of ≥ 1
    saturated CPU) is what issue 35 replaces with a per-sample rule, so it is not pinned here."""
    columns = cores(8, {0: busy_pct, 1: busy_pct}, rest=idle_pct)
    assert judge("cpu", cpu_util_pct=30.0, proc_cpu_pct=proc_cpu_pct, **columns).primary == expected


def _thread_in_half_the_samples(samples: int = 20) -> dict[str, np.ndarray]:
    columns = {f"cpu{i}_util_pct": np.full(samples, 5.0) for i in range(4)}
    for row in range(samples // 2):
        columns[f"cpu{row % 4}_util_pct"][row] = 95.0
    return columns


@pytest.mark.parametrize(
    ("proc_cpu_pct", "expected"),
    [
        (100 * b.HOST_THREAD_TREE_CORES, b.HOST_BOUND),
        (100 * b.HOST_THREAD_TREE_CORES - BELOW, b.GPU_UNDERUSED),
    ],
)
def test_a_thread_seen_per_cpu_counts_only_when_the_training_uses_a_core(
    proc_cpu_pct: float, expected: str
) -> None:
    verdict = judge("gpu", gpu0_util_pct=30.0, cpu_util_pct=28.0, proc_cpu_pct=proc_cpu_pct,
                    **_thread_in_half_the_samples())  # fmt: skip
    assert verdict.primary == expected


AT_FRACTION = round(T.throttled_sample_fraction * 100)  # flagged samples of 100 at the fraction


@pytest.mark.parametrize(("flagged", "labelled"), [(AT_FRACTION, True), (AT_FRACTION - 1, False)])
def test_cpu_clock_below_peak_is_a_label_from_the_throttled_fraction(flagged: int, labelled: bool) -> None:
    below = thermal.ThrottleSummary("cpu", thermal.CPU_BELOW_PEAK, False, 100, flagged, 1, float(flagged))
    verdict = judge("cpu", throttles=(below,), cpu_util_pct=30.0)
    assert (b.CPU_CLOCK_BELOW_PEAK in verdict.labels) is labelled


def test_a_gpu_that_did_one_percent_of_work_judges_a_run_that_does_not_say_which_trained() -> None:
    """Not in docs/sizing.md's thresholds: sizing.analysis.run.busy_gpus' ≥ 1 % mean utilization."""
    assert WORKED_UTIL_PCT == 1.0
    frame = telemetry_frame(0.0, 10, gpu0_util_pct=90.0, gpu1_util_pct=WORKED_UTIL_PCT)
    assert [i for i, _ in busy_gpus(frame, [0, 1])] == [0, 1]
    idle = telemetry_frame(0.0, 10, gpu0_util_pct=90.0, gpu1_util_pct=WORKED_UTIL_PCT - BELOW)
    assert [i for i, _ in busy_gpus(idle, [0, 1])] == [0]


# CPU frequency and temperature (sizing.analysis.thermal)


def _one_busy_core(last_mhz: float, util_pct: float = 100.0) -> pd.DataFrame:
    freq = np.full(20, 4000.0)
    freq[-1] = last_mhz
    return telemetry_frame(0.0, 20, cpu_util_pct=util_pct / 2, cpu0_freq_mhz=freq, cpu1_freq_mhz=1200.0,
                           cpu0_util_pct=util_pct, cpu1_util_pct=2.0)  # fmt: skip


@pytest.mark.parametrize(("above", "dropped"), [(False, 1), (True, 0)])
def test_a_frequency_drop_at_exactly_the_drop_fraction_below_the_peak(above: bool, dropped: int) -> None:
    edge = 4000.0 * (1.0 - T.cpu_freq_drop_fraction)
    last = np.nextafter(edge, np.inf) if above else edge
    drops = thermal.cpu_frequency_drops(_one_busy_core(last), T, 1.0, peaks_mhz={1: 4000.0})
    assert drops.status == "measured" and drops.samples == 20 and drops.flagged_samples == dropped


@pytest.mark.parametrize(("util_pct", "busy"), [(T.cpu_busy_pct, 1), (T.cpu_busy_pct - BELOW, 0)])
def test_a_core_counts_as_busy_for_the_frequency_rule_at_the_busy_threshold(
    util_pct: float, busy: int
) -> None:
    freq, counts, _ = thermal.busy_core_frequency(_one_busy_core(3000.0, util_pct), T)
    assert set(counts) == {busy} and bool(np.isfinite(freq).all()) is bool(busy)


@pytest.mark.parametrize(
    ("util_pct", "judged"), [(T.core_saturated_pct, True), (T.core_saturated_pct - BELOW, False)]
)
def test_without_per_core_frequency_only_nearly_all_busy_samples_are_judged(
    util_pct: float, judged: bool
) -> None:
    frame = telemetry_frame(0.0, 10, cpu_util_pct=util_pct, cpu_freq_mhz=np.linspace(3000.0, 3600.0, 10))
    freq, _, basis = thermal.busy_core_frequency(frame, T)
    assert bool(np.isfinite(freq).all()) is judged and basis == "cpu_freq_mhz while ≥ 90 % busy"


def test_the_frequency_peak_is_the_90th_percentile_of_like_samples() -> None:
    freq = np.arange(1.0, 11.0) * 100.0
    assert thermal.frequency_peaks(freq, np.ones(10), T) == {1: pytest.approx(910.0)}


def test_time_at_or_above_the_temperature_threshold_and_thermal_evidence() -> None:
    edge = T.temp_threshold_c
    frame = telemetry_frame(0.0, 4, cpu_temp_c=[edge, edge - BELOW, edge - BELOW, edge])
    (cpu,) = thermal.temperature_summaries(frame, edge, 1.0)
    assert cpu.time_above_s == 2.0
    only_first, only_second = np.array([True, False, False, False]), np.array([False, True, False, False])
    assert f"≥ {edge:g} °C" in thermal.thermal_evidence(frame, only_first, T)
    assert thermal.thermal_evidence(frame, only_second, T) == ""


# Weak baseline (sizing.analysis.validity)


@pytest.fixture(scope="module")
def cpu_analysis():
    return analyse_run(reference_cpu(), Prices(), T)


def _weak(a, hardware: dict | None = None, **numbers: float | None) -> list[str]:
    found = replace(a, verdict=replace(a.verdict, numbers={**a.verdict.numbers, **numbers}),
                    hardware={**a.hardware, "cpu_cores_logical": 8, **(hardware or {})})  # fmt: skip
    return validity.weak_baseline_reasons(found, T)


def test_a_weak_baseline_at_each_of_its_boundaries(cpu_analysis) -> None:
    half = T.weak_baseline_cpu_fraction * 8 * 100
    base = {"cpu_steal_pct": None}
    assert not _weak(cpu_analysis, proc_cpu_pct=half, **base)
    assert (
        "its training used 4.0 of 8 logical CPUs" in _weak(cpu_analysis, proc_cpu_pct=half - BELOW, **base)[0]
    )
    contended = 100 * (3 + validity.OTHERS_SHARE * 8) / 8  # 3 CPUs training, 2 more busy besides
    assert _weak(cpu_analysis, proc_cpu_pct=300.0, cpu_util_pct=contended, **base)[0] == (
        "its training used 3.0 of 8 logical CPUs while other processes kept about 2.0 more busy (the host "
        "62 % busy)"
    )
    calm = _weak(cpu_analysis, proc_cpu_pct=300.0, cpu_util_pct=contended - BELOW, **base)[0]
    assert calm == "its training used 3.0 of 8 logical CPUs"
    util = 100 * T.weak_baseline_cpu_fraction
    assert not _weak(cpu_analysis, proc_cpu_pct=None, cpu_util_pct=util, **base)
    assert "under half" in _weak(cpu_analysis, proc_cpu_pct=None, cpu_util_pct=util - BELOW, **base)[0]
    busy = {"proc_cpu_pct": 800.0}
    assert not _weak(cpu_analysis, cpu_steal_pct=T.steal_pct, **busy)
    assert _weak(cpu_analysis, cpu_steal_pct=T.steal_pct + BELOW, **busy)[0].startswith("hypervisor steal")
    small = {"cpu_cores_logical": T.small_host_logical_cpus}
    assert _weak(cpu_analysis, small, cpu_steal_pct=None, proc_cpu_pct=400.0) == [
        "a small host (4 logical CPUs)"
    ]
    larger = {"cpu_cores_logical": T.small_host_logical_cpus + 1}
    assert not _weak(cpu_analysis, larger, cpu_steal_pct=None, proc_cpu_pct=500.0)
    swapped = _weak(cpu_analysis, swap_growth_bytes=float(validity.SWAP_GROWTH_BYTES), **busy)
    assert swapped == ["it swapped: swap in use grew by 1.0 GiB while it trained"]
    assert not _weak(cpu_analysis, swap_growth_bytes=validity.SWAP_GROWTH_BYTES - 1.0, **busy)


@pytest.mark.parametrize(("allowed", "weak"), [(4, True), (8, False), (None, False)])
def test_a_baseline_on_a_cpu_set_smaller_than_its_host_is_weak(cpu_analysis, allowed, weak) -> None:
    found = _weak(cpu_analysis, {"cpu_affinity_cpus": allowed}, proc_cpu_pct=800.0, cpu_steal_pct=None)
    assert found == (
        ["its CPU set allowed 4 of 8 logical CPUs (taskset, Slurm or a container's cpuset)"] if weak else []
    )


@pytest.mark.parametrize("label", validity.CLOCK_HELD_DOWN)
def test_a_baseline_whose_cpu_clock_was_held_down_is_weak(cpu_analysis, label: str) -> None:
    held = replace(cpu_analysis, verdict=replace(cpu_analysis.verdict, labels=(label,)))
    assert f"its CPU clock was held down ({label})" in validity.weak_baseline_reasons(held, T)
    assert not any("clock" in r for r in validity.weak_baseline_reasons(cpu_analysis, T))


@pytest.mark.parametrize(
    ("precision", "simd", "weak"),
    [("bfloat16", ["avx2", "fma"], True), ("bfloat16", ["avx512f", "avx512_bf16"], False),
     ("bfloat16", ["amx_bf16"], False), ("bfloat16", None, False), ("float32", ["avx2"], False)],
)  # fmt: skip
def test_bfloat16_without_the_cpus_own_support_is_weak(cpu_analysis, precision, simd, weak) -> None:
    """No avx512_bf16 or amx_bf16 (an unknown CPU: no claim): oneDNN converts to float32 and back."""
    run = replace(cpu_analysis, workload={**cpu_analysis.workload, "precision": precision},
                  hardware={**cpu_analysis.hardware, "cpu_simd": simd})  # fmt: skip
    found = [r for r in validity.weak_baseline_reasons(run, T) if "bfloat16" in r]
    assert bool(found) is weak
    if weak:
        assert found == [
            "its bfloat16 has no native support on this CPU (none of avx512_bf16, amx_bf16 in run.json "
            "cpu_simd): converted to float32 and back"
        ]


def test_the_swap_growth_is_the_highest_reading_less_the_first() -> None:
    samples = pd.DataFrame({"swap_used_bytes": [2e9, np.nan, 1e9, 3.5e9, 3e9]})
    assert b.growth_of(samples, "swap_used_bytes") == 1.5e9
    assert b.growth_of(samples.head(1), "swap_used_bytes") is None
    assert b.growth_of(pd.DataFrame({"x": [1.0]}), "swap_used_bytes") is None


# GPU verdicts that read power and clocks (sizing.analysis.gpu_verdicts)

H100 = {"power_limit_w": 700.0, "sm_clock_max_mhz": 1980.0}


def gpu_frame(samples: int = 1, **columns: object) -> pd.DataFrame:
    return pd.DataFrame({"time_unix": 1_795_000_000.0 + np.arange(samples), **columns})


def test_at_the_power_limit_within_the_margin_and_below_the_max_clock() -> None:
    edge = (1.0 - gv.POWER_LIMIT_MARGIN) * 700.0
    assert gv.power_limited(gpu_frame(gpu0_power_w=edge, gpu0_sm_clock_mhz=1500.0), 0, H100, T) is not None
    below = gpu_frame(gpu0_power_w=np.nextafter(edge, 0.0), gpu0_sm_clock_mhz=1500.0)
    assert gv.power_limited(below, 0, H100, T) is None
    at_max = gpu_frame(gpu0_power_w=700.0, gpu0_sm_clock_mhz=1980.0 - 1.0)  # within 1 MHz of the max
    assert gv.power_limited(at_max, 0, H100, T) is None
    clock = gpu_frame(gpu0_power_w=700.0, gpu0_sm_clock_mhz=np.nextafter(1980.0 - 1.0, 0.0))
    assert gv.power_limited(clock, 0, H100, T) is not None


@pytest.mark.parametrize(("flagged", "label"), [(AT_FRACTION, gv.POWER_LIMITED), (AT_FRACTION - 1, "")])
def test_the_power_limit_label_from_the_throttled_fraction(flagged: int, label: str) -> None:
    reasons = np.where(np.arange(100) < flagged, float(gv.SW_POWER_CAP), 0.0)
    found = gv.power_limited(gpu_frame(100, gpu0_power_w=300.0, gpu0_throttle_reasons=reasons), 0, H100, T)
    assert found is not None and found.label == label


def test_busy_but_not_computing_at_its_boundaries() -> None:
    power = gv.NOT_COMPUTING_POWER_FRACTION * 700.0
    busy = gv.BUSY_UTIL_PCT
    assert gv.busy_not_computing(gpu_frame(gpu0_util_pct=busy, gpu0_power_w=power), 0, H100) is not None
    less_busy = gpu_frame(gpu0_util_pct=busy - BELOW, gpu0_power_w=power)
    assert gv.busy_not_computing(less_busy, 0, H100) is None
    more_power = gpu_frame(gpu0_util_pct=busy, gpu0_power_w=np.nextafter(power, np.inf))
    assert gv.busy_not_computing(more_power, 0, H100) is None


@pytest.mark.parametrize(
    ("peers", "lagging", "straggles"),
    [
        (90.0, 90.0 - gv.STRAGGLER_GAP_PCT, True),
        (90.0, 90.0 - gv.STRAGGLER_GAP_PCT + BELOW, False),
        (T.gpu_underused_util_pct, 10.0, True),  # the peers busy exactly at the underused line
        (T.gpu_underused_util_pct - BELOW, 10.0, False),  # the peers themselves underused
    ],
)
def test_a_straggler_at_its_boundaries(peers: float, lagging: float, straggles: bool) -> None:
    frame = gpu_frame(10, gpu0_util_pct=peers, gpu1_util_pct=lagging, gpu2_util_pct=peers)
    assert (gv.straggler(frame, [0, 1, 2], T) is not None) is straggles


def test_telemetry_short_of_the_steady_state_at_complete_coverage() -> None:
    steady = (0.0, 100.0)
    at = 100.0 * coverage.COMPLETE_COVERAGE
    assert runchecks.telemetry_short(steady, (100.0 - at, 100.0)) is None
    below = runchecks.telemetry_short(steady, (100.0 - at + BELOW, 100.0))
    assert below is not None and below.startswith("telemetry covers 95% of its steady state (none in its")


def test_a_run_json_is_another_runs_past_records_slack() -> None:
    slack = runchecks.RECORDS_SLACK_S
    meta = {"start_unix": 1000.0, "end_unix": 2000.0, "device": "gpu"}
    for began, foreign in ((1000.0 - slack, False), (1000.0 - slack - BELOW, True),
                           (2000.0 + slack, False), (2000.0 + slack + BELOW, True)):  # fmt: skip
        said = runchecks.foreign_run_json(meta, {"start_unix": began, "device_requested": "gpu"})
        assert (said is not None) is foreign, began


def test_a_batch_size_is_in_doubt_from_batch_doubt_share() -> None:
    """The step log's count of examples a step (whole) against training.json's batch_size."""
    share = runchecks.BATCH_DOUBT_SHARE
    for stated, counted, doubt in ((10, 10 * (1 + share), True), (11, 10, False), (10, 9, True)):
        log = pd.DataFrame({"step": [1.0, 2.0, 3.0], "examples": [counted, 2 * counted, 3 * counted]})
        found, said, _ = runchecks.batch_in_doubt(log, {"batch_size": stated})
        assert (said is not None) is doubt, (stated, counted)
        assert found == (counted if doubt else None)


def test_a_flop_count_below_min_flops_per_example_gives_no_mfu() -> None:
    from runformat.records import MIN_FLOPS_PER_EXAMPLE
    from sizing.analysis import mfu

    for per_example, known in ((MIN_FLOPS_PER_EXAMPLE, True), (MIN_FLOPS_PER_EXAMPLE * (1 - BELOW), False)):
        found, _, reason = mfu._flops({"flops": {"per_example": per_example}})
        assert (found is not None) is known and (reason is None) is known, per_example
