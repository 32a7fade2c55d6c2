"""`collect timed --tune`: a real sweep of torch trials on this CPU, failures injected at the training
process's boundary, and the one-line refusals of what cannot be tuned."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collect.timed import build_parser, matching_command, training_command
from runformat import RUN_JSON, TRAINING_JSON
from runformat.tuning import FAILED, FINAL, OK, TRIAL, Setting, tuning_of

REPO = Path(__file__).resolve().parents[2]

# Loaded by every Python process of the run through PYTHONPATH (sitecustomize): once the training imports
# its torch backend, a step at batch >= 4 runs out of memory and torch.compile fails, as a GPU's allocator
# and a broken compiler would. The product code is untouched.
FAULTS = """
import importlib.abc, importlib.util, sys

class _Faults(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "training.torch_backend":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _inject(module)

        spec.loader.exec_module = exec_module
        return spec

def _inject(module):
    import torch

    step = module.TorchSession.step

    def step_or_oom(self):
        if self.options.batch_size >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return step(self)

    def broken_compile(*args, **kwargs):
        raise RuntimeError("backend='inductor' raised: CompilationError (injected)")

    module.TorchSession.step = step_or_oom
    torch.compile = broken_compile

sys.meta_path.insert(0, _Faults())
"""


def _runs(data_dir: Path) -> list[dict]:
    found = []
    for run_json in sorted((data_dir / "runs").glob(f"*/{RUN_JSON}")):
        found.append({**json.loads(run_json.read_text()), "_dir": run_json.parent})
    return found


def test_a_real_sweep_records_failed_trials_and_goes_on_to_the_final_run(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "sitecustomize.py").write_text(FAULTS)
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": f"{faults}:{REPO}"}
    result = subprocess.run(  # 3 m of trials: room for the compiled trial's allowance (it fails at once)
        [sys.executable, "-m", "collect", "timed", "6m", "--tune", "--tune-budget", "3m",
         "--tune-space", "batch,compile", "--framework", "torch", "--data-dir", str(data_dir),
         "--dataset", str(tiny_dataset), "--no-export", "--max-steps", "3"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = _runs(data_dir)
    tags = [tuning_of(run) for run in runs]
    assert all(tag is not None for tag in tags) and len({tag.id for tag in tags if tag}) == 1
    trials = [tag for tag in tags if tag and tag.role == TRIAL]
    final = next(tag for tag in tags if tag and tag.role == FINAL)
    assert [t.setting for t in trials] == [
        Setting(batch=2),
        Setting(batch=4),
        Setting(batch=2, compile=True),
    ]
    outcomes = [(o.outcome, o.reason) for o in final.trials]
    assert outcomes[0][0] == OK, final.trials[0]
    assert outcomes[1:] == [(FAILED, "out of memory"), (FAILED, "compile failed")]
    assert final.setting == Setting(batch=2)
    assert final.chosen_why is not None and final.chosen_why.startswith("your setting")
    reference = next(run for run in runs if (tuning_of(run) or final).position == 0)
    training = json.loads((reference["_dir"] / TRAINING_JSON).read_text())
    assert training["settings"]["batch"] == 2 and training["last_checkpoint"] is None  # a trial keeps none
    assert final.trials[0].steady_s is not None and final.trials[0].steady_s >= 20.0
    said = re.sub(r"Tuning trial (\d) \(\S+-vm\)", r"Tuning trial \1", result.stdout)  # its run id
    assert "Tuning trial 1: batch 4, float32: failed (out of memory)" in said
    assert "Tuning trial 2: batch 2, float32, compile: failed (compile failed)" in said


def _args(*argv: str):
    return build_parser().parse_args(["5m", *argv])


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--framework", "torch", "--procs", "1,2"], "--tune tunes one device count"),
        (["--tune-space", "fast"], "--tune-space: unknown fast"),
        (["--tune-space", "channels-last"], "torch only"),
        (["--tune-budget", "3m"], "more than 50% of the budget 5m"),
        (["--framework", "torch", "--tune-budget", "89s"], "--tune needs at least 1m30s for two trials"),
        (["--tune-budget", "149s"], "--tune needs at least 2m30s for two trials (--tune-budget 2m29s"),
    ],
)
def test_what_cannot_be_tuned_is_refused_in_one_line(tmp_path: Path, argv: list[str], line: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "collect", "timed", "5m", "--tune", *argv, "--data-dir", str(tmp_path / "d")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and line in result.stderr, result.stderr
    assert not (tmp_path / "d" / "runs").exists()


def test_a_tuned_run_trains_at_its_setting_not_at_the_commands_batch() -> None:
    args = _args("--batch", "2", "--precision", "mixed", "--framework", "torch", "--tune")
    args.no_checkpoint = True
    setting = Setting(batch=8, precision="bfloat16", channels_last=True, loader_workers=4, pin_memory=True)
    command = training_command(args, None, setting)
    assert command.count("--batch") == 1 and command[command.index("--batch") + 1] == "8"
    assert command.count("--precision") == 1 and command[command.index("--precision") + 1] == "bfloat16"
    assert {"--channels-last", "--pin-memory", "--no-checkpoint"} <= set(command)
    assert command[command.index("--loader-workers") + 1] == "4"
    plain = training_command(_args("--batch", "2"))
    assert "--no-checkpoint" not in plain and plain[plain.index("--batch") + 1] == "2"


def test_the_matching_command_tunes_the_other_device_too() -> None:
    assert "--tune --tune-budget 1m" in matching_command(_args("--tune", "--tune-budget", "1m"))
    assert "--tune" not in matching_command(_args())


def test_tuning_at_one_device_count_passes_it_to_every_trial_and_tf_searches_its_own_settings() -> None:
    from collect.tune_sweep import tuning_plan

    args = _args("--framework", "torch", "--procs", "2", "--tune", "--tune-budget", "2m")
    command = training_command(args, 2, Setting(batch=4))
    assert command[command.index("--procs") + 1] == "2" and command[command.index("--batch") + 1] == "4"
    plan, problem = tuning_plan(args, 300.0, [2])
    assert problem is None and plan is not None and plan.space[0] == "threads"
    tf_cpu, _ = tuning_plan(_args("--tune"), 900.0, [])
    tf_gpu, _ = tuning_plan(_args("--tune", "--device", "gpu", "--precision", "mixed"), 900.0, [])
    assert tf_cpu is not None and tf_cpu.space == ("threads", "precision", "batch")
    assert tf_gpu is not None and tf_gpu.space == ("batch", "precision", "compile")
    assert tf_gpu.user == Setting(batch=2, precision="float16")  # --precision mixed on a GPU
    assert tf_cpu.dataset_command[-5:] == ("training", "dataset", "--data-dir", "data", "--if-missing")
    given, _ = tuning_plan(_args("--tune", "--dataset", "/srv/coco-waldo"), 900.0, [])
    assert given is not None and given.dataset_command == ()  # the user's own: nothing to generate


def test_a_labs_own_job_is_not_tuned_and_says_why_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "collect", "timed", "5m", "--tune", "--data-dir", str(tmp_path / "d"),
         "--", sys.executable, "-c", "pass"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "your own job's batch, precision and compiler are its own options" in result.stderr


def test_the_scripts_pass_tune_through() -> None:
    """`./scripts/collect_cpu.sh DURATION --tune ...` as docs/tuning.md shows it, up to the sweep's own
    check of its budget; the GPU script's usage names the options."""
    result = subprocess.run(
        [str(REPO / "scripts" / "collect_cpu.sh"), "5m", "--tune", "--tune-budget", "3m",
         "--framework", "torch"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "more than 50% of the budget 5m" in result.stderr, result.stderr
    script = str(REPO / "scripts" / "collect_gpu.sh")
    usage = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert all(option in usage.stdout for option in ("--tune ", "--tune-budget", "--tune-space"))


@pytest.mark.parametrize("option", [["--tune-budget", "2m"], ["--tune-space", "batch"]])
def test_a_tuning_option_without_tune_is_refused_in_one_line(tmp_path: Path, option: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "collect", "timed", "10m", *option, "--data-dir", str(tmp_path / "d")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--tune-budget and --tune-space go with --tune" in result.stderr
