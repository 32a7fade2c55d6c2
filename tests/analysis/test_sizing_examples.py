"""The sizing analysis on the real recordings shipped in data/examples (CPU, and GPU when one is there).

Each figure is recomputed here straight from the CSV text with the standard library, independently of
sizing.analysis.load and sizing's analysis, so a parsing or windowing slip shows up as a mismatch.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from sizingfixtures import reference_cpu, reference_gpu, write_run

from sizing import RunData
from sizing.analysis import bottleneck, gpu_verdicts, thermal
from sizing.analysis.load import load_run_dir
from sizing.analysis.run import analyse_run
from sizing.cli import main as sizing_main
from sizing.model import Prices, Thresholds, clip_window, train_windows

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
EXAMPLE_RUNS = (
    sorted(p for p in EXAMPLES.glob("*") if (p / "training.csv").is_file()) if EXAMPLES.is_dir() else []
)
needs_examples = pytest.mark.skipif(
    not EXAMPLE_RUNS, reason="no recorded run with training.csv in data/examples"
)


def read_rows(path: Path) -> list[dict[str, float]]:
    """Complete rows of a CSV as floats (empty cell → nan); a truncated last line is dropped."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not text.endswith("\n"):
        lines = lines[:-1]
    reader = csv.DictReader(lines)
    return [{k: float(v) if v not in ("", None) else math.nan for k, v in row.items()} for row in reader]


def hand_steady_rate(run_dir: Path) -> tuple[float, float, float]:
    """(steps/s, steady start, steady end) by the documented rule, from the raw files."""
    rows = sorted(read_rows(run_dir / "training.csv"), key=lambda r: r["time_unix"])
    info = (
        json.loads((run_dir / "training.json").read_text()) if (run_dir / "training.json").is_file() else {}
    )
    stated = info.get("warmup_steps_excluded")
    warmup = int(stated) if isinstance(stated, int) else (20 if len(rows) >= 60 else len(rows) // 3)
    warmup = min(max(1, warmup), len(rows) - 1)
    first, last = rows[warmup - 1], rows[-1]
    return (
        (last["step"] - first["step"]) / (last["time_unix"] - first["time_unix"]),
        first["time_unix"],
        last["time_unix"],
    )


def hand_training_window(run_dir: Path, times: np.ndarray) -> tuple[float, float]:
    """The train phases' hull from phases.csv, else the telemetry's span."""
    phases = run_dir / "phases.csv"
    if phases.is_file():
        with phases.open(encoding="utf-8") as handle:
            train = [r for r in csv.DictReader(handle) if r["phase"] == "train"]
        if train:
            return min(float(r["start_unix"]) for r in train), max(float(r["end_unix"]) for r in train)
    return float(times[0]), float(times[-1])


@pytest.mark.parametrize("run_dir", EXAMPLE_RUNS, ids=[p.name for p in EXAMPLE_RUNS])
def test_recorded_run_figures_match_the_raw_files(run_dir: Path) -> None:
    check_against_raw_files(run_dir)


def test_the_raw_file_checks_on_crafted_run_dirs(tmp_path: Path) -> None:
    """The same checks on crafted dirs: RAPL and a GPU, and neither RAPL nor phases nor training.json."""
    bare = reference_cpu("bare-cpu")
    bare = RunData(
        bare.run_id,
        bare.meta,
        {},
        {},
        bare.telemetry.drop(columns=["cpu_energy_j"]),
        bare.training,
        bare.phases.iloc[0:0],
    )
    for run in (reference_cpu(), reference_gpu(), bare):
        check_against_raw_files(write_run(tmp_path, run))


def hand_verdict(kind: str, rows: list[dict[str, float]]) -> str:
    """The first matching rule of docs/sizing.md, from the raw rows (GPU util, CPU, iowait, disk)."""

    def mean(name: str) -> float:
        values = [r.get(name, math.nan) for r in rows]
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    gpu_columns = sorted(
        {k.split("_")[0] for r in rows[:1] for k in r if k.endswith("_util_pct") and k[:3] == "gpu"}
    )
    gpu = min((mean(f"{g}_util_pct") for g in gpu_columns), default=math.nan)
    cpu, iowait, disk = mean("cpu_util_pct"), mean("cpu_iowait_pct"), mean("disk_util_pct")
    cores = [k for k in (rows[0] if rows else {}) if re.fullmatch(r"cpu\d+_util_pct", k)]
    per_row = [[r[k] for k in cores if math.isfinite(r[k])] for r in rows]
    per_row = [values for values in per_row if values]
    saturated = float(np.mean([sum(v >= 90 for v in values) for values in per_row])) if per_row else 0.0
    idle = float(np.mean([sum(v < 50 for v in values) for values in per_row])) if per_row else 0.0
    tree = mean("proc_cpu_pct")
    if kind == "gpu" and gpu >= 80:
        limits = [mean(f"{g}_power_limit_w") for g in gpu_columns]
        powers = [mean(f"{g}_power_w") for g in gpu_columns]
        # busy but not computing: busy at a low draw (docs/sizing.md, GPU verdicts) takes GPU-bound's place
        if any(p <= 0.35 * lim for p, lim in zip(powers, limits, strict=True) if math.isfinite(p * lim)):
            return gpu_verdicts.BUSY_NOT_COMPUTING
        return bottleneck.GPU_BOUND
    if kind == "cpu" and cpu >= 85:
        return bottleneck.CPU_BOUND
    if iowait >= 20 or disk >= 80:
        return bottleneck.IO_BOUND
    if kind == "gpu" and cpu >= 85:
        return bottleneck.HOST_BOUND
    if saturated >= 1 and idle >= 1 and not (tree < 0.8 * 100 * saturated):
        return bottleneck.HOST_BOUND
    busiest = [
        r["proc_busiest_thread_pct"]
        for r in rows
        if math.isfinite(r.get("proc_busiest_thread_pct", math.nan))
    ]
    if busiest:  # the training's busiest thread: saturated in half the rows, or busy 70 % on average
        if (
            kind == "gpu"
            and idle >= 1
            and (np.mean([v >= 90 for v in busiest]) >= 0.5 or np.mean(busiest) >= 70)
        ):
            return bottleneck.HOST_BOUND
    else:
        one_saturated = (
            float(np.mean([any(v >= 90 for v in values) for values in per_row])) if per_row else 0.0
        )
        if kind == "gpu" and one_saturated >= 0.5 and idle >= 1 and tree >= 80:
            return bottleneck.HOST_BOUND
    if kind == "gpu" and gpu < 50:
        return bottleneck.GPU_UNDERUSED
    return bottleneck.UNDETERMINED


def check_against_raw_files(run_dir: Path) -> None:
    data = load_run_dir(run_dir)
    result = analyse_run(data, Prices(cpu_tdp_w=65.0), Thresholds())
    rate, start, end = hand_steady_rate(run_dir)
    assert len(read_rows(run_dir / "training.csv")) == result.throughput.steps_total
    assert result.throughput.steps_per_s == pytest.approx(rate, rel=1e-9)
    assert result.throughput.steady_start_unix == pytest.approx(start)
    assert result.throughput.steady_end_unix == pytest.approx(end)
    info = (
        json.loads((run_dir / "training.json").read_text()) if (run_dir / "training.json").is_file() else {}
    )
    if info.get("steady_steps_per_s") and info.get("initial_step", 0) == 0:
        # the workload's own figure (rounded to 4 digits), from its in-memory step clock
        assert result.throughput.steps_per_s == pytest.approx(info["steady_steps_per_s"], abs=1e-4)
    assert math.isfinite(result.throughput.examples_per_s) and result.throughput.examples_per_s > 0

    telemetry = read_rows(run_dir / "telemetry.csv")
    times = np.array([r["time_unix"] for r in telemetry])
    window = clip_window((start, end), train_windows(data.phases, data.telemetry), data.telemetry)
    assert window is not None, "the steady state should be covered by telemetry"
    in_window = [r for r, t in zip(telemetry, times, strict=True) if window[0] <= t <= window[1]]
    cpu_util = np.nanmean([r["cpu_util_pct"] for r in in_window])
    assert result.verdict.numbers["cpu_util_pct"] == pytest.approx(cpu_util)
    assert result.verdict.primary == hand_verdict(result.kind, in_window)
    evidence = " ".join(result.verdict.evidence)  # names the hand-computed mean it rests on
    gpu_means = [
        np.nanmean([r[k] for r in in_window]) for k in in_window[0] if re.fullmatch(r"gpu\d+_util_pct", k)
    ]
    if result.verdict.primary == bottleneck.GPU_BOUND:
        assert f"mean GPU util {min(gpu_means):.1f} %" in evidence
    elif result.verdict.primary in (bottleneck.CPU_BOUND, bottleneck.UNDETERMINED):
        assert f"{cpu_util:.1f} %" in evidence

    freq = np.array([r.get("cpu_freq_mhz", math.nan) for r in telemetry])
    cpu_throttle = next(t for t in result.throttling if t.source == "cpu")
    if np.isfinite(freq).any() and np.ptp(freq[np.isfinite(freq)]) < 1.0:
        assert cpu_throttle.status == thermal.CONSTANT_FREQUENCY  # "cannot tell", never "0 events"

    # CPU energy: RAPL if recorded, else the 65 W estimate, both recomputed by hand
    if "cpu_energy_j" in telemetry[0] and np.isfinite([r["cpu_energy_j"] for r in telemetry]).sum() >= 2:
        counter = np.array([r["cpu_energy_j"] for r in telemetry])
        ok = np.isfinite(counter)
        joules = np.interp(window[1], times[ok], counter[ok]) - np.interp(window[0], times[ok], counter[ok])
        assert result.steady_energy.cpu_covers == "CPU package (RAPL)"
    else:
        util = np.array([r["cpu_util_pct"] for r in telemetry])
        ok = np.isfinite(util)
        watts = 65.0 * (0.3 + 0.7 * util[ok] / 100)
        cumulative = np.concatenate([[0.0], np.cumsum(np.diff(times[ok]) * (watts[1:] + watts[:-1]) / 2)])
        joules = np.interp(window[1], times[ok], cumulative) - np.interp(window[0], times[ok], cumulative)
        assert result.steady_energy.cpu_is_estimate
    if result.kind == "cpu":
        assert result.j_per_1k_steps == pytest.approx(
            joules / (window[1] - window[0]) * 1000 / rate, rel=1e-6
        )

    train_start, train_end = hand_training_window(run_dir, times)
    for sensor in result.thermal:
        column = "cpu_temp_c" if sensor.sensor == "cpu" else f"{sensor.sensor}_temp_c"
        temps = [r[column] for r, t in zip(telemetry, times, strict=True) if train_start <= t <= train_end]
        assert sensor.peak_c == pytest.approx(np.nanmax(temps))

    evaluation = json.loads((run_dir / "eval.json").read_text()) if (run_dir / "eval.json").is_file() else {}
    assert result.evaluation.get("map_50") == evaluation.get("map_50")


@needs_examples
def _configurations(run_dirs: list[Path]) -> dict[tuple, int]:
    """How many runs share device, host hardware and workload (what makes runs repeats); a --tune trial
    given with its sweep's final run is read through it, not sized."""
    counts: dict[tuple, int] = {}
    for run_dir in run_dirs:
        meta = json.loads((run_dir / "run.json").read_text())
        if run_dir.name in _folded_trials(run_dirs):
            continue
        info = json.loads((run_dir / "training.json").read_text())
        system = meta.get("system") or {}
        key = (
            meta.get("device"),
            system.get("cpu_model"),
            system.get("cpu_cores_logical"),
            tuple(gpu.get("name") for gpu in system.get("gpus") or []),
            *(info.get(field) for field in ("framework", "preset", "batch_size", "precision")),
        )
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_both_report_formats_from_the_recorded_runs_and_a_crafted_gpu_run(tmp_path: Path) -> None:
    """The report over every recorded example plus a crafted GPU run (this machine has no GPU)."""
    for run_dir in EXAMPLE_RUNS:
        shutil.copytree(run_dir, tmp_path / "examples" / run_dir.name)
    write_run(tmp_path / "runs", reference_gpu("crafted-gpu"))
    ids = [p.name for p in EXAMPLE_RUNS] + ["crafted-gpu"]
    common = [
        "--data-dir",
        str(tmp_path),
        "--gpu-price",
        "2000",
        "--value-per-hour",
        "10",
        "--cpu-tdp-w",
        "65",
    ]
    assert sizing_main([*ids, *common, "--out", str(tmp_path / "r.md")]) == 0
    assert sizing_main([*ids, *common, "--out", str(tmp_path / "r.html")]) == 0
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "(baseline)" in markdown and "crafted-gpu" in markdown
    # recorded runs of one configuration on one host are repeats: one group, mean ± sd over them
    repeats = max(_configurations(EXAMPLE_RUNS).values(), default=0)
    assert f"n={repeats}" in markdown if repeats > 1 else True
    assert "CPU-bound" in markdown and "cannot tell (constant frequency" in markdown
    figures = markdown.split("## Definitions")[0]
    assert re.search(r"\$0(?>\.0+)?(?![\d.])", figures) is None  # unknown is never $0
    folded = _folded_trials(EXAMPLE_RUNS)
    for run_id in ids:
        if run_id in folded:  # named in the note on its sweep, and in the final run's trials table
            assert re.search(rf"trials? of tuning sweep \S+ \([^)]*{run_id}", markdown)
        else:
            assert f"| {run_id} |" in markdown
    assert "Plotly.newPlot" in (tmp_path / "r.html").read_text(encoding="utf-8")


H100_RUNS = ["20261124T111406Z-cpu-vm", "20261124T110829Z-gpu-vm", "20261124T113233Z-gpu-vm"]


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in H100_RUNS), reason="the H100 runs are not shipped"
)
def test_the_h100_machines_headline_says_what_limits_the_speedup(tmp_path: Path) -> None:
    """The real GPU runs against the same machine's 16 CPUs: like-for-like at batch 2 with the GPU named
    underused (once, with its figure), batch 32 marked NOT like-for-like, the CPU rate's drift said."""
    assert sizing_main([*H100_RUNS, "--data-dir", str(EXAMPLES.parent), "--out", str(tmp_path / "r.md")]) == 0
    headline = (tmp_path / "r.md").read_text(encoding="utf-8").split("## Summary")[1].split("## Settings")[0]
    baseline, batch2, batch32 = [line for line in headline.splitlines() if line.startswith("- ")]
    assert "16 logical CPUs" in baseline and "drifted +9%" in baseline
    assert "batch 2/float32: 9.04× the baseline's examples/s" in batch2 and "like-for-like" not in batch2
    assert batch2.count("mean GPU util 25.1 %") == 1 and "GPU underused" in batch2
    # how far from the H100's peak: MFU once training.json counts FLOPs (sizing.analysis.headroom), and why
    assert "ran at 0.3 % of the NVIDIA H100 80GB HBM3's dense TF32 peak (MFU)" in batch2
    assert "why (from utilization only): GPU underused" in batch2
    assert "ran at 1.0 % of the NVIDIA H100 80GB HBM3's dense TF32 peak (MFU)" in batch32
    assert "why (from utilization only): host-bound" in batch32  # one CPU ≥ 90 % in 94 % of samples
    assert "GPU board only: CPU not measured" in batch2 and "GPU not priced" in batch2
    assert "batch 32/float32: 27.85×" in batch32 and "NOT like-for-like (batch_size 32 vs 2)" in batch32


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in H100_RUNS), reason="the H100 runs are not shipped"
)
def test_cpu_cores_one_gpu_replaces_needs_a_measured_gpu_cell_not_just_a_file(tmp_path: Path) -> None:
    """The H100's batch-2 run has an inference.json whose every GPU cell failed: no figure, and the
    note says why; with the batch-32 run's measured cells there is one, marked NOT like-for-like."""
    out = tmp_path / "r.json"
    assert sizing_main([*H100_RUNS[:2], "--data-dir", str(EXAMPLES.parent), "--out", str(out)]) == 0
    serving = json.loads(out.read_text())["sections"]["serving"]
    assert serving["cpu_cores_replaced"] is None
    assert serving["cpu_cores_note"].startswith("not measured: needs an inference cell measured on a CPU and")
    assert sizing_main([*H100_RUNS, "--data-dir", str(EXAMPLES.parent), "--out", str(out)]) == 0
    serving = json.loads(out.read_text())["sections"]["serving"]
    assert serving["cpu_cores_replaced"] > 1 and serving["cpu_cores_note"].startswith("NOT like-for-like")


def _folded_trials(run_dirs: list[Path]) -> set[str]:
    """The trial run ids whose sweep's final run is among `run_dirs`."""
    tags = {d.name: json.loads((d / "run.json").read_text()).get("tuning") or {} for d in run_dirs}
    finals = {tag.get("id") for tag in tags.values() if tag.get("role") == "final"}
    return {name for name, tag in tags.items() if tag.get("role") == "trial" and tag.get("id") in finals}


STANDARD_RUNS = ["20261124T112303Z-gpu-vm", "20261127T090127Z-cpu-vm"]


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in [*H100_RUNS, *STANDARD_RUNS]),
    reason="the H100 runs are not shipped",
)
def test_a_standard_gpu_option_against_the_small_baseline_gives_its_like_for_like_speedup(
    tmp_path: Path,
) -> None:
    """The README's promise, as it shows it: `python -m sizing` over both presets' runs. The baseline is the
    small CPU run; the standard GPU run's line also gives its speedup against the standard CPU run."""
    out = tmp_path / "r.md"
    assert (
        sizing_main([*H100_RUNS, *STANDARD_RUNS, "--data-dir", str(EXAMPLES.parent), "--out", str(out)]) == 0
    )
    decision = out.read_text(encoding="utf-8").split("## Decision")[1].split("Caveats")[0]
    (standard,) = [line for line in decision.splitlines() if "NOT like-for-like: preset standard" in line]
    assert (
        "like for like, against Intel(R) Xeon(R) Processor, 16 logical CPUs (CPU, 20261127T090127Z-cpu-vm) "
        in standard
    )
    assert "training its workload: " in standard
