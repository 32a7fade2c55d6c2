"""`collect timed DURATION [OPTIONS] -- COMMAND`: the user's own job recorded, its progress turned into the
step log, and the hard cases (no match, a malformed line, forked workers, an immediate exit, `\\r` progress,
a flood of output), each one clear line with every sample kept."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from collectfakes import REPO, FakeGpu, FakeNvml, FakeProcess

from collect import gpu_state, jobtimed
from collect.jobrecord import NO_PROGRESS, NOTHING_ASKED, PROGRESS_ENV
from collect.sources import Hardware
from collect.usage import options_problem
from runformat import read_json
from sizing.cli import main as sizing_main

PY = sys.executable


def _no_nvml() -> Any:
    raise ImportError("No module named 'pynvml'")


CPU_ONLY = Hardware(load_nvml=_no_nvml, environ={})


def _job(tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], script: str,
         hardware: Hardware = CPU_ONLY) -> tuple[int, Path, str]:  # fmt: skip
    """Run `script` as a job; (exit code, its run directory, what the collector printed)."""
    data = tmp_path / "data"
    argv = ["8s", "--interval", "0.1s", "--data-dir", str(data), *options, "--", PY, "-c", script]
    code = jobtimed.main(argv, hardware=hardware)
    out = capsys.readouterr()
    runs = sorted((data / "runs").iterdir()) if (data / "runs").exists() else []
    return code, runs[-1] if runs else data, out.out + out.err


def _report(run_dir: Path, tmp_path: Path) -> str:
    out = tmp_path / "report.md"
    assert sizing_main(["--data-dir", str(run_dir.parents[1]), "--out", str(out), run_dir.name]) == 0
    return out.read_text()


def _rows(run_dir: Path) -> list[list[str]]:
    return [line.split(",") for line in (run_dir / "training.csv").read_text().splitlines()[1:]]


def test_a_regex_that_never_matches_records_the_run_and_the_report_asks_about_the_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "import time\nfor i in range(3):\n    print(f'iteration {i} done', flush=True); time.sleep(0.1)"
    code, run, printed = _job(tmp_path, capsys, ["--progress-regex", r"step (?P<step>\d+)"], script)
    assert code == 0
    record, training = read_json(run / "run.json"), read_json(run / "training.json")
    assert record["end_reason"] == "completed" and record["samples"] >= 3
    assert record["job"]["progress_regex"] == [r"step (?P<step>\d+)"]
    assert training["status"] == "completed" and training["steps"] == 0
    assert training["progress"]["note"] == NO_PROGRESS
    assert training["progress"]["last_lines"] == ["iteration 0 done", "iteration 1 done", "iteration 2 done"]
    assert not (run / "training.csv").exists()
    assert f"progress: {NO_PROGRESS}" in printed and "    iteration 2 done" in printed
    report = _report(run, tmp_path)
    assert f"{run.name}: {NO_PROGRESS} (--progress-regex" in report
    assert "the command's last lines: iteration 0 done ⏎ iteration 1 done ⏎ iteration 2 done" in report


def test_a_job_that_exits_at_once_is_a_failed_run_with_its_last_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, run, printed = _job(tmp_path, capsys, [], "import sys; sys.exit('bad config: no data')")
    assert code == 1
    record, training = read_json(run / "run.json"), read_json(run / "training.json")
    assert (record["end_reason"], record["exit_code"]) == ("failed", 1) and record["samples"] >= 1
    assert (training["status"], training["error"]) == ("failed", "exit code 1")
    assert training["progress"]["note"] == NOTHING_ASKED
    assert training["progress"]["last_lines"] == ["bad config: no data"]
    assert (run / "phases.csv").read_text().splitlines()[1].endswith(",failed")
    assert "    bad config: no data" in printed


def test_progress_redrawn_with_carriage_returns_counts_every_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        "import sys, time\n"
        "for i in range(1, 31):\n"
        "    sys.stdout.write(f'\\rtraining step {i}/30 loss={1 / i:.3f}'); sys.stdout.flush()\n"
        "    time.sleep(0.01)\n"
        "print()"
    )
    regex = r"step (?P<step>\d+)/\d+ loss=(?P<loss>\S+)"
    code, run, _ = _job(tmp_path, capsys, ["--progress-regex", regex, "--batch", "8"], script)
    assert code == 0
    rows = _rows(run)
    assert [int(r[2]) for r in rows] == list(range(1, 31))
    assert rows[-1][4] == "0.033" and all(r[6] for r in rows)  # loss, examples/s from the declared batch
    training = read_json(run / "training.json")
    assert (
        training["batch_size"] == 8
        and training["global_step"] == 30
        and training["progress"]["from"] == "output"
    )


def test_a_malformed_protocol_line_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        f"import json, os\nout = open(os.environ['{PROGRESS_ENV}'], 'a')\n"
        "out.write(json.dumps({'batch_size': 4, 'framework': 'numpy'}) + '\\n')\n"
        "for step in (1, 2):\n    out.write(json.dumps({'step': step, 'examples': 4 * step}) + '\\n')\n"
        'out.write(\'{"step": 3, "loss": "low"}\\nnot json at all\\n\')\n'
        "out.write(json.dumps({'step': 4, 'examples': 16, 'loss': 0.25}))  # no newline at the end\n"
    )
    code, run, printed = _job(tmp_path, capsys, [], script)
    assert code == 0
    assert [int(r[2]) for r in _rows(run)] == [1, 2, 4]
    training = read_json(run / "training.json")
    assert (training["framework"], training["batch_size"]) == ("numpy", 4)
    assert training["progress"]["protocol_malformed"] == 2
    assert training["progress"]["protocol_problems"] == {"loss is not a number": 1, "not JSON": 1}
    assert "protocol: 2 malformed lines skipped (loss is not a number: 1, not JSON: 1)" in printed
    assert f"{run.name}: 2 malformed progress protocol lines skipped" in _report(run, tmp_path)


def test_a_job_that_forks_workers_is_stopped_whole_at_its_budget_and_their_progress_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pids = tmp_path / "pids"
    worker = (
        "import os, sys, time\nfor i in range(1, 1000):\n    print(f'step {i}', flush=True); time.sleep(0.05)"
    )
    script = (
        "import subprocess, sys, time\n"
        f"workers = [subprocess.Popen([sys.executable, '-c', {worker!r}]) for _ in range(2)]\n"
        f"open({str(pids)!r}, 'w').write(' '.join(str(w.pid) for w in workers))\n"
        "time.sleep(60)"
    )
    data = tmp_path / "data"
    argv = ["2s", "--interval", "0.1s", "--data-dir", str(data), "--progress-regex", r"step (?P<step>\d+)",
            "--", PY, "-c", script]  # fmt: skip
    started = time.monotonic()
    assert jobtimed.main(argv, hardware=CPU_ONLY) == 124
    assert time.monotonic() - started < 15  # SIGINT stopped all three, no grace period waited out
    run = next((data / "runs").iterdir())
    assert read_json(run / "run.json")["end_reason"] == "deadline"
    assert read_json(run / "training.json")["status"] == "deadline"
    assert len(_rows(run)) >= 5  # two workers' lines: a step counts once, when first seen
    for pid in pids.read_text().split():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert "collect: SIGINT to the command (deadline)" in capsys.readouterr().err


def test_gigabytes_of_output_are_logged_whole_while_the_collector_holds_only_a_tail(tmp_path: Path) -> None:
    """A 128 MiB line without a newline and 30 MB of chatter: command.log gets every byte, the step after it
    still counts, and the collector's peak memory stays far below the output's size (about 30 MB here)."""
    job = (
        "import sys\nout = sys.stdout.buffer\nout.write(b'step 1\\n')\n"
        "for _ in range(128):\n    out.write(b'x' * (1 << 20))\n"
        "out.write(b'\\n' + b'a chatty log line, no progress in it\\n' * 800_000 + b'step 7\\n')"
    )
    collector = (  # VmHWM, not ru_maxrss: that one keeps the forking parent's size from before exec
        "import sys\nfrom collect.__main__ import main\ncode = main(sys.argv[1:])\n"
        "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0].split()[1]\n"
        "print('PEAK_KB', peak, file=sys.stderr)\nsys.exit(code)"
    )
    data = tmp_path / "data"
    result = subprocess.run(
        [PY, "-c", collector, "timed", "60s", "--interval", "0.2s", "--data-dir", str(data),
         "--progress-regex", r"step (?P<step>\d+)", "--", PY, "-c", job],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    peak_kb = int(result.stderr.split("PEAK_KB")[1].split()[0])
    run = next((data / "runs").iterdir())
    size = (run / "command.log").stat().st_size
    assert size == 7 + (128 << 20) + 1 + 37 * 800_000 + 7
    assert peak_kb * 1024 < 96 << 20, f"the collector peaked at {peak_kb} kB"
    assert [r[2] for r in _rows(run)] == ["1", "7"]
    progress = read_json(run / "training.json")["progress"]
    assert (progress["output_bytes"], progress["cut_lines"]) == (size, 1)
    assert "output: 1 lines longer than 64 KiB were cut for matching" in result.stdout


def test_the_job_records_the_gpu_nvml_saw_it_on_and_hides_none_on_the_gpu_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_state, "STATE_PERIOD_S", 0.1)
    pid_file = tmp_path / "pid"

    class Live(list):  # the board's process list: the job's process once it has started
        def __iter__(self) -> Any:
            started = pid_file.exists() and pid_file.read_text()
            return iter([*super().__iter__(), *([FakeProcess(int(started))] if started else [])])

    gpus = [FakeGpu(uuid="GPU-0"), FakeGpu(name="NVIDIA A100-SXM4-40GB", uuid="GPU-1", processes=Live())]
    hardware = Hardware(load_nvml=lambda: FakeNvml(gpus), environ={})
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('hidden:', os.environ.get('CUDA_VISIBLE_DEVICES') == ''); time.sleep(1)"
    )
    code, run, printed = _job(tmp_path, capsys, ["--device", "gpu"], script, hardware)
    assert code == 0
    training = read_json(run / "training.json")
    assert training["gpu_uuids"] == ["GPU-1"] and training["device_used"] == "NVIDIA A100-SXM4-40GB"
    assert training["gpus_used_from"] == "NVML per-process list"
    assert [p["index"] for p in read_json(run / "run.json")["gpu_state"]["command_processes"]] == [1]
    assert training["progress"]["last_lines"] == ["hidden: False"]  # a GPU job sees the GPUs
    assert "device: NVIDIA A100-SXM4-40GB (NVML per-process list)" in printed


def test_on_the_cpu_the_job_sees_no_gpu_and_the_callbacks_are_on_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        "import os, runformat.callbacks as c\n"
        "env = os.environ\n"
        "print(repr(env['CUDA_VISIBLE_DEVICES']), os.path.basename(env['WORKBENCH_PROGRESS']))\n"
        "c.ProgressFile().step(1, examples=2, loss=0.5)"
    )
    code, run, _ = _job(tmp_path, capsys, [], script)
    training = read_json(run / "training.json")
    assert code == 0 and training["progress"]["rows"] == 1
    assert (training["device_used"], training["gpus_used_from"]) == (
        "CPU",
        "the job ran with CUDA_VISIBLE_DEVICES=''",
    )
    assert "'' progress.jsonl" in (run / "command.log").read_text()


def test_gpu_problems_are_one_line_and_exit_1_before_anything_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (Hardware(load_nvml=_no_nvml, environ={}), "no GPU: NVML cannot start (No module named 'pynvml')"),
        (Hardware(load_nvml=lambda: FakeNvml([]), environ={}), "no GPU: NVML sees none"),
        (Hardware(load_nvml=lambda: FakeNvml([FakeGpu()]), environ={"CUDA_VISIBLE_DEVICES": ""}),
         "no GPU: NVML sees none (CUDA_VISIBLE_DEVICES='' hides 1)"),
        (Hardware(load_nvml=lambda: FakeNvml([FakeGpu()], init_error=12), environ={}),
         "no GPU: NVML cannot start (NVML Shared Library Not Found)"),
    ]  # fmt: skip
    for hardware, reason in cases:
        assert jobtimed.gpu_problem(hardware) == reason
    assert jobtimed.gpu_problem(Hardware(load_nvml=lambda: FakeNvml([FakeGpu()]), environ={})) is None
    code, _, printed = _job(tmp_path, capsys, ["--device", "gpu"], "print(1)", cases[1][0])
    assert code == 1 and not (tmp_path / "data" / "runs").exists()
    assert printed == "python -m collect timed: error: no GPU: NVML sees none\n"


@pytest.mark.parametrize(
    ("options", "command", "message"),
    [
        ([], [], "missing command after --"),
        (["--progress-regex", "(?P<step>"], [PY], "--progress-regex '(?P<step>': not a regular expression"),
        (["--batch", "0"], [PY], "--batch 0: expected a whole number ≥ 1"),
        (["--precision", "Float 32"], [PY], "--precision 'Float 32': expected a dtype name"),
        (["--precision", "_bf16"], [PY], "--precision '_bf16': expected a dtype name"),
        (["--flops-per-example", "0"], [PY], "--flops-per-example 0: expected a number of FLOPs > 0"),
        (["--flops-per-example", "nan"], [PY], "--flops-per-example nan: expected a number of FLOPs > 0"),
        (
            ["--flops-per-example", "26.6"],
            [PY],
            "--flops-per-example 26.6: fewer FLOPs than any network's "
            "training example (100000): give FLOPs, not GFLOPs (e.g. 7.8e9)",
        ),  # 26.6 GFLOPs meant
        ([], ["no-such-program-xyz"], "no-such-program-xyz: command not found"),
        (["--preset", "small"], [PY], "unrecognized arguments: --preset small"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], command: list[str], message: str
) -> None:
    argv = ["5s", "--data-dir", str(tmp_path), *options, "--", *command]
    try:
        code = jobtimed.main(argv, hardware=CPU_ONLY)
    except SystemExit as exc:  # argparse's own refusal
        code = int(str(exc.code))
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed", "32-true", "FP16", "mixed_float16"])
def test_precision_takes_the_spellings_frameworks_use(precision: str) -> None:
    args = jobtimed.build_parser().parse_args(["5s", "--precision", precision])
    assert jobtimed.options_problem(args, [PY]) is None


def test_collect_run_with_a_progress_option_writes_the_step_log_and_without_one_does_not(
    tmp_path: Path,
) -> None:
    script = "for i in range(1, 4): print(f'step {i}', flush=True)"
    base = [PY, "-m", "collect", "run", "--interval", "0.1s", "--data-dir", str(tmp_path), "--no-echo"]
    with_job = subprocess.run([*base, "--progress-regex", r"step (?P<step>\d+)", "--", PY, "-c", script],
                              cwd=REPO, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    plain = subprocess.run([*base, "--", PY, "-c", script], cwd=REPO, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    assert with_job.returncode == 0 and plain.returncode == 0, with_job.stderr + plain.stderr
    first, second = sorted((tmp_path / "runs").iterdir())
    assert [r[2] for r in _rows(first)] == ["1", "2", "3"] and "progress: step 3" in with_job.stderr
    assert read_json(first / "training.json")["device_used"] == "CPU"
    assert not (second / "training.json").exists() and "job" not in read_json(second / "run.json")


def test_a_job_option_without_a_job_says_where_the_command_goes(tmp_path: Path) -> None:
    """`collect_cpu.sh 10m --progress-format keras` (the job's command forgotten) was argparse's
    "unrecognized arguments"; it now says to give the command after --, and starts nothing."""
    data = tmp_path / "data"
    script = str(REPO / "scripts" / "collect_cpu.sh")
    for command in (
        [script, "10m", "--progress-format", "keras", "--data-dir", str(data)],
        [sys.executable, "-m", "collect", "timed", "10m", "--flops-per-example=3e9", "--data-dir", str(data)],
    ):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "goes with your own training job: give its command after --" in done.stderr
    assert not data.exists()


def test_the_scripts_read_none_of_the_jobs_own_arguments(tmp_path: Path) -> None:
    extras = subprocess.run(
        ["bash", "-c", 'source scripts/lib.sh; framework_extras "train,gpu,infer,dashboard" "$@"', "x",
         "30m", "--framework", "torch", "--", "python", "t.py", "--framework", "tf"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert extras.stdout == "sizing,dashboard\n"
    assert (
        options_problem(["--device", "cpu", "--", "python", "t.py", "--preset", "huge", "--procs", "x"])
        is None
    )
    assert options_problem(["--device", "cpu", "--preset", "huge", "--", "python"]) is not None
    usage = subprocess.run([str(REPO / "scripts" / "collect_cpu.sh"), "--help"], capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert (
        "-- COMMAND [ARGS...]" in usage.stdout and "--progress-format keras|lightning|hf|tqdm" in usage.stdout
    )
