"""The setting a training runs at (issue 34's tuning knobs): its options and their one-line refusals, the
Setting recorded in training.json, `--no-checkpoint`, the loader workers' order, and the one-line errors of
a compiler failure and of running out of memory."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainfixtures import REPO, cli_in, run_training_cli, training_env

from runformat import read_json
from runformat.tuning import Setting, setting_of
from training.failures import CompileFailed, failure_line


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("training: error: ")
    return lines[0]


def _train_args(tmp_path: Path, *args: str) -> list[str]:
    return ["train", "--run-dir", str(tmp_path / "run"), *args]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--framework", "tf", "--channels-last"], "--channels-last is for --framework torch"),
        (["--framework", "tf", "--loader-workers", "1"], "--loader-workers is for --framework torch"),
        (["--framework", "tf", "--pin-memory"], "--pin-memory is for --framework torch"),
        (["--framework", "torch", "--tf32"], "--tf32 is for --device gpu"),
        (["--framework", "torch", "--no-tf32"], "--no-tf32 is for --device gpu"),
        (["--framework", "torch", "--pin-memory"], "add --loader-workers N"),
        (
            ["--framework", "torch", "--pin-memory", "--loader-workers", "1"],
            "--pin-memory is for --device gpu",
        ),
        (["--framework", "torch", "--no-checkpoint"], "add --no-export"),
        (["--threads", "0"], "--threads: expected a whole number >= 1"),
        (["--loader-workers", "-1"], "--loader-workers: expected a whole number >= 0"),
    ],
)
def test_setting_options_that_do_not_fit_exit_2_in_one_line(
    args: list[str], says: str, tmp_path: Path, no_tf_env: dict[str, str]
) -> None:
    done = cli_in(no_tf_env, *_train_args(tmp_path, *args))
    assert done.returncode == 2, done.stderr
    assert says in _one_error_line(done.stderr)
    assert not (tmp_path / "run").exists()


def test_the_boundaries_of_the_setting_options_are_accepted() -> None:
    """--threads 1 and --loader-workers 0 are in range; together with the rest they pass the checks."""
    from training.cli import _parser
    from training.settings import settings_problem

    args = _parser().parse_args(
        ["train", "--framework", "torch", "--threads", "1", "--loader-workers", "0", "--channels-last",
         "--compile", "--no-checkpoint", "--no-export"]
    )  # fmt: skip
    assert (args.threads, args.loader_workers, args.channels_last, args.compile) == (1, 0, True, True)
    assert settings_problem(args) is None
    gpu = _parser().parse_args(
        [
            "train",
            "--framework",
            "torch",
            "--device",
            "gpu",
            "--tf32",
            "--loader-workers",
            "1",
            "--pin-memory",
        ]
    )
    assert settings_problem(gpu) is None
    tf = _parser().parse_args(["train", "--framework", "tf", "--compile", "--threads", "2"])
    assert settings_problem(tf) is None and not tf.no_checkpoint


def test_every_setting_the_sweep_asks_for_parses_back_to_itself() -> None:
    """runformat.tuning.Setting.train_args() (the sweep's side) against this parser."""
    from training.cli import _parser

    setting = Setting(8, "bfloat16", tf32=True, channels_last=True, compile=True, threads=3,
                      loader_workers=2, pin_memory=True)  # fmt: skip
    args = _parser().parse_args(["train", "--framework", "torch", *setting.train_args()])
    parsed = Setting(args.batch, args.precision, args.tf32, args.channels_last, args.compile, args.threads,
                     args.loader_workers, args.pin_memory)  # fmt: skip
    assert parsed == setting
    for tf32 in (False, None):
        args = _parser().parse_args(["train", "--framework", "torch", *setting.but(tf32=tf32).train_args()])
        assert args.tf32 is tf32


def test_tf32_is_the_frameworks_default_unless_asked_either_way() -> None:
    """Without --tf32/--no-tf32 torch keeps its own default (cuDNN convolutions on TF32, matmuls float32),
    which a user's own float32 code gets too; --tf32 turns both on, --no-tf32 both off."""
    from types import SimpleNamespace

    import torch

    from training.torch_settings import apply_torch_settings

    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    precision = torch.get_float32_matmul_precision()
    try:
        for tf32, expected in ((True, (True, True)), (False, (False, False)), (None, (False, False))):
            apply_torch_settings(SimpleNamespace(threads=None, tf32=tf32))
            assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == expected
        torch.backends.cudnn.allow_tf32 = True  # torch's default
        apply_torch_settings(SimpleNamespace(threads=None, tf32=None))
        assert torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
        torch.set_float32_matmul_precision(precision)
    assert Setting(2).text() == "batch 2, float32" and Setting(2).record()["tf32"] is None
    assert Setting(2, tf32=False).text() == "batch 2, float32, TF32 off"
    assert Setting(2, tf32=True).text() == "batch 2, float32 + TF32"


def _losses(run_dir: Path) -> list[float]:
    with (run_dir / "training.csv").open(newline="") as handle:
        return [float(row["loss_total"]) for row in csv.DictReader(handle)]


@pytest.mark.slow
def test_loader_workers_train_on_the_same_batches_and_no_checkpoint_writes_none(
    tmp_path: Path, tiny_dataset: Path, no_tf_env: dict[str, str]
) -> None:
    """Two real 3-step torch trainings, the same seed, with and without 2 loader workers: the same losses
    (worker k took the steps k, k+2, ...). A checkpoint would be due after every step: none is written."""
    runs = {}
    for workers in ("2", "0"):
        run_dir = tmp_path / f"workers-{workers}"
        done = cli_in(
            no_tf_env, "train", "--framework", "torch", "--run-dir", str(run_dir), "--dataset",
            str(tiny_dataset), "--channels-last", "--threads", "1", "--loader-workers", workers,
            "--max-steps", "3", "--no-export", "--no-checkpoint", "--checkpoint-every", "10ms",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        runs[workers] = run_dir
    info = read_json(runs["2"] / "training.json")
    assert info["status"] == "completed" and info["steps"] == 3
    assert info["settings"] == Setting(2, "float32", channels_last=True, threads=1, loader_workers=2).record()
    assert setting_of(info["settings"]) is not None and info["torch_threads"] == 1
    assert info["last_checkpoint"] is None and info["checkpoint_interval_s"] is None
    assert not (runs["2"] / "checkpoints").exists() and not (runs["0"] / "checkpoints").exists()
    assert read_json(runs["0"] / "training.json")["settings"]["loader_workers"] == 0
    with_workers, without = _losses(runs["2"]), _losses(runs["0"])
    assert len(with_workers) == 3 and with_workers == pytest.approx(without, rel=1e-5)
    assert len(set(with_workers)) == 3  # three different batches, not one batch three times
    assert not Path(no_tf_env["BLOCKED_IMPORT_LOG"]).exists()


def test_the_loader_hands_back_trainbatches_batches_in_order_from_a_resumed_step(
    tiny_dataset: Path, frameworks_in_process: None
) -> None:
    import torch

    from training.torch_data import TrainBatches
    from training.torch_loader import LoaderBatches

    cpu = torch.device("cpu")
    straight = TrainBatches(tiny_dataset, 2, seed=5, device=cpu, first_step=13)
    loader = LoaderBatches(TrainBatches(tiny_dataset, 2, seed=5, device=cpu, first_step=13), workers=2)
    try:
        for _ in range(5):  # odd: worker 0 takes three, worker 1 two
            (images, targets), (loaded, loaded_targets) = straight.next(), loader.next()
            assert all(torch.equal(a, b) for a, b in zip(images, loaded, strict=True))
            for target, loaded_target in zip(targets, loaded_targets, strict=True):
                assert torch.equal(target["boxes"], loaded_target["boxes"])
                assert torch.equal(target["labels"], loaded_target["labels"])
        assert loader.position == straight.position == (13 + 5) * 2
    finally:
        loader.close()


def _train_in_process(tmp_path: Path, dataset: Path, **settings):
    from training.device import DeviceInfo
    from training.trainer import StopRequest, TrainOptions, train

    options = TrainOptions(run_dir=tmp_path / "run", dataset=dataset, framework="torch", max_steps=1,
                           checkpoint=False, **settings)  # fmt: skip
    device = DeviceInfo(kind="cpu", used="CPU", gpu_names=[], tensorflow_devices=[])
    return train(options, device, StopRequest(), time.time())


def test_a_compiler_that_refuses_fails_the_training_with_compile_failed(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch, frameworks_in_process: None
) -> None:
    """torch.compile itself raising (injected: the compiler is the boundary) is the training's failure."""
    import torch

    def refuse(*_args, **_kwargs):
        raise RuntimeError("injected: no C++ compiler")

    monkeypatch.setattr(torch, "compile", refuse)
    with pytest.raises(CompileFailed):
        _train_in_process(tmp_path, tiny_dataset, compile=True)
    info = read_json(tmp_path / "run" / "training.json")
    assert info["status"] == "failed" and info["settings"]["compile"] is True
    assert (
        info["error"]
        == "compile failed (torch.compile of the backbone): RuntimeError: injected: no C++ compiler"
    )


def test_the_compiled_steps_errors_are_the_compilers_unless_memory_ran_out(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch, frameworks_in_process: None
) -> None:
    """The compiled backbone raising at its first call (where torch.compile really compiles): Dynamo's
    error is a compile failure; running out of memory there is out of memory."""
    import torch
    from torch._dynamo.exc import InternalTorchDynamoError

    raised: list[BaseException] = []

    def compile_to(error: BaseException):
        def compiled(*_args, **_kwargs):
            def call(*_a, **_k):
                raised.append(error)
                raise error

            return call

        return compiled

    monkeypatch.setattr(torch, "compile", compile_to(InternalTorchDynamoError("injected: graph break")))
    with pytest.raises(CompileFailed):
        _train_in_process(tmp_path / "dynamo", tiny_dataset, compile=True)
    error = read_json(tmp_path / "dynamo" / "run" / "training.json")["error"]
    assert (
        error
        == "compile failed (torch.compile of the backbone): InternalTorchDynamoError: injected: graph break"
    )
    monkeypatch.setattr(
        torch, "compile", compile_to(torch.OutOfMemoryError("CUDA out of memory. Tried 2 GiB"))
    )
    with pytest.raises(torch.OutOfMemoryError):
        _train_in_process(tmp_path / "oom", tiny_dataset, compile=True)
    assert read_json(tmp_path / "oom" / "run" / "training.json")["error"] == (
        "out of memory: CUDA out of memory. Tried 2 GiB"
    )
    assert len(raised) == 2  # each from the first step's compiled call


def test_out_of_memory_is_said_in_one_line_whatever_raised_it() -> None:
    assert failure_line(MemoryError()) == "out of memory: MemoryError"
    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: 9 GB")
    assert failure_line(cpu).startswith("out of memory: [enforce fail at alloc_cpu.cpp:117] DefaultCPU")
    try:
        try:
            raise MemoryError("no room")
        except MemoryError as inner:
            raise ValueError("while preparing a batch") from inner
    except ValueError as outer:
        assert failure_line(outer) == "out of memory: no room"
    assert failure_line(ValueError("nan in\n  the loss")) == "ValueError: nan in the loss"
    assert len(failure_line(RuntimeError("x" * 2000))) == 500


@pytest.mark.slow
def test_tensorflow_takes_threads_and_tf32_and_says_out_of_memory(
    tmp_path: Path, tiny_dataset: Path, frameworks_in_process: None
) -> None:
    """One real 1-step TensorFlow training at 1 thread, no checkpoint; TF32 switched both ways in this
    process; TensorFlow's ResourceExhaustedError as out of memory."""
    done = run_training_cli(
        "train", "--framework", "tf", "--run-dir", str(tmp_path / "run"), "--dataset", str(tiny_dataset),
        "--threads", "1", "--max-steps", "1", "--no-export", "--no-checkpoint", "--checkpoint-every", "10ms",
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    info = read_json(tmp_path / "run" / "training.json")
    assert info["status"] == "completed" and info["steps"] == 1
    assert info["settings"] == Setting(2, "float32", threads=1).record() and info["tf_intra_op_threads"] == 1
    assert info["last_checkpoint"] is None and not (tmp_path / "run" / "checkpoints").exists()

    import tensorflow as tf

    from training.settings import apply_tf_settings

    # TensorFlow's own default (0, "the system picks") as the CPUs this process may run on, and the
    # environment's count where it gives one: each in a fresh process, where nothing has set the count
    code = "import tensorflow as tf; from training.settings import tf_intra_op_threads as n; print(n(tf))"
    for given, expected in ((None, len(os.sched_getaffinity(0))), ("3", 3)):
        env = {k: v for k, v in training_env().items() if k != "TF_NUM_INTRAOP_THREADS"}
        env.update({"TF_NUM_INTRAOP_THREADS": given} if given else {})
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0 and done.stdout.split()[-1] == str(expected), done.stderr[-2000:]

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        for wanted in (True, False):
            apply_tf_settings(Setting(2, tf32=wanted))
            assert tf.config.experimental.tensor_float_32_execution_enabled() is wanted
            apply_tf_settings(Setting(2))  # neither asked: left as it is
            assert tf.config.experimental.tensor_float_32_execution_enabled() is wanted
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)
    exhausted = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[64,3]")
    assert failure_line(exhausted) == "out of memory: OOM when allocating tensor with shape[64,3]"
