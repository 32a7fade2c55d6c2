"""The GPU's profiling counters through NVML's GPM (GPU Performance Monitoring, Hopper and newer).

A GPM value is an average over the time between two snapshots of the GPU's counters. Each visible GPU (the
same ones, numbered the same, as the `nvml` source) keeps two sample buffers, allocated once: every read
takes a new snapshot into the older one and asks `nvmlGpmMetricsGet` for every metric of
runformat.gpm.GPM_METRICS in one call, between the previous snapshot and the new one. The first snapshot is
taken when the source is built, which probes the whole chain: a GPU whose counters cannot be read (not
supported, MIG mode, a binding or driver without the API, profiling refused, counters held by another
profiler) gets no columns and a one-line reason in run.json's `sources.gpm.gpus`; the source is absent when
no GPU has them. A failed read leaves that GPU's cells empty and the next read takes a new base snapshot
(its row empty too), so no value spans a gap silently; a GPU lost to the bus is not read again.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collect.sources.base import Reading, Source, SourceUnavailable
from collect.sources.nvml import open_visible_gpus
from runformat.gpm import GPM_METRICS, GpmMetric, gpm_column

# A GPM value is the mean over the window between two snapshots, so a longer window loses nothing of the
# mean (as with the energy counter); DCGM samples these counters once a second by default.
GPM_PERIOD_S = 1.0
# A window shorter than this is never read (the run's last row may come a tick after a read): the last
# reading is repeated instead.
GPM_MIN_WINDOW_S = 0.1
# How far a percentage may stray outside 0-100 and still be clamped (the counters' own jitter); beyond it
# the cell is empty and noted.
PCT_SLACK = 0.5

_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND, _GPU_IS_LOST, _IN_USE = 3, 4, 13, 15, 19
_GPM_API = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmSampleFree",
    "nvmlGpmMetricsGet",
    "c_nvmlGpmMetricsGet_t",
    "NVML_GPM_METRICS_GET_VERSION",
)
NOT_SUPPORTED = "GPM not supported by this GPU (Hopper or newer data-center GPUs have it)"
MIG_MODE = "MIG mode: device-level GPM samples are not per instance"
OLD_BINDING = "nvidia-ml-py too old for GPM"
OLD_DRIVER = "the NVIDIA driver is too old for GPM"
REFUSED = "profiling refused (driver or VM setting)"
HELD = "counters held by another profiler (DCGM or Nsight?)"


class GpmUnavailable(SourceUnavailable):
    """No visible GPU has GPM; `gpus` says why for each (run.json `sources.gpm.gpus`)."""

    def __init__(self, reason: str, gpus: list[dict[str, Any]]) -> None:
        super().__init__(reason)
        self.gpus = gpus


@dataclass
class _GpmGpu:
    position: int  # the i in gpu<i>_*
    handle: Any
    samples: list[Any]  # two buffers, alternated
    request: Any  # one c_nvmlGpmMetricsGet_t, its metric ids set once
    columns: list[str]
    base: int | None = 0  # which buffer holds the last snapshot; None: none to span from
    lost: bool = False
    out_of_range: set[str] = field(default_factory=set)  # columns already noted


def _code(exc: Exception) -> int | None:
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) else None


def _message(exc: Exception) -> str:
    text = str(exc)
    return text or type(exc).__name__


def _refusal(nvml: Any, exc: Exception, first_sample: bool = False) -> str:
    """Why a GPU's counters cannot be read, from what the probe raised."""
    code = _code(exc)
    known = {
        getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", _NOT_SUPPORTED): NOT_SUPPORTED,
        getattr(nvml, "NVML_ERROR_NO_PERMISSION", _NO_PERMISSION): REFUSED,
        getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", _FUNCTION_NOT_FOUND): OLD_DRIVER,
        getattr(nvml, "NVML_ERROR_IN_USE", _IN_USE): HELD,
        getattr(nvml, "NVML_ERROR_GPU_IS_LOST", _GPU_IS_LOST): "the GPU is lost",
    }
    if code in known:
        return known[code]
    if first_sample:
        return (
            f"the first GPM sample failed ({_message(exc)}); another profiler (DCGM or Nsight?) may hold them"
        )
    return f"GPM support query failed ({_message(exc)})"


def _mig_enabled(nvml: Any, handle: Any) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception:
        return False  # a GPU without MIG
    return int(current) == 1


def _scaled(metric: GpmMetric, raw: float) -> float | int | None:
    """NVML's value in the column's unit, or None when it is out of range or not a number."""
    if not math.isfinite(raw):
        return None
    value = raw * metric.nvml_scale
    if metric.is_pct:
        if not -PCT_SLACK <= value <= 100.0 + PCT_SLACK:
            return None
        return round(min(100.0, max(0.0, value)), 2)
    whole = round(value)
    return whole if whole >= 0 else None


class GpmSource(Source):
    name = "gpm"
    min_period_s = GPM_PERIOD_S
    read_off_tick = True  # a read costs milliseconds of CPU (docs/measurements.md)

    def __init__(self, load_nvml: Callable[[], Any], environ: dict[str, str] | None = None) -> None:
        super().__init__()
        self._nvml, visible = open_visible_gpus(load_nvml, environ)
        self._gpus: list[_GpmGpu] = []
        self.gpus: list[dict[str, Any]] = []  # run.json `sources.gpm.gpus`
        api_missing = [name for name in _GPM_API if not hasattr(self._nvml, name)]
        for position, (handle, _uuid) in enumerate(visible):
            try:
                reason = OLD_BINDING if api_missing else self._probe(position, handle)
            except Exception as exc:  # whatever else the binding does, the collector goes on without GPM
                reason = f"GPM probe failed ({_message(exc)})"
            entry: dict[str, Any] = {"index": position, "supported": reason is None}
            if reason is not None:
                entry["reason"] = reason
            self.gpus.append(entry)
        if not self._gpus:
            self.close()
            raise GpmUnavailable(self._summary(), self.gpus)
        self._columns = [column for gpu in self._gpus for column in gpu.columns]
        self._last: tuple[float, Reading] | None = None  # (read at, reading)

    def _probe(self, position: int, handle: Any) -> str | None:
        """None once the GPU's first snapshot is taken (the GPU then joins the source), else why not."""
        nvml = self._nvml
        try:
            support = nvml.nvmlGpmQueryDeviceSupport(handle)
        except Exception as exc:
            return _refusal(nvml, exc)
        if not int(support.isSupportedDevice):
            return NOT_SUPPORTED
        if _mig_enabled(nvml, handle):
            return MIG_MODE
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_METRICS)
        for slot, metric in enumerate(GPM_METRICS):
            request.metrics[slot].metricId = metric.nvml_id
        samples: list[Any] = []
        try:
            samples.append(nvml.nvmlGpmSampleAlloc())
            samples.append(nvml.nvmlGpmSampleAlloc())
            nvml.nvmlGpmSampleGet(handle, samples[0])
        except Exception as exc:
            self._free(samples)
            return _refusal(nvml, exc, first_sample=True)
        columns = [gpm_column(position, metric.suffix) for metric in GPM_METRICS]
        self._gpus.append(_GpmGpu(position, handle, samples, request, columns))
        return None

    def _summary(self) -> str:
        reasons = {entry["reason"] for entry in self.gpus}
        if len(reasons) == 1:
            (reason,) = reasons
            return reason if len(self.gpus) == 1 else f"{reason} (all {len(self.gpus)} GPUs)"
        return "no GPU has GPM: " + "; ".join(f"gpu{e['index']}: {e['reason']}" for e in self.gpus)

    def status(self) -> dict[str, Any]:
        """What run.json's `sources.gpm` adds to `available`."""
        return {"period_s": GPM_PERIOD_S, "gpus": [dict(entry) for entry in self.gpus]}

    def columns(self) -> list[str]:
        return list(self._columns)

    def prime(self, now: float) -> None:
        for gpu in self._gpus:
            if gpu.base is None and not gpu.lost:
                self._sample_one(gpu)

    def sample(self, now: float) -> Reading:
        if self._last is not None and now - self._last[0] < GPM_MIN_WINDOW_S:
            return self._last[1]  # the run's last row, a tick after a read: too short a window to mean much
        reading: Reading = dict.fromkeys(self._columns)
        for gpu in self._gpus:
            if not gpu.lost:
                reading.update(self._sample_one(gpu))
        self._last = (now, reading)
        return reading

    def calls(self) -> list[tuple[str, Callable[[], Reading]]]:
        """(what, read) per GPU: one read (a snapshot and every metric since the last one), raising what NVML
        raises; what bench/nvml_cost.py times."""
        return [(f"gpu{gpu.position} gpm", lambda gpu=gpu: self._read(gpu)) for gpu in self._gpus]

    def _sample_one(self, gpu: _GpmGpu) -> Reading:
        try:
            return self._read(gpu)
        except Exception as exc:
            message = _message(exc)
            if _code(exc) == getattr(self._nvml, "NVML_ERROR_GPU_IS_LOST", _GPU_IS_LOST):
                gpu.lost = True
                self.note_once(
                    f"gpu{gpu.position} was lost during the run ({message}); its GPM cells are empty"
                )
            else:
                self.note_once(f"gpu{gpu.position} GPM read failed ({message}); that row's cells are empty")
            return {}

    def _read(self, gpu: _GpmGpu) -> Reading:
        """A new snapshot and the metrics between the last one and it; empty without a last one. A snapshot
        that fails leaves none, so the next read only takes a new base."""
        nvml = self._nvml
        base, gpu.base = gpu.base, None
        new = 0 if base is None else 1 - base
        nvml.nvmlGpmSampleGet(gpu.handle, gpu.samples[new])
        gpu.base = new
        if base is None:
            return {}
        request = gpu.request
        request.sample1, request.sample2 = gpu.samples[base], gpu.samples[new]
        nvml.nvmlGpmMetricsGet(request)
        return self._values(gpu, request)

    def _values(self, gpu: _GpmGpu, request: Any) -> Reading:
        values: Reading = {}
        for slot, (metric, column) in enumerate(zip(GPM_METRICS, gpu.columns, strict=True)):
            entry = request.metrics[slot]
            code = int(entry.nvmlReturn)
            if code != 0:
                self.note_once(f"{column}: not supported (NVML error {code}); its cells are empty")
                continue
            raw = float(entry.value)
            value = _scaled(metric, raw)
            if value is None and column not in gpu.out_of_range:
                gpu.out_of_range.add(column)
                self.note_once(f"{column}: NVML gave {raw!r}, out of range; such cells are empty")
            values[column] = value
        return values

    def _free(self, samples: list[Any]) -> None:
        for sample in samples:
            with contextlib.suppress(Exception):
                self._nvml.nvmlGpmSampleFree(sample)

    def close(self) -> None:
        nvml = getattr(self, "_nvml", None)
        if nvml is None:
            return
        for gpu in self._gpus:
            self._free(gpu.samples)
        self._gpus = []
        self._nvml = None
        try:
            nvml.nvmlShutdown()
        except Exception:
            self.note_once("nvmlShutdown failed")
