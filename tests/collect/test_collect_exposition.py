"""--prometheus: the names node_exporter and dcgm-exporter dashboards query, served from the sampling tick
(a real /proc, a fake NVML and a /sys with a sensor and RAPL), and bad addresses refused before anything."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from collectfakes import FakeNvml
from promfixtures import free_port, one, scrape, sys_with_sensors_and_rapl

from collect.exposition import ExpositionError, PrometheusExposition, parse_listen_address
from collect.exposition_families import StaticInfo, node_families
from collect.session import SessionOptions, run_session
from collect.sources import Hardware
from collect.sources.thermal import Sensor

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def test_listen_addresses() -> None:
    assert parse_listen_address("9101") == ("127.0.0.1", 9101)
    assert parse_listen_address(":9101") == ("127.0.0.1", 9101)
    assert parse_listen_address("0.0.0.0:9101") == ("0.0.0.0", 9101)
    assert parse_listen_address("[::1]:9101") == ("::1", 9101)
    for bad in ("", "abc", "127.0.0.1:0", "127.0.0.1:65536", "::1:9101", "[zz]:9101", "host:-1"):
        with pytest.raises(ExpositionError):
            parse_listen_address(bad)


def test_a_tick_is_served_under_node_exporter_and_dcgm_names(tmp_path: Path, fake_nvml: FakeNvml) -> None:
    exposition = PrometheusExposition(f"127.0.0.1:{free_port()}")
    try:
        hardware = Hardware(
            sys_root=sys_with_sensors_and_rapl(tmp_path / "sys"), load_nvml=lambda: fake_nvml, environ={}
        )
        options = SessionOptions(
            data_dir=tmp_path / "data",
            interval_s=0.1,
            duration_s=0.5,
            hardware=hardware,
            tick_sink=exposition,
        )
        result = run_session(options)
        samples, types = scrape(exposition.url)
    finally:
        exposition.close()
    record = json.loads((result.run_dir / "run.json").read_text())
    with open(result.run_dir / "telemetry.csv", newline="") as handle:
        last = list(csv.DictReader(handle))[-1]

    assert one(samples, "node_uname_info", nodename=record["host"]) == 1
    for name in (
        "node_cpu_seconds",
        "node_disk_read_bytes",
        "node_network_receive_bytes",
        "node_rapl_package_joules",
    ):
        assert types[name] == "counter", name
    cpus = {labels["cpu"] for labels, _ in samples["node_cpu_seconds_total"]}
    assert cpus == {str(n) for n in range(os.cpu_count() or 1)}
    modes = {labels["mode"] for labels, _ in samples["node_cpu_seconds_total"]}
    assert {"user", "system", "idle", "iowait", "steal"} <= modes
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert one(samples, "node_memory_MemTotal_bytes") == int(meminfo["MemTotal"].split()[0]) * 1024
    assert one(samples, "node_load1") == float(last["load1"])
    disks = {labels["device"] for labels, _ in samples["node_disk_io_time_seconds_total"]}
    assert disks and not any(d.startswith(("loop", "zram", "ram")) for d in disks)
    assert "lo" not in {labels["device"] for labels, _ in samples["node_network_transmit_bytes_total"]}
    assert one(samples, "node_hwmon_temp_celsius", chip="hwmon1_coretemp", sensor="temp1") == 67.0
    assert one(samples, "node_hwmon_chip_names", chip="hwmon1_coretemp", chip_name="coretemp") == 1
    assert float(last["cpu_temp_c"]) == 67.0
    assert one(samples, "node_rapl_package_joules_total", index="0") == pytest.approx(123.456789)

    gpu0 = {"gpu": "0", "UUID": "GPU-11111111-2222-3333-4444-555555555555", "device": "nvidia0"}
    assert one(samples, "DCGM_FI_DEV_GPU_TEMP", **gpu0) == 61
    assert one(samples, "DCGM_FI_DEV_GPU_TEMP", gpu="1", modelName="NVIDIA A100-SXM4-40GB") == 55
    labels = next(found for found, _ in samples["DCGM_FI_DEV_GPU_UTIL"] if found["gpu"] == "0")
    assert labels == {
        **gpu0,
        "pci_bus_id": "00000000:19:00.0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": record["host"],
    }
    assert one(samples, "DCGM_FI_DEV_GPU_UTIL", **gpu0) == 97
    assert one(samples, "DCGM_FI_DEV_POWER_USAGE", **gpu0) == 312.5
    assert one(samples, "DCGM_FI_DEV_SM_CLOCK", **gpu0) == 1980
    assert one(samples, "DCGM_FI_DEV_MEM_CLOCK", **gpu0) == 2619
    assert one(samples, "DCGM_FI_DEV_FB_USED", **gpu0) == 1024
    assert one(samples, "DCGM_FI_DEV_FB_FREE", **gpu0) == 80 * 1024 - 1024
    assert one(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **gpu0) == 5_000_000

    info = one(samples, "workbench_run_info", run_id=result.run_dir.name, device="cpu", framework="none")
    assert info == 1
    assert one(samples, "workbench_late_ms") == float(last["late_ms"])
    assert "workbench_training_step" not in samples  # no training: no step, not a zero


def test_thermal_zones_and_missing_readings() -> None:
    zone = Sensor("x86_pkg_temp", "thermal_zone2", Path("/sys/class/thermal/thermal_zone2/temp"))
    static = StaticInfo(uname={"nodename": "h"}, sensors=[zone])
    families = {
        family.name: family for family in node_families({"load1": None}, {"thermal": [55500]}, static)
    }
    assert families["node_thermal_zone_temp"].samples[0].labels == {"type": "x86_pkg_temp", "zone": "2"}
    assert families["node_thermal_zone_temp"].samples[0].value == 55.5
    assert "node_load1" not in families and "node_cpu_seconds" not in families
    assert "node_cpu_scaling_frequency_hertz" not in families  # no per-CPU frequency column in this row


def test_per_cpu_frequency_columns_become_node_cpu_scaling_frequency_hertz() -> None:
    row = {"cpu_freq_mhz": 2000.0, "cpu0_freq_mhz": 1800.5, "cpu1_freq_mhz": None, "cpu12_freq_mhz": 3000.0}
    families = {family.name: family for family in node_families(row, {}, StaticInfo(uname={}))}
    samples = {s.labels["cpu"]: s.value for s in families["node_cpu_scaling_frequency_hertz"].samples}
    assert samples == {"0": 1_800_500_000.0, "12": 3_000_000_000.0}


def _collector(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collect", *args, "--data-dir", str(data_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("value", ["nonsense", "127.0.0.1:99999", "[::1:5", "no.such.host.invalid:9100"])
@pytest.mark.parametrize(
    "command", [["sample", "--duration", "1s"], ["run", "--duration", "1s"], ["timed", "5s"]]
)
def test_bad_prometheus_values_are_usage_errors(tmp_path: Path, command: list[str], value: str) -> None:
    tail = ["--", "true"] if command[0] == "run" else []
    result = _collector([*command, "--prometheus", value, *tail], tmp_path / "data")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "--prometheus" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("command", [["sample", "--duration", "1s"], ["timed", "5s"]])
def test_a_port_in_use_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _collector([*command, "--prometheus", str(port)], tmp_path / "data")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"python -m collect {command[0]}: error: --prometheus: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    ]
    assert not (tmp_path / "data").exists()


TRAINER = """
import json, os, sys, time
run_dir = os.environ["WORKBENCH_RUN_DIR"]
with open(os.path.join(run_dir, "training.json"), "w") as f:
    json.dump({"format_version": 1, "status": "running", "framework": "pytorch"}, f)
with open(os.path.join(run_dir, "training.csv"), "w") as f:
    f.write("time_unix,elapsed_s,step,loss_total,step_time_s,examples_per_s\\n")
    for step in (1, 2, 3):
        f.write(f"{time.time()},{step * 0.1},{step},1.5,0.5,{step * 2.5}\\n")
        f.flush()
print("trained", flush=True)
time.sleep(30)
"""


def test_training_progress_is_served_while_the_command_runs(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collect",
            "run",
            "--prometheus",
            str(port),
            "--interval",
            "0.2s",
            "--data-dir",
            str(tmp_path / "data"),
            "--no-echo",
            "--",
            sys.executable,
            "-c",
            TRAINER,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        samples: dict = {}
        while time.monotonic() < deadline:
            try:
                samples, _ = scrape(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                samples = {}
            if samples.get("workbench_training_step"):
                break
            time.sleep(0.2)
        assert one(samples, "workbench_training_step") == 3
        assert one(samples, "workbench_examples_per_second") == 7.5
        assert one(samples, "workbench_run_info", framework="pytorch", device="cpu") == 1
    finally:
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert f"serving Prometheus metrics at http://127.0.0.1:{port}/metrics" in err


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh"])
@pytest.mark.parametrize("value", ["99999", "host:0", "nonsense", "--verbose"])
def test_scripts_refuse_bad_prometheus_values_first(tmp_path: Path, script: str, value: str) -> None:
    result = subprocess.run(
        [str(REPO / "scripts" / script), "10s", "--data-dir", str(tmp_path), "--prometheus", value],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--prometheus" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_cpu_script_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(REPO / "scripts/collect_cpu.sh"), "10s", "--data-dir", str(tmp_path),
             "--prometheus", str(port)],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().endswith("Address already in use") and result.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_timed_training_serves_its_steps_to_prometheus(tmp_path: Path) -> None:
    """A real (short) training under `collect timed --prometheus`: its steps reach /metrics. The collector
    reads training.csv whichever framework wrote it; torch starts in seconds, TensorFlow in tens."""
    from training.dataset import generate_dataset

    dataset = tmp_path / "waldo"
    generate_dataset(dataset, size=256, train=8, val=2, seed=1)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "collect", "timed", "60s", "--framework", "torch", "--max-steps", "4",
         "--no-export", "--interval", "0.5s", "--data-dir", str(tmp_path), "--dataset", str(dataset),
         "--prometheus", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    seen: list[float] = []
    info: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 600
        while process.poll() is None and time.monotonic() < deadline and len(set(seen)) < 2:
            try:
                samples, _ = scrape(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                time.sleep(0.5)
                continue
            seen += [value for _, value in samples.get("workbench_training_step", [])]
            info = next((labels for labels, _ in samples.get("workbench_run_info", [])), info)
            time.sleep(0.5)
    finally:
        out, err = process.communicate(timeout=600)
    assert process.returncode == 0, out[-2000:] + err[-2000:]
    assert len(set(seen)) >= 2 and seen == sorted(seen) and seen[0] >= 1, seen
    assert info["framework"] == "torch" and info["device"] == "cpu"
    run_dir = next((tmp_path / "runs").iterdir())
    assert info["run_id"] == run_dir.name
    assert f"Serving Prometheus metrics at http://127.0.0.1:{port}/metrics" in out
