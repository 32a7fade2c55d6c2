"""`import-nvidia-smi --into RUN_DIR`: a GPU log merged into a sysstat import of the same host and time,
end to end with a real `sadc` recording, then sized."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nvsmifixtures import LOG_ZONE, Gpu, capped, collect, query_gpu_log, sysstat_run_with_gpu_log

from runformat import read_json
from sizing.analysis import gpu_verdicts as gv

SADF_HEADER = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle"
T0 = 1795438920  # 2026-11-23 13:02:00 UTC


def rows_of(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "telemetry.csv", encoding="ascii", newline="") as handle:
        return list(csv.DictReader(handle))


def sysstat_text_run(tmp_path: Path) -> Path:
    lines = [SADF_HEADER] + [
        f"db1;10;{T0 + 10 * k};-1;{20 + k}.00;0.00;5.00;1.00;0.00;{74 - k}.00" for k in range(1, 7)
    ]
    text = tmp_path / "sa.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = collect("import-sysstat", str(text), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    return Path(done.stderr.strip().rsplit(" into ", 1)[1])


def test_real_sadc_recording_and_nvidia_smi_log_merged_into_one_run_and_sized(tmp_path: Path) -> None:
    run_dir, log = sysstat_run_with_gpu_log(tmp_path / "data", tmp_path / "scratch")
    meta, rows = read_json(run_dir / "run.json"), rows_of(run_dir)
    cpu_rows = [r for r in rows if r["cpu_util_pct"]]
    gpu_rows = [r for r in rows if r["gpu0_util_pct"]]
    assert len(cpu_rows) == 5 and len(gpu_rows) == len(log.read_text().splitlines()) // 2
    times = [float(r["time_unix"]) for r in rows]
    assert times == sorted(times)
    first_line = log.read_text().splitlines()[1]
    stamp = datetime.strptime(first_line.split(", ")[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=LOG_ZONE)
    assert float(gpu_rows[0]["time_unix"]) == round(stamp.timestamp(), 3)  # read as UTC+02:00
    assert min(times) >= meta["start_unix"] and max(times) <= meta["end_unix"]
    assert meta["device"] == "gpu" and meta["imported_from"]["tool"] == "sysstat"
    (merged,) = meta["merged_from"]
    assert merged["tool"] == "nvidia-smi" and merged["utc_offset"] == "+02:00" and merged["interval_s"] == 0.5
    assert meta["sources"]["cpu"]["available"] and meta["sources"]["nvml"]["available"]
    assert meta["system"]["gpu_count"] == 2 and meta["system"]["cpu_cores_logical"]
    assert set(meta["not_recorded"]) == {"training GPUs", "training steps"}
    assert meta["samples"] == len(rows)

    report = tmp_path / "report.json"
    done = collect_sizing(run_dir, report)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(report.read_text(encoding="utf-8"))["runs"]
    assert run["device"] == "gpu" and gv.POWER_LIMITED in run["verdict_labels"]
    assert run["energy_covers"].startswith("GPU board (integrated NVML instant power)")  # 0.5 s apart


def collect_sizing(run_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`python -m sizing RUN_DIR --out FILE` as a user runs it."""
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "sizing", str(run_dir), "--out", str(out)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(repo)},
    )


def test_a_merge_keeps_every_recorded_cell_and_refuses_what_would_be_wrong(tmp_path: Path) -> None:
    run_dir = sysstat_text_run(tmp_path)
    before_rows, before_meta = rows_of(run_dir), (run_dir / "run.json").read_bytes()
    before_csv = (run_dir / "telemetry.csv").read_bytes()
    first = datetime.fromtimestamp(T0 + 5, timezone.utc).replace(tzinfo=None)
    log = tmp_path / "gpu.csv"
    log.write_text(query_gpu_log([Gpu(0), capped(1)], start=first, samples=70), encoding="utf-8")

    done = collect("import-nvidia-smi", str(log), "--into", str(run_dir), "--utc-offset", "+05:00")
    assert done.returncode == 2 and "no overlap; is --utc-offset right?" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (run_dir / "telemetry.csv").read_bytes() == before_csv and (
        run_dir / "run.json"
    ).read_bytes() == before_meta

    done = collect("import-nvidia-smi", str(log), "--into", str(run_dir), "--utc-offset", "+00:00")
    assert done.returncode == 0, done.stderr
    rows = rows_of(run_dir)
    kept = [{k: r[k] for k in before_rows[0]} for r in rows if r["cpu_util_pct"]]
    assert [{k: v for k, v in r.items() if k != "elapsed_s"} for r in kept] == [
        {k: v for k, v in r.items() if k != "elapsed_s"} for r in before_rows
    ]
    assert len(rows) == 70  # each sysstat row's second has a GPU sample too: they share the row
    assert sum(1 for r in rows if r["cpu_util_pct"] and r["gpu0_util_pct"]) == 6
    meta = read_json(run_dir / "run.json")
    assert meta["start_unix"] == T0  # sysstat's start (one interval before its first row) already covers it
    assert any("now 'gpu'" in note for note in meta["notes"])
    assert abs(meta["end_unix"] - (T0 + 5 + 69)) < 1e-6 and meta["actual_duration_s"] == 74.0
    assert any("after its end" in note for note in meta["notes"])

    again = collect("import-nvidia-smi", str(log), "--into", str(run_dir), "--utc-offset", "+00:00")
    assert again.returncode == 2 and "already has GPU columns" in again.stderr
    assert len(rows_of(run_dir)) == len(rows)


def test_the_log_may_start_before_the_run(tmp_path: Path) -> None:
    run_dir = sysstat_text_run(tmp_path)
    first = datetime.fromtimestamp(T0 - 20, timezone.utc).replace(tzinfo=None) + timedelta(milliseconds=500)
    log = tmp_path / "gpu.csv"
    log.write_text(query_gpu_log([Gpu()], start=first, samples=40), encoding="utf-8")
    done = collect(
        "import-nvidia-smi", str(log), "--into", str(run_dir), "--utc-offset", "Z", "--label", "db1 + GPU"
    )
    assert done.returncode == 0, done.stderr
    meta, rows = read_json(run_dir / "run.json"), rows_of(run_dir)
    assert meta["label"] == "db1 + GPU"
    assert meta["start_unix"] == T0 - 19.5 and float(rows[0]["elapsed_s"]) == 0.0
    assert all(float(r["elapsed_s"]) == round(float(r["time_unix"]) - meta["start_unix"], 3) for r in rows)
    assert any("before its start" in note for note in meta["notes"])
