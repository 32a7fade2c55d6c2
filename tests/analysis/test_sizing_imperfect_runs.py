"""Realistic faults in real runs (copies of data/examples) that once left the Decision confidently wrong:
a training that diverged, a counter's "not available" sentinel, a baseline that swapped. Each test fails on
the code before its rule, and its control shows the assertion can go the other way."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_view import DEFAULTS, all_text

from dashboard import runs as dashboard_runs
from dashboard import sizing_view
from sizing.cli import main as sizing_main

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
GPU_RUN, CPU_RUN = "20261127T031121Z-gpu-vm", "20261124T111406Z-cpu-vm"
pytestmark = pytest.mark.skipif(
    not (EXAMPLES / GPU_RUN).is_dir() or not (EXAMPLES / CPU_RUN).is_dir(), reason="no example runs"
)


def decision_of(
    tmp_path: Path, gpu_change: Callable[[Path], None] | None = None,
    cpu_change: Callable[[Path], None] | None = None,
) -> tuple[dict, list[str]]:  # fmt: skip
    """The report's Decision and warnings for copies of the H100 run and its 16-CPU baseline."""
    runs = tmp_path / "runs"
    for name, change in ((GPU_RUN, gpu_change), (CPU_RUN, cpu_change)):
        shutil.copytree(EXAMPLES / name, runs / name, ignore=shutil.ignore_patterns("detections"))
        if change is not None:
            change(runs / name)
    out = tmp_path / "report.json"
    assert sizing_main([str(runs / CPU_RUN), str(runs / GPU_RUN), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    return report["decision"], report["warnings"]


def report_of(tmp_path: Path) -> dict:
    """The whole report decision_of wrote in tmp_path."""
    return json.loads((tmp_path / "report.json").read_text())


def losses(cells: Callable[[pd.Series], pd.Series]) -> Callable[[Path], None]:
    """training.csv with its loss_total cells (as text) rewritten."""

    def change(run_dir: Path) -> None:
        path = run_dir / "training.csv"
        frame = pd.read_csv(path, dtype={"loss_total": str})
        frame["loss_total"] = cells(frame["loss_total"])
        frame.to_csv(path, index=False)

    return change


def rewrite(name: str, change_frame: Callable[[pd.DataFrame], pd.DataFrame | None]) -> Callable[[Path], None]:
    """The run's CSV `name` read, changed in place by change_frame (or replaced by the frame it returns) and
    written back."""

    def change(run_dir: Path) -> None:
        path = run_dir / name
        frame = pd.read_csv(path)
        changed = change_frame(frame)
        (frame if changed is None else changed).to_csv(path, index=False)

    return change


def telemetry(change_frame: Callable[[pd.DataFrame], pd.DataFrame | None]) -> Callable[[Path], None]:
    return rewrite("telemetry.csv", change_frame)


def nan_from_half(cells: pd.Series) -> pd.Series:
    return cells.where(cells.index < len(cells) // 2, "nan")


def test_a_training_whose_loss_went_nan_is_left_out_not_sped_up(tmp_path: Path) -> None:
    """The GPU run trained on NaN for half its steps: 6.9× faster at producing NaN is not a speedup."""
    decision, _ = decision_of(tmp_path, gpu_change=losses(nan_from_half))
    assert decision["options"] == []
    left_out = next(c for c in decision["caveats"] if c.startswith("Left out as incomplete"))
    assert f"{GPU_RUN} (training diverged: its loss was not finite (nan or inf) from step " in left_out
    assert "to the end)" in left_out
    text = all_text(sizing_view.sizing_content(tmp_path, [CPU_RUN, GPU_RUN], DEFAULTS))
    assert "training diverged" in text  # the dashboard reads training.csv through the same reader


def test_one_step_that_loss_scaling_skipped_does_not_leave_a_run_out(tmp_path: Path) -> None:
    one_inf = losses(lambda cells: cells.where(cells.index != len(cells) // 2, "inf"))
    decision, _ = decision_of(tmp_path, gpu_change=one_inf)
    assert [o["group"] for o in decision["options"]] == [[GPU_RUN]]
    assert not any("diverged" in c for c in decision["caveats"])


def test_a_loss_that_rose_says_the_training_may_have_diverged(tmp_path: Path) -> None:
    def rising(cells: pd.Series) -> pd.Series:
        values = cells.astype(float)
        return values.where(values.index < len(values) // 2, values * 1e4).map("{:.6g}".format)

    decision, warnings = decision_of(tmp_path, gpu_change=losses(rising))
    assert [o["group"] for o in decision["options"]] == [[GPU_RUN]]
    said = [c for c in decision["caveats"] if "its loss rose" in c]
    assert said and said[0].startswith(f"{GPU_RUN}: its loss rose: the last ")
    assert "the training may have diverged" in said[0] and any("its loss rose" in w for w in warnings)
    control, _ = decision_of(tmp_path / "control")
    assert not any("loss rose" in c for c in control["caveats"])


def test_a_memory_sentinel_does_not_make_the_board_shared(tmp_path: Path) -> None:
    """NVML's "not available" (2^64 − 1 bytes) in used memory read as 16 EiB held before the training."""

    def sentinel(frame: pd.DataFrame) -> None:
        frame["gpu0_mem_used_bytes"] = float(2**64 - 1)

    decision, warnings = decision_of(tmp_path, gpu_change=telemetry(sentinel))
    (option,) = decision["options"]
    assert "shared" not in option["name"] and "not attributable" not in option["line"]
    assert any("gpu0_mem_used_bytes: " in w and "above the GPU's 80 GiB" in w for w in warnings)

    def held(frame: pd.DataFrame) -> None:  # control: 3 GiB really in use on the board
        frame["gpu0_mem_used_bytes"] = 3.0 * 2**30

    (shared,) = decision_of(tmp_path / "control", gpu_change=telemetry(held))[0]["options"]
    assert "(shared)" in shared["name"]


def test_a_baseline_that_swapped_is_weak(tmp_path: Path) -> None:
    def swapping(frame: pd.DataFrame) -> None:
        frame["swap_used_bytes"] = np.linspace(0.0, 6.0 * 2**30, len(frame))

    decision, _ = decision_of(tmp_path, cpu_change=telemetry(swapping))
    weak = [c for c in decision["caveats"] if c.startswith("The baseline is weak")]
    assert weak and "it swapped: swap in use grew by " in weak[0]
    control, _ = decision_of(tmp_path / "control")
    assert not any("swapped" in c for c in control["caveats"])


def test_a_speedup_from_totals_says_why_it_has_no_interval(tmp_path: Path) -> None:
    """A GPU run without a usable step log (removed to save space, or its times in milliseconds) is sized
    from training.json's totals: the line read a bare "9.0× faster", as if nothing were missing."""
    decision, warnings = decision_of(tmp_path, gpu_change=lambda run: (run / "training.csv").unlink())
    (line,) = [o["line"] for o in decision["options"]]
    said = f"(no interval: the rate of {GPU_RUN} is training.json's totals (no usable step log); run-to-run"
    assert said in line and f"{GPU_RUN}: no step log (training.csv)" in " ".join(warnings)
    control, _ = decision_of(tmp_path / "control")
    (recorded,) = [o["line"] for o in control["options"]]
    assert "no interval" not in recorded and "within-run" in recorded


def spaced(run_dir: Path) -> None:
    """Every CSV with a space after each comma, as nvidia-smi and hand-made files write them."""
    for name in ("training.csv", "telemetry.csv", "phases.csv"):
        path = run_dir / name
        path.write_text(path.read_text().replace(",", ", "))


def test_csvs_with_a_space_after_each_comma_read_as_written(tmp_path: Path) -> None:
    """Their header names began with a space: no step log, no host, no GPU energy, said as if absent."""
    decision, warnings = decision_of(tmp_path, gpu_change=spaced)
    control, _ = decision_of(tmp_path / "control")
    assert [o["line"] for o in decision["options"]] == [o["line"] for o in control["options"]]
    assert not any("no step log" in w or "not measured (GPU board" in w for w in warnings), warnings
    run = dashboard_runs.open_run_dir(tmp_path / "runs" / GPU_RUN)
    assert dashboard_runs.read_phases(run)["phase"].iloc[0] == "train"
    assert len(dashboard_runs.read_training(run)) > 0


def head_cut(share: float) -> Callable[[Path], None]:
    """telemetry.csv without its first rows (a big file cut to share it): `share` of its rows kept."""

    def change(run_dir: Path) -> None:
        path = run_dir / "telemetry.csv"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text(lines[0] + "".join(lines[1 + int((len(lines) - 1) * (1 - share)) :]))

    return change


def test_telemetry_cut_at_its_head_is_a_caveat(tmp_path: Path) -> None:
    """The steady window was clipped to the telemetry's span, so 40% of the training read as 100%: the
    verdict and the energy per example came from that part, and nothing said so."""
    decision, _ = decision_of(tmp_path, gpu_change=head_cut(0.4))
    said = [c for c in decision["caveats"] if "telemetry covers" in c]
    assert len(said) == 1 and "of its steady state (none in its first " in said[0], decision["caveats"]
    assert "its verdict and energy read that part" in said[0]
    control, _ = decision_of(tmp_path / "control")
    assert not any("telemetry covers" in c for c in control["caveats"])


def test_a_step_log_cut_at_its_head_says_its_rate_is_that_parts(tmp_path: Path) -> None:
    def cut(run_dir: Path) -> None:
        path = run_dir / "training.csv"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text(lines[0] + "".join(lines[1 + (len(lines) - 1) * 6 // 10 :]))

    _, warnings = decision_of(tmp_path, gpu_change=cut)
    said = [w for w in warnings if "training.csv holds steps " in w]
    assert len(said) == 1 and "its rate is that part's" in said[0], warnings
    _, control = decision_of(tmp_path / "control")
    assert not any("training.csv holds steps " in w for w in control)


def test_a_gpu_run_whose_host_kept_busy_by_other_processes_is_a_caveat(tmp_path: Path) -> None:
    """A shared lab server: the host 97 % busy while the training's processes used about 3 of its 16 CPUs.
    The line said host-bound, "the code feeding the GPU sets this speedup", as if the code were the limit."""

    def busy(frame: pd.DataFrame) -> None:
        for column in [c for c in frame.columns if c.startswith("cpu") and c.endswith("_util_pct")]:
            frame[column] = 97.0

    decision, _ = decision_of(tmp_path, gpu_change=telemetry(busy))
    said = [c for c in decision["caveats"] if "other processes kept about" in c]
    assert len(said) == 1 and "what fed the GPU was shared, so the speedup may understate the GPU" in said[0]
    control, _ = decision_of(tmp_path / "control")
    assert not any("other processes" in c for c in control["caveats"])


def test_a_run_json_copied_from_another_run_is_a_caveat(tmp_path: Path) -> None:
    """The baseline's run.json over the GPU run's (a copy by hand): device cpu, a run that ended a day
    before the training began, and its hardware taken for the GPU run's, without a word."""
    theirs = EXAMPLES / CPU_RUN / "run.json"
    decision, _ = decision_of(tmp_path, gpu_change=lambda run: shutil.copy(theirs, run))
    said = [c for c in decision["caveats"] if "its run.json and training.json are not one run's" in c]
    assert len(said) == 1 and "s after its end; it says device cpu, training.json asked for gpu" in said[0]
    control, _ = decision_of(tmp_path / "control")
    assert not any("are not one run's" in c for c in control["caveats"])


def test_records_that_name_one_device_two_ways_are_one_runs() -> None:
    """'cuda:0' and 'gpu' both ask for a GPU, as the report reads them elsewhere: no disagreement."""
    from sizing.analysis.runchecks import foreign_run_json

    meta, began = {"start_unix": 100.0, "end_unix": 400.0}, {"start_unix": 130.0}
    assert foreign_run_json({**meta, "device": "cuda:0"}, {**began, "device_requested": "gpu"}) is None
    said = foreign_run_json({**meta, "device": "CPU"}, {**began, "device_requested": "cuda"})
    assert said is not None and "it says device CPU, training.json asked for cuda" in said


def counts_examples(per_step: int) -> Callable[[Path], None]:
    """training.csv with a job's own `examples` count (its progress lines carry one): `per_step` a step."""

    def change(run_dir: Path) -> None:
        path = run_dir / "training.csv"
        frame = pd.read_csv(path)
        frame["examples"] = frame["step"] * per_step
        frame.to_csv(path, index=False)

    return change


def test_a_batch_size_its_own_count_contradicts_is_a_caveat_and_the_count_is_read(tmp_path: Path) -> None:
    """A job that counts 8 examples a step, run with `--batch 2` (its per-device batch on 4 GPUs): the
    speedup read 4× too low, as like-for-like, and nothing said so. The count is the measurement."""
    decision, _ = decision_of(tmp_path, gpu_change=counts_examples(8))
    control, _ = decision_of(tmp_path / "control", gpu_change=counts_examples(2))
    plain, _ = decision_of(tmp_path / "plain")
    assert control["options"][0]["speedup"] == pytest.approx(plain["options"][0]["speedup"])
    assert control["caveats"] == plain["caveats"]
    (option,) = decision["options"]
    assert option["speedup"] == pytest.approx(4 * control["options"][0]["speedup"], rel=0.01)
    assert "NOT like-for-like: batch_size 8 vs 2" in option["line"]
    assert any(
        f"{GPU_RUN}: training.json's batch_size is 2 but its step log counts 8 examples a step" in c
        for c in decision["caveats"]
    ), decision["caveats"]


def every_row_twice(run_dir: Path) -> None:
    """training.csv with each row written twice (a logger attached twice)."""
    path = run_dir / "training.csv"
    header, *rows = path.read_text().splitlines(keepends=True)
    path.write_text(header + "".join(row + row for row in rows))


def test_a_step_log_written_twice_reads_as_written_once(tmp_path: Path) -> None:
    """Its 17,436 rows were taken for as many steps: "holds steps 1–8,718 of the 17,436 training.json
    records (a file cut at its head or tail?)", beside the honest 8,718 of training.json."""
    decision, warnings = decision_of(tmp_path, gpu_change=every_row_twice)
    control, _ = decision_of(tmp_path / "control")
    assert decision["options"][0]["line"] == control["options"][0]["line"]
    assert decision["caveats"] == control["caveats"]
    said = " | ".join(warnings)
    assert f"{GPU_RUN}: training.csv: 2229 row(s) repeat an earlier one, cell for cell: first kept" in said
    assert "cut at its head or tail" not in said and "steps from training.csv" not in said


def records_cpus(logical: int | None) -> Callable[[Path], None]:
    """run.json's system records `logical` logical CPUs (a run.json from another host; None: as it is), and
    the CPU's vector flags and clock, so its CPU peak is known."""

    def change(run_dir: Path) -> None:
        path = run_dir / "run.json"
        record = json.loads(path.read_text())
        record["system"] |= {"cpu_simd": ["avx512f", "avx2", "fma"], "cpu_max_mhz": 3000.0}
        if logical is not None:
            record["system"]["cpu_cores_logical"] = logical
        path.write_text(json.dumps(record))

    return change


def test_a_cpu_count_the_telemetry_contradicts_is_a_caveat_and_the_sampled_count_is_read(
    tmp_path: Path,
) -> None:
    """The baseline's run.json from a 64-CPU host over telemetry of 16: "The baseline is weak: its training
    used 9.2 of 64 logical CPUs while other processes kept about 27.6 more busy", and no speedup."""
    decision, _ = decision_of(tmp_path, cpu_change=records_cpus(64))
    cpu_room = next(r for r in report_of(tmp_path)["runs"] if r["run_id"] == CPU_RUN)["headroom"]
    assert cpu_room["mfu"] is None  # its peak would be the other host's cores
    assert (
        cpu_room["mfu_not_known_reason"]
        == "run.json's CPU facts may be another host's (its CPU count is not the telemetry's)"
    )
    control, _ = decision_of(tmp_path / "control", cpu_change=records_cpus(None))
    control_room = next(r for r in report_of(tmp_path / "control")["runs"] if r["run_id"] == CPU_RUN)[
        "headroom"
    ]
    assert control_room["mfu"] is not None
    assert [o["line"] for o in decision["options"]] == [o["line"] for o in control["options"]]
    assert "16 logical CPUs" in decision["baseline"] and "MFU" not in decision["baseline"]
    assert control["baseline"].startswith(decision["baseline"].removesuffix("."))  # the same, but its MFU
    assert not any("weak" in c for c in decision["caveats"])
    assert any(
        f"{CPU_RUN}: run.json records 64 logical CPUs but its telemetry samples 16 (cpu0–cpu15)" in c
        for c in decision["caveats"]
    ), decision["caveats"]


def test_a_count_of_one_devices_share_leaves_the_recorded_batch(tmp_path: Path) -> None:
    """A data-parallel job counting examples on its first rank (2 a step of its 4 ranks' 8): the count is one
    device's, so training.json's batch size stands, said once, not a caveat."""

    def per_rank(run_dir: Path) -> None:
        counts_examples(2)(run_dir)
        path = run_dir / "training.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "batch_size": 8, "world_size": 4}))

    decision, warnings = decision_of(tmp_path, gpu_change=per_rank)
    control, _ = decision_of(tmp_path / "control")
    assert decision["options"][0]["speedup"] == pytest.approx(4 * control["options"][0]["speedup"], rel=0.01)
    assert not any("batch_size is" in c for c in decision["caveats"])
    assert any("counts 2 examples a step, one of 4 devices' share of training.json's batch_size 8" in w
               for w in warnings)  # fmt: skip


def test_a_flop_count_in_gflops_gives_no_mfu_and_says_why(tmp_path: Path) -> None:
    """26.6 (GFLOPs) for 2.66e10 FLOPs a training example: the headline read "MFU 0.0000000003 %: GPU
    underused", a figure no training reaches. Fewer FLOPs than any network's example is a unit slip."""

    def in_gflops(run_dir: Path) -> None:
        path = run_dir / "training.json"
        record = json.loads(path.read_text())
        record["flops"]["per_example"] = round(record["flops"]["per_example"] / 1e9, 1)
        path.write_text(json.dumps(record))

    decision, _ = decision_of(tmp_path, gpu_change=in_gflops)
    (option,) = decision["options"]
    assert option["mfu"] is None and "MFU not known" in option["line"], option["line"]


def test_a_batch_size_the_record_lost_is_read_from_the_step_log(tmp_path: Path) -> None:
    """training.json's batch_size written as text ("2"): "not known to be like-for-like: batch_size unknown",
    and no speedup known to compare the same work. Its step log's examples_per_s × step_time_s is 2."""

    def batch_as_text(run_dir: Path) -> None:
        path = run_dir / "training.json"
        record = json.loads(path.read_text())
        record["batch_size"] = str(record["batch_size"])
        path.write_text(json.dumps(record))

    decision, warnings = decision_of(tmp_path, gpu_change=batch_as_text)
    control, _ = decision_of(tmp_path / "control")
    assert decision["options"][0]["line"] == control["options"][0]["line"]
    assert "like-for-like" not in " ".join(decision["caveats"])
    said = f"{GPU_RUN}: no batch_size recorded (training.json): read as its step log's 2 examples a step"
    assert said in warnings


def test_a_cpu_baseline_beside_a_busy_gpu_is_weak(tmp_path: Path) -> None:
    """A "CPU" run whose telemetry shows its GPU 25 % busy while it trained (code that found the GPU, a
    record edited): "1.0× faster", from a baseline that may have trained on the GPU. The shipped CPU
    baseline, its GPU idle, is not."""
    runs = tmp_path / "runs"
    shutil.copytree(EXAMPLES / GPU_RUN, runs / GPU_RUN, ignore=shutil.ignore_patterns("detections"))
    shutil.copytree(EXAMPLES / GPU_RUN, runs / "on-the-gpu", ignore=shutil.ignore_patterns("detections"))
    for name, fields in (("run.json", {"device": "cpu"}), ("training.json", {"device_used": "CPU"})):
        path = runs / "on-the-gpu" / name
        path.write_text(json.dumps(json.loads(path.read_text()) | fields))
    out = tmp_path / "report.json"
    assert sizing_main([str(runs / "on-the-gpu"), str(runs / GPU_RUN), "--out", str(out)]) == 0
    caveats = json.loads(out.read_text())["decision"]["caveats"]
    weak = next(c for c in caveats if c.startswith("The baseline is weak"))
    assert weak.startswith("The baseline is weak: a GPU was busy while it trained (gpu0 ")
    assert "it may not have trained on the CPU alone" in weak
    control, _ = decision_of(tmp_path / "control")
    assert not any("a GPU was busy" in c for c in control["caveats"])


def test_a_run_without_training_json_that_failed_after_training_is_complete(tmp_path: Path) -> None:
    """training.json not copied, and run.json `failed` (its infer phase failed after training: exit code 1):
    "No complete GPU run". phases.csv says the training ended ok, so the run is sized; a run whose train
    phase failed stays incomplete."""

    def without_training_json(run_dir: Path) -> None:
        (run_dir / "training.json").unlink()
        record = json.loads((run_dir / "run.json").read_text())
        (run_dir / "run.json").write_text(json.dumps(record | {"end_reason": "failed", "exit_code": 1}))
        phases = pd.read_csv(run_dir / "phases.csv")
        phases.loc[phases["phase"] == "infer", "status"] = "failed"
        phases.to_csv(run_dir / "phases.csv", index=False)

    decision, _ = decision_of(tmp_path, gpu_change=without_training_json)
    assert decision["options"] and decision["options"][0]["speedup"] is not None
    assert not any("Left out as incomplete" in c for c in decision["caveats"])

    def train_failed(run_dir: Path) -> None:
        without_training_json(run_dir)
        phases = pd.read_csv(run_dir / "phases.csv")
        phases.loc[phases["phase"] == "train", "status"] = "failed"
        phases.to_csv(run_dir / "phases.csv", index=False)

    failed, _ = decision_of(tmp_path / "failed", gpu_change=train_failed)
    assert any(
        c.startswith(f"Left out as incomplete: {GPU_RUN} (the command failed") for c in failed["caveats"]
    )


def paused_for(seconds: float) -> Callable[[Path], None]:
    """The step log of a training stopped for `seconds` halfway (SIGSTOP, a host that swapped): every later
    row that much later, the step it fell in that much longer."""

    def pause(frame: pd.DataFrame) -> None:
        later = frame.index >= len(frame) // 2
        for column in ("time_unix", "elapsed_s"):
            frame.loc[later, column] += seconds
        frame.loc[len(frame) // 2, "step_time_s"] += seconds

    return rewrite("training.csv", pause)


def test_a_pause_that_took_a_share_of_the_steady_time_is_a_caveat(tmp_path: Path) -> None:
    """A training stopped 20 s in a 100 s run (shorter than a resumed session's gap; a real SIGSTOP of a
    2-minute CPU run, too) read 5.7× for 6.9× with the pause unsaid: the caveat says it and the rate without
    it."""
    decision, warnings = decision_of(tmp_path, gpu_change=paused_for(20.0))
    said = [c for c in decision["caveats"] if "pause" in c]
    assert said and f"{GPU_RUN}'s steady rate holds 1 pause (2" in said[0], decision["caveats"]
    assert "steps/s without it (a stopped or starved process: repeat the run" in said[0]
    assert any(w.startswith(f"{GPU_RUN}: steady rate holds 1 pause") for w in warnings)
    (run,) = [r for r in report_of(tmp_path)["runs"] if r["run_id"] == GPU_RUN]
    assert run["steady_pauses"] == 1 and 15 < run["steady_pause_time_pct"] < 20
    assert run["steps_per_s_without_pauses"] > 20  # the copy's own rate, 22.4 steps/s without the pause
    control, _ = decision_of(tmp_path / "control")
    assert not any("pause" in c for c in control["caveats"])
