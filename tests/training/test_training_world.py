"""Which devices a torch rank's training.json names: this node's, not every node's."""

from __future__ import annotations

from types import SimpleNamespace

from training.device import DeviceInfo
from training.distributed import World, world_from_environment
from training.trainstate import _framework_fields


def test_world_reads_the_ranks_on_this_node_from_torchrun() -> None:
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}
    world = world_from_environment(env)
    assert (world.rank, world.local_rank, world.size, world.ranks_on_node) == (5, 1, 8, 4)
    without_local = world_from_environment({k: v for k, v in env.items() if k != "LOCAL_WORLD_SIZE"})
    assert without_local.ranks_on_node == 8  # one node: every rank is on it


def _gpu_device() -> DeviceInfo:
    return DeviceInfo(kind="gpu", used="NVIDIA H100", gpu_names=["NVIDIA H100"], tensorflow_devices=[])


def test_a_multi_node_gpu_rank_records_its_node_local_devices(frameworks_in_process: None) -> None:
    options = SimpleNamespace(framework="torch", replicas=8)
    world = World(rank=5, local_rank=1, size=8, backend="nccl", local_size=4)
    assert _framework_fields(options, _gpu_device(), world)["torch_device"] == "cuda:0,cuda:1,cuda:2,cuda:3"


def test_a_one_node_gpu_run_records_every_device_it_used(frameworks_in_process: None) -> None:
    options = SimpleNamespace(framework="torch", replicas=2)
    assert _framework_fields(options, _gpu_device(), World())["torch_device"] == "cuda:0,cuda:1"
    one_node = World(rank=0, local_rank=0, size=2, backend="nccl", local_size=2)
    assert _framework_fields(options, _gpu_device(), one_node)["torch_device"] == "cuda:0,cuda:1"
