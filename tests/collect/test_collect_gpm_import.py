"""The GPM columns (runformat/gpm.py) rebuilt by the importers: `import-prometheus` from dcgm-exporter's
DCGM_FI_PROF_* (ratios 0-1 to percent, bytes/s as they are; a real Prometheus for the query path) and
`import-nvidia-smi` from a `nvidia-smi dmon --gpm-metrics` log (nvidia-smi's column names, by metric id)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from nvsmifixtures import DMON_GPM, Gpu, dmon_gpm_log, dmon_log
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, Metric
from promfixtures import free_port

from collect.exposition_families import dcgm_families
from collect.importers import nvsmi
from collect.importers import prometheus as import_prometheus
from collect.importers.nvsmi_fields import DMON_GPM_IDS
from collect.importers.promapi import Series
from collect.importers.promcolumns import Grid, gpm_columns
from runformat import read_json
from runformat.gpm import GPM_METRICS

MIB = 1024 * 1024
PROMETHEUS = shutil.which("prometheus")


def series(times: list[float], values: list[float], **labels: str) -> Series:
    return Series(dict(labels), list(times), list(values))


def rows_of(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "telemetry.csv", newline="") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------------------------ import-prometheus


def test_dcgm_prof_ratios_become_percent_and_bytes_stay_bytes() -> None:
    families = {
        "DCGM_FI_PROF_SM_ACTIVE": [series([0, 1, 2], [0.5, 0.62, 0.999])],
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": [series([0, 1], [0.0, 0.31])],  # none at 2 s and after: stale
        "DCGM_FI_PROF_PCIE_RX_BYTES": [series([0, 1, 2], [0, 1200 * MIB, 5.5])],
        "DCGM_FI_DEV_GPU_UTIL": [series([0, 1, 2], [90, 91, 92])],  # not a GPM column
    }
    columns = gpm_columns(3, families, Grid([0, 1, 2, 4], 1, 1.5))
    assert columns == {
        "gpu3_sm_active_pct": [50.0, 62.0, 99.9, None],
        "gpu3_tensor_active_pct": [0.0, 31.0, 31.0, None],  # 0 is a reading; past the lookback, nothing
        "gpu3_pcie_rx_bytes_per_s": [0.0, 1200.0 * MIB, 5.5, None],
    }  # fields nobody exported (DRAM, FP32, ...): no column at all, not an empty one


def test_a_mig_slices_prof_series_is_not_the_boards() -> None:
    slice_only = {"DCGM_FI_PROF_SM_ACTIVE": [series([0], [0.9], GPU_I_ID="3", GPU_I_PROFILE="1g.10gb")]}
    assert gpm_columns(0, slice_only, Grid([0], 1, 1.5)) == {}
    both = {"DCGM_FI_PROF_SM_ACTIVE": [*slice_only["DCGM_FI_PROF_SM_ACTIVE"], series([0], [0.4])]}
    assert gpm_columns(0, both, Grid([0], 1, 1.5)) == {"gpu0_sm_active_pct": [40.0]}


def test_every_dcgm_twin_maps_back_to_its_column() -> None:
    families = {metric.dcgm_field: [series([0], [0.25 if metric.is_pct else 7.0])] for metric in GPM_METRICS}
    columns = gpm_columns(0, families, Grid([0], 1, 1.5))
    assert list(columns) == [f"gpu0_{metric.suffix}" for metric in GPM_METRICS]
    assert {c: v[0] for c, v in columns.items() if c.endswith("_pct")} == dict.fromkeys(
        [f"gpu0_{m.suffix}" for m in GPM_METRICS if m.is_pct], 25.0
    )
    assert columns["gpu0_nvlink_tx_bytes_per_s"] == [7.0]


class _Target:
    """A scrape target serving node_cpu_seconds_total (growing) and the DCGM families of one row."""

    def __init__(self, row: dict[str, Any], gpus: list[dict[str, Any]]) -> None:
        self.row, self.gpus, self.started = row, gpus, time.monotonic()

    def collect(self) -> Iterator[Metric]:
        busy = time.monotonic() - self.started
        cpu = CounterMetricFamily("node_cpu_seconds_total", "CPU seconds.", labels=["cpu", "mode"])
        cpu.add_metric(["0", "user"], busy / 2)
        cpu.add_metric(["0", "idle"], busy / 2)
        yield cpu
        yield from dcgm_families(self.row, self.gpus, [None] * len(self.gpus), "gpu-box-1")


def _wait_for(api: str, query: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": query})
            with urllib.request.urlopen(url, timeout=2) as response:
                if len(json.load(response)["data"]["result"]) > 0:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"prometheus never had {query}")


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed (scripts/test.sh does)")
def test_import_prometheus_keeps_the_profiling_counters(tmp_path: Path) -> None:
    """A real Prometheus scrapes a target serving gpu0's GPM columns and none of gpu1's; the import rebuilds
    gpu0's in percent and bytes/s, leaves gpu1's out, and run.json's sources.gpm says which GPU had them."""
    gpus = [
        {"index": i, "uuid": f"GPU-{i}", "pci_bus_id": "", "name": "NVIDIA H100 80GB HBM3"} for i in (0, 1)
    ]
    row = {
        "gpu0_util_pct": 97.0,
        "gpu1_util_pct": 12.0,
        "gpu0_sm_active_pct": 62.0,
        "gpu0_tensor_active_pct": 31.0,
        "gpu0_dram_active_pct": 44.0,
        "gpu0_pcie_tx_bytes_per_s": 850 * MIB,
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Target(row, gpus))  # type: ignore[arg-type]
    port, web = free_port(), free_port()
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    with tempfile.TemporaryDirectory(prefix="prometheus-gpm-") as scratch:
        config = Path(scratch) / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: gpm\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={Path(scratch) / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        api = f"http://127.0.0.1:{web}"
        try:
            start = time.time()
            _wait_for(api, "count_over_time(DCGM_FI_PROF_SM_ACTIVE[1m])>=3", 60)
            code = import_prometheus.main(
                [api, "--instance", f"127.0.0.1:{port}", "--start", str(start), "--end", str(time.time()),
                 "--step", "1s", "--data-dir", str(tmp_path)]
            )  # fmt: skip
        finally:
            process.terminate()
            process.wait(timeout=30)
            server.shutdown()
    assert code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    last = rows[-1]
    assert float(last["gpu0_sm_active_pct"]) == 62.0 and float(last["gpu0_tensor_active_pct"]) == 31.0
    assert float(last["gpu0_dram_active_pct"]) == 44.0
    assert float(last["gpu0_pcie_tx_bytes_per_s"]) == 850 * MIB
    assert float(last["gpu1_util_pct"]) == 12.0
    assert not [c for c in rows[0] if c.startswith("gpu1_") and c.endswith(("active_pct", "_per_s"))]
    assert "gpu0_fp64_active_pct" not in rows[0]  # not exported: absent, not an empty or zero column
    gpm = meta["sources"]["gpm"]
    assert gpm["available"] is True and gpm["period_s"] is None
    assert gpm["gpus"][0] == {"index": 0, "supported": True}
    assert gpm["gpus"][1]["supported"] is False and "DCGM_FI_PROF_" in gpm["gpus"][1]["reason"]


# ------------------------------------------------------------------------------------- import-nvidia-smi


def _imported(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "dmon.txt"
    log.write_text(text)
    code = nvsmi.run_cli([str(log), "--data-dir", str(tmp_path / "data"), "--utc-offset", "+00:00"])
    assert code == 0, capsys.readouterr().err
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    return run_dir


def test_dmon_gpm_columns_map_by_metric_id() -> None:
    for name, nvml_id in DMON_GPM_IDS.items():
        assert DMON_GPM[nvml_id][0] == name  # the fixture's names are the importer's
    assert set(DMON_GPM) - set(DMON_GPM_IDS.values()) == {4}  # intutil: no run-format column


def test_dmon_gpm_log_becomes_gpm_columns(capsys, tmp_path: Path) -> None:
    run_dir = _imported(capsys, tmp_path, dmon_gpm_log([Gpu(0), Gpu(1)], samples=6, without_gpm=(1,)))
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    assert len(rows) == 6
    first, last = rows[0], rows[-1]
    assert first["gpu0_sm_active_pct"] == ""  # `-` at the first sample: empty, never 0
    assert float(last["gpu0_gr_engine_active_pct"]) == 95 and float(last["gpu0_sm_active_pct"]) == 62
    assert float(last["gpu0_sm_occupancy_pct"]) == 28 and float(last["gpu0_tensor_active_pct"]) == 31
    assert float(last["gpu0_dram_active_pct"]) == 44 and float(last["gpu0_fp32_active_pct"]) == 12
    assert float(last["gpu0_fp64_active_pct"]) == 0 and float(last["gpu0_fp16_active_pct"]) == 3
    assert float(last["gpu0_pcie_tx_bytes_per_s"]) == 850 * MIB  # GPM:MiB/s × 2^20
    assert float(last["gpu0_pcie_rx_bytes_per_s"]) == 1200 * MIB
    assert float(last["gpu0_nvlink_rx_bytes_per_s"]) == 0 and float(last["gpu0_nvlink_tx_bytes_per_s"]) == 0
    assert last["gpu0_dmon_intutil"] == "7"  # no run-format column: kept under its own name
    assert all(row["gpu1_sm_active_pct"] == "" for row in rows)  # a GPU without GPM
    gpu0 = [c for c in rows[0] if c.startswith("gpu0_")]
    assert gpu0.index("gpu0_util_pct") < gpu0.index("gpu0_gr_engine_active_pct")  # the run format's order
    assert [c for c in gpu0 if c.endswith(("active_pct", "occupancy_pct", "_per_s"))] == [
        f"gpu0_{m.suffix}" for m in GPM_METRICS if m.nvml_id not in (6, 7, 9)
    ]
    gpm = meta["sources"]["gpm"]
    assert gpm["available"] is True and gpm["period_s"] == 1.0
    assert gpm["gpus"][0] == {"index": 0, "supported": True}
    assert gpm["gpus"][1]["supported"] is False and "`-`" in gpm["gpus"][1]["reason"]
    assert any("intutil" in note for note in meta["notes"])


def test_a_units_line_without_gpm_keeps_a_same_named_column(capsys, tmp_path: Path) -> None:
    """`dram` counts as DRAM activity only under a `GPM:` unit (a future non-GPM `dram` column is kept)."""
    text = dmon_gpm_log([Gpu(0)], metric_ids=(2, 10), samples=3).replace("GPM:%", "%", 2)
    rows = rows_of(_imported(capsys, tmp_path, text))
    assert "gpu0_dram_active_pct" not in rows[0] and rows[-1]["gpu0_dmon_dram"] == "44"
    assert "gpu0_sm_active_pct" not in rows[0] and rows[-1]["gpu0_dmon_smutil"] == "62"


def test_a_log_without_gpm_says_why(capsys, tmp_path: Path) -> None:
    meta = read_json(_imported(capsys, tmp_path / "plain", dmon_log([Gpu(0)], samples=4)) / "run.json")
    assert meta["sources"]["gpm"] == {"available": False, "reason": nvsmi.NO_GPM}
    empty = dmon_gpm_log([Gpu(0)], samples=3, without_gpm=(0,))  # a GPU that has no GPM: `-` throughout
    meta = read_json(_imported(capsys, tmp_path / "empty", empty) / "run.json")
    assert meta["sources"]["gpm"] == {"available": False, "reason": nvsmi.GPM_EMPTY}


def test_into_a_cpu_run_its_gpm_source_becomes_the_logs(capsys, tmp_path: Path) -> None:
    start = datetime(2026, 11, 23, 14, 2, 0, tzinfo=timezone.utc).timestamp()
    run_dir = tmp_path / "runs" / "20261123T140200Z-cpu-box"
    run_dir.mkdir(parents=True)
    (run_dir / "telemetry.csv").write_text(
        "time_unix,elapsed_s,cpu_util_pct\n" + "".join(f"{start + k},{k},50\n" for k in range(1, 8))
    )
    sources = {"cpu": {"available": True}, "gpm": {"available": False, "reason": "no NVIDIA GPU"}}
    meta = {
        "run_id": run_dir.name,
        "device": "cpu",
        "start_unix": start,
        "end_unix": start + 7,
        "sources": sources,
    }
    (run_dir / "run.json").write_text(json.dumps(meta))
    log = tmp_path / "dmon.txt"
    log.write_text(dmon_gpm_log([Gpu(0)], samples=4))
    assert nvsmi.run_cli([str(log), "--into", str(run_dir), "--utc-offset", "+00:00"]) == 0, (
        capsys.readouterr()
    )
    merged = read_json(run_dir / "run.json")
    assert merged["sources"]["gpm"]["available"] is True and merged["sources"]["cpu"] == {"available": True}
    assert [float(r["gpu0_sm_active_pct"]) for r in rows_of(run_dir) if r["gpu0_sm_active_pct"]] == [62.0] * 3


def test_into_a_run_json_whose_sources_is_not_an_object_is_one_line(capsys, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "telemetry.csv").write_text("time_unix,elapsed_s,cpu_util_pct\n1795442521,1,50\n")
    (run_dir / "run.json").write_text(json.dumps({"run_id": "run", "device": "cpu", "sources": None}))
    log = tmp_path / "dmon.txt"
    log.write_text(dmon_gpm_log([Gpu(0)], samples=3))
    assert nvsmi.run_cli([str(log), "--into", str(run_dir), "--utc-offset", "+00:00"]) == 2
    assert "run.json's sources or system is not an object" in capsys.readouterr().err
