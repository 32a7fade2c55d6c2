"""The GPU's own state (the settings a sysadmin makes, the PCIe link) and who else computes on it, from NVML.

Read once before the command is launched ("start", with the board's readings at that moment:
"before_training"), again every STATE_PERIOD_S (one GPU per turn, so no tick pays for more than one GPU's
calls), and once after the command has ended ("end"). Every field is its own NVML call: a refused call is
null, and a function that the driver or the binding lacks is not asked again. A field whose value differs
from the last known one is an entry of `changes`; a read refused in between is not a change (unknown is
not a new value). run.json's `gpu_state` is this module's `GpuStateWatch.record()` (docs/run-format.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collect.sources import SourceSet
from collect.sources.nvml import memory_used_bytes, nvml_text
from collect.sources.process import read_parent

STATE_PERIOD_S = 5.0  # each GPU's state and process list are read again this often
MAX_CHANGES = 1000  # past this, changes are counted in `changes_dropped` (an idle link flaps its generation)
_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND, _GPU_IS_LOST = 3, 4, 13, 15
_ASK_NO_MORE = (_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND)
_NOT_AVAILABLE = 2**63  # usedGpuMemory at or above this is NVML_VALUE_NOT_AVAILABLE in an old binding
_PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
)
_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
STATE_FIELDS = (
    "power_limit_w",
    "power_limit_default_w",
    "power_limit_min_w",
    "power_limit_max_w",
    "applications_clock_sm_mhz",
    "applications_clock_mem_mhz",
    "default_applications_clock_sm_mhz",
    "default_applications_clock_mem_mhz",
    "mig_mode",
    "persistence_mode",
    "compute_mode",
    "ecc_mode",
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width",
    "pcie_link_width_max",
)

# (fields it fills, NVML function, arguments after the handle, its answer -> the fields' values)
_Call = tuple[tuple[str, ...], str, tuple[Any, ...], Callable[[Any], tuple[Any, ...]]]


def _watts(milliwatts: Any) -> float:
    return round(int(milliwatts) / 1000.0, 2)


def _switch(value: Any) -> str | None:
    """NVML's enable state (a [current, pending] pair for MIG and ECC): the current one, as a word."""
    current = value[0] if isinstance(value, list | tuple) else value
    return {0: "disabled", 1: "enabled"}.get(int(current))


def _int(value: Any) -> tuple[int]:
    return (int(value),)


def _state_calls(nvml: Any) -> list[_Call]:
    sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    app, default_app = "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetDefaultApplicationsClock"
    return [
        (("power_limit_w",), "nvmlDeviceGetEnforcedPowerLimit", (), lambda v: (_watts(v),)),
        (("power_limit_default_w",), "nvmlDeviceGetPowerManagementDefaultLimit", (), lambda v: (_watts(v),)),
        (
            ("power_limit_min_w", "power_limit_max_w"),
            "nvmlDeviceGetPowerManagementLimitConstraints",
            (),
            lambda v: (_watts(v[0]), _watts(v[1])),
        ),
        (("applications_clock_sm_mhz",), app, (sm,), _int),
        (("applications_clock_mem_mhz",), app, (mem,), _int),
        (("default_applications_clock_sm_mhz",), default_app, (sm,), _int),
        (("default_applications_clock_mem_mhz",), default_app, (mem,), _int),
        (("mig_mode",), "nvmlDeviceGetMigMode", (), lambda v: (_switch(v),)),
        (("persistence_mode",), "nvmlDeviceGetPersistenceMode", (), lambda v: (_switch(v),)),
        (("compute_mode",), "nvmlDeviceGetComputeMode", (), lambda v: (_COMPUTE_MODES.get(int(v)),)),
        (("ecc_mode",), "nvmlDeviceGetEccMode", (), lambda v: (_switch(v),)),
        (("pcie_link_gen",), "nvmlDeviceGetCurrPcieLinkGeneration", (), _int),
        (("pcie_link_gen_max",), "nvmlDeviceGetMaxPcieLinkGeneration", (), _int),
        (("pcie_link_width",), "nvmlDeviceGetCurrPcieLinkWidth", (), _int),
        (("pcie_link_width_max",), "nvmlDeviceGetMaxPcieLinkWidth", (), _int),
    ]


@dataclass
class _Board:
    index: int  # the i in gpu<i>_*
    handle: Any
    lost: bool = False
    refused: set[int] = field(default_factory=set)  # calls (by position) not asked again
    last: dict[str, Any] = field(default_factory=dict)  # each field's last known value
    no_process_call: bool = False  # the process list is not asked again


def _descends_from(proc_root: Path, pid: int, ancestors: Collection[int]) -> bool:
    """Whether a parent, grandparent... of `pid` is one of `ancestors`."""
    for _ in range(64):
        parent = read_parent(proc_root, str(pid))
        if parent is None or parent <= 0:
            return False
        if parent in ancestors:
            return True
        if parent == 1:
            return False
        pid = parent
    return False


def nested_pid_namespace(proc_root: Path) -> bool:
    """Whether the collector runs in a pid namespace below another (a container): /proc/self/status's
    NSpid lists one pid per level. NVML then may list the host's pids, which no /proc here can match."""
    try:
        status = (proc_root / "self" / "status").read_text(errors="replace")
    except OSError:
        return False
    line = next((line for line in status.splitlines() if line.startswith("NSpid:")), "")
    return len(line.split()) > 2


class GpuStateWatch:
    """The state of each visible GPU (`handles`, in gpu<i> order) and the compute processes on it that are
    neither the command's (`tree_pids()`, or their descendants) nor the collector itself."""

    def __init__(
        self,
        nvml: Any,
        handles: list[Any],
        tree_pids: Callable[[], Iterable[int]],
        proc_root: Path = Path("/proc"),
        own_pid: int | None = None,
        period_s: float = STATE_PERIOD_S,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nvml = nvml
        self._calls = _state_calls(nvml)
        self._boards = [_Board(index, handle) for index, handle in enumerate(handles)]
        self._tree_pids = tree_pids
        self._proc_root = proc_root
        self._own_pid = os.getpid() if own_pid is None else own_pid
        self._gap_s = period_s / max(1, len(handles))  # one GPU per turn
        self._wall_clock, self._monotonic = wall_clock, monotonic
        self._next_at = float("inf")
        self._turn = 0
        self._ours: set[int] = set()  # pids once seen in the command's tree
        self.start: list[dict[str, Any]] = []
        self.end: list[dict[str, Any]] = []
        self.before_training: list[dict[str, Any]] = []
        self.changes: list[dict[str, Any]] = []
        self.changes_dropped = 0
        self._others: dict[tuple[int, int], dict[str, Any]] = {}
        self._command: dict[tuple[int, int], dict[str, Any]] = {}  # the command's own processes, per GPU
        self._process_reasons: list[str] = []
        self._nested = nested_pid_namespace(proc_root)
        if self._nested:
            self._process_reasons.append(
                "the collector runs in a pid namespace of its own (a container): NVML's pids may be the "
                "host's, so the training's processes cannot be told from another tenant's"
            )

    # ---- when -----------------------------------------------------------------------------------

    def read_start(self) -> None:
        """The state and the board's readings before the command exists (every process is another's)."""
        now_unix = self._wall_clock()
        tree = self._tree()
        for board in self._boards:
            self.start.append(self._read_state(board))
            board.last = dict(self.start[-1])
            others = self._check_processes(board, now_unix, tree)
            if others is None and self._nested and not board.no_process_call:
                others = self._count_processes(board)  # before the command, every process is another's
            self.before_training.append(
                {"index": board.index, **self._readings(board), "compute_processes": others}
            )
        self._next_at = self._monotonic() + self._gap_s

    def maintain(self, now: float) -> None:
        """Called on every tick (monotonic `now`): costs a comparison until the next GPU's turn."""
        if now < self._next_at or not self._boards:
            return
        self._next_at = now + self._gap_s
        board = self._boards[self._turn]
        self._turn = (self._turn + 1) % len(self._boards)
        now_unix = self._wall_clock()
        self._compare(board, self._read_state(board), now_unix)
        self._check_processes(board, now_unix, self._tree())

    def read_end(self) -> None:
        """The state after the command ended (before NVML is shut down); the last look at the processes."""
        if self.end:
            return
        now_unix = self._wall_clock()
        tree = self._tree()
        for board in self._boards:
            state = self._read_state(board)
            self._compare(board, state, now_unix)
            self._check_processes(board, now_unix, tree)
            self.end.append(state)
        self._next_at = float("inf")

    def record(self) -> dict[str, Any]:
        """run.json's `gpu_state` (`end` is empty until read_end)."""
        record: dict[str, Any] = {
            "start": [dict(state) for state in self.start],
            "end": [dict(state) for state in self.end],
            "changes": [dict(change) for change in self.changes],
            "processes_checked": not self._process_reasons,
        }
        if self._process_reasons:
            record["processes_reason"] = "; ".join(self._process_reasons)
        if self.changes_dropped:
            record["changes_dropped"] = self.changes_dropped
        others = sorted(self._others.values(), key=lambda o: (o["first_seen_unix"], o["index"], o["pid"]))
        record["other_processes"] = [dict(other) for other in others]
        ours = sorted(self._command.values(), key=lambda o: (o["first_seen_unix"], o["index"], o["pid"]))
        record["command_processes"] = [dict(own) for own in ours]
        record["before_training"] = [dict(readings) for readings in self.before_training]
        return record

    # ---- what -----------------------------------------------------------------------------------

    def _read_state(self, board: _Board) -> dict[str, Any]:
        state: dict[str, Any] = {"index": board.index, **dict.fromkeys(STATE_FIELDS)}
        for position, (fields, name, args, convert) in enumerate(self._calls):
            if board.lost or position in board.refused:
                continue
            try:
                values = convert(getattr(self._nvml, name)(board.handle, *args))
            except Exception as exc:
                self._refused(board, exc, lambda p=position: board.refused.add(p))
                continue
            state.update(zip(fields, values, strict=True))
        return state

    def _refused(self, board: _Board, exc: Exception, ask_no_more: Callable[[], None]) -> None:
        code = getattr(exc, "value", None)
        if code == _GPU_IS_LOST:
            board.lost = True
        elif isinstance(exc, AttributeError) or code in _ASK_NO_MORE:
            ask_no_more()

    def _readings(self, board: _Board) -> dict[str, Any]:
        nvml, handle = self._nvml, board.handle
        return {
            "util_pct": self._optional(lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)),
            "mem_used_bytes": self._optional(lambda: memory_used_bytes(nvml, handle)[0]),
            "power_w": self._optional(lambda: _watts(nvml.nvmlDeviceGetPowerUsage(handle))),
        }

    @staticmethod
    def _optional(read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Exception:
            return None

    def _compare(self, board: _Board, state: dict[str, Any], now_unix: float) -> None:
        for name in STATE_FIELDS:
            new, old = state[name], board.last.get(name)
            if new is None or new == old:
                continue
            board.last[name] = new
            if len(self.changes) >= MAX_CHANGES:
                self.changes_dropped += 1
                continue
            change = {
                "time_unix": round(now_unix, 3),
                "index": board.index,
                "field": name,
                "from": old,
                "to": new,
            }
            self.changes.append(change)

    # ---- who else -------------------------------------------------------------------------------

    def _tree(self) -> set[int]:
        try:
            tree = set(self._tree_pids())
        except Exception:
            tree = set()
        self._ours |= tree
        return tree

    def _list_processes(self, board: _Board) -> list[Any]:
        """The compute processes, through the first call the binding and the driver have."""
        failure: Exception = AttributeError(f"the NVML binding has no {_PROCESS_CALLS[0]}")
        for name in _PROCESS_CALLS:
            call = getattr(self._nvml, name, None)
            if call is None:
                continue
            try:
                return list(call(board.handle))
            except Exception as exc:
                failure = exc
                if getattr(exc, "value", None) not in (None, _FUNCTION_NOT_FOUND):
                    break  # refused, not missing: an older version would be refused too
        raise failure

    def _count_processes(self, board: _Board) -> int | None:
        try:
            return len(self._list_processes(board))
        except Exception:
            return None

    def _check_processes(self, board: _Board, now_unix: float, tree: set[int]) -> int | None:
        """Note the other processes on this GPU; how many there are (None: the list was refused)."""
        if board.lost or board.no_process_call or self._process_reasons:
            return None
        try:
            entries = self._list_processes(board)
        except Exception as exc:
            self._refused(board, exc, lambda: setattr(board, "no_process_call", True))
            why = nvml_text(exc) or type(exc).__name__
            reason = f"gpu{board.index}: the process list was refused ({why})"
            if reason not in self._process_reasons:
                self._process_reasons.append(reason)
            return None
        count = 0
        for entry in entries:
            pid = int(entry.pid)
            if pid == self._own_pid:
                continue
            memory = getattr(entry, "usedGpuMemory", None)
            if pid in self._ours or (tree and _descends_from(self._proc_root, pid, tree)):
                self._ours.add(pid)
                self._seen(board.index, pid, memory, now_unix, self._command)
                continue
            count += 1
            self._seen(board.index, pid, memory, now_unix, self._others)
        return count

    def _seen(
        self, index: int, pid: int, used_memory: Any, now_unix: float, seen: dict[tuple[int, int], dict]
    ) -> None:
        memory = (
            int(used_memory) if isinstance(used_memory, int) and 0 <= used_memory < _NOT_AVAILABLE else None
        )
        other = seen.get((index, pid))
        if other is None:
            other = seen[(index, pid)] = {
                "index": index,
                "pid": pid,
                "name": None,
                "used_memory_bytes": None,
                "first_seen_unix": round(now_unix, 3),
            }
        if other["name"] is None:
            other["name"] = self._process_name(pid)
        if memory is not None:
            other["used_memory_bytes"] = max(memory, other["used_memory_bytes"] or 0)
        other["last_seen_unix"] = round(now_unix, 3)

    def _process_name(self, pid: int) -> str | None:
        name = self._optional(lambda: nvml_text(self._nvml.nvmlSystemGetProcessName(pid)))
        if name:
            return name
        try:
            return (self._proc_root / str(pid) / "comm").read_text().strip() or None
        except (OSError, UnicodeDecodeError):
            return None


def watch_gpu_state(sources: SourceSet, proc_root: Path) -> GpuStateWatch | None:
    """The watch over the sources' visible GPUs, its start read done; None without an NVML source."""
    if sources.nvml is None:
        return None
    nvml, handles = sources.nvml.board_handles()
    watch = GpuStateWatch(nvml, handles, lambda: sources.process.pids, proc_root, period_s=STATE_PERIOD_S)
    watch.read_start()
    return watch
