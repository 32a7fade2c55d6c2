"""The kernel's thermal-throttle counters and the cgroup CPU quota, against fake /sys and /proc trees
(neither exists on this VM), and what a real collector run records where they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from collectfakes import fake_psutil, write_tree

from collect.cgroup import cpu_quota
from collect.sources import Hardware, build_sources
from collect.sources.base import SourceUnavailable
from collect.sources.cpu_throttle import CORE_COLUMN, PACKAGE_COLUMN, CpuThrottleSource
from collect.sysinfo import system_info, virtual_machine


def throttle_tree(root: Path, counts: dict[int, tuple[int, int]], packages: dict[int, int]) -> Path:
    files = {}
    for cpu, (core, package) in counts.items():
        base = f"devices/system/cpu/cpu{cpu}"
        files[f"{base}/thermal_throttle/core_throttle_count"] = f"{core}\n"
        files[f"{base}/thermal_throttle/package_throttle_count"] = f"{package}\n"
        files[f"{base}/topology/physical_package_id"] = f"{packages[cpu]}\n"
    return write_tree(root, files)


def test_throttle_counts_sum_cores_and_count_each_package_once(tmp_path: Path) -> None:
    # Two packages of two CPUs: every CPU of a package shows the same package counter.
    sys_root = throttle_tree(tmp_path, {0: (3, 7), 1: (4, 7), 2: (0, 2), 3: (1, 2)}, {0: 0, 1: 0, 2: 1, 3: 1})
    source = CpuThrottleSource(sys_root)
    assert source.columns() == [CORE_COLUMN, PACKAGE_COLUMN]
    assert source.sample(0.0) == {CORE_COLUMN: 8, PACKAGE_COLUMN: 9}
    (sys_root / "devices/system/cpu/cpu1/thermal_throttle/core_throttle_count").write_text("10\n")
    assert source.sample(1.0)[CORE_COLUMN] == 14
    (sys_root / "devices/system/cpu/cpu1/thermal_throttle/core_throttle_count").write_text("gone\n")
    assert source.sample(2.0)[CORE_COLUMN] is None  # a partial sum would read as a counter reset
    source.close()


def test_throttle_counters_absent_is_an_absent_source(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="no readable thermal_throttle counters"):
        CpuThrottleSource(tmp_path)
    hardware = Hardware(proc_root=Path("/proc"), sys_root=tmp_path, load_nvml=lambda: None)
    sources = build_sources(hardware, follow_command=False)
    assert sources.status["cpu_throttle"]["available"] is False
    assert CORE_COLUMN not in sources.columns()
    with_counters = Hardware(
        proc_root=Path("/proc"), sys_root=throttle_tree(tmp_path / "t", {0: (1, 1)}, {0: 0})
    )
    assert CORE_COLUMN in build_sources(with_counters, follow_command=False).columns()


def test_cgroup_v2_quota_is_the_tightest_of_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"self/cgroup": "0::/kubepods/pod1/box\n"})
    sys_root = write_tree(
        tmp_path / "sys",
        {
            "fs/cgroup/kubepods/cpu.max": "max 100000\n",
            "fs/cgroup/kubepods/pod1/cpu.max": "200000 100000\n",
            "fs/cgroup/kubepods/pod1/box/cpu.max": "400000 100000\n",
        },
    )
    assert cpu_quota(proc, sys_root) == {
        "cgroup_cpu_quota_us": 200000,
        "cgroup_cpu_period_us": 100000,
        "cgroup_cpu_limit_cpus": 2.0,
        "cgroup_cpu_quota_file": "fs/cgroup/kubepods/pod1/cpu.max",
    }
    (sys_root / "fs/cgroup/kubepods/pod1/cpu.max").write_text("max 100000\n")
    assert cpu_quota(proc, sys_root)["cgroup_cpu_limit_cpus"] == 4.0
    (sys_root / "fs/cgroup/kubepods/pod1/box/cpu.max").write_text("max 100000\n")
    assert cpu_quota(proc, sys_root)["cgroup_cpu_limit_cpus"] is None


def test_cgroup_v1_cfs_quota(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"self/cgroup": "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n0::/\n"})
    sys_root = write_tree(
        tmp_path / "sys",
        {
            "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
            "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us": "-1\n",
            "fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us": "100000\n",
        },
    )
    quota = cpu_quota(proc, sys_root)
    assert quota["cgroup_cpu_limit_cpus"] == 1.5 and quota["cgroup_cpu_quota_us"] == 150000
    assert quota["cgroup_cpu_quota_file"] == "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"
    (sys_root / "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(proc, sys_root)["cgroup_cpu_limit_cpus"] is None


def test_system_info_records_the_quota_and_the_hypervisor_flag(tmp_path: Path) -> None:
    proc = write_tree(
        tmp_path / "proc",
        {"self/cgroup": "0::/slice\n", "cpuinfo": "model name\t: Crafted\nflags\t\t: fpu sse2 hypervisor\n"},
    )
    sys_root = write_tree(tmp_path / "sys", {"fs/cgroup/slice/cpu.max": "50000 100000\n"})
    info = system_info(proc, sys_root, psutil_module=fake_psutil())
    assert info["virtual_machine"] is True and info["cgroup_cpu_limit_cpus"] == 0.5
    (proc / "cpuinfo").write_text("model name\t: Crafted\nflags\t\t: fpu sse2\n")
    assert virtual_machine(proc) is False
    (proc / "cpuinfo").write_text("Hardware\t: ARM board\n")
    assert virtual_machine(proc) is None


def test_system_info_records_the_cpu_set_the_training_may_run_on(tmp_path: Path) -> None:
    """taskset, Slurm or a container's cpuset: the CPUs the collector (and the training it starts) may use."""
    proc = write_tree(tmp_path / "proc", {"self/cgroup": "0::/\n", "cpuinfo": "model name\t: Crafted\n"})

    def info(**affinity: object) -> dict:
        return system_info(proc, tmp_path / "sys", psutil_module=fake_psutil(), **affinity)

    assert info(affinity=lambda pid: {0, 1, 2})["cpu_affinity_cpus"] == 3
    assert info(affinity=None)["cpu_affinity_cpus"] is None
    assert info()["cpu_affinity_cpus"] == len(os.sched_getaffinity(0))  # this machine, through the default


def test_this_machine_has_a_quota_answer_without_crashing() -> None:
    quota = cpu_quota()
    assert set(quota) == {"cgroup_cpu_quota_us", "cgroup_cpu_period_us", "cgroup_cpu_limit_cpus",
                          "cgroup_cpu_quota_file"}  # fmt: skip
    limit = quota["cgroup_cpu_limit_cpus"]
    assert limit is None or limit > 0
