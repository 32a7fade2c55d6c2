"""The GPU's own state in run.json (`gpu_state`): settings at start and end, their changes, the other compute
processes on each board and the board's readings before the training, through the fake NVML."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from collectfakes import FakeGpu, FakeNvml, FakeProcess, write_tree

from collect import gpu_state
from collect.gpu_state import STATE_FIELDS, GpuStateWatch, nested_pid_namespace
from collect.session import SessionOptions, run_session
from collect.sources import Hardware
from runformat import read_json

H100_STATE = {
    "index": 0,
    "power_limit_w": 700.0,
    "power_limit_default_w": 700.0,
    "power_limit_min_w": 200.0,
    "power_limit_max_w": 700.0,
    "applications_clock_sm_mhz": 1980,
    "applications_clock_mem_mhz": 2619,
    "default_applications_clock_sm_mhz": 1980,
    "default_applications_clock_mem_mhz": 2619,
    "mig_mode": "disabled",
    "persistence_mode": "enabled",
    "compute_mode": "default",
    "ecc_mode": "enabled",
    "pcie_link_gen": 5,
    "pcie_link_gen_max": 5,
    "pcie_link_width": 16,
    "pcie_link_width_max": 16,
}
NO_SUCH_PID = 2**22 + 17  # above any pid_max: never in /proc, never in the tree
PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
)


class Without:
    """The fake NVML seen through an older or smaller binding: `missing` functions are not there at all,
    `renamed` ones are there under another name."""

    def __init__(self, nvml: FakeNvml, missing: set[str], renamed: dict[str, str] | None = None) -> None:
        self._nvml, self._missing, self._renamed = nvml, missing, renamed or {}

    def __getattr__(self, name: str) -> Any:
        if name in self._missing:
            raise AttributeError(name)
        return getattr(self._nvml, self._renamed.get(name, name))


class Clocks:
    def __init__(self) -> None:
        self.wall, self.mono = 1_800_000_000.0, 100.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def watch(
    nvml: Any,
    gpus: list[FakeGpu],
    clocks: Clocks,
    tree: set[int] | None = None,
    proc_root: Path | None = None,
) -> GpuStateWatch:
    state = GpuStateWatch(
        nvml,
        gpus,
        lambda: sorted(tree or ()),
        proc_root or Path("/nonexistent-proc"),
        own_pid=1234,
        period_s=5.0,
        wall_clock=lambda: clocks.wall,
        monotonic=lambda: clocks.mono,
    )
    state.read_start()
    return state


def test_a_plain_h100_has_its_state_at_start_and_end_no_change_and_nobody_else() -> None:
    gpu, clocks = FakeGpu(), Clocks()
    state = watch(FakeNvml([gpu]), [gpu], clocks)
    for _ in range(3):
        clocks.advance(5.0)
        state.maintain(clocks.mono)
    state.read_end()
    record = state.record()
    assert record["start"] == [H100_STATE] and record["end"] == [H100_STATE]
    assert record["changes"] == [] and record["other_processes"] == []
    assert record["processes_checked"] is True and "processes_reason" not in record
    assert record["before_training"] == [
        {"index": 0, "util_pct": 97.0, "mem_used_bytes": 1024**3, "power_w": 312.5, "compute_processes": 0}
    ]
    assert "changes_dropped" not in record


def test_a_power_cap_low_application_clocks_and_other_modes_are_recorded_as_they_are() -> None:
    gpu = FakeGpu(
        power_limit_mw=200_000, app_sm_clock=1275, app_mem_clock=1593, persistence=0, compute_mode=3, ecc=0,
        pcie_gen=1, pcie_width=8,
    )  # fmt: skip
    (start,) = watch(FakeNvml([gpu]), [gpu], Clocks()).record()["start"]
    assert (start["power_limit_w"], start["power_limit_default_w"]) == (200.0, 700.0)
    assert (start["applications_clock_sm_mhz"], start["default_applications_clock_sm_mhz"]) == (1275, 1980)
    assert (start["applications_clock_mem_mhz"], start["default_applications_clock_mem_mhz"]) == (1593, 2619)
    assert (start["persistence_mode"], start["compute_mode"], start["ecc_mode"]) == (
        "disabled", "exclusive_process", "disabled",
    )  # fmt: skip
    assert (start["pcie_link_gen"], start["pcie_link_gen_max"]) == (1, 5)
    assert (start["pcie_link_width"], start["pcie_link_width_max"]) == (8, 16)


def test_mig_mode_enabled_disabled_and_not_known() -> None:
    enabled, disabled, unknown = FakeGpu(mig_mode=1), FakeGpu(), FakeGpu(unsupported={"nvmlDeviceGetMigMode"})
    gpus = [enabled, disabled, unknown]
    states = watch(FakeNvml(gpus), gpus, Clocks()).record()["start"]
    assert [s["mig_mode"] for s in states] == ["enabled", "disabled", None]
    assert [s["index"] for s in states] == [0, 1, 2]


def test_a_function_not_supported_is_null_and_not_asked_again() -> None:
    gpu, clocks = FakeGpu(unsupported={"nvmlDeviceGetPowerManagementDefaultLimit"}), Clocks()
    gpu.failing["nvmlDeviceGetEccMode"] = 999  # a one-off error: null, asked again next time
    state = watch(FakeNvml([gpu]), [gpu], clocks)
    (start,) = state.record()["start"]
    assert start["power_limit_default_w"] is None and start["ecc_mode"] is None
    assert start["power_limit_w"] == 700.0  # the other calls are unaffected
    del gpu.failing["nvmlDeviceGetEccMode"]
    calls = gpu.calls
    clocks.advance(5.0)
    state.maintain(clocks.mono)
    # 14 state calls (not the refused one) and the process list; the ECC read back is a change from unknown
    assert gpu.calls - calls == 15
    assert state.record()["changes"] == [
        {"time_unix": clocks.wall, "index": 0, "field": "ecc_mode", "from": None, "to": "enabled"}
    ]


def test_a_binding_without_a_function_gives_null() -> None:
    gpu = FakeGpu()
    nvml = Without(FakeNvml([gpu]), {"nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetMigMode"})
    (start,) = watch(nvml, [gpu], Clocks()).record()["start"]
    assert start["pcie_link_width_max"] is None and start["mig_mode"] is None
    assert start["pcie_link_width"] == 16
    assert set(start) == {"index", *STATE_FIELDS}


def test_a_lost_gpu_reads_null_and_is_not_asked_again() -> None:
    gpu, clocks = FakeGpu(), Clocks()
    state = watch(FakeNvml([gpu]), [gpu], clocks)
    gpu.lost = True
    calls = gpu.calls
    clocks.advance(5.0)
    state.maintain(clocks.mono)
    assert gpu.calls == calls + 1  # the first call says the GPU is lost; nothing else is asked
    state.read_end()
    assert gpu.calls == calls + 1
    (end,) = state.record()["end"]
    assert end == {"index": 0, **dict.fromkeys(STATE_FIELDS)}
    assert state.record()["changes"] == []  # unknown is not a change


def test_a_change_mid_run_is_one_entry_with_from_and_to_and_the_end_state_shows_it() -> None:
    gpu, clocks = FakeGpu(), Clocks()
    state = watch(FakeNvml([gpu]), [gpu], clocks)
    gpu.power_limit_mw = 300_000  # someone ran nvidia-smi -pl 300
    clocks.advance(5.0 - 2**-10)
    state.maintain(clocks.mono)
    assert state.record()["changes"] == []  # not due yet: the last read is not 5 s old
    clocks.advance(2**-10)
    state.maintain(clocks.mono)
    changed_at = clocks.wall
    gpu.failing["nvmlDeviceGetEnforcedPowerLimit"] = 999  # refused once: not a change to unknown and back
    clocks.advance(5.0)
    state.maintain(clocks.mono)
    del gpu.failing["nvmlDeviceGetEnforcedPowerLimit"]
    gpu.app_sm_clock = 1410
    clocks.advance(1.0)
    state.read_end()  # the end read sees the clock change that no periodic read saw
    record = state.record()
    assert record["changes"] == [
        {"time_unix": changed_at, "index": 0, "field": "power_limit_w", "from": 700.0, "to": 300.0},
        {
            "time_unix": clocks.wall,
            "index": 0,
            "field": "applications_clock_sm_mhz",
            "from": 1980,
            "to": 1410,
        },
    ]
    assert record["start"][0]["power_limit_w"] == 700.0
    assert (
        record["end"][0]["power_limit_w"] == 300.0 and record["end"][0]["applications_clock_sm_mhz"] == 1410
    )


def test_changes_past_the_cap_are_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_state, "MAX_CHANGES", 3)
    gpu, clocks = FakeGpu(), Clocks()
    state = watch(FakeNvml([gpu]), [gpu], clocks)
    for gen in (1, 5, 1, 5):  # an idle link drops its generation, a busy one raises it again
        gpu.pcie_gen = gen
        clocks.advance(5.0)
        state.maintain(clocks.mono)
    record = state.record()
    assert [c["to"] for c in record["changes"]] == [1, 5, 1] and record["changes_dropped"] == 1


def test_between_its_turns_the_watch_costs_no_nvml_call_and_each_gpu_is_read_once_a_period() -> None:
    """At 10 ms, 5 s of ticks: one read per GPU, staggered (a tick pays for one GPU's calls at most)."""
    gpus, clocks = [FakeGpu(), FakeGpu()], Clocks()
    state = watch(FakeNvml(gpus), gpus, clocks)
    calls = [g.calls for g in gpus]
    reads: list[tuple[int, int]] = []
    for tick in range(1, 521):
        clocks.advance(0.01)
        before = [g.calls for g in gpus]
        state.maintain(clocks.mono)
        for index, gpu in enumerate(gpus):
            if gpu.calls != before[index]:
                reads.append((tick, index))
    assert [index for _, index in reads] == [0, 1]
    assert reads[1][0] - reads[0][0] in (250, 251)  # 2.5 s apart: half a period
    assert [g.calls - c for g, c in zip(gpus, calls, strict=True)] == [16, 16]  # 15 state calls, 1 list


def test_other_processes_before_and_during_the_run_but_not_the_commands_tree(tmp_path: Path) -> None:
    proc = write_tree(tmp_path, {"501/stat": "501 (python) S 500 1 1 0", "77/comm": "tenant-job\n"})
    tenant = FakeProcess(77, used_memory=5 * 1024**3, name="tenant-job")
    gpu, clocks, tree = FakeGpu(processes=[tenant]), Clocks(), set()
    nvml = Without(FakeNvml([gpu]), {"nvmlSystemGetProcessName"})  # names from /proc/<pid>/comm instead
    state = watch(nvml, [gpu], clocks, tree, proc)
    first_seen = clocks.wall
    tree.add(500)  # the command starts; its child 501 is not in the tree yet, but descends from it
    gpu.processes += [
        FakeProcess(500), FakeProcess(501), FakeProcess(1234), FakeProcess(NO_SUCH_PID, used_memory=None),
    ]  # fmt: skip
    tenant.used_memory = 7 * 1024**3
    clocks.advance(5.0)
    state.maintain(clocks.mono)
    tenant.used_memory = 6 * 1024**3
    tree.clear()  # the command ended: its pids are still known as its
    clocks.advance(2.0)
    state.read_end()
    record = state.record()
    assert record["before_training"][0]["compute_processes"] == 1
    assert record["other_processes"] == [
        {"index": 0, "pid": 77, "name": "tenant-job", "used_memory_bytes": 7 * 1024**3,
         "first_seen_unix": first_seen, "last_seen_unix": clocks.wall},
        {"index": 0, "pid": NO_SUCH_PID, "name": None, "used_memory_bytes": None,
         "first_seen_unix": first_seen + 5.0, "last_seen_unix": clocks.wall},
    ]  # fmt: skip
    assert record["processes_checked"] is True


def test_without_a_command_every_process_but_the_collector_is_another() -> None:
    gpu = FakeGpu(processes=[FakeProcess(1234), FakeProcess(88, name="jupyter")])
    record = watch(FakeNvml([gpu]), [gpu], Clocks()).record()
    assert [(o["pid"], o["name"]) for o in record["other_processes"]] == [(88, "jupyter")]
    assert record["before_training"][0]["compute_processes"] == 1


def test_a_binding_without_the_process_call_and_a_refused_one_say_why() -> None:
    gpu = FakeGpu(processes=[FakeProcess(88)])
    record = watch(Without(FakeNvml([gpu]), set(PROCESS_CALLS)), [gpu], Clocks()).record()
    assert record["processes_checked"] is False
    assert record["processes_reason"] == (
        "gpu0: the process list was refused (the NVML binding has no nvmlDeviceGetComputeRunningProcesses)"
    )
    assert record["other_processes"] == [] and record["before_training"][0]["compute_processes"] is None
    refused = FakeGpu(processes=[FakeProcess(88)], failing={"nvmlDeviceGetComputeRunningProcesses": 4})
    gpus = [FakeGpu(), refused]
    record = watch(FakeNvml(gpus), gpus, Clocks()).record()
    assert record["processes_checked"] is False
    assert record["processes_reason"] == "gpu1: the process list was refused (NVML error 4)"
    assert [b["compute_processes"] for b in record["before_training"]] == [0, None]


def test_an_older_binding_or_driver_falls_back_to_the_v2_process_call() -> None:
    gpu = FakeGpu(processes=[FakeProcess(88)])
    only_v2 = Without(
        FakeNvml([gpu]),
        set(PROCESS_CALLS[:2]),
        {"nvmlDeviceGetComputeRunningProcesses_v2": "nvmlDeviceGetComputeRunningProcesses"},
    )
    assert watch(only_v2, [gpu], Clocks()).record()["other_processes"][0]["pid"] == 88

    class V3Missing(FakeNvml):  # the binding has the plain call, the driver lacks what it calls
        def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list:
            raise self.NVMLError(13)

        def nvmlDeviceGetComputeRunningProcesses_v2(self, h: FakeGpu) -> list:
            return super().nvmlDeviceGetComputeRunningProcesses(h)

    record = watch(V3Missing([gpu]), [gpu], Clocks()).record()
    assert [o["pid"] for o in record["other_processes"]] == [88] and record["processes_checked"] is True


# ---- through a whole session ------------------------------------------------------------------------


def _session(tmp_path: Path, nvml: Any, **options: Any) -> dict:
    hardware = Hardware(load_nvml=lambda: nvml, environ={})
    result = run_session(SessionOptions(data_dir=tmp_path, hardware=hardware, echo_output=False, **options))
    return read_json(result.run_dir / "run.json")


def test_a_cpu_only_host_writes_no_gpu_state(tmp_path: Path) -> None:
    def no_pynvml() -> Any:
        raise ImportError("No module named 'pynvml'")

    seen: list[dict] = []
    hardware = Hardware(load_nvml=no_pynvml, environ={})
    options = SessionOptions(data_dir=tmp_path, interval_s=0.02, duration_s=0.06, hardware=hardware)
    result = run_session(options, on_start=lambda run_dir: seen.append(read_json(run_dir / "run.json")))
    assert "gpu_state" not in seen[0] and "gpu_state" not in read_json(result.run_dir / "run.json")


def test_the_session_records_the_training_apart_from_a_second_process_on_the_board(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pid outside the command's tree was on the board before the run and stays during it; the training
    itself joins the board's process list and is not another's. Someone lowers the power limit mid-run; the
    run ends at its deadline, and run.json's end state says so."""
    monkeypatch.setattr(gpu_state, "STATE_PERIOD_S", 0.1)
    gpu = FakeGpu(processes=[FakeProcess(NO_SUCH_PID, used_memory=3 * 1024**3, name="tenant")])
    nvml, started = FakeNvml([gpu]), []
    script = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(30)"
    pid_file = tmp_path / "pid"

    def on_start(run_dir: Path) -> None:
        started.append(read_json(run_dir / "run.json"))

    def on_sample(row: dict) -> None:
        if len(gpu.processes) == 1 and pid_file.exists() and pid_file.read_text():
            gpu.processes.append(FakeProcess(int(pid_file.read_text()), name="python"))
            gpu.power_limit_mw = 350_000

    hardware = Hardware(load_nvml=lambda: nvml, environ={})
    options = SessionOptions(
        data_dir=tmp_path, interval_s=0.02, duration_s=1.5, hardware=hardware, echo_output=False,
        command=[sys.executable, "-c", script, str(pid_file)],
    )  # fmt: skip
    result = run_session(options, on_start=on_start, on_sample=on_sample)
    record = read_json(result.run_dir / "run.json")
    assert record["end_reason"] == "deadline"
    assert len(gpu.processes) == 2  # the training did reach the board
    state = record["gpu_state"]
    assert started[0]["gpu_state"]["start"] == [H100_STATE] and started[0]["gpu_state"]["end"] == []
    assert [(o["pid"], o["name"], o["used_memory_bytes"]) for o in state["other_processes"]] == [
        (NO_SUCH_PID, "tenant", 3 * 1024**3)
    ]
    assert state["before_training"][0]["compute_processes"] == 1
    assert state["end"][0]["power_limit_w"] == 350.0
    assert [(c["field"], c["from"], c["to"]) for c in state["changes"]] == [("power_limit_w", 700.0, 350.0)]
    assert record["start_unix"] <= state["changes"][0]["time_unix"] <= record["end_unix"]


def test_an_interrupted_run_still_writes_the_end_state(tmp_path: Path) -> None:
    gpu = FakeGpu()
    rows: list[dict] = []

    def on_sample(row: dict) -> None:
        rows.append(row)
        if len(rows) == 3:
            gpu.app_sm_clock = 1275
            os.kill(os.getpid(), signal.SIGTERM)  # the collector's own stop signal: handled, not fatal

    hardware = Hardware(load_nvml=lambda: FakeNvml([gpu]), environ={})
    options = SessionOptions(
        data_dir=tmp_path, interval_s=0.02, hardware=hardware, echo_output=False,
        command=[sys.executable, "-c", "import time; time.sleep(30)"],
    )  # fmt: skip
    result = run_session(options, on_sample=on_sample)
    record = read_json(result.run_dir / "run.json")
    assert record["end_reason"] == "interrupted"
    (end,) = record["gpu_state"]["end"]
    assert end["applications_clock_sm_mhz"] == 1275 and end["power_limit_w"] == 700.0
    assert record["gpu_state"]["changes"][0]["field"] == "applications_clock_sm_mhz"


def test_in_a_container_pid_namespace_no_process_is_called_another_tenants(tmp_path: Path) -> None:
    proc = write_tree(tmp_path, {"self/status": "Name:\tpython\nNSpid:\t4711\t12\n"})
    gpu = FakeGpu(processes=[FakeProcess(88)])
    watch = GpuStateWatch(FakeNvml([gpu]), [gpu], lambda: [], proc)
    watch.read_start()
    record = watch.record()
    assert record["processes_checked"] is False and "pid namespace" in record["processes_reason"]
    assert record["other_processes"] == []
    assert record["before_training"][0]["compute_processes"] == 1  # before the command, all are others'


def test_a_pid_namespace_of_one_level_is_not_nested(tmp_path: Path) -> None:
    proc = write_tree(tmp_path, {"self/status": "Name:\tpython\nNSpid:\t4711\n"})
    assert not nested_pid_namespace(proc)
    assert not nested_pid_namespace(tmp_path / "missing")
