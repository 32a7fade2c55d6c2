"""A six-hour `sadf -d` file and the job's one-hour `nvidia-smi -l 5` log, through the real importers
(import-sysstat, import-nvidia-smi --into, its UTC offset assumed from the importing machine's zone), then
sized: judged over the hour both recorded, that span and the assumed offset among the caveats."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

from nvsmifixtures import BASIC_FIELDS, LOG_ZONE, Gpu, query_gpu_log
from nvsmifixtures import collect as nvsmi_collect

from sizing.analysis import bottleneck, spans
from sizing.analysis.load import load_run_dir
from sizing.analysis.run import analyse_run
from sizing.model import Prices, Thresholds

SADF_HEADER = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle"
T0 = 1795400400  # 2026-11-23 02:20:00 UTC
H = 3600
JOB = (T0 + 2 * H, T0 + 3 * H)


def collect(*args: str, zone: str = "UTC0") -> subprocess.CompletedProcess[str]:
    """`python -m collect ARGS` on a machine whose time zone is `zone` (POSIX TZ)."""
    return nvsmi_collect(*args, zone=zone)


def sadf_day(path: Path) -> Path:
    """`sadf -d -U -- -u` of six hours at sar's 10-minute interval: 95 % busy in the job's hour."""
    lines = [SADF_HEADER]
    for k in range(1, 37):
        t = T0 + 600 * k
        idle = 4.0 if JOB[0] <= t <= JOB[1] else 94.0
        lines.append(f"web01;600;{t};-1;{90 - idle:.2f};0.00;5.00;1.00;0.00;{idle:.2f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_sysstat_day_and_5_s_gpu_log_are_judged_over_their_shared_hour(tmp_path: Path) -> None:
    done = collect(
        "import-sysstat", str(sadf_day(tmp_path / "sa23.txt")), "--data-dir", str(tmp_path / "data")
    )
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stderr.strip().rsplit(" into ", 1)[1])
    start = datetime.fromtimestamp(JOB[0], LOG_ZONE).replace(tzinfo=None)  # written at UTC+02:00
    gpu = Gpu(0, util=lambda k: 40.0, power=lambda k: 300.0)
    log = tmp_path / "gpu.csv"
    log.write_text(
        query_gpu_log([gpu], BASIC_FIELDS, start=start, samples=721, interval_s=5.0), encoding="utf-8"
    )
    done = collect("import-nvidia-smi", str(log), "--into", str(run_dir), zone="XYZ-2")  # no --utc-offset
    assert done.returncode == 0, done.stderr

    a = analyse_run(load_run_dir(run_dir), Prices(), Thresholds())
    assert a.verdict.primary == bottleneck.HOST_BOUND  # over six hours the CPU would read 20 % busy
    span = a.measurement_span
    assert span is not None and span.shared is not None
    assert abs(span.shared[0] - JOB[0]) < 1 and abs(span.shared[1] - JOB[1]) < 1
    assert [(f.source, f.interval_s) for f in span.families] == [("sysstat", 600.0), ("nvidia-smi", 5.0)]
    offset, shared = a.caveats
    assert spans.ASSUMED_OFFSET in offset and "UTC+02:00" in offset
    assert "verdict judged over" in shared and "17% of the 5.8 h window" in shared
    # The log's 5 s readings cover the hour at its own interval: energy measured, not "not reported".
    assert a.training_energy is not None and a.training_energy.gpu_missing is None
