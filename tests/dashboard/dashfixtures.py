"""Build run directories that follow docs/run-format.md exactly, for the dashboard tests and bench.

The numbers are synthetic (a fake GPU run is the only way to have `gpu0_*` columns on this machine), but
every file, column name, unit and JSON key is the one the collector and the training workload write.
Vectorized, so `bench/dashboard_scale.py` can build a 24 h × 10 Hz run with it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from PIL import Image, ImageDraw

from runformat import new_run_id

GPU_COLUMNS = (
    "util_pct",
    "mem_util_pct",
    "mem_used_bytes",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_pct",
    "throttle_reasons",
    "energy_j",
)
TRAINING_COLUMNS = (
    "time_unix",
    "elapsed_s",
    "step",
    "loss_total",
    "loss_rpn_score",
    "loss_rpn_box",
    "loss_frcnn_cls",
    "loss_frcnn_box",
    "loss_model",
    "learning_rate",
    "step_time_s",
    "examples_per_s",
)
DEFAULT_START = 1795093375.123456  # 2026-11-21T13:02:55Z, as in docs/run-format.md


def make_run(
    data_dir: Path,
    *,
    device: str = "cpu",
    host: str = "testbox",
    sub: str = "runs",
    label: str | None = None,
    start_unix: float = DEFAULT_START,
    duration_s: float = 120.0,
    interval_s: float = 1.0,
    cores: int = 2,
    gpus: int = 0,
    cpu_temp_sensor: bool = False,
    end_reason: str = "completed",
    steps_per_s: float = 2.0,
    with_training: bool = True,
    with_eval: bool = True,
    image_ids: Sequence[str] = ("val_0000", "val_0001", "val_0002"),
    map_50: float = 0.41,
    seed: int = 0,
    run_id: str | None = None,
) -> Path:
    """Write a complete run directory under data_dir/<sub>/ and return its path."""
    run_id = run_id or new_run_id(device, datetime.fromtimestamp(start_unix, tz=timezone.utc), host)
    run_dir = Path(data_dir) / sub / run_id
    run_dir.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    samples = round(duration_s / interval_s)
    write_telemetry(
        run_dir / "telemetry.csv", start_unix, samples, interval_s, cores, gpus, rng, cpu_temp_sensor
    )
    (run_dir / "command.log").write_text("starting training\n", encoding="utf-8")
    command = ["python", "-m", "training", "train", "--device", device, "--duration", f"{duration_s:g}s"]
    write_json(
        run_dir / "run.json",
        run_json(
            run_id,
            label or f"{device} run",
            device,
            host,
            command,
            interval_s,
            start_unix,
            duration_s,
            end_reason,
            samples,
            cores,
            gpus,
            cpu_temp_sensor,
        ),
    )
    if with_training:
        train_start = start_unix + TRAIN_START_S
        steps = write_training(run_dir / "training.csv", train_start, duration_s - 10.0, steps_per_s, rng)
        write_json(
            run_dir / "training.json",
            training_json(device, gpus, train_start, duration_s - 10.0, steps, steps_per_s),
        )
        write_phases(run_dir / "phases.csv", train_start, start_unix + duration_s)
    if with_eval:
        write_json(
            run_dir / "eval.json",
            {
                "format_version": 1,
                "map_50": map_50,
                "recall_50": 0.63,
                "precision_50": 0.52,
                "num_images": len(image_ids),
                "num_targets": len(image_ids),
                "iou_threshold": 0.5,
                "score_threshold": 0.5,
                "global_step": 200,
                "model_dir": "model",
                "evaluated_unix": start_unix + duration_s - 2.0,
            },
        )
        write_detections(run_dir / "detections", image_ids, rng)
    return run_dir


def telemetry_columns(cores: int, gpus: int) -> list[str]:
    columns = ["time_unix", "elapsed_s", "late_ms", "skipped_ticks", "cpu_util_pct"]
    columns += [f"cpu{n}_util_pct" for n in range(cores)]
    columns += [
        "cpu_freq_mhz",
        "load1",
        "cpu_temp_c",
        "mem_used_bytes",
        "mem_util_pct",
        "swap_used_bytes",
        "disk_read_bps",
        "disk_write_bps",
        "disk_util_pct",
        "net_rx_bps",
        "net_tx_bps",
        "proc_cpu_pct",
        "proc_rss_bytes",
        "proc_threads",
    ]
    columns += [f"gpu{i}_{name}" for i in range(gpus) for name in GPU_COLUMNS]
    return columns


TRAIN_START_S = 3.0  # after the run's start, where the training's first phase begins


def write_telemetry(
    path: Path,
    start_unix: float,
    samples: int,
    interval_s: float,
    cores: int,
    gpus: int,
    rng: np.random.Generator,
    cpu_temp_sensor: bool = False,
) -> None:
    elapsed = np.arange(samples, dtype=np.float64) * interval_s + rng.uniform(0.0, 0.002, samples)
    busy = np.clip(60 + 30 * np.sin(elapsed / 50.0) + rng.normal(0, 5, samples), 0, 100)
    values: dict[str, np.ndarray | pa.Array] = {
        "time_unix": start_unix + elapsed,
        "elapsed_s": elapsed,
        "late_ms": rng.uniform(0.1, 2.0, samples),
        "skipped_ticks": np.zeros(samples),
        "cpu_util_pct": busy,
    }
    for n in range(cores):
        values[f"cpu{n}_util_pct"] = np.clip(busy + rng.normal(0, 8, samples), 0, 100)
    values |= {
        "cpu_freq_mhz": 2400 + rng.normal(0, 30, samples),
        "load1": busy / 50.0,
        "cpu_temp_c": 40 + busy / 3 if cpu_temp_sensor else pa.nulls(samples, pa.float64()),
        "mem_used_bytes": 6e9 + busy * 1e7,
        "mem_util_pct": 25 + busy / 10,
        "swap_used_bytes": np.zeros(samples),
        "disk_read_bps": np.abs(rng.normal(2e6, 1e6, samples)),
        "disk_write_bps": np.abs(rng.normal(1e6, 5e5, samples)),
        "disk_util_pct": np.clip(rng.normal(5, 2, samples), 0, 100),
        "net_rx_bps": np.abs(rng.normal(1e4, 5e3, samples)),
        "net_tx_bps": np.abs(rng.normal(5e3, 2e3, samples)),
        "proc_cpu_pct": busy * cores,
        "proc_rss_bytes": 3e9 + busy * 1e6,
        "proc_threads": np.full(samples, 40.0),
    }
    for i in range(gpus):
        before_training = elapsed < TRAIN_START_S  # the board idle until the training touches it
        gpu_busy = np.where(before_training, 0.0, np.clip(85 + rng.normal(0, 5, samples), 0, 100))
        power = 250 + gpu_busy
        values |= {
            f"gpu{i}_util_pct": gpu_busy,
            f"gpu{i}_mem_util_pct": gpu_busy / 2,
            f"gpu{i}_mem_used_bytes": np.where(before_training, 5e8, 9e9),
            f"gpu{i}_temp_c": 45 + 30 * (1 - np.exp(-elapsed / 60.0)),
            f"gpu{i}_power_w": power,
            f"gpu{i}_sm_clock_mhz": 1980 - rng.integers(0, 3, samples) * 15.0,
            f"gpu{i}_mem_clock_mhz": np.full(samples, 2619.0),
            f"gpu{i}_fan_pct": pa.nulls(samples, pa.float64()),  # passively cooled
            f"gpu{i}_throttle_reasons": np.where(rng.uniform(0, 1, samples) < 0.05, 4.0, 0.0),
            f"gpu{i}_energy_j": np.cumsum(power * interval_s) - power[0] * interval_s,
        }
    write_csv(path, telemetry_columns(cores, gpus), values)


def write_training(
    path: Path, start_unix: float, duration_s: float, steps_per_s: float, rng: np.random.Generator
) -> int:
    steps = max(1, int((duration_s - 8.0) * steps_per_s))
    step_time = np.full(steps, 1.0 / steps_per_s) * rng.uniform(0.9, 1.1, steps)
    step_time[0] = 8.0  # graph tracing
    elapsed = np.cumsum(step_time)
    step = np.arange(1, steps + 1, dtype=np.float64)
    loss = 2.5 * np.exp(-step / (steps / 3)) + 0.3 + rng.normal(0, 0.05, steps)
    parts = {
        name: loss * share
        for name, share in (
            ("loss_rpn_score", 0.1),
            ("loss_rpn_box", 0.1),
            ("loss_frcnn_cls", 0.4),
            ("loss_frcnn_box", 0.3),
            ("loss_model", 0.1),
        )
    }
    values = {
        "time_unix": start_unix + elapsed,
        "elapsed_s": elapsed,
        "step": step,
        "loss_total": loss,
        **parts,
        "learning_rate": np.full(steps, 0.01),
        "step_time_s": step_time,
        "examples_per_s": 2.0 / step_time,
    }
    write_csv(path, list(TRAINING_COLUMNS), values)
    return steps


def write_phases(path: Path, train_start: float, run_end: float) -> None:
    train_end = run_end - 8.0
    rows = [
        ("train", train_start, train_end),
        ("export", train_end, train_end + 3),
        ("evaluate", train_end + 3, train_end + 6),
        ("detect", train_end + 6, train_end + 7),
    ]
    lines = ["phase,start_unix,end_unix,status"] + [f"{p},{s!r},{e!r},ok" for p, s, e in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_detections(directory: Path, image_ids: Sequence[str], rng: np.random.Generator) -> None:
    directory.mkdir()
    images = []
    for image_id in image_ids:
        truth = [40.0, 60.0, 90.0, 100.0]
        found = [v + float(rng.normal(0, 3)) for v in truth]
        image = Image.new("RGB", (256, 256), (200, 180, 150))
        draw = ImageDraw.Draw(image)
        draw.rectangle([truth[1], truth[0], truth[3], truth[2]], outline=(0, 200, 0), width=2)
        draw.rectangle([found[1], found[0], found[3], found[2]], outline=(220, 0, 0), width=2)
        image.save(directory / f"{image_id}.png")
        images.append(
            {
                "image_id": image_id,
                "file": f"{image_id}.png",
                "width": 256,
                "height": 256,
                "ground_truth": [truth],
                "detections": [{"box": found, "score": round(float(rng.uniform(0.5, 1)), 3), "class": 1}],
            }
        )
    write_json(
        directory / "detections.json",
        {"format_version": 1, "score_threshold": 0.5, "global_step": 200, "images": images},
    )


def run_json(
    run_id: str,
    label: str,
    device: str,
    host: str,
    command: list[str],
    interval_s: float,
    start_unix: float,
    duration_s: float,
    end_reason: str,
    samples: int,
    cores: int,
    gpus: int,
    cpu_temp_sensor: bool = False,
) -> dict:
    end_unix = start_unix + duration_s
    gpu_list = [
        {
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": f"GPU-{i:08d}",
            "mem_total_bytes": 85520809984,
            "power_limit_w": 700.0,
            "pci_bus_id": f"0000:{i:02x}:00.0",
        }
        for i in range(gpus)
    ]
    running = end_reason == "running"
    return {
        "format_version": 1,
        "run_id": run_id,
        "label": label,
        "device": device,
        "host": host,
        "command": command,
        "interval_s": interval_s,
        "start_utc": datetime.fromtimestamp(start_unix, tz=timezone.utc).isoformat(),
        "start_unix": start_unix,
        "end_utc": None if running else datetime.fromtimestamp(end_unix, tz=timezone.utc).isoformat(),
        "end_unix": None if running else end_unix,
        "requested_duration_s": duration_s,
        "actual_duration_s": None if running else duration_s,
        "end_reason": end_reason,
        "exit_code": None if running else 0,
        "samples": samples,
        "late_ticks": 0,
        "skipped_ticks": 0,
        "system": {
            "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
            "cpu_cores_physical": max(1, cores // 2),
            "cpu_cores_logical": cores,
            "cpu_sockets": 1,
            "mem_total_bytes": 25769803776,
            "swap_total_bytes": 0,
            "gpu_count": gpus,
            "gpus": gpu_list,
            "gpu_driver_version": "550.54.15" if gpus else None,
            "cuda_version": "12.4" if gpus else None,
            "os": "Debian GNU/Linux 12 (bookworm)",
            "kernel": "6.1.0-18-amd64",
            "python": "3.11.7",
            "packages": {
                "psutil": "7.2.0",
                "nvidia-ml-py": "13.580.82",
                "tensorflow": "2.20.0",
                "tf-models-official": "2.20.0",
            },
        },
        "sources": {
            "cpu": {"available": True},
            "thermal": {"available": True}
            if cpu_temp_sensor
            else {"available": False, "reason": "no temperature sensor in /sys/class/hwmon"},
            "nvml": {"available": bool(gpus)} | ({} if gpus else {"reason": "NVML Shared Library Not Found"}),
            "rapl": {"available": False, "reason": "permission denied (needs root)"},
        },
    }


def training_json(
    device: str, gpus: int, start_unix: float, duration_s: float, steps: int, steps_per_s: float
) -> dict:
    return {
        "format_version": 1,
        "status": "deadline",
        "device_requested": device,
        "device_used": "NVIDIA H100 80GB HBM3" if gpus else "CPU",
        "gpu_names": ["NVIDIA H100 80GB HBM3"] * gpus,
        "preset": "small",
        "backbone": "resnet18",
        "image_size": 256,
        "batch_size": 2,
        "precision": "float32",
        "dataset": "data/datasets/waldo",
        "duration_budget_s": duration_s,
        "start_unix": start_unix,
        "end_unix": start_unix + duration_s,
        "first_step_s": 8.0,
        "steps": steps,
        "initial_step": 0,
        "global_step": steps,
        "warmup_steps_excluded": 20,
        "steady_steps_per_s": steps_per_s,
        "steady_examples_per_s": 2 * steps_per_s,
        "last_checkpoint": f"checkpoints/ckpt-{steps}",
        "checkpoint_interval_s": 60.0,
        "config": {
            "task": {
                "model": {"num_classes": 2, "input_size": [256, 256, 3]},
                "train_data": {"global_batch_size": 2},
            },
            "trainer": {"optimizer_config": {"learning_rate": {"type": "constant"}}},
        },
    }


# Decimals the collector and the training workload round to (collect/sources/*, collect/session.py).
_DECIMALS = (
    ("time_unix", 6),
    ("elapsed_s", 6),
    ("_ms", 3),
    ("_pct", 2),
    ("_bytes", 0),
    ("_bps", 1),
    ("_mhz", 1),
    ("_c", 1),
    ("_w", 2),
    ("_j", 3),
    ("load1", 2),
    ("loss", 5),
    ("_s", 4),
)


def write_csv(path: Path, columns: list[str], values: dict) -> None:
    table = pa.table({name: _rounded(name, values[name]) for name in columns})
    buffer = io.BytesIO()
    pacsv.write_csv(table, buffer, write_options=pacsv.WriteOptions(include_header=False))
    path.write_bytes((",".join(columns) + "\n").encode() + buffer.getvalue())


def _rounded(name: str, column: np.ndarray | pa.Array) -> np.ndarray | pa.Array:
    if isinstance(column, pa.Array):
        return column
    decimals = next((d for key, d in _DECIMALS if name.endswith(key) or name.startswith(key)), None)
    return column if decimals is None else np.round(column, decimals)


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def truncate_last_line(path: Path, keep_chars: int = 7) -> None:
    """Cut the file in the middle of its last line, as a killed writer leaves it."""
    data = path.read_bytes().rstrip(b"\n")
    last_start = data.rfind(b"\n") + 1
    path.write_bytes(data[: last_start + keep_chars])


def corrupt(path: Path) -> None:
    path.write_text('{"format_version": 1, "run_id": "half-writ', encoding="utf-8")
