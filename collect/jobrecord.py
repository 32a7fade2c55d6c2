"""The training files of a job: what `collect timed ... -- COMMAND` writes besides the telemetry.

The job is the user's own command; the collector turns what it says about its progress (its output through
the progress patterns, and the WORKBENCH_PROGRESS protocol file) into training.csv, training.json and
phases.csv, in the shape the training workload writes them (docs/run-format.md, "A job's training files"),
so the sizing report and the dashboard read a job as they read our training.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collect.joblines import LineScanner
from collect.jobpatterns import FORMAT_ENV, ProgressPatterns
from collect.jobprotocol import PROTOCOL_FILE, ProtocolReader
from collect.jobsteps import StepCounter, StepLog
from collect.options import RUN_DIR_PLACEHOLDER
from runformat import FORMAT_VERSION, PHASES_CSV, RUN_JSON, TRAINING_JSON, read_json, write_json_atomic

PROGRESS_ENV = "WORKBENCH_PROGRESS"
POLL_S = 0.02  # a protocol line without its own time_unix is stamped when read
NO_PROGRESS = "no progress seen: is the pattern right?"
NOTHING_ASKED = (
    "no progress asked for: give --progress-format, --progress-regex, or write the WORKBENCH_PROGRESS "
    "protocol (docs/run-format.md)"
)
STATUS_OF_END = {name: name for name in ("completed", "failed", "deadline", "interrupted")}
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class JobDeclared:
    """What the user says about the job on the command line (None: not said)."""

    workload_name: str | None = None
    batch_size: int | None = None
    precision: str | None = None
    flops_per_example: float | None = None


def callbacks_path() -> str | None:
    """The directory that makes `runformat.callbacks` importable: this checkout, not an installed copy
    (a site-packages directory on the job's path would bring the collector's packages into the job's)."""
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "runformat" / "callbacks.py").is_file():
        return str(REPO_ROOT)
    return None


def job_environment(
    device: str, patterns: ProgressPatterns, environ: dict[str, str], hide_gpus: bool = True
) -> dict[str, str]:
    """What the job's environment gets: the protocol file, the callbacks on its path, what a format needs,
    and on the CPU (`hide_gpus`) no GPU for CUDA: the job is measured on the CPU."""
    env = {PROGRESS_ENV: f"{RUN_DIR_PLACEHOLDER}/{PROTOCOL_FILE}"}
    extra = callbacks_path()
    if extra is not None:
        current = environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = f"{current}{os.pathsep}{extra}" if current else extra
    if patterns.format:
        env.update(FORMAT_ENV.get(patterns.format, {}))
    if device == "cpu" and hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class JobRecorder:
    """Fed the command's output (on_output, from the output pump's thread) and polling the protocol file
    (its own thread) from `start` to `finish`."""

    def __init__(
        self,
        command: list[str],
        patterns: ProgressPatterns,
        declared: JobDeclared,
        device: str,
        budget_s: float | None,
        hides_gpus: bool = True,
    ) -> None:
        """`hides_gpus`: the job runs with CUDA_VISIBLE_DEVICES='' on the CPU (job_environment)."""
        self.command = list(command)
        self.hides_gpus = hides_gpus and device == "cpu"
        self.patterns = patterns
        self.declared = declared
        self.device = device
        self.budget_s = budget_s
        self.run_dir: Path | None = None
        self.start_unix = time.time()
        self.output_end_unix: float | None = None
        self.from_protocol: dict[str, Any] = {}  # what the protocol declared (last value wins)
        self.protocol_steps = 0
        self.output_steps_ignored = 0
        self._sources = threading.Lock()  # at the protocol's first step, output steps stop and their rows go
        self._counter = StepCounter(patterns.has_epoch)
        self.scanner = LineScanner(patterns, self._on_match)
        self.steps: StepLog | None = None
        self.reader: ProtocolReader | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def run_record(self) -> dict[str, Any]:
        """run.json's `job`: what was asked."""
        return {
            "progress_patterns": self.patterns.describe() or None,
            "progress_format": self.patterns.format,
            "progress_regex": list(self.patterns.regexes),
            "protocol_file": PROTOCOL_FILE,
            "workload_name": self.declared.workload_name,
            "batch_size": self.declared.batch_size,
            "precision": self.declared.precision,
            "flops_per_example": self.declared.flops_per_example,
        }

    # ---- while it runs ---------------------------------------------------------------------------

    def start(self, run_dir: Path) -> None:
        """Before the command starts: the protocol file exists, training.json says running."""
        self.run_dir = Path(run_dir)
        self.start_unix = time.time()
        (self.run_dir / PROTOCOL_FILE).touch()
        self.steps = StepLog(self.run_dir, self.start_unix, self.declared.batch_size)
        self.reader = ProtocolReader(self.run_dir / PROTOCOL_FILE, self.start_unix)
        write_json_atomic(self.run_dir / TRAINING_JSON, self.training_record("running"))
        self._poller = threading.Thread(target=self._poll, name="collect-job-progress", daemon=True)
        self._poller.start()

    def on_output(self, chunk: bytes) -> None:
        if chunk:
            self.scanner.feed(chunk)
            return
        self.scanner.close()
        self.output_end_unix = self.output_end_unix or time.time()

    def _on_match(self, groups: dict[str, str]) -> None:
        step = self._counter.feed(groups, time.time())
        if step is None or self.steps is None:
            return
        with self._sources:
            if self.protocol_steps:
                self.output_steps_ignored += 1  # the protocol's steps are the job's own word
                return
            self.steps.add(step)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            self._read_protocol(final=False)

    def _read_protocol(self, final: bool) -> None:
        if self.reader is None or self.steps is None:
            return
        while True:
            for parsed in self.reader.read(time.time(), final):
                self.from_protocol.update(parsed.declared)
                if parsed.step is None:
                    continue
                with self._sources:
                    if not self.protocol_steps:  # the output's bar may have shown a step or two first
                        self.output_steps_ignored += self.steps.restart()
                    self.protocol_steps += 1
                self.steps.add(parsed.step)
            if not (final and self.reader.more):
                return

    # ---- at the end -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop following the protocol file (idempotent); the last lines are read."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
            self._poller = None
            self._read_protocol(final=True)
        if self.reader is not None:
            self.reader.close()
        self.scanner.close()
        if self.steps is not None:
            self.steps.close()

    def finish(self, end_reason: str, exit_code: int | None, error: str | None = None) -> dict[str, Any]:
        """The final training.json and the `train` phase; returns training.json's record."""
        self.stop()
        if self.run_dir is None:
            return {}
        meta = _read(self.run_dir / RUN_JSON)
        end_unix = self.output_end_unix or meta.get("end_unix") or time.time()
        status = STATUS_OF_END.get(end_reason, "failed")
        if status == "failed" and error is None:
            error = meta.get("error") or _exit_text(meta.get("exit_code", exit_code))
        record = self.training_record(status, end_unix, meta, error)
        with contextlib.suppress(OSError):
            write_json_atomic(self.run_dir / TRAINING_JSON, record)
            _append_phase(self.run_dir, self.start_unix, end_unix, status in ("completed", "deadline"))
        return record

    def training_record(
        self, status: str, end_unix: float | None = None, meta: dict | None = None, error: str | None = None
    ) -> dict[str, Any]:
        declared = {**self.from_protocol}
        steps = self.steps
        first = steps.first if steps else None
        last = steps.last if steps else None
        record: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "status": status,
            "pid": os.getpid(),  # the collector writes this file: while it lives, the record may change
            "host": socket.gethostname(),
            "device_requested": self.device,
            **_devices(self.device, meta or {}, self.hides_gpus),
            "framework": declared.get("framework"),
            "framework_version": declared.get("framework_version"),
            "library": declared.get("library"),
            "batch_size": self.declared.batch_size or declared.get("batch_size"),
            "precision": self.declared.precision or declared.get("precision"),
            "workload": self._workload(declared),
            **self._flops(declared),
            "duration_budget_s": self.budget_s,
            "start_unix": round(self.start_unix, 6),
            "end_unix": round(end_unix, 6) if end_unix else None,
            "first_step_s": round(first.time_unix - self.start_unix, 3) if first else None,
            "steps": last.step if last else 0,
            "initial_step": 0,
            "global_step": last.step if last else 0,
            "loss_read_every_steps": 1,
            "progress": self._progress_record(final=end_unix is not None),
        }
        if error:
            record["error"] = error
        return record

    def _flops(self, declared: dict[str, Any]) -> dict[str, Any]:
        """training.json `flops` from the FLOPs per example the job declared; {} when it declared none."""
        per_example = self.declared.flops_per_example
        method = "declared by the user (--flops-per-example)"
        if per_example is None:
            per_example = declared.get("flops_per_example")
            method = "declared by the job (protocol flops_per_example)"
        return {"flops": {"per_example": per_example, "method": method}} if per_example is not None else {}

    def _workload(self, declared: dict[str, Any]) -> dict[str, Any]:
        if self.declared.workload_name:
            return {"name": self.declared.workload_name, "from": "--workload-name", "command": self._line()}
        if declared.get("workload_name"):
            return {"name": declared["workload_name"], "from": "progress protocol", "command": self._line()}
        return {"name": self._line(), "from": "command line", "command": self._line()}

    def _line(self) -> str:
        return shlex.join(self.command)

    def _progress_record(self, final: bool) -> dict[str, Any]:
        scanner, reader, steps = self.scanner, self.reader, self.steps
        rows = steps.rows if steps else 0
        record: dict[str, Any] = {
            "from": ("protocol" if self.protocol_steps else "output") if rows else None,
            "patterns": self.patterns.describe() or None,
            "rows": rows,
            "output_bytes": scanner.output_bytes,
            "matched_lines": scanner.matched_lines,
            "cut_lines": scanner.cut_lines,
            "protocol_lines": reader.lines if reader else 0,
            "protocol_malformed": reader.malformed if reader else 0,
            "protocol_problems": dict(reader.problems) if reader else {},
            "output_steps_ignored": self.output_steps_ignored,
            "steps_not_forward": steps.skipped if steps else 0,
        }
        if steps is not None and steps.write_error:
            record["error"] = steps.write_error
        if final and not rows:
            record["note"] = NO_PROGRESS if not self.patterns.empty else NOTHING_ASKED
            record["last_lines"] = scanner.tail()
        return record


def _devices(device: str, meta: dict, hid_gpus: bool) -> dict[str, Any]:
    """device_used, gpu_names and gpu_uuids from the GPUs NVML saw the job's processes on."""
    gpus = {g.get("index"): g for g in (meta.get("system") or {}).get("gpus") or [] if isinstance(g, dict)}
    state = meta.get("gpu_state") if isinstance(meta.get("gpu_state"), dict) else None
    processes = (state or {}).get("command_processes") or []
    seen = sorted({p.get("index") for p in processes if isinstance(p, dict)})
    used = [gpus[i] for i in seen if i in gpus]
    names = [str(g.get("name")) for g in used if g.get("name")]
    found = {
        "gpu_names": names,
        "gpu_uuids": [str(g.get("uuid")) for g in used if g.get("uuid")],
    }
    if used:
        return {"device_used": " + ".join(names) or "GPU", **found, "gpus_used_from": "NVML per-process list"}
    if hid_gpus:
        return {"device_used": "CPU", **found, "gpus_used_from": "the job ran with CUDA_VISIBLE_DEVICES=''"}
    if state is None:
        why = "not known yet" if not meta else "not known: no NVML on this host"
    elif not state.get("processes_checked", True):
        why = f"not known: {state.get('processes_reason')}"
    else:
        why = "no process of the job was seen on a GPU (NVML's per-process list, every 5 s)"
    return {"device_used": "CPU" if device == "cpu" else None, **found, "gpus_used_from": why}


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_json(path)
    except ValueError:
        return {}


def _exit_text(code: Any) -> str:
    if isinstance(code, int) and code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _append_phase(run_dir: Path, start_unix: float, end_unix: float, ok: bool) -> None:
    """phases.csv's `train` row (the columns training/runlog.py writes)."""
    path = run_dir / PHASES_CSV
    header = "" if path.exists() and path.stat().st_size else "phase,start_unix,end_unix,status\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{header}train,{start_unix:.6f},{end_unix:.6f},{'ok' if ok else 'failed'}\n")
