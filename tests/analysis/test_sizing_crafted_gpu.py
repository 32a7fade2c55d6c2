"""Copies of the shipped H100 run made shared, MIG-sliced, power-capped and clock-locked, each sized
honestly: with run.json `gpu_state` (the collector's record) and without it (what a run that predates it
carries: telemetry, run.json `system.gpus`, training.json)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sizing.analysis import bottleneck
from sizing.analysis import gpu_state as gs
from sizing.analysis import gpu_verdicts as gv
from sizing.analysis.load import load_run_dir
from sizing.analysis.run import RunAnalysis, analyse_run
from sizing.cli import main as sizing_main
from sizing.model import Prices, Thresholds

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "data" / "examples"
GPU, CPU = "20261124T110829Z-gpu-vm", "20261124T111406Z-cpu-vm"
FILES = ("run.json", "training.json", "telemetry.csv", "training.csv", "phases.csv", "eval.json")
GIB = 2**30
MIG_UUID = "MIG-5e1f0b2c-6d1a-5b7e-9c44-1a2b3c4d5e6f"

pytestmark = pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in (GPU, CPU)), reason="the H100 runs are not shipped"
)


def copy_run(data: Path, source: str, run_id: str) -> Path:
    target = data / "runs" / run_id
    target.mkdir(parents=True)
    for name in FILES:
        shutil.copy(EXAMPLES / source / name, target / name)
    edit_json(target / "run.json", lambda meta: meta.update(run_id=run_id))
    return target


def another_measurement(run_dir: Path) -> None:
    """A repeat, not a copy: its telemetry ends a sample earlier (a copy is counted once)."""
    path = run_dir / "telemetry.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1]), encoding="utf-8")


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content), encoding="utf-8")


def train_span(run_dir: Path) -> tuple[float, float]:
    phases = pd.read_csv(run_dir / "phases.csv")
    train = phases[phases["phase"] == "train"]
    return float(train["start_unix"].min()), float(train["end_unix"].max())


def edit_telemetry(run_dir: Path, change: Callable[[pd.DataFrame, np.ndarray, np.ndarray], None]) -> None:
    """change(frame, before the first train phase, in the train phase) edits the frame in place."""
    frame = pd.read_csv(run_dir / "telemetry.csv")
    start, end = train_span(run_dir)
    times = frame["time_unix"].to_numpy(dtype=float)
    change(frame, times < start, (times >= start) & (times <= end))
    frame.to_csv(run_dir / "telemetry.csv", index=False)


def slow_down(run_dir: Path, keep: float) -> None:
    """The same span with `keep` of the steps: a slower board (rows dropped evenly, steps renumbered)."""
    training = pd.read_csv(run_dir / "training.csv")
    chosen = np.unique(np.round(np.linspace(0, len(training) - 1, int(len(training) * keep))).astype(int))
    slower = training.iloc[chosen].reset_index(drop=True)
    slower["step"] = np.arange(1, len(slower) + 1)
    slower.to_csv(run_dir / "training.csv", index=False)

    def update(info: dict) -> None:
        info.update(steps=len(slower), global_step=len(slower), steady_steps_per_s=None,
                    steady_examples_per_s=None)  # fmt: skip

    edit_json(run_dir / "training.json", update)


def cap_power(run_dir: Path, limit_w: float, with_state: bool) -> None:
    """A board held at `limit_w`: the limit column, the training's power at 97.5 % of it (the energy
    counter following) with the SW power cap bit; run.json's limit, and gpu_state when `with_state`."""

    def change(frame: pd.DataFrame, _: np.ndarray, training: np.ndarray) -> None:
        frame["gpu0_power_limit_w"] = limit_w
        for column in ("gpu0_power_w", "gpu0_power_instant_w"):
            frame[column] = frame[column].clip(upper=limit_w).where(~training, 0.975 * limit_w)
        times = frame["time_unix"].to_numpy(dtype=float)
        power = frame["gpu0_power_instant_w"].to_numpy(dtype=float)
        steps = np.concatenate([[0.0], np.diff(times) * (power[1:] + power[:-1]) / 2])
        frame["gpu0_energy_j"] = frame["gpu0_energy_j"].iloc[0] + np.cumsum(steps)
        frame.loc[training, "gpu0_throttle_reasons"] = 0x4

    edit_telemetry(run_dir, change)

    def meta(content: dict) -> None:
        content["system"]["gpus"][0]["power_limit_w"] = limit_w
        if with_state:
            content["gpu_state"] = {"start": [board_state(power_limit_w=limit_w)], "end": [],
                                    "changes": [], "processes_checked": True, "other_processes": [],
                                    "before_training": []}  # fmt: skip

    edit_json(run_dir / "run.json", meta)


def board_state(**fields: object) -> dict:
    return {"index": 0, "power_limit_w": 700.0, "power_limit_default_w": 700.0, "power_limit_min_w": 200.0,
            "power_limit_max_w": 700.0, "applications_clock_sm_mhz": 1980, "applications_clock_mem_mhz": 2619,
            "default_applications_clock_sm_mhz": 1980, "default_applications_clock_mem_mhz": 2619,
            "mig_mode": "disabled", "persistence_mode": "enabled", "compute_mode": "default",
            "ecc_mode": "enabled", "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16,
            "pcie_link_width_max": 16, **fields}  # fmt: skip


def share_board(frame: pd.DataFrame, before: np.ndarray, training: np.ndarray) -> None:
    """Another tenant on the board from before the training to its end: 45 % busy, 12 GiB."""
    tenant = before | training
    frame.loc[tenant, "gpu0_util_pct"] = (frame.loc[tenant, "gpu0_util_pct"] + 45.0).clip(upper=100.0)
    frame.loc[tenant, "gpu0_mem_used_bytes"] += 12 * GIB
    frame.loc[tenant, "gpu0_power_w"] += 150.0


def analysed(run_dir: Path) -> RunAnalysis:
    return analyse_run(load_run_dir(run_dir), Prices(), Thresholds())


def report(data: Path, run_ids: list[str], out: str = "r.json") -> dict | str:
    assert sizing_main([*run_ids, "--data-dir", str(data), "--out", str(data / out)]) == 0
    text = (data / out).read_text(encoding="utf-8")
    return json.loads(text) if out.endswith(".json") else text


@pytest.fixture
def data(tmp_path: Path) -> Path:
    copy_run(tmp_path, CPU, "cpu")
    return tmp_path


def test_the_uncopied_run_is_alone_on_its_board_at_its_defaults(data: Path) -> None:
    found = analysed(copy_run(data, GPU, "plain"))
    assert found.gpu_state.gpus and found.gpu_state.signature is None and found.j_per_1k_examples
    assert found.verdict.primary == bottleneck.GPU_UNDERUSED


def test_capped_and_uncapped_runs_are_two_configurations_each_with_its_own_speedup(data: Path) -> None:
    """Two 700 W runs and two 200 W runs (one with gpu_state, one without): two groups of two repeats,
    never one average of four."""
    copy_run(data, GPU, "full-a")
    another_measurement(copy_run(data, GPU, "full-b"))
    for run_id, with_state in (("capped-a", True), ("capped-b", False)):
        run_dir = copy_run(data, GPU, run_id)
        cap_power(run_dir, 200.0, with_state)
        slow_down(run_dir, 0.74)
    another_measurement(data / "runs" / "capped-b")
    result = report(data, ["cpu", "full-a", "capped-a", "full-b", "capped-b"])
    comparisons = {tuple(c["group"]): c["speedup"] for c in result["comparisons"]}
    assert set(comparisons) == {("full-a", "full-b"), ("capped-a", "capped-b")}
    full, capped = comparisons[("full-a", "full-b")], comparisons[("capped-a", "capped-b")]
    assert full == pytest.approx(9.04, abs=0.01) and capped == pytest.approx(0.74 * full, rel=0.01)
    lines = result["headline"][1:3]
    capped_line = next(line for line in lines if "(power cap 200 W)" in line)
    full_line = next(line for line in lines if "power cap" not in line)
    assert capped_line.startswith("GPU NVIDIA H100 80GB HBM3 (power cap 200 W) · torch/small/")
    assert f"{capped:.2f}× the baseline" in capped_line and f"{full:.2f}× the baseline" in full_line
    hardware = {r["run_id"]: r["hardware"]["gpu_settings"] for r in result["runs"]}
    assert hardware == {"cpu": None, "full-a": None, "full-b": None, "capped-a": "power cap 200 W",
                        "capped-b": "power cap 200 W"}  # fmt: skip


@pytest.mark.parametrize("with_state", [True, False])
def test_a_shared_gpu_gets_no_energy_and_no_board_verdict(data: Path, with_state: bool) -> None:
    run_dir = copy_run(data, GPU, "shared")
    if with_state:
        start, end = train_span(run_dir)
        tenant = {"index": 0, "pid": 31337, "name": "python3", "used_memory_bytes": 12 * GIB,
                  "first_seen_unix": start + 30.0, "last_seen_unix": end}  # fmt: skip
        state = {"start": [board_state()], "end": [board_state()], "changes": [], "processes_checked": True,
                 "other_processes": [tenant], "before_training": [{"index": 0, "util_pct": 0.0,
                 "mem_used_bytes": 0, "power_w": 70.0, "compute_processes": 0}]}  # fmt: skip
        edit_json(run_dir / "run.json", lambda meta: meta.update(gpu_state=state))
    else:
        edit_telemetry(run_dir, share_board)
    result = report(data, ["cpu", "shared"])
    run = next(r for r in result["runs"] if r["run_id"] == "shared")
    assert run["energy_j_per_1k_examples"] is None and run["energy_usd_per_1k_examples"] is None
    assert run["energy_not_measured_reason"] == gs.SHARED and run["hardware"]["gpu_settings"] == "shared"
    assert run["verdict"] not in (bottleneck.GPU_BOUND, bottleneck.GPU_UNDERUSED)
    assert gs.SHARED_UTILIZATION in run["verdict_labels"]
    line = result["headline"][1]
    assert line.startswith("GPU NVIDIA H100 80GB HBM3 (shared) · ")
    assert "energy not attributable: the GPU was shared" in line and "GPU underused" not in line
    assert " J " not in line.split("per 1,000 examples")[0]  # no joule figure, the board's least of all
    why = "pid 31337, python3 holding 12.0 GiB" if with_state else "mean util 45.0 % ≥ 10 %"
    assert any("energy and utilization not attributable" in w and why in w for w in result["warnings"])


def test_the_cli_says_it_in_the_headline(data: Path) -> None:
    """`python -m sizing` as docs/sizing.md shows it, on a copy shared before the training only."""
    run_dir = copy_run(data, GPU, "shared-before")
    edit_telemetry(run_dir, lambda frame, before, _: share_board(frame, before, np.zeros(len(frame), bool)))
    out = data / "report.md"
    command = [
        sys.executable,
        "-m",
        "sizing",
        "cpu",
        "shared-before",
        "--data-dir",
        str(data),
        "--out",
        str(out),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    headline = out.read_text(encoding="utf-8").split("## Settings")[0]
    gpu_line = next(line for line in headline.splitlines() if line.startswith("- GPU "))
    assert "NVIDIA H100 80GB HBM3 (shared) · torch/small/resnet18/256px/batch 2/float32: 9.04×" in gpu_line
    assert "energy not attributable: the GPU was shared and cost n/a" in gpu_line


def _mig_by_state(meta: dict) -> None:
    meta["gpu_state"] = {"start": [board_state(mig_mode="enabled")], "end": [], "changes": [],
                         "processes_checked": False, "processes_reason": "MIG", "other_processes": [],
                         "before_training": []}  # fmt: skip


def _mig_by_name(meta: dict) -> None:
    meta["system"]["gpus"][0].update(name="NVIDIA H100 80GB HBM3 MIG 3g.40gb", uuid=MIG_UUID)


@pytest.mark.parametrize("how", ["gpu_state", "run.json name", "training.json uuid"])
def test_a_mig_slice_is_not_charged_the_boards_energy(data: Path, how: str) -> None:
    run_dir = copy_run(data, GPU, "slice")
    if how == "gpu_state":
        edit_json(run_dir / "run.json", _mig_by_state)
    elif how == "run.json name":
        edit_json(run_dir / "run.json", _mig_by_name)
        edit_json(run_dir / "training.json", lambda info: info.update(gpu_uuids=[MIG_UUID]))
    else:
        edit_json(run_dir / "training.json", lambda info: info.update(gpu_uuids=[MIG_UUID]))
    found = analysed(run_dir)
    assert found.charged_gpus == (0,) and found.j_per_1k_examples is None
    assert found.steady_energy is not None and found.steady_energy.missing == gs.MIG_SLICE
    assert found.hardware["gpu_settings"] == "MIG" and found.hardware_name.endswith("(MIG)")
    assert gs.MIG_UTILIZATION in found.verdict.labels and bottleneck.GPU_UNDERUSED not in found.verdict.labels
    assert any(gs.MIG_SLICE in w and "J and $ per 1,000 examples unknown" in w for w in found.warnings)


def _spin(locked: bool) -> Callable[[pd.DataFrame, np.ndarray, np.ndarray], None]:
    """Kernels resident 90 % of the time at 120 W; with `locked`, at 1,095 MHz under the clocks setting."""

    def change(frame: pd.DataFrame, _: np.ndarray, training: np.ndarray) -> None:
        frame.loc[training, "gpu0_util_pct"] = 90.0
        frame.loc[training, ["gpu0_power_w", "gpu0_power_instant_w"]] = 120.0
        if locked:
            frame.loc[training, "gpu0_sm_clock_mhz"] = 1095.0
            frame.loc[training, "gpu0_throttle_reasons"] = 0x2

    return change


def test_clocks_locked_low_are_a_setting_not_busy_but_not_computing(data: Path) -> None:
    spinning, locked = copy_run(data, GPU, "spinning"), copy_run(data, GPU, "locked")
    edit_telemetry(spinning, _spin(locked=False))
    edit_telemetry(locked, _spin(locked=True))
    assert analysed(spinning).verdict.primary == gv.BUSY_NOT_COMPUTING  # the same figures, no setting
    found = analysed(locked)
    assert gv.BUSY_NOT_COMPUTING not in found.verdict.labels and gv.HELD_BY_SETTING in found.verdict.labels
    assert found.verdict.primary == bottleneck.GPU_BOUND
    said = next(e for e in found.verdict.evidence if "not busy but not computing" in e)
    assert (
        "in 100% of busy samples ≥ 5% (3006 with clocks-event bit 0x2, SM clock 1095 MHz of its 1980" in said
    )
    assert found.hardware_name == "NVIDIA H100 80GB HBM3 (clocks held by a setting)"
    assert found.j_per_1k_examples is not None  # a setting is not sharing: the energy is the run's


def test_applications_clocks_from_gpu_state_hold_the_clocks_too(data: Path) -> None:
    run_dir = copy_run(data, GPU, "apps")
    edit_telemetry(run_dir, _spin(locked=False))
    state = {"start": [board_state(applications_clock_sm_mhz=1095)], "other_processes": []}
    edit_json(run_dir / "run.json", lambda meta: meta.update(gpu_state=state))
    found = analysed(run_dir)
    assert gv.BUSY_NOT_COMPUTING not in found.verdict.labels and gv.HELD_BY_SETTING in found.verdict.labels
    assert found.hardware["gpu_settings"] == gs.CLOCKS_HELD
