"""Multi-node data parallel: the options both `collect timed` and `training train` take, and their checks.

One torchrun per node; the nodes meet at a rendezvous endpoint HOST:PORT on node 0. Node rank R is kept
as torchrun's node rank (its static rendezvous: c10d's would hand ranks out by join order), so global
rank 0, the one that writes training.csv, training.json and the checkpoints, is always on node 0.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

SLURM_JOB_ENV = "SLURM_JOB_ID"
DEFAULT_RDZV_ID = "workbench"


@dataclass(frozen=True)
class Nodes:
    """Where this node stands among the nodes of one data-parallel training."""

    count: int = 1
    rank: int = 0
    endpoint: str | None = None
    rdzv_id: str = DEFAULT_RDZV_ID

    @property
    def multinode(self) -> bool:
        return self.count > 1

    def step_log_elsewhere(self) -> str:
        return f"node rank 0 of rendezvous {self.rdzv_id}"

    def record(self, procs_per_node: int | None) -> dict[str, Any]:
        """What run.json and training.json say about the nodes (world_size: None when not known here)."""
        return {
            "nnodes": self.count,
            "node_rank": self.rank,
            "world_size": procs_per_node * self.count if procs_per_node else None,
            "rdzv_endpoint": self.endpoint,
            "rdzv_id": self.rdzv_id,
            "step_log": "this run directory" if self.rank == 0 else self.step_log_elsewhere(),
        }


def add_node_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nnodes", type=int, default=1, help="torch: nodes of one data-parallel training (one torchrun each)"
    )
    parser.add_argument("--node-rank", type=int, default=0, help="this node's rank, 0..NNODES-1")
    parser.add_argument(
        "--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes meet: node 0's address and a free port"
    )
    parser.add_argument(
        "--rdzv-id", help=f"the training's rendezvous id (default: ${SLURM_JOB_ENV}, else {DEFAULT_RDZV_ID})"
    )


def nodes_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Nodes:
    env = os.environ if environ is None else environ
    rdzv_id = args.rdzv_id or env.get(SLURM_JOB_ENV) or DEFAULT_RDZV_ID
    return Nodes(args.nnodes, args.node_rank, args.rdzv_endpoint, rdzv_id)


def nodes_problem(args: argparse.Namespace) -> str | None:
    """The first thing wrong with the node options, one line; None when they can run."""
    if args.nnodes < 1:
        return f"--nnodes {args.nnodes}: expected a whole number >= 1"
    if args.node_rank < 0 or args.node_rank >= args.nnodes:
        return f"--node-rank {args.node_rank}: expected 0..{args.nnodes - 1} with --nnodes {args.nnodes}"
    if args.nnodes == 1:
        if args.rdzv_endpoint:
            return "--rdzv-endpoint is for --nnodes N > 1 (one node needs no rendezvous)"
        return None
    if args.framework != "torch":
        return "--nnodes N > 1 is for --framework torch (DDP under torchrun); Model Garden runs on one node"
    if not args.rdzv_endpoint:
        return f"--nnodes {args.nnodes} needs --rdzv-endpoint HOST:PORT (node 0's address and a free port)"
    host, _, port = args.rdzv_endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--rdzv-endpoint {args.rdzv_endpoint}: expected HOST:PORT"
    return None
