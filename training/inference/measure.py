"""The timing loop: per runtime × batch size, warm-up (excluded, reported), then timed calls for a duration.

Writes inference.csv (one row per measured call, flushed as written) and inference.json (the summary,
rewritten atomically after each runtime, so a stopped phase keeps what it measured).
"""

from __future__ import annotations

import csv
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from runformat import FORMAT_VERSION, INFERENCE_CSV, INFERENCE_JSON, write_json_atomic
from training.inference.runtimes import RUNTIMES, runtime_module
from training.inference.runtimes.base import (
    CannotTake,
    Loaded,
    ModelFacts,
    framework_of,
    model_input_size,
    one_line,
)

INFERENCE_COLUMNS = ["time_unix", "runtime", "batch_size", "latency_ms"]
DEFAULT_BATCH_SIZES = (1, 2, 4, 8)
DEFAULT_DURATION_S = 5.0
PHASE_BATCH_SIZES = (1, 4)  # the short phase after training (collect_cpu.sh / collect_gpu.sh)
PHASE_DURATION_S = 2.0
WARMUP_CALLS = 2
MIN_CALLS = 3
INPUT_SEED = 20261123
SCENE_SIDE = 256


@dataclass(frozen=True)
class InferOptions:
    run_dir: Path
    device: str = "cpu"
    runtimes: Sequence[str] = tuple(RUNTIMES)
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES
    duration_s: float = DEFAULT_DURATION_S  # measured time per runtime × batch size, warm-up excluded
    warmup_calls: int = WARMUP_CALLS
    min_calls: int = MIN_CALLS


def run_inference(
    options: InferOptions,
    log: Callable[[str], None] = print,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict:
    run_dir = Path(options.run_dir)
    size = model_input_size(run_dir)
    images = synthetic_images(max(options.batch_sizes), size)
    summary = {
        "format_version": FORMAT_VERSION,
        "device": options.device,
        "framework": framework_of(run_dir),
        "start_unix": time.time(),
        "end_unix": None,
        "status": "running",
        "batch_sizes": list(options.batch_sizes),
        "duration_per_cell_s": options.duration_s,
        "warmup_calls": options.warmup_calls,
        "min_calls": options.min_calls,
        "input": {
            "height": size[0],
            "width": size[1],
            "images": "synthetic find-the-target scenes (uint8 RGB), the same for every runtime",
        },
        "cpu_logical_cores": os.cpu_count(),
        "model": {
            "parameters": None,
            "parameters_note": "not measured: no runtime could take the model",
            "flops_per_image": None,
            "flops_note": "not measured: no runtime could take the model",
        },
        "runtimes": [],
    }
    facts_found = False
    with (run_dir / INFERENCE_CSV).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(INFERENCE_COLUMNS)
        handle.flush()

        def record(time_unix: float, runtime: str, batch_size: int, latency_ms: float) -> None:
            writer.writerow([f"{time_unix:.6f}", runtime, batch_size, f"{latency_ms:.4f}"])
            handle.flush()

        for name in options.runtimes:
            if should_stop():
                break
            entry = _measure_runtime(name, options, images, record, log, should_stop)
            facts = entry.pop("facts", None)
            if facts is not None and not facts_found:
                summary["model"] = {**asdict(facts), "measured_by": name}
                facts_found = True
            summary["runtimes"].append(entry)
            summary["process_peak_rss_bytes"] = _process_peak_rss_bytes(summary)
            write_json_atomic(run_dir / INFERENCE_JSON, summary)
    summary["end_unix"] = time.time()
    summary["status"] = "interrupted" if should_stop() else "completed"
    summary["process_peak_rss_bytes"] = _process_peak_rss_bytes(summary)
    write_json_atomic(run_dir / INFERENCE_JSON, summary)
    return summary


def measured_runtimes(summary: dict) -> list[str]:
    return [
        r["runtime"] for r in summary["runtimes"] if any("latency_ms_p50" in c for c in r.get("cells", []))
    ]


def synthetic_images(count: int, size: tuple[int, int]) -> list[np.ndarray]:
    """Deterministic scenes like the training data (drawn at 256 px), resized to the model's input size."""
    from PIL import Image

    from training.synth import DIFFICULTIES, make_scene, scene_rng

    scenes = [
        make_scene(scene_rng(INPUT_SEED, "infer", i), SCENE_SIDE, DIFFICULTIES["hard"]).image
        for i in range(count)
    ]
    if size == (SCENE_SIDE, SCENE_SIDE):
        return scenes
    return [np.asarray(Image.fromarray(s).resize((size[1], size[0]), Image.BILINEAR)) for s in scenes]


def _measure_runtime(name, options, images, record, log, should_stop) -> dict:
    entry: dict = {"runtime": name}
    started = time.monotonic()
    try:
        module = runtime_module(name)
        module.check(options.run_dir)
        loaded: Loaded = module.load(options.run_dir, options.device)
    except CannotTake as exc:
        return _refused(entry, str(exc), log)
    except Exception as exc:  # a runtime that breaks is reported with its reason, never skipped silently
        return _refused(entry, f"failed to load: {one_line(exc)}", log)
    entry.update(available=True, version=loaded.version, load_s=round(time.monotonic() - started, 3))
    entry["cells"] = []
    for batch_size in options.batch_sizes:
        if should_stop():
            break
        try:
            cell = _measure_cell(
                loaded, np.stack(images[:batch_size]), batch_size, options, record, should_stop
            )
        except CannotTake as exc:
            if not entry["cells"]:  # refused at its first call: the model, not a batch size, is the problem
                entry.pop("cells")
                return _refused(entry, str(exc), log)
            cell = {"batch_size": batch_size, "error": str(exc)}
        except Exception as exc:
            cell = {"batch_size": batch_size, "error": one_line(exc)}
        entry["cells"].append(cell)
        log(_cell_line(name, cell))
    if loaded.notes:  # read after the cells: a runtime may convert the model per batch size in `prepare`
        entry["notes"] = list(loaded.notes)
    if isinstance(loaded.facts, ModelFacts):
        entry["facts"] = loaded.facts
    return entry


def _refused(entry: dict, reason: str, log: Callable[[str], None]) -> dict:
    entry.update(available=False, reason=reason)
    log(f"infer: {entry['runtime']}: cannot take this model: {reason}")
    return entry


def _measure_cell(loaded: Loaded, batch: np.ndarray, batch_size: int, options, record, should_stop) -> dict:
    inputs = loaded.prepare(batch)
    if loaded.gpu_memory is not None:
        loaded.gpu_memory.reset()
    warmup_started = time.perf_counter()
    first_call_ms = None
    for _ in range(options.warmup_calls):
        call_started = time.perf_counter()
        loaded.run(inputs)
        first_call_ms = (
            first_call_ms if first_call_ms is not None else (time.perf_counter() - call_started) * 1e3
        )
    warmup_s = time.perf_counter() - warmup_started
    latencies: list[float] = []
    rss_peak = _rss_bytes()
    start_unix = time.time()
    measure_started = time.perf_counter()
    deadline = measure_started + options.duration_s
    while (time.perf_counter() < deadline or len(latencies) < options.min_calls) and not should_stop():
        call_started = time.perf_counter()
        loaded.run(inputs)
        latency_ms = (time.perf_counter() - call_started) * 1e3
        record(time.time(), loaded.name, batch_size, latency_ms)
        latencies.append(latency_ms)
        rss_peak = max(rss_peak, _rss_bytes())
    wall_s = time.perf_counter() - measure_started
    cell = {
        "batch_size": batch_size,
        "warmup_calls": options.warmup_calls,
        "warmup_s": round(warmup_s, 4),
        "first_call_ms": round(first_call_ms, 3) if first_call_ms is not None else None,
        "start_unix": start_unix,
        "end_unix": time.time(),
        "calls": len(latencies),
        "images": len(latencies) * batch_size,
    }
    if latencies:
        values = np.asarray(latencies)
        cell.update(
            {
                f"latency_ms_{label}": round(float(np.percentile(values, q)), 3)
                for label, q in (("p50", 50), ("p90", 90), ("p99", 99))
            }
        )
        cell["latency_ms_max"] = round(float(values.max()), 3)
        cell["latency_ms_mean"] = round(float(values.mean()), 3)
        cell["images_per_s"] = round(len(latencies) * batch_size / wall_s, 4)
        cell["ms_per_image_p99"] = round(cell["latency_ms_p99"] / batch_size, 3)
    cell["rss_peak_bytes"] = rss_peak
    if loaded.gpu_memory is not None:
        cell["gpu_mem_peak_bytes"] = loaded.gpu_memory.peak_bytes()
    else:
        cell["gpu_mem_peak_note"] = (
            "n/a on the CPU" if options.device == "cpu" else "not measured by this runtime"
        )
    return cell


def _cell_line(name: str, cell: dict) -> str:
    if "error" in cell:
        return f"infer: {name} batch {cell['batch_size']}: failed: {cell['error']}"
    if "latency_ms_p50" not in cell:
        return f"infer: {name} batch {cell['batch_size']}: stopped before a measured call"
    return (
        f"infer: {name} batch {cell['batch_size']}: p50 {cell['latency_ms_p50']:.1f} ms, "
        f"p99 {cell['latency_ms_p99']:.1f} ms, {cell['images_per_s']:.2f} images/s "
        f"({cell['calls']} calls; warm-up {cell['warmup_calls']} calls, {cell['warmup_s']:.1f} s)"
    )


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _process_peak_rss_bytes(summary: dict) -> int:
    """The kernel's high-water mark, which it updates lazily, and never below an RSS a cell sampled."""
    sampled = [
        cell["rss_peak_bytes"]
        for entry in summary["runtimes"]
        for cell in entry.get("cells", [])
        if isinstance(cell.get("rss_peak_bytes"), int)
    ]
    return max([int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, *sampled])
