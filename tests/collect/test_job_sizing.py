"""A job's runs in the sizing report: the workload signature a job declares, and an untouched script that
prints only its steps, recorded on the CPU and on a (fake-NVML) GPU, compared like-for-like in steps/s."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from collectfakes import REPO, FakeGpu, FakeNvml, FakeProcess

from collect import gpu_state, jobtimed
from collect.sources import Hardware
from dashboard.overview import training_figure
from dashboard.runs import discover_runs
from runformat import read_json
from sizing.analysis import signature
from sizing.cli import main as sizing_main

JOB = {"workload": {"name": "python train.py", "from": "command line"}, "progress": {"rows": 10}}


def test_a_jobs_signature_is_its_name_and_what_it_declared() -> None:
    plain = signature.workload(JOB, "cpu")
    assert plain == {**dict.fromkeys(signature.WORKLOAD_FIELDS), "job": "python train.py"}
    declared = signature.workload(
        {**JOB, "batch_size": 32, "precision": "mixed_float16", "framework": "torch"}
    )
    assert {k: v for k, v in declared.items() if v is not None} == {
        "job": "python train.py", "framework": "torch", "batch_size": 32, "precision": "float16"}  # fmt: skip
    assert signature.like_for_like(plain, signature.workload(JOB, "gpu"))  # the same job stands for the rest
    assert signature.unknown_fields(plain, declared) == ["framework", "batch_size", "precision"]
    other = signature.workload({**JOB, "workload": {"name": "python other.py"}})
    hint = " (if one job run two ways, record both with one --workload-name)"
    assert signature.differences(plain, other) == [f"job python train.py vs python other.py{hint}"]
    ours = signature.workload(
        {"framework": "torch", "preset": "small", "batch_size": 2, "precision": "float32"}
    )
    assert not signature.like_for_like(plain, ours) and "job" in signature.unknown_fields(plain, ours)
    assert signature.workload_key(plain) != signature.workload_key(declared)
    assert signature.workload_name(plain) == "python train.py [dtype not declared]"
    assert signature.workload_name(declared) == "python train.py [torch, batch 32, float16]"
    assert signature.workload_name(signature.workload({**JOB, "workload": {"name": "x" * 80}})) == (
        "x" * 59 + "… [dtype not declared]"
    )


SCRIPT = (
    "import os, time\n"
    "if os.environ.get('JOB_PID_FILE'):\n"
    "    open(os.environ['JOB_PID_FILE'], 'w').write(str(os.getpid()))\n"
    "for step in range(1, 81):\n"
    "    time.sleep(float(os.environ['JOB_STEP_S']))\n"
    "    print(f'step {step}', flush=True)\n"
)


def test_the_same_untouched_job_on_the_cpu_and_a_gpu_compares_like_for_like_in_steps_per_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.setattr(gpu_state, "STATE_PERIOD_S", 0.1)
    data = tmp_path / "data"
    command = ["--", sys.executable, str(script)]
    options = [
        "10s",
        "--interval",
        "0.1s",
        "--data-dir",
        str(data),
        "--progress-regex",
        r"step (?P<step>\d+)",
    ]

    def no_nvml() -> Any:
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setenv("JOB_STEP_S", "0.02")
    assert jobtimed.main([*options, *command], hardware=Hardware(load_nvml=no_nvml, environ={})) == 0

    pid = tmp_path / "gpu-pid"

    class Job(list):  # the board lists the job's process while it runs
        def __iter__(self) -> Any:
            return iter([FakeProcess(int(pid.read_text()))] if pid.exists() and pid.read_text() else [])

    monkeypatch.setenv("JOB_PID_FILE", str(pid))
    monkeypatch.setenv("JOB_STEP_S", "0.005")
    hardware = Hardware(load_nvml=lambda: FakeNvml([FakeGpu(processes=Job())]), environ={})
    assert jobtimed.main([*options, "--device", "gpu", *command], hardware=hardware) == 0
    capsys.readouterr()
    cpu, gpu = sorted((data / "runs").iterdir())
    assert read_json(gpu / "training.json")["device_used"] == "NVIDIA H100 80GB HBM3"

    out = tmp_path / "report.json"
    assert sizing_main(["--data-dir", str(data), "--out", str(out), cpu.name, gpu.name]) == 0
    report = json.loads(out.read_text())
    [comparison] = report["comparisons"]  # the GPU run against the CPU baseline
    assert (comparison["run_id"], comparison["baseline"], comparison["like_for_like"]) == (
        gpu.name,
        [cpu.name],
        True,
    )
    rates = {r["run_id"]: r["steps_per_s"] for r in report["runs"]}
    assert all(r["examples_per_s"] is None for r in report["runs"])
    assert comparison["speedup"] == pytest.approx(rates[gpu.name] / rates[cpu.name], rel=1e-6)
    assert comparison["speedup"] > 1.5
    assert any("examples per step not known" in w for w in report["warnings"])
    assert "× the baseline's steps/s (examples per step not known on either side)" in report["headline"][1]
    (option,) = report["decision"]["options"]
    assert "faster in steps/s (examples per step not known; within-run " in option["line"]
    baseline_rate = f"{rates[cpu.name]:,.3f} steps/s, examples per step not known (--batch gives them)"
    assert baseline_rate in report["decision"]["baseline"]
    gpu_run = next(r for r in report["runs"] if r["run_id"] == gpu.name)
    reason = gpu_run["headroom"]["mfu_not_known_reason"]
    assert reason == "the job declares no FLOPs per example: give --flops-per-example"
    jsonschema.validate(report, json.loads((REPO / "docs" / "sizing.schema.json").read_text()))
    figure = training_figure(discover_runs(data))  # the dashboard's Training plot draws the job's steps
    assert figure is not None and 80 in {max(t.y) for t in figure.data if t.y is not None and len(t.y)}


def test_a_job_that_declares_its_flops_per_example_gets_an_mfu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--flops-per-example (with --batch and --precision): the report's MFU for a lab's own model, which
    our counter cannot count; the command printed for the other device keeps it."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.setattr(gpu_state, "STATE_PERIOD_S", 0.1)
    monkeypatch.setenv("JOB_STEP_S", "0.01")
    data = tmp_path / "data"
    hardware = Hardware(load_nvml=lambda: FakeNvml([FakeGpu()]), environ={})
    declared = ["--batch", "4", "--precision", "float32", "--flops-per-example", "2.5e9"]
    options = ["6s", "--interval", "0.1s", "--data-dir", str(data), "--device", "gpu", *declared,
               "--progress-regex", r"step (?P<step>\d+)"]  # fmt: skip
    assert jobtimed.main([*options, "--", sys.executable, str(script)], hardware=hardware) == 0
    printed = capsys.readouterr().out
    assert "./scripts/collect_cpu.sh 6s --progress-regex " in printed
    assert " --flops-per-example 2.5e+09 " in printed
    (run,) = (data / "runs").iterdir()
    assert read_json(run / "training.json")["flops"] == {
        "per_example": 2.5e9, "method": "declared by the user (--flops-per-example)"}  # fmt: skip
    out = tmp_path / "report.json"
    assert sizing_main(["--data-dir", str(data), "--out", str(out), run.name]) == 0
    (sized,) = json.loads(out.read_text())["runs"]
    room = sized["headroom"]
    assert room["mfu"] == pytest.approx(2.5e9 * sized["examples_per_s"] / room["peak_flops_per_s"])
    assert room["math_dtype"] == "tf32"
    assert room["flops_method"] == "declared by the user (--flops-per-example)"
