"""What a job's run (`collect timed ... -- COMMAND`, the user's own training) says about its own progress.

The collector writes a job's training.json with a `progress` object (docs/run-format.md, "A job's training
files"): where its steps came from, what was skipped, and, when it saw none, the command's last lines.
"""

from __future__ import annotations

SHOWN_LAST_LINES = 5


def is_job(training_info: dict) -> bool:
    return isinstance(training_info.get("workload"), dict) and isinstance(training_info.get("progress"), dict)


def job_warnings(run_id: str, training_info: dict, examples_known: bool, steps_known: bool) -> list[str]:
    """One line per thing the reader must know: no progress (with the last lines), skipped protocol lines,
    throughput in steps/s only, the devices the job used not known."""
    if not is_job(training_info):
        return []
    progress = training_info["progress"]
    found = []
    if not progress.get("rows"):
        lines = [str(line) for line in progress.get("last_lines") or []][-SHOWN_LAST_LINES:]
        tail = " ⏎ ".join(lines) if lines else "(no output)"
        asked = progress.get("patterns") or "no pattern, no protocol line"
        found.append(f"{run_id}: {progress.get('note') or 'no progress seen'} ({asked}); the command's last "
                     f"lines: {tail}")  # fmt: skip
    if progress.get("protocol_malformed"):
        found.append(f"{run_id}: {progress['protocol_malformed']} malformed progress protocol lines skipped")
    if steps_known and not examples_known:
        found.append(
            f"{run_id}: examples per step not known (no --batch, no examples in its progress): its "
            "throughput is in steps/s, and a speedup against a run of the same job compares steps/s"
        )
    used_from = training_info.get("gpus_used_from")
    if training_info.get("device_requested") == "gpu" and not training_info.get("device_used") and used_from:
        found.append(f"{run_id}: the GPUs the job used: {used_from}")
    return found
