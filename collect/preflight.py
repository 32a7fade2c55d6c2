"""Before a timed run starts: what it will write into the data directory, against the space free there.

Pure: `estimate(plan)` is the bytes each part of the run writes at its peak, `verdict` compares them
with the free bytes, `problem_line` / `warning_line` say it in one line. collect timed measures the free
space (runformat.diskfull.free_bytes) and calls these once, before anything starts.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path

from runformat.diskfull import format_bytes, free_bytes, mount_point
from runformat.multinode import nodes_from_args

# Values (weights, running statistics) and trainable values of each model, counted on the models built
# on 2026-11-27 (TensorFlow 2.20 with Model Garden: len of every model.variables / trainable_variables
# element; torch 2.9 with torchvision: parameters + buffers, parameters), batch 2, float32.
MODEL_VALUES: dict[tuple[str, str], tuple[int, int]] = {
    ("tf", "small"): (15_541_465, 15_527_641),
    ("tf", "standard"): (43_324_633, 43_262_297),
    ("torch", "small"): (15_528_941, 15_519_321),
    ("torch", "standard"): (43_315_482, 43_256_153),
}
VALUE_BYTES = 4  # float32: mixed precision keeps float32 weights too
# A checkpoint holds the weights and SGD's momentum for each trainable value (measured: tf small
# 124,353,050 bytes, torch small 124,271,809: 4 x (values + trainable) + 77-79 kB of index and layout).
CHECKPOINT_OVERHEAD_BYTES = 1_000_000
# The export is the weights once (measured, small: SavedModel 64.7 MB, TorchScript 62.4 MB), and the
# inference phase converts it to ONNX, one copy of the weights each (tf 66.2 MB; torch one per batch size
# of the phase, 62.3 and 62.5 MB).
EXPORT_OVERHEAD_BYTES = 5_000_000
ONNX_COPIES = {"tf": 1, "torch": 2}  # torch: training.inference PHASE_BATCH_SIZES (1, 4)
DEFAULT_KEEP_CHECKPOINTS = 3  # the training's (its backends' MAX_CHECKPOINTS)
DEFAULT_CHECKPOINT_EVERY_S = 60.0  # the training's --checkpoint-every
# The generated dataset: 138 kB per 256 px image (measured: 28 images in 3.86 MB); 256 + 32 of them. The
# detections drawn after training are about the size of the held-out split (measured: 555 kB for 551 kB).
IMAGE_BYTES = 138_000
DEFAULT_DATASET_IMAGES = 256 + 32
DEFAULT_HELDOUT_IMAGES = 32
# telemetry.csv per row: measured 124-126 bytes with 2 CPUs and no GPU, 266-356 with 16 CPUs and 1 GPU.
ROW_BASE_BYTES, ROW_PER_CPU_BYTES, ROW_PER_GPU_BYTES = 110, 8, 160
SETUP_S = 2 * 60  # sampled before the first step
AFTER_TRAINING_S = 10 * 60  # export, evaluation, detections and inference, sampled too
STEP_ROW_BYTES = 130  # training.csv
STEPS_PER_S_BOUND = {"cpu": 5.0, "gpu": 30.0}  # per device: more than the small preset does
RECORDS_BYTES = 1_000_000  # run.json, training.json, command.log, eval, inference, the two reserves
TIGHT_FACTOR = 1.5  # less free than this many times the estimate: a warning


@dataclass(frozen=True)
class Plan:
    """What one `collect timed` call will run (several runs for a sweep)."""

    preset: str
    framework: str  # tf | torch
    device: str  # cpu | gpu
    budget_s: float
    interval_s: float
    export: bool  # not --no-export
    infer: bool  # not --no-infer
    keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    runs: int = 1  # a sweep runs once per device count
    devices: int = 1
    cpus: int = 1
    writes_training: bool = True  # false on a node other than node 0 (telemetry only)
    dataset_bytes: int = 0  # a dataset to generate first (none given, none there yet)
    heldout_bytes: int = DEFAULT_HELDOUT_IMAGES * IMAGE_BYTES


@dataclass(frozen=True)
class Estimate:
    parts: dict[str, int]  # what writes how many bytes at its peak, in the order shown
    checkpoints: int  # checkpoints on disk at once, per run
    checkpoint_bytes: int

    @property
    def total_bytes(self) -> int:
        return sum(self.parts.values())


def checkpoint_bytes(framework: str, preset: str) -> int:
    values, trainable = MODEL_VALUES[(framework, preset)]
    return VALUE_BYTES * (values + trainable) + CHECKPOINT_OVERHEAD_BYTES


def export_bytes(framework: str, preset: str, infer: bool) -> int:
    values, _ = MODEL_VALUES[(framework, preset)]
    copies = 1 + (ONNX_COPIES[framework] if infer else 0)
    return copies * (VALUE_BYTES * values + EXPORT_OVERHEAD_BYTES)


def checkpoints_at_once(plan: Plan) -> int:
    """At most keep + 1 (the newest is written before the oldest goes); fewer in a short budget: one
    every checkpoint_every_s and one at the end."""
    written = math.floor(plan.budget_s / plan.checkpoint_every_s) + 1
    return max(1, min(plan.keep_checkpoints + 1, written))


def estimate(plan: Plan) -> Estimate:
    rows = (SETUP_S + plan.budget_s + (AFTER_TRAINING_S if plan.export else 0)) / plan.interval_s
    row_bytes = ROW_BASE_BYTES + ROW_PER_CPU_BYTES * plan.cpus
    row_bytes += ROW_PER_GPU_BYTES * (plan.devices if plan.device == "gpu" else 0)
    parts: dict[str, int] = {}
    count, each = checkpoints_at_once(plan), checkpoint_bytes(plan.framework, plan.preset)
    if plan.writes_training:
        parts["checkpoints"] = count * each * plan.runs
        if plan.export:
            parts["export"] = export_bytes(plan.framework, plan.preset, plan.infer) * plan.runs
            parts["detections"] = plan.heldout_bytes * plan.runs
    parts["telemetry"] = round(rows * row_bytes) * plan.runs
    if plan.writes_training:
        steps = plan.budget_s * STEPS_PER_S_BOUND[plan.device] * plan.devices
        parts["step log"] = round(steps * STEP_ROW_BYTES) * plan.runs
    parts["records"] = RECORDS_BYTES * plan.runs
    if plan.dataset_bytes:
        parts["dataset"] = plan.dataset_bytes
    return Estimate(parts, count if plan.writes_training else 0, each)


def verdict(needed_bytes: int, free_bytes: int | None) -> str:
    """`too little` (less free than needed), `tight` (less than TIGHT_FACTOR times), `ok`, or `unknown`."""
    if free_bytes is None:
        return "unknown"
    if free_bytes < needed_bytes:
        return "too little"
    if free_bytes < TIGHT_FACTOR * needed_bytes:
        return "tight"
    return "ok"


def _parts_text(plan: Plan, found: Estimate) -> str:
    texts = []
    for name, size in found.parts.items():
        if name == "checkpoints":
            runs = f" x {plan.runs} runs" if plan.runs > 1 else ""
            texts.append(f"checkpoints {found.checkpoints} x {format_bytes(found.checkpoint_bytes)}{runs}")
        else:
            texts.append(f"{name} {format_bytes(size)}")
    return ", ".join(texts)


def _options(plan: Plan, found: Estimate) -> str:
    """The ways out that would change the figure."""
    ways = ["another --data-dir"]
    if found.checkpoints > 2:
        ways.append("fewer checkpoints kept (--keep-checkpoints 1)")
    if plan.export and plan.writes_training:
        ways.append("no export (--no-export)")
    return ", ".join(ways[:-1]) + " or " + ways[-1] if len(ways) > 1 else ways[0]


def problem_line(plan: Plan, found: Estimate, free_bytes: int, where: str) -> str:
    """Why the run cannot start: both figures and the ways out, one line."""
    return (
        f"not enough free space for this run: it writes about {format_bytes(found.total_bytes)} "
        f"({_parts_text(plan, found)}) and {where} has {format_bytes(free_bytes)} free; "
        f"try {_options(plan, found)}"
    )


def warning_line(plan: Plan, found: Estimate, free_bytes: int, where: str) -> str:
    return (
        f"free space is tight: this run writes about {format_bytes(found.total_bytes)} "
        f"({_parts_text(plan, found)}) and {where} has {format_bytes(free_bytes)} free "
        f"(less than {TIGHT_FACTOR:g} x); if the disk fills up the run stops and is recorded as failed"
    )


# ---- the impure edge: the file system and the options of `collect timed` ------------------------------


def plan_for(args: argparse.Namespace, budget_s: float, interval_s: float, counts: list[int]) -> Plan:
    """The Plan of a `collect timed` call (its parsed options); reads whether the dataset is there."""
    dataset = Path(args.dataset) if args.dataset is not None else Path(args.data_dir) / "datasets" / "waldo"
    there = (dataset / "dataset.json").is_file() or any(dataset.glob("train*.tfrecord"))
    heldout = sum(path.stat().st_size for path in dataset.glob("val*.tfrecord")) if there else 0
    every_s = args.checkpoint_every_s if args.checkpoint_every_s is not None else DEFAULT_CHECKPOINT_EVERY_S
    return Plan(
        preset=args.preset,
        framework=args.framework,
        device=args.device,
        budget_s=budget_s,
        interval_s=interval_s,
        export=not args.no_export,
        infer=not args.no_infer,
        keep_checkpoints=args.keep_checkpoints or DEFAULT_KEEP_CHECKPOINTS,
        checkpoint_every_s=every_s,
        runs=max(1, len(counts)),
        devices=max(counts) if counts else 1,
        cpus=os.cpu_count() or 1,
        writes_training=nodes_from_args(args).rank == 0,
        dataset_bytes=0 if there or args.dataset is not None else DEFAULT_DATASET_IMAGES * IMAGE_BYTES,
        heldout_bytes=heldout or DEFAULT_HELDOUT_IMAGES * IMAGE_BYTES,
    )


def job_plan(budget_s: float, interval_s: float, device: str) -> Plan:
    """A lab's own job: only what the collector writes (telemetry, step log, records) is known; the job's
    own files (its checkpoints, its outputs) are its own and not counted."""
    return Plan(preset="small", framework="torch", device=device, budget_s=budget_s, interval_s=interval_s,
                export=False, infer=False, cpus=os.cpu_count() or 1, writes_training=False)  # fmt: skip


def space_check(plan: Plan, data_dir: Path) -> tuple[str | None, str | None]:
    """(the problem that stops the run, a warning) for the free space of data_dir: one line or None each."""
    free = free_bytes(data_dir)
    found = estimate(plan)
    mount = mount_point(data_dir)
    where = f"--data-dir {data_dir}" + (f" (on {mount})" if mount else "")
    said = verdict(found.total_bytes, free)
    if said == "too little":
        return problem_line(plan, found, free or 0, where), None
    if said == "tight":
        return None, warning_line(plan, found, free or 0, where)
    return None, None
