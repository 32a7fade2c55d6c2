"""`python -m training train`: checks, the training itself (one device, N ranks or N mirrored GPUs),
then export, evaluation, detections and inference as phases of their own.

With `--procs N` / `--gpus N` and `--framework torch` this process launches the N ranks under torchrun
(training.distributed), waits for them, and then runs the phases after training once, itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runformat.multinode import Nodes, nodes_from_args, nodes_problem
from training.cli_args import ALL_GPUS
from training.errors import EXIT_FAILED, EXIT_OK


def usage_problem(args: argparse.Namespace) -> str | None:
    """The first thing wrong with the train options that can be told before anything starts."""
    from training.dataset import is_dataset
    from training.distributed import under_launcher, world_from_environment
    from training.settings import settings_problem

    if (problem := settings_problem(args)) is not None:
        return problem
    if args.init_checkpoint and not _is_local_checkpoint(args.init_checkpoint):
        return (
            f"--init-checkpoint {args.init_checkpoint}: no checkpoint there (a local directory "
            "or a checkpoint prefix with its .index file)"
        )
    if args.dataset is not None and not is_dataset(args.dataset):
        return f"--dataset {args.dataset}: no train*.tfrecord there"
    if args.init_checkpoint and args.framework == "torch":
        return "--init-checkpoint is for --framework tf (the torch path trains from scratch)"
    if args.procs is not None and args.gpus is not None:
        return "--procs (CPU processes) and --gpus (GPUs) exclude each other"
    if args.procs is not None:
        if args.procs == ALL_GPUS:
            return "--procs all: give a number of processes (all is for --gpus)"
        if args.device != "cpu":
            return "--procs is for --device cpu; on GPUs use --gpus N"
        if args.framework != "torch" and args.procs > 1:
            return (
                "--procs N > 1 is for --framework torch: Model Garden's mirrored strategy spreads one "
                "process over GPUs, not over CPU processes (see README, Many GPUs)"
            )
    if args.gpus is not None:
        if args.device != "gpu":
            return "--gpus needs --device gpu (CPU processes: --procs N)"
        visible = visible_gpu_count()
        if args.gpus != ALL_GPUS and visible is not None and args.gpus > visible:
            return f"--gpus {args.gpus}: this node has {visible} GPU(s) visible"
        if args.gpus == ALL_GPUS and not visible:
            return "--gpus all: no GPU visible through NVML"
    if (problem := nodes_problem(args)) is not None:
        return problem
    ranks = replica_count(args) * args.nnodes
    if under_launcher() and world_from_environment().size != ranks:
        return f"torchrun started {world_from_environment().size} ranks for {ranks} devices"
    return None


def visible_gpu_count() -> int | None:
    """GPUs visible to CUDA (NVML's list after CUDA_VISIBLE_DEVICES), None when NVML cannot tell."""
    from training.device import cuda_order_uuids, nvml_gpus

    gpus = nvml_gpus()
    if not gpus:
        return None
    return len(cuda_order_uuids(gpus, os.environ.get("CUDA_VISIBLE_DEVICES")))


def replica_count(args: argparse.Namespace) -> int:
    count = args.gpus if args.gpus is not None else args.procs
    if count == ALL_GPUS:
        return visible_gpu_count() or 1
    return int(count or 1)


def run_train(args: argparse.Namespace, process_start: float, run_dir: Path) -> int:
    from training.distributed import under_launcher

    replicas = replica_count(args)
    nodes = nodes_from_args(args)
    if args.framework == "torch" and (replicas > 1 or nodes.multinode) and not under_launcher():
        return _launch_ranks(args, run_dir, replicas, nodes)
    return _train_here(args, process_start, run_dir, replicas)


def _train_here(args: argparse.Namespace, process_start: float, run_dir: Path, replicas: int) -> int:
    from training.distributed import (
        end_process_group,
        start_process_group,
        under_launcher,
        world_from_environment,
    )
    from training.experiment import DEFAULT_PRECISION
    from training.trainer import SAME_STOP_WINDOW_S, StopRequest, TrainOptions, train

    world = world_from_environment()
    stop = StopRequest(same_request_within_s=5.0 if world.distributed else SAME_STOP_WINDOW_S)
    stop.install()
    device = prepare(args.device, args.framework, replicas)
    dataset = args.dataset or _default_dataset(args.data_dir)
    precision = args.precision or DEFAULT_PRECISION
    options = TrainOptions(
        framework=args.framework,
        run_dir=run_dir,
        dataset=dataset,
        device=args.device,
        duration_s=args.duration,
        preset=args.preset,
        batch_size=args.batch,
        precision=precision,
        init_checkpoint=args.init_checkpoint,
        max_steps=args.max_steps,
        checkpoint_every_s=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        seed=args.seed,
        replicas=world.size if world.distributed else replicas,
        nodes=_node_fields(nodes_from_args(args)),
        tf32=args.tf32,
        channels_last=args.channels_last,
        compile=args.compile,
        threads=args.threads,
        loader_workers=args.loader_workers,
        pin_memory=args.pin_memory,
        checkpoint=not args.no_checkpoint,
    )
    if options.precision == "float16" and args.device == "cpu" and world.is_main:
        print(
            "note: float16 is emulated on CPUs and many times slower; bfloat16 or float32 suit a CPU",
            flush=True,
        )
    world = start_process_group(world, args.device) if args.framework == "torch" else world
    try:
        result = train(options, device, stop, process_start, world)
    finally:
        end_process_group(world)
    if result.status == "interrupted":  # under torchrun 0: a stop is no rank failure; our launcher says 130
        return EXIT_OK if under_launcher() else 128 + (stop.signum or signal.SIGINT)
    if args.no_export or not world.is_main:
        return EXIT_OK
    return _after_training(run_dir, args, stop, args.device)


def _node_fields(nodes: Nodes) -> dict | None:
    """training.json's account of the nodes (world_size is the ranks', recorded already)."""
    if not nodes.multinode:
        return None
    record = nodes.record(None)
    record.pop("world_size")
    return record


def _launch_ranks(args: argparse.Namespace, run_dir: Path, replicas: int, nodes: Nodes) -> int:
    """torchrun with `replicas` ranks training into run_dir; then this process's phases after training.
    On a node other than node 0 nothing is written here by the ranks (global rank 0, on node 0, holds
    the step log and checkpoints), and there is nothing to export: the phases after training are node 0's."""
    from runformat import RUN_DIR_ENV
    from training.distributed import launch_command
    from training.trainer import StopRequest

    dataset = args.dataset or _default_dataset(args.data_dir)  # once, before the ranks look for it
    run_dir.mkdir(parents=True, exist_ok=True)
    rank_args = [*args.argv, "--no-export", "--run-dir", str(run_dir), "--dataset", str(dataset)]
    if nodes.multinode:
        rank_args += ["--rdzv-id", nodes.rdzv_id]
    command = launch_command(replicas, rank_args, nodes=nodes)
    env = {**os.environ, RUN_DIR_ENV: str(run_dir)}
    if args.device == "cpu":  # the cores shared out (torchrun's own default would be 1 thread each)
        env.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // replicas)))
    where = f" on node {nodes.rank} of {nodes.count} ({nodes.endpoint})" if nodes.multinode else ""
    print(f"launching {replicas} ranks{where}: {' '.join(command[1:7])} ...", flush=True)
    # torchrun runs in a session of its own, so a Ctrl-C or the collector's stop reaches us alone; we
    # pass it on to the ranks only (torchrun, stopped itself, would tear them down mid-checkpoint).
    # A second signal is passed on too: the ranks then stop without their final checkpoint.
    stop = StopRequest()
    launcher: subprocess.Popen | None = None

    def relay(signum: int, _frame) -> None:
        stop.signum = stop.signum or signum
        for pid in _children(launcher.pid) if launcher is not None else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM if signum == signal.SIGHUP else signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, relay)
    launcher = subprocess.Popen(command, env=env, start_new_session=True, preexec_fn=_end_with_parent)
    if stop.signum is not None:  # it came while torchrun was starting
        relay(stop.signum, None)
    returncode = launcher.wait()
    problem = _ranks_problem(run_dir, returncode) if nodes.rank == 0 else _node_problem(nodes, returncode)
    if stop.signum is not None:
        return 128 + stop.signum
    if problem:
        print(f"training: error: {problem}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if nodes.rank != 0:
        print(f"node {nodes.rank} of {nodes.count}: training.csv, training.json and the checkpoints are in "
              f"node 0's run directory ({nodes.step_log_elsewhere()})", flush=True)  # fmt: skip
    if args.no_export or nodes.rank != 0:
        return EXIT_OK
    return _after_training(run_dir, args, stop, args.device)


def _end_with_parent() -> None:
    """In torchrun's child before exec: SIGTERM when we die (kill -9 included), so no rank outlives us."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == parent:
                    found.append(int(entry))
    return found


def _ranks_problem(run_dir: Path, returncode: int) -> str | None:
    """Why the ranks failed, one line; a training.json left `running` (rank 0 died) is marked failed."""
    from runformat import TRAINING_JSON, read_json
    from training.runlog import write_training_json

    try:
        state = read_json(run_dir / TRAINING_JSON)
    except ValueError:
        state = {}
    if returncode == 0 and state.get("status") not in (None, "running", "failed"):
        return None
    how = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit code {returncode}"
    if state.get("status") == "running":
        state.update(
            status="failed",
            error=f"a rank ended without finishing (torchrun {how}; its lines above say which)",
            end_unix=time.time(),
        )
        state.pop("format_version", None)
        with contextlib.suppress(OSError):
            write_training_json(run_dir, state)
    reason = state.get("error") or "a rank failed before training started (see its lines above)"
    return f"data-parallel training failed (torchrun {how}): {reason}"


def _node_problem(nodes: Nodes, returncode: int) -> str | None:
    """Why this node's ranks failed (not node 0: its run directory holds the step log), one line."""
    if returncode == 0:
        return None
    how = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit code {returncode}"
    return (
        f"data-parallel training failed on node {nodes.rank} of {nodes.count} (torchrun {how}; its lines "
        f"above say why); node 0's run of rendezvous {nodes.rdzv_id} holds the step log"
    )


def _is_local_checkpoint(path: str) -> bool:
    return Path(path).is_dir() or Path(f"{path}.index").is_file()


def _default_dataset(data_dir: Path) -> Path:
    from training.dataset import generate_dataset, why_draw

    path = data_dir / "datasets" / "waldo"
    why = why_draw(path)
    if why is not None:
        print(f"{why}: generating the default one (256 train + 32 held-out images)", flush=True)
        generate_dataset(path)
    return path


def _after_training(run_dir: Path, args: argparse.Namespace, stop, device: str) -> int:
    from training.inference.command import infer, phase_options
    from training.postrun import draw_detections, evaluate_model, export_model
    from training.runlog import Phase

    score_threshold = args.score_threshold
    phases: list[tuple[str, Callable[[], dict]]] = [
        ("export", lambda: export_model(run_dir)),
        ("evaluate", lambda: evaluate_model(run_dir, score_threshold=score_threshold, device=device)),
        ("detect", lambda: draw_detections(run_dir, score_threshold=score_threshold, device=device)),
    ]
    if (options := phase_options(args, run_dir)) is not None:
        phases.append(("infer", lambda: infer(options, lambda: stop.signum is not None)))
    for name, action in phases:
        if stop.signum is not None:
            print(f"skipping {name}: interrupted", flush=True)
            return 128 + stop.signum
        with Phase(run_dir, name) as phase:
            try:
                report(name, action())
            except Exception as exc:
                phase.ok = False
                why = _phase_disk_full(run_dir, name, exc) or " ".join(str(exc).split())
                print(f"training: error: {name} failed: {why}", file=sys.stderr, flush=True)
                return EXIT_FAILED
    return 128 + stop.signum if stop.signum is not None else EXIT_OK


def _phase_disk_full(run_dir: Path, phase: str, exc: BaseException) -> str | None:
    """A full disk behind a phase after training: training.json's `failure` says so (the phase named; the
    training's own status stays), so run.json ends failed with it too; the one line, else None."""
    from runformat import TRAINING_JSON, read_json, write_json_atomic
    from runformat.diskfull import disk_full_in

    full = disk_full_in(exc)
    if full is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        state = read_json(run_dir / TRAINING_JSON)
        state["failure"] = {**full.record("training", run_dir), "phase": phase}
        write_json_atomic(run_dir / TRAINING_JSON, state)
    return full.line()


def report(name: str, result: dict) -> None:
    if name == "export":
        kind = {"torchscript": "TorchScript", "state_dict": "state dict"}.get(
            result.get("format"), "SavedModel"
        )
        print(f"export: {kind} of step {result['global_step']} in model/", flush=True)
    elif name == "evaluate":
        print(
            f"evaluate: mAP@0.5 {result['map_50']:.3f}  recall {result['recall_50']:.3f}  "
            f"precision {result['precision_50']:.3f} on {result['num_images']} held-out images",
            flush=True,
        )
    elif name == "detect":
        print(f"detect: {len(result['images'])} images with boxes in detections/", flush=True)
    else:
        from training.inference.measure import measured_runtimes

        print(f"infer: measured {', '.join(measured_runtimes(result))} into inference.csv, inference.json")


def prepare(device: str, framework: str = "tf", count: int = 1):
    from training.device import prepare_device, prepare_torch_device

    if framework == "torch":
        return prepare_torch_device(device, count)
    return prepare_device(device, count)
