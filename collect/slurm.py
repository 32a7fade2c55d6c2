"""The Slurm allocation a run was recorded in, and why Slurm stopped it (standard library only).

Read from the job's environment (`SLURM_*`, `CUDA_VISIBLE_DEVICES`) and, for the stop reason, from
`scontrol show job`. Outside a Slurm job every answer is None or empty: nothing here needs Slurm installed.
`python -m collect.slurm record-stop ...` is what scripts/slurm/node.sh calls after an interrupted run.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from runformat import RUN_JSON, RUNS_SUBDIR, read_json, write_json_atomic
from runformat.cli import OneLineParser

# run.json key -> the environment variable it is read from (kept as text: Slurm's own notation).
_TEXT_FIELDS = {
    "job_id": "SLURM_JOB_ID",
    "job_name": "SLURM_JOB_NAME",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "cluster": "SLURM_CLUSTER_NAME",
    "partition": "SLURM_JOB_PARTITION",
    "nodelist": "SLURM_JOB_NODELIST",
    "node_name": "SLURMD_NODENAME",
    "cpus_per_node": "SLURM_JOB_CPUS_PER_NODE",
    "job_gpus": "SLURM_JOB_GPUS",
    "cuda_visible_devices": "CUDA_VISIBLE_DEVICES",
}
_INT_FIELDS = {
    "nnodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
    "node_rank": ("SLURM_NODEID",),
    "cpus_per_task": ("SLURM_CPUS_PER_TASK",),
    "cpus_on_node": ("SLURM_CPUS_ON_NODE",),
    "gpus_on_node": ("SLURM_GPUS_ON_NODE",),
    "mem_per_node_mb": ("SLURM_MEM_PER_NODE",),
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")
# How long before the time limit a SIGTERM still counts as Slurm's `--signal=B:TERM@N` warning.
TIME_LIMIT_WARNING_WINDOW_S = 300.0
_STATE_REASONS = {
    "CANCELLED": "cancelled (scancel)",
    "TIMEOUT": "time limit (--time) reached",
    "NODE_FAIL": "node failure",
    "PREEMPTED": "preempted",
    "DEADLINE": "deadline (--deadline) reached",
    "OUT_OF_MEMORY": "out of memory",
    "BOOT_FAIL": "node boot failure",
    "REQUEUED": "requeued",
}

# SIGNALING: a running job while slurmctld still sends it a signal (the --signal warning itself, say).
_STILL_RUNNING = ("RUNNING", "SIGNALING")

ScontrolRunner = Callable[[str], str]


def in_slurm_job(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SLURM_JOB_ID"))


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def gpu_list(text: str | None) -> list[str] | None:
    """`0,1` -> ["0", "1"]; None when the variable is not set (unknown is not 'no GPUs')."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def allocation(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """run.json's `system.slurm`: the job's allocation, or None outside a Slurm job."""
    if not in_slurm_job(environ):
        return None
    record: dict[str, Any] = {key: environ.get(name) or None for key, name in _TEXT_FIELDS.items()}
    for key, names in _INT_FIELDS.items():
        record[key] = next((_int_or_none(environ.get(n)) for n in names if environ.get(n)), None)
    record["gpus"] = gpu_list(environ.get("SLURM_JOB_GPUS", environ.get("CUDA_VISIBLE_DEVICES")))
    return record


def job_tag(environ: Mapping[str, str]) -> str | None:
    """`job1234`, or `job1234_7` for task 7 of array job 1234; None outside Slurm."""
    if not in_slurm_job(environ):
        return None
    array_job, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    tag = f"job{array_job}_{task}" if array_job and task else f"job{environ['SLURM_JOB_ID']}"
    return _UNSAFE.sub("-", tag)[:40]


def run_id_suffix(environ: Mapping[str, str]) -> str:
    """What a run id gets after `<start>-<device>-<host>` inside a Slurm job: `-job1234[_7]`, else ''."""
    tag = job_tag(environ)
    return f"-{tag}" if tag else ""


# ---- why Slurm stopped the job -------------------------------------------------------------------
# slurmstepd writes `*** JOB 12 ON node1 CANCELLED AT 2026-11-23T21:33:04 [DUE TO TIME LIMIT] ***` into the
# job's output when it ends a job; scontrol shows such a job as COMPLETING until it is gone.
_STEPD_LINE = re.compile(r"\*\*\* JOB (\d+) ON (\S+) CANCELLED AT (\S+)(?: DUE TO ([A-Z ]+?))? \*\*\*")
_DUE_TO = {
    None: "cancelled (scancel)",
    "TIME LIMIT": "time limit (--time) reached",
    "NODE FAILURE": "node failure",
    "PREEMPTION": "preempted",
    "JOB REQUEUE": "requeued",
}


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job -o ID` (one line of Key=Value pairs) -> a dict; values are single words."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", text.strip()))


def _slurm_time(text: str | None) -> float | None:
    """Slurm's `2026-11-23T21:50:00` (the controller's local time) as Unix seconds; None if not a time."""
    try:
        return datetime.strptime(text or "", "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def _slurm_duration_s(text: str | None) -> float | None:
    """Slurm's `[days-]hours:minutes:seconds` (also `minutes:seconds`) as seconds; None for UNLIMITED."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text or "")
    if match is None:
        return None
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def stepd_verdict(job_output: str, job_id: str) -> str | None:
    """The reason in slurmstepd's last line about this job in its output, if it wrote one."""
    dues = [m.group(4) for m in _STEPD_LINE.finditer(job_output) if m.group(1) == job_id]
    if not dues:
        return None
    return _DUE_TO[dues[-1]] if dues[-1] in _DUE_TO else f"cancelled ({dues[-1].lower()})"


def _signalled_by_slurm(job_output: str, job_id: str) -> bool:
    """slurmstepd writes `*** JOB 12 ... CANCELLED` or `*** STEP 12.0 ... CANCELLED` for a signal too."""
    pattern = rf"\*\*\* (?:JOB|STEP) {re.escape(job_id)}\b\S* ON \S+ CANCELLED"
    return re.search(pattern, job_output) is not None


def stop_reason(job: Mapping[str, str], signal_unix: float | None, job_output: str = "") -> dict[str, Any]:
    """run.json's `slurm_stop`: why Slurm stopped the job, in words, or None where it cannot be told.

    A job still RUNNING (or SIGNALING) after the run stopped was signalled, not ended: the time limit's
    `--signal` warning, or `scancel --signal`. A job on its way out (COMPLETING, CANCELLED...) was ended:
    slurmstepd's line in its output says why."""
    state = (job.get("JobState") or "").upper() or None
    start_unix = _slurm_time(job.get("StartTime"))
    limit_s = _slurm_duration_s(job.get("TimeLimit"))
    limit_unix = None if start_unix is None or limit_s is None else start_unix + limit_s
    time_left_s = None if limit_unix is None or signal_unix is None else round(limit_unix - signal_unix, 1)
    job_id = job.get("JobId", "")
    reason = _STATE_REASONS.get(state or "")
    if state in _STILL_RUNNING:
        if time_left_s is not None and 0 <= time_left_s <= TIME_LIMIT_WARNING_WINDOW_S:
            reason = f"time limit (--time): warned {time_left_s:.0f} s before it (--signal)"
        elif _signalled_by_slurm(job_output, job_id):
            reason = "signalled while running (scancel --signal, or an early --signal)"
    elif reason is None:
        reason = stepd_verdict(job_output, job_id)
    # Otherwise a kill by hand, which Slurm cannot tell apart: the reason stays unknown.
    slurm_reason = job.get("Reason")
    return {
        "reason": reason,
        "job_state": state,
        "slurm_reason": None if slurm_reason in (None, "", "None") else slurm_reason,
        "signal_unix": signal_unix,
        "time_left_s": time_left_s,
    }


def _job_output(job: Mapping[str, str]) -> str:
    """The batch step's output (where slurmstepd says why it ended the job); '' when unreadable."""
    for key in ("StdErr", "StdOut"):
        if job.get(key):
            with contextlib.suppress(OSError):
                return Path(job[key]).read_text(encoding="utf-8", errors="replace")[-65536:]
    return ""


def run_scontrol(job_id: str) -> str:
    """`scontrol show job -o JOB_ID`; OSError or CalledProcessError when Slurm cannot answer."""
    return subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True, timeout=20
    ).stdout


def job_runs(data_dir: Path, environ: Mapping[str, str], host: str | None = None) -> list[Path]:
    """This job's run directories under data_dir/runs (the run id carries the job tag): every node's, or
    only `host`'s."""
    tag = job_tag(environ)
    runs = Path(data_dir) / RUNS_SUBDIR
    if tag is None or not runs.is_dir():
        return []
    found = []
    for run_dir in sorted(runs.glob(f"*-{tag}*")):
        try:
            record = read_json(run_dir / RUN_JSON)
        except ValueError:
            continue
        slurm = (record.get("system") or {}).get("slurm") or {}
        if slurm.get("job_id") == environ.get("SLURM_JOB_ID") and host in (None, record.get("host")):
            found.append(run_dir)
    return found


def record_stop(
    data_dir: Path,
    environ: Mapping[str, str],
    signal_unix: float | None,
    host: str | None = None,
    scontrol: ScontrolRunner = run_scontrol,
) -> list[Path]:
    """Add `slurm_stop` to this job's interrupted runs (every node's, on shared storage); returns them."""
    runs = [
        run_dir
        for run_dir in job_runs(data_dir, environ, host)
        if read_json(run_dir / RUN_JSON).get("end_reason") == "interrupted"
    ]
    if not runs:
        return []
    try:
        job = parse_scontrol(scontrol(environ["SLURM_JOB_ID"]))
        stop = stop_reason(job, signal_unix, _job_output(job))
    except (OSError, subprocess.SubprocessError) as exc:
        stop = stop_reason({}, signal_unix)
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        stop["not_known_because"] = f"scontrol: {detail}"
    for run_dir in runs:
        record = read_json(run_dir / RUN_JSON)
        record["slurm_stop"] = stop
        notes = record.get("notes") or []
        notes = [notes] if isinstance(notes, str) else list(notes)
        reason = stop["reason"] or "reason not known"
        notes.append(f"stopped by Slurm: {reason} (job state {stop['job_state']})")
        record["notes"] = notes
        write_json_atomic(run_dir / RUN_JSON, record)
    return runs


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m collect.slurm",
        description="record-stop: after an interrupted run in a Slurm job, add why Slurm stopped it to "
        "run.json (`slurm_stop`) of this job's runs under DATA_DIR.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    record = commands.add_parser("record-stop", help="add `slurm_stop` to this job's interrupted runs")
    record.add_argument("--data-dir", type=Path, required=True)
    record.add_argument("--signal-at", type=float, help="when the stop signal arrived (Unix seconds)")
    args = parser.parse_args(argv)
    environ = os.environ if environ is None else environ
    if not in_slurm_job(environ):
        print("python -m collect.slurm: error: not in a Slurm job (no SLURM_JOB_ID)", file=sys.stderr)
        return 2
    try:
        written = record_stop(args.data_dir, environ, args.signal_at if args.signal_at else time.time())
    except (OSError, ValueError) as exc:
        print(f"python -m collect.slurm: error: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    for run_dir in written:
        print(f"collect.slurm: recorded why Slurm stopped the run in {run_dir / RUN_JSON}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
