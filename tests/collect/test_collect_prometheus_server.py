"""Against a real Prometheus server (Debian's `prometheus`, started here on 127.0.0.1 with a 1 s scrape):
what it scraped from `collect --prometheus` answers PromQL like node_exporter's and dcgm-exporter's data,
and `collect import-prometheus` rebuilds runs from it (a real CPU run through the CLI; a fake NVML, at the
hardware boundary, for the GPU names)."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from collectfakes import two_fake_gpus
from promfixtures import free_port

from collect.exposition import PrometheusExposition
from collect.session import SessionOptions, run_session
from collect.sources import Hardware

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
# A stand-in training: one core half busy, a "step" every 0.1 s written to training.csv like the real one.
TRAINING_STAND_IN = """
import os, time
with open(os.path.join(os.environ["WORKBENCH_RUN_DIR"], "training.csv"), "w") as out:
    out.write("time_unix,elapsed_s,step,loss_total,learning_rate,step_time_s,examples_per_s\\n")
    start, step = time.time(), 0
    while True:
        began = time.monotonic()
        while time.monotonic() - began < 0.05:
            pass
        time.sleep(0.05)
        step += 1
        now = time.time()
        out.write(f"{now},{now - start},{step},1.0,0.01,0.1,20.0\\n")
        out.flush()
"""
NODE_NAMES = (
    "node_uname_info",
    "node_cpu_seconds_total",
    "node_load1",
    "node_memory_MemTotal_bytes",
    "node_memory_MemAvailable_bytes",
    "node_disk_io_time_seconds_total",
    "node_disk_read_bytes_total",
    "node_disk_written_bytes_total",
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    "workbench_run_info",
    "workbench_late_ms",
)
DCGM_NAMES = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="Debian's prometheus is not installed (scripts/test.sh installs it when run as root)",
    ),
]


@dataclass
class Recorded:
    api: str
    cpu_target: str
    cpu_run: Path
    gpu_target: str
    gpu_run: Path


def query(api: str, promql: str, when: float) -> list[dict]:
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": f"{when:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def _wait_ready(api: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "prometheus exited at start"
        try:
            with urllib.request.urlopen(f"{api}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("prometheus did not become ready")


@pytest.fixture(scope="module")
def recorded() -> Iterator[Recorded]:
    with tempfile.TemporaryDirectory(prefix="prometheus-test-") as tmp:
        root = Path(tmp)
        web, cpu_port, gpu_port = free_port(), free_port(), free_port()
        targets = [f"127.0.0.1:{cpu_port}", f"127.0.0.1:{gpu_port}"]
        config = root / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: workbench\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        server = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        api = f"http://127.0.0.1:{web}"
        try:
            _wait_ready(api, server)
            cpu_run = _cli_run(root / "cpu", cpu_port)
            gpu_run = _fake_gpu_run(root / "gpu", gpu_port)
            time.sleep(2.5)  # the last scrapes land
            yield Recorded(api, targets[0], cpu_run, targets[1], gpu_run)
        finally:
            server.terminate()
            server.wait(timeout=30)


def _cli_run(data_dir: Path, port: int) -> Path:
    """A real run through the CLI: a command keeping one core half busy, sampled every 0.5 s for 12 s."""
    result = subprocess.run(
        [sys.executable, "-m", "collect", "run", "--prometheus", f"127.0.0.1:{port}", "--interval", "0.5s",
         "--duration", "12s", "--data-dir", str(data_dir), "--no-echo", "--sigint-grace", "1s",
         "--", sys.executable, "-c", TRAINING_STAND_IN],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 124, result.stderr
    return next((data_dir / "runs").iterdir())


def _fake_gpu_run(data_dir: Path, port: int) -> Path:
    """Sampling only, with two fake GPUs whose energy counter grows 100 J per tick and temperature 1 °C."""
    nvml = two_fake_gpus()

    def warm_up(_row: dict) -> None:
        for gpu in nvml.gpus:
            gpu.energy_mj += 100_000
            gpu.temp += 1

    exposition = PrometheusExposition(f"127.0.0.1:{port}")
    try:
        options = SessionOptions(
            data_dir=data_dir, interval_s=0.5, duration_s=6.0, tick_sink=exposition,
            hardware=Hardware(load_nvml=lambda: nvml, environ={}),
        )  # fmt: skip
        result = run_session(options, on_sample=warm_up)
        time.sleep(1.5)  # still served after the last tick: let Prometheus scrape it
    finally:
        exposition.close()
    return result.run_dir


def _rows(run_dir: Path, name: str = "telemetry.csv") -> list[dict[str, str]]:
    with open(run_dir / name, newline="") as handle:
        return list(csv.DictReader(handle))


def _meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def test_the_server_has_node_exporter_and_workbench_series(recorded: Recorded) -> None:
    meta = _meta(recorded.cpu_run)
    when = meta["end_unix"] - 2
    names = {
        item["metric"]["__name__"]
        for item in query(recorded.api, f'{{instance="{recorded.cpu_target}"}}', when)
    }
    assert set(NODE_NAMES) <= names, set(NODE_NAMES) - names
    uname = query(recorded.api, "node_uname_info", when)
    assert {item["metric"]["nodename"] for item in uname} == {socket.gethostname()}
    info = query(recorded.api, f'workbench_run_info{{instance="{recorded.cpu_target}"}}', when)
    assert info[0]["metric"]["run_id"] == recorded.cpu_run.name and info[0]["metric"]["device"] == "cpu"
    cpus = query(
        recorded.api, f'count(node_cpu_seconds_total{{instance="{recorded.cpu_target}",mode="idle"}})', when
    )
    assert int(float(cpus[0]["value"][1])) == len(
        [c for c in _rows(recorded.cpu_run)[0] if c.startswith("cpu") and c[3:4].isdigit()]
    )


def test_rate_of_node_cpu_seconds_agrees_with_the_csv(recorded: Recorded) -> None:
    rows = _rows(recorded.cpu_run)
    meta = _meta(recorded.cpu_run)
    window = 8
    when = meta["end_unix"] - 1.5
    target = recorded.cpu_target
    promql = (
        f'100 * (1 - sum(rate(node_cpu_seconds_total{{instance="{target}",mode=~"idle|iowait"}}[{window}s]))'
        f' / sum(rate(node_cpu_seconds_total{{instance="{target}"}}[{window}s])))'
    )
    from_prometheus = float(query(recorded.api, promql, when)[0]["value"][1])
    # rate() is the counters' slope between the window's first and last scrape; each scrape served the
    # last tick before it. The CSV's ticks in between are those whose CPU the two counters differ by.
    scraped = query(
        recorded.api, f'node_cpu_seconds_total{{instance="{target}",cpu="0",mode="idle"}}[{window}s]', when
    )[0]["values"]
    first_scrape, last_scrape = float(scraped[0][0]), float(scraped[-1][0])
    times = [float(r["time_unix"]) for r in rows]
    served_first = max(t for t in times if t <= first_scrape)
    served_last = max(t for t in times if t <= last_scrape)
    ticks = zip(rows[1:], times[1:], times[:-1], strict=True)
    in_window = [  # (utilization, seconds it covers): a tick a loaded VM delayed covers more
        (float(r["cpu_util_pct"]), t - before) for r, t, before in ticks if served_first < t <= served_last
    ]
    from_csv = sum(pct * seconds for pct, seconds in in_window) / sum(seconds for _, seconds in in_window)
    print(f"cpu_util_pct over {window}s: Prometheus {from_prometheus:.2f}, CSV {from_csv:.2f}")
    assert abs(from_prometheus - from_csv) <= 3.0
    assert from_csv > 15  # the command kept a core half busy: a real signal, not two zeros agreeing


def test_dcgm_names_and_labels_from_the_fake_gpus(recorded: Recorded) -> None:
    meta = _meta(recorded.gpu_run)
    when = meta["end_unix"] + 1.45  # after a scrape of the last tick, before the endpoint closed
    for name in DCGM_NAMES:
        found = query(recorded.api, f'{name}{{instance="{recorded.gpu_target}"}}', when)
        assert {item["metric"]["gpu"] for item in found} == {"0", "1"}, name
    temp = query(recorded.api, f'DCGM_FI_DEV_GPU_TEMP{{instance="{recorded.gpu_target}",gpu="0"}}', when)[0]
    assert temp["metric"]["UUID"] == meta["system"]["gpus"][0]["uuid"]
    assert temp["metric"]["modelName"] == "NVIDIA H100 80GB HBM3"
    assert temp["metric"]["pci_bus_id"] == "00000000:19:00.0" and temp["metric"]["device"] == "nvidia0"
    assert temp["metric"]["Hostname"] == socket.gethostname()
    assert float(temp["value"][1]) == float(_rows(recorded.gpu_run)[-1]["gpu0_temp_c"])
    # 100 J per 0.5 s tick: the counter's rate is 200 W, in mJ/s. Over 3 s of 1 s scrapes that land
    # between ticks, a scrape that jitters or a tick a loaded VM delays moves it by a tick's 100 J (seen:
    # exactly 100 W once); a wrong unit would be 1,000× off.
    watts = query(
        recorded.api,
        f'rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{instance="{recorded.gpu_target}",gpu="1"}}[3s]) / 1000',
        meta["end_unix"] - 1,
    )
    assert 100 * 0.95 <= float(watts[0]["value"][1]) <= 300 * 1.05


def _import(
    recorded: Recorded, tmp_path: Path, instance: str, run_dir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    meta = _meta(run_dir)
    return subprocess.run(
        [sys.executable, "-m", "collect", "import-prometheus", recorded.api, "--instance", instance,
         "--start", str(meta["start_unix"]), "--end", str(meta["end_unix"]), "--data-dir", str(tmp_path),
         *extra],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_import_rebuilds_the_cpu_run(recorded: Recorded, tmp_path: Path) -> None:
    result = _import(recorded, tmp_path, recorded.cpu_target, recorded.cpu_run, "--step", "1s")
    assert result.returncode == 0, result.stderr
    imported = next((tmp_path / "runs").iterdir())
    assert imported.name.endswith(f"-cpu-{socket.gethostname()}".replace("_", "-"))
    original_rows, rows = _rows(recorded.cpu_run), _rows(imported)
    assert list(rows[0]) == list(original_rows[0])  # the same columns, in the contract's order
    assert len(rows) >= 5  # Prometheus scrapes a new target first a few seconds after it appears
    meta = _meta(imported)
    assert meta["device"] == "cpu" and meta["host"] == socket.gethostname() and meta["interval_s"] == 1.0
    assert meta["sources"]["process"]["available"] is False and meta["imported_from"]["url"] == recorded.api
    assert meta["system"]["cpu_cores_logical"] == _meta(recorded.cpu_run)["system"]["cpu_cores_logical"]
    start, end = float(rows[1]["time_unix"]), float(rows[-1]["time_unix"])
    ours = statistics.fmean(float(r["cpu_util_pct"]) for r in rows[2:])
    # The imported rows cover (start, end] in counters a scrape saw, up to a tick (0.5 s) old, and each
    # recorded row covers the tick before it: either end of the window may be off by up to a tick or two.
    shifts = (-1.0, -0.5, 0.0, 0.5)
    theirs = [
        statistics.fmean(float(r["cpu_util_pct"]) for r in original_rows if a < float(r["time_unix"]) <= b)
        for a, b in ((start + early, end + late) for early, late in itertools.product(shifts, repeat=2))
    ]
    print(f"imported cpu_util_pct {ours:.2f}, recorded {min(theirs):.2f} to {max(theirs):.2f}")
    assert min(theirs) - 1.0 <= ours <= max(theirs) + 1.0
    assert all(r["late_ms"] != "" for r in rows)  # workbench_late_ms came along
    assert all(r["proc_cpu_pct"] == "" for r in rows)  # not measured, never 0
    from dashboard.runs import open_run_dir, read_training, run_warnings
    from sizing.analysis.throughput import throughput

    assert run_warnings(open_run_dir(imported)) == []
    steps = _rows(imported, "training.csv")
    original_steps = _rows(recorded.cpu_run, "training.csv")
    assert [int(r["step"]) for r in steps] == sorted({int(r["step"]) for r in steps}) and len(steps) >= 4
    assert int(steps[-1]["step"]) <= int(original_steps[-1]["step"])
    assert {r["examples_per_s"] for r in steps} == {"20.0"} and {r["loss_total"] for r in steps} == {""}
    imported_rate = throughput(read_training(open_run_dir(imported)), {}).steps_per_s
    recorded_rate = throughput(read_training(open_run_dir(recorded.cpu_run)), {}).steps_per_s
    print(f"steady steps/s: imported {imported_rate:.2f}, recorded {recorded_rate:.2f}")
    assert imported_rate == pytest.approx(recorded_rate, rel=0.25)


def test_import_rebuilds_gpu_columns_from_dcgm_names(recorded: Recorded, tmp_path: Path) -> None:
    result = _import(recorded, tmp_path, recorded.gpu_target, recorded.gpu_run)
    assert result.returncode == 0, result.stderr
    imported = next((tmp_path / "runs").iterdir())
    meta, rows, original = _meta(imported), _rows(imported), _rows(recorded.gpu_run)
    assert meta["device"] == "gpu"
    assert meta["interval_s"] == pytest.approx(1.0, abs=0.1)  # the scrape interval, as no --step was given
    assert [g["name"] for g in meta["system"]["gpus"]] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert meta["system"]["gpus"][0]["mem_total_bytes"] == 80 * 1024**3
    assert [c for c in rows[0] if c.startswith("gpu0_")] == [c for c in original[0] if c.startswith("gpu0_")]
    last = rows[-1]
    assert float(last["gpu0_power_w"]) == 312.5 and int(last["gpu0_mem_used_bytes"]) == 1024**3
    assert float(last["gpu1_temp_c"]) - float(last["gpu0_temp_c"]) == -6
    energy = [float(r["gpu0_energy_j"]) for r in rows]
    assert energy[0] == 0 and energy == sorted(energy)

    def recorded_energy_at(when: float) -> float:
        return max(float(r["gpu0_energy_j"]) for r in original if float(r["time_unix"]) <= when)

    recorded_increase = recorded_energy_at(float(rows[-1]["time_unix"])) - recorded_energy_at(
        float(rows[0]["time_unix"])
    )
    assert energy[-1] > 0
    assert energy[-1] == pytest.approx(recorded_increase, abs=200)  # a scrape lags its tick by up to 1 s


def test_import_errors_are_one_line(recorded: Recorded, tmp_path: Path) -> None:
    unknown = _import(recorded, tmp_path, "no-such-host", recorded.cpu_run)
    assert unknown.returncode == 1
    assert len(unknown.stderr.strip().splitlines()) == 1 and recorded.cpu_target in unknown.stderr
    closed = subprocess.run(
        [sys.executable, "-m", "collect", "import-prometheus", f"http://127.0.0.1:{free_port()}",
         "--instance", "x", "--start", "now-1h", "--end", "now", "--data-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert closed.returncode == 1 and "cannot reach" in closed.stderr
    assert len(closed.stderr.strip().splitlines()) == 1
    both = _import(
        recorded, tmp_path, "127.0.0.1", recorded.cpu_run, "--end", str(_meta(recorded.gpu_run)["end_unix"])
    )
    assert both.returncode == 2 and recorded.cpu_target in both.stderr and recorded.gpu_target in both.stderr
    assert len(both.stderr.strip().splitlines()) == 1 and "HOST:PORT" in both.stderr
    bad_time = _import(recorded, tmp_path, recorded.cpu_target, recorded.cpu_run, "--start", "yesterday-ish")
    assert bad_time.returncode == 2 and "Traceback" not in bad_time.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
