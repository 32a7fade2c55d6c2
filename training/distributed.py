"""Data-parallel training on N devices: torchrun's launch command, the process group, stop agreement.

`training train --procs N` (CPU, gloo) or `--gpus N` (NCCL) re-executes itself under `python -m
torch.distributed.run --standalone --nproc_per_node N` (with `--nnodes M --node-rank R --rdzv-endpoint
HOST:PORT`: one such torchrun per node, M x N ranks in all); each rank then finds RANK, LOCAL_RANK and
WORLD_SIZE in its environment. Rank 0 writes training.csv, training.json and the checkpoints; every rank
trains on its own shard of each global batch (training.torch_data.TrainBatches) and DDP averages the
gradients. Ranks must stop after the same step (the next step's all-reduce would wait forever for a
rank that left), so a stop seen by any rank (signal, deadline, step limit) is agreed on by an
all-reduce of the wish before each step.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from runformat.multinode import Nodes

# Stop wishes, in the order the agreement prefers them (the largest wins).
CONTINUE, COMPLETED, DEADLINE, INTERRUPTED = 0, 1, 2, 3
STOP_NAMES = {COMPLETED: "completed", DEADLINE: "deadline", INTERRUPTED: "interrupted"}
WORLD_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks; a single process is rank 0 of 1."""

    rank: int = 0
    local_rank: int = 0
    size: int = 1
    backend: str | None = None  # "gloo" or "nccl" once the process group is up
    local_size: int | None = None  # ranks on this node (torchrun's LOCAL_WORLD_SIZE); None: all of them

    @property
    def ranks_on_node(self) -> int:
        return self.size if self.local_size is None else self.local_size

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def world_from_environment(environ: dict[str, str] | None = None) -> World:
    """The ranks torchrun started us among (RANK, LOCAL_RANK, WORLD_SIZE), else a world of one."""
    env = os.environ if environ is None else environ
    if not all(env.get(name, "").isdigit() for name in WORLD_ENV):
        return World()
    local = env.get("LOCAL_WORLD_SIZE", "")
    return World(
        rank=int(env["RANK"]),
        local_rank=int(env["LOCAL_RANK"]),
        size=int(env["WORLD_SIZE"]),
        local_size=int(local) if local.isdigit() else None,
    )


def under_launcher(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env or all(name in env for name in WORLD_ENV)


def launch_command(
    count: int, train_argv: list[str], python: str | None = None, nodes: Nodes | None = None
) -> list[str]:
    """torchrun on this node with `count` ranks, each running `python -m training train_argv...`; with
    several nodes, this node's torchrun of `nodes.count`, meeting the others at the rendezvous endpoint.
    (Static rendezvous: c10d's ignores --node-rank, so rank 0 could land on any node.)"""
    if nodes is None or not nodes.multinode:
        where = ["--standalone"]
    else:
        where = [
            "--nnodes", str(nodes.count), "--node-rank", str(nodes.rank),
            "--rdzv-backend", "static", "--rdzv-endpoint", str(nodes.endpoint), "--rdzv-id", nodes.rdzv_id,
        ]  # fmt: skip
    return [python or sys.executable, "-m", "torch.distributed.run", *where,
            "--nproc_per_node", str(count), "-m", "training", *train_argv]  # fmt: skip


def start_process_group(world: World, device_kind: str) -> World:
    """Join the ranks: gloo on CPUs, NCCL on GPUs (rank r on cuda:LOCAL_RANK)."""
    if not world.distributed:
        return world
    import torch
    import torch.distributed as dist

    backend = "nccl" if device_kind == "gpu" else "gloo"
    if device_kind == "gpu":
        torch.cuda.set_device(world.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return World(world.rank, world.local_rank, world.size, backend, world.local_size)


def agree_stop(world: World, wish: int, device: Any = None) -> int:
    """The stop every rank will act on: the largest wish of any rank (CONTINUE when none wants to stop)."""
    if not world.distributed:
        return wish
    import torch
    import torch.distributed as dist

    flag = torch.tensor([wish], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


def share_from_main(world: World, value: float) -> float:
    """Rank 0's value of a number on every rank (e.g. the start of the training clock)."""
    if not world.distributed:
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return float(box[0])


def gather_from_all(world: World, value: Any) -> list[Any]:
    """Every rank's value, in rank order, on every rank."""
    if not world.distributed:
        return [value]
    import torch.distributed as dist

    found: list[Any] = [None] * world.size
    dist.all_gather_object(found, value)
    return found


def weights_digest(model: Any) -> str:
    """A hash of every trainable parameter: equal on all ranks when the gradients were synchronised.
    (Batch-norm running statistics are left out: each rank updates them from its own shard.)"""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def end_process_group(world: World) -> None:
    if world.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
