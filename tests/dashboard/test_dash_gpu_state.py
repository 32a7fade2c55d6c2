"""Run details of a run whose run.json has `gpu_state`: the settings, their changes, the other processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dashfixtures import make_run
from test_dash_sparse import texts

from dashboard import views


def _state(index: int, **changed: Any) -> dict[str, Any]:
    state = {
        "index": index, "power_limit_w": 700.0, "power_limit_default_w": 700.0, "power_limit_min_w": 200.0,
        "power_limit_max_w": 700.0, "applications_clock_sm_mhz": 1980, "applications_clock_mem_mhz": 2619,
        "default_applications_clock_sm_mhz": 1980, "default_applications_clock_mem_mhz": 2619,
        "mig_mode": "disabled", "persistence_mode": "enabled", "compute_mode": "default",
        "ecc_mode": "enabled",
        "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16, "pcie_link_width_max": 16,
    }  # fmt: skip
    return {**state, **changed}


def _details(data_dir: Path, gpu_state: dict[str, Any] | None) -> list[str]:
    run_dir = make_run(data_dir, device="gpu", gpus=2)
    record = json.loads((run_dir / "run.json").read_text())
    if gpu_state is not None:
        record["gpu_state"] = gpu_state
    (run_dir / "run.json").write_text(json.dumps(record))
    (card,) = views.details_view(data_dir, [run_dir.name])[0].children
    return texts([card])


def test_run_details_show_each_gpus_state_its_changes_and_the_other_processes(tmp_path: Path) -> None:
    start = 1795093375.123456  # dashfixtures' run start
    shown = _details(
        tmp_path,
        {
            "start": [_state(0, power_limit_w=200.0), _state(1, mig_mode="enabled", compute_mode=None)],
            "end": [
                _state(0, power_limit_w=300.0, applications_clock_sm_mhz=1275),
                _state(1, mig_mode="enabled"),
            ],
            "changes": [
                {"time_unix": start + 42.4, "index": 0, "field": "power_limit_w", "from": 200.0, "to": 300.0},
            ],
            "processes_checked": True,
            "other_processes": [
                {
                    "index": 1,
                    "pid": 4242,
                    "name": "tenant-job",
                    "used_memory_bytes": 3 * 2**30,
                    "first_seen_unix": start,
                    "last_seen_unix": start + 90.0,
                },
            ],
            "before_training": [
                {"index": 0, "util_pct": 0.0, "mem_used_bytes": 0, "power_w": 68.5, "compute_processes": 0},
                {
                    "index": 1,
                    "util_pct": 35.0,
                    "mem_used_bytes": 3 * 2**30,
                    "power_w": None,
                    "compute_processes": 1,
                },
            ],
        },
    )
    assert "GPU state" in shown and "gpu0" in shown and "gpu1" in shown
    assert (
        "200 W (default 700 W, range 200–700 W): below the default at start, "
        "300 W (default 700 W, range 200–700 W): below the default at end"
    ) in shown
    assert "700 W (default 700 W, range 200–700 W)" in shown  # gpu1, not capped: no mark
    assert (
        "SM 1980 MHz, memory 2619 MHz (default 1980 / 2619 MHz) at start, "
        "SM 1275 MHz, memory 2619 MHz (default 1980 / 2619 MHz) at end"
    ) in shown
    mig = shown.index("MIG mode")
    assert shown[mig + 1 : mig + 3] == ["disabled", "enabled"]
    assert "enabled / n/a at start, enabled / default at end" in shown  # compute mode unknown at start
    assert "gen 5 of 5, width 16 of 16" in shown
    assert "0 % busy, 0.0 GiB used, 68.5 W, 0 compute process(es)" in shown
    assert "35 % busy, 3.0 GiB used, n/a, 1 compute process(es)" in shown
    assert "+42 s gpu0 power_limit_w: 200 → 300" in shown
    assert "gpu1: pid 4242 (tenant-job), 3.0 GiB of GPU memory at most, seen +0 s to +90 s" in shown
    assert "no other compute process seen on these GPUs" not in shown
    assert not [t for t in shown if "None" in t]


def test_a_run_whose_processes_were_not_checked_says_why_and_a_run_without_gpu_state_has_no_section(
    tmp_path: Path,
) -> None:
    shown = _details(
        tmp_path / "refused",
        {
            "start": [_state(0)],
            "end": [],
            "changes": [],
            "processes_checked": False,
            "processes_reason": "gpu0: the process list was refused (Not Supported)",
            "other_processes": [],
            "before_training": [
                {
                    "index": 0,
                    "util_pct": None,
                    "mem_used_bytes": None,
                    "power_w": None,
                    "compute_processes": None,
                }
            ],
        },
    )
    assert "other compute processes not checked: gpu0: the process list was refused (Not Supported)" in shown
    assert "no change seen during the run" in shown
    assert "700 W (default 700 W, range 200–700 W)" in shown  # no end read (still running): the start alone
    assert "n/a busy, n/a used, n/a, n/a compute process(es)" in shown
    assert "GPU state" not in _details(tmp_path / "plain", None)
