"""NVIDIA GPU telemetry through NVML (nvidia-ml-py, import name `pynvml`), loaded when a collector starts.

Every NVML call can fail on its own: an unsupported field becomes an empty column (noted once), a GPU that
falls off the bus gives empty cells from then on; neither stops the collector.

Memory: `mem_used_bytes` is NVML's v2 `used`, as nvidia-smi shows it (without the driver's reservation).
Power: `power_w` is nvmlDeviceGetPowerUsage, a 1-second running average on Ampere and newer except the
A100 (instantaneous there and on older GPUs); `power_instant_w` is NVML_FI_DEV_POWER_INSTANT through the
field-value API where the driver offers it; `power_limit_w` the enforced limit; `energy_j` the board's
total-energy counter (Volta and newer), which sizing prefers for energy (docs/run-format.md), read every
ENERGY_MIN_PERIOD_S (the rows in between repeat it) and on the run's last row. Below GPU_HELD_PERIOD_S the
source is read on every few ticks only, its reading repeated in between.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collect.sources.base import Reading, Source, SourceUnavailable
from runformat.columns import GPU_SUFFIXES, gpu_column

GPU_COLUMN_SUFFIXES = GPU_SUFFIXES  # per GPU, in the order of docs/run-format.md

_NOT_SUPPORTED, _FUNCTION_NOT_FOUND, _GPU_IS_LOST = 3, 13, 15
_NO_V2_CODES = (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND)
FI_DEV_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (nvml.h), for bindings that lack the name
# NVML's values change at most about 10 times a second (measured on an H100: power and instant power 9-10,
# the energy counter 10, utilization under 5; it is an average over 1/6 s or more), and each call cost 3-70 µs
# of CPU on a 10 ms tick there (docs/gpu-evidence.md): the source is read twice that often, which sees every
# change, and its last reading repeated on the ticks in between.
GPU_HELD_PERIOD_S = 0.05
# One read of the board's energy counter costs milliseconds of CPU on an H100, hundreds of times any other
# call (docs/measurements.md).
# It is read about once a second and its last value repeated in between: a counter loses nothing by that, the
# joules between two reads are exact (sizing spreads them over the rows between).
ENERGY_MIN_PERIOD_S = 1.0
_HELD_READS = {"total energy": ENERGY_MIN_PERIOD_S}  # what: seconds its reading is kept
_VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # by nvmlValueType_t


def read_due(what: str, last_read_at: float | None, now: float) -> bool:
    """Whether NVML call `what` (a reader's name: "total energy") is read anew at `now`: a held call once its
    period is over (a tenth early still is, so that a tick a little early does not put the read off by a
    whole tick), any other call always."""
    hold_s = _HELD_READS.get(what)
    return hold_s is None or last_read_at is None or now >= last_read_at + 0.9 * hold_s


class FieldValueError(Exception):
    """One field of nvmlDeviceGetFieldValues came back with an NVML error code (`value`)."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value} for the field")
        self.value = value


def field_value(nvml: Any, handle: Any, field_id: int) -> float:
    """One field through the field-value API, as a number in NVML's unit; FieldValueError if refused."""
    (entry,) = nvml.nvmlDeviceGetFieldValues(handle, [field_id])
    if int(entry.nvmlReturn) != 0:
        raise FieldValueError(int(entry.nvmlReturn))
    value_type = int(entry.valueType)
    member = _VALUE_FIELDS[value_type] if value_type < len(_VALUE_FIELDS) else "dVal"
    return float(getattr(entry.value, member))


def nvml_text(value: Any) -> str:
    """An NVML string (bytes in old bindings) or error as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def visible_gpu_indices(cuda_visible_devices: str | None, uuids: list[str]) -> list[int]:
    """NVML indices CUDA will use, in CUDA's order; like CUDA, the list ends at the first invalid entry.

    Entries are indices (into NVML's PCI-bus order, as with CUDA_DEVICE_ORDER=PCI_BUS_ID) or GPU UUIDs
    (`GPU-...`, a unique prefix is enough). MIG UUIDs are not resolved here and end the list.
    """
    if cuda_visible_devices is None:
        return list(range(len(uuids)))
    chosen: list[int] = []
    for raw in cuda_visible_devices.split(","):
        token = raw.strip()
        if token.isdigit():
            index = int(token)
            if index >= len(uuids):
                break
        elif token.lower().startswith("gpu-"):
            matches = [i for i, uuid in enumerate(uuids) if uuid.lower().startswith(token.lower())]
            if len(matches) != 1:
                break
            index = matches[0]
        else:
            break
        if index in chosen:
            break
        chosen.append(index)
    return chosen


def open_visible_gpus(
    load_nvml: Callable[[], Any], environ: dict[str, str] | None = None
) -> tuple[Any, list[tuple[Any, str]]]:
    """The binding, initialised, and (handle, UUID) of each GPU CUDA will use, in CUDA's order (the i of
    gpu<i>_*); SourceUnavailable with a one-line reason where there is none (NVML then shut down again)."""
    environ = os.environ if environ is None else environ
    try:
        nvml = load_nvml()
    except ImportError as exc:
        raise SourceUnavailable(f"nvidia-ml-py (pynvml) is not installed: {exc}") from exc
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise SourceUnavailable(nvml_text(exc) or type(exc).__name__) from exc
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        uuids = [nvml_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
        visible = visible_gpu_indices(environ.get("CUDA_VISIBLE_DEVICES"), uuids)
    except Exception as exc:
        _shutdown(nvml)
        raise SourceUnavailable(f"NVML could not list the GPUs: {nvml_text(exc)}") from exc
    if not visible:
        _shutdown(nvml)
        if not handles:
            raise SourceUnavailable("NVML found no GPU")
        raise SourceUnavailable(
            f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')!r} leaves no visible GPU"
        )
    return nvml, [(handles[i], uuids[i]) for i in visible]


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):  # a source that never started has nobody to tell
        nvml.nvmlShutdown()


def memory_used_bytes(nvml: Any, handle: Any, v1: bool = False) -> tuple[int, Exception | None]:
    """Used memory as nvidia-smi shows it: NVML's v2 call, whose `used` leaves out the memory the driver
    reserves (v1 counts it as used: 480 MiB on an idle H100 with driver 580); v1 where `v1` is asked or
    the driver lacks v2. Returns the bytes and, when v2 was found missing just now, why."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None and not v1:
        try:
            return int(nvml.nvmlDeviceGetMemoryInfo(handle, version=version).used), None
        except Exception as exc:
            if not (isinstance(exc, TypeError) or getattr(exc, "value", None) in _NO_V2_CODES):
                raise
            return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), exc
    return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), None


@dataclass
class _Gpu:
    position: int  # the i in gpu<i>_*
    handle: Any
    lost: bool = False
    unsupported: set[str] = field(default_factory=set)
    energy_base_mj: int | None = None
    memory_v1: bool = False  # the driver lacks nvmlDeviceGetMemoryInfo_v2
    kept: dict[str, tuple[float, Reading]] = field(default_factory=dict)  # a held call: (read at, reading)


def _call(nvml: Any, name: str, *alternatives: str) -> Callable[..., Any]:
    for candidate in (name, *alternatives):
        function = getattr(nvml, candidate, None)
        if function is not None:
            return function
    raise AttributeError(f"pynvml has no {name}")


class NvmlSource(Source):
    name = "nvml"
    min_period_s = GPU_HELD_PERIOD_S

    def __init__(self, load_nvml: Callable[[], Any], environ: dict[str, str] | None = None) -> None:
        super().__init__()
        nvml, visible = open_visible_gpus(load_nvml, environ)
        self._nvml = nvml
        self._gpus = [_Gpu(position, handle) for position, (handle, _) in enumerate(visible)]
        self.gpu_info = [self._describe(position, *gpu) for position, gpu in enumerate(visible)]
        self.driver_version = self._optional(lambda: nvml_text(nvml.nvmlSystemGetDriverVersion()))
        self.cuda_version = self._optional(self._cuda_version)
        self._readers = self._build_readers()

    def _optional(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Exception:
            return None

    def _cuda_version(self) -> str:
        version = int(
            _call(self._nvml, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")()
        )
        return f"{version // 1000}.{version % 1000 // 10}"

    def _describe(self, position: int, handle: Any, uuid: str) -> dict[str, Any]:
        nvml = self._nvml
        mem_total = self._optional(lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total))
        power_limit_mw = self._optional(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        clock_sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        max_sm = self._optional(lambda: float(nvml.nvmlDeviceGetMaxClockInfo(handle, clock_sm)))
        return {
            "index": position,
            "name": self._optional(lambda: nvml_text(nvml.nvmlDeviceGetName(handle))),
            "uuid": uuid,
            "mem_total_bytes": mem_total,
            "power_limit_w": None if power_limit_mw is None else round(power_limit_mw / 1000.0, 1),
            "pci_bus_id": self._optional(lambda: nvml_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
            "sm_clock_max_mhz": max_sm,
        }

    def _build_readers(self) -> list[tuple[str, Callable[[_Gpu], dict[str, float | int | None]]]]:
        """(what, read) pairs; one NVML call may fill several columns."""
        nvml = self._nvml
        temperature_gpu = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        clock_sm, clock_mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)

        def utilization(gpu: _Gpu) -> Reading:
            rates = nvml.nvmlDeviceGetUtilizationRates(gpu.handle)
            return {"util_pct": float(rates.gpu), "mem_util_pct": float(rates.memory)}

        def energy(gpu: _Gpu) -> Reading:
            total_mj = int(nvml.nvmlDeviceGetTotalEnergyConsumption(gpu.handle))
            if gpu.energy_base_mj is None:
                gpu.energy_base_mj = total_mj
            return {"energy_j": round((total_mj - gpu.energy_base_mj) / 1000.0, 3)}

        def throttle(gpu: _Gpu) -> Reading:
            read = _call(
                nvml, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"
            )
            return {"throttle_reasons": int(read(gpu.handle))}

        instant_field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", FI_DEV_POWER_INSTANT)

        def instant_power(gpu: _Gpu) -> Reading:
            return {"power_instant_w": round(field_value(nvml, gpu.handle, instant_field) / 1000.0, 2)}

        def power_limit(gpu: _Gpu) -> Reading:
            return {"power_limit_w": round(nvml.nvmlDeviceGetEnforcedPowerLimit(gpu.handle) / 1000.0, 2)}

        return [
            ("utilization", utilization),
            ("memory", self._memory_used),
            (
                "temperature",
                lambda g: {"temp_c": float(nvml.nvmlDeviceGetTemperature(g.handle, temperature_gpu))},
            ),
            ("power", lambda g: {"power_w": round(nvml.nvmlDeviceGetPowerUsage(g.handle) / 1000.0, 2)}),
            ("instant power", instant_power),
            ("power limit", power_limit),
            ("SM clock", lambda g: {"sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(g.handle, clock_sm))}),
            (
                "memory clock",
                lambda g: {"mem_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(g.handle, clock_mem))},
            ),
            ("fan speed", lambda g: {"fan_pct": float(nvml.nvmlDeviceGetFanSpeed(g.handle))}),
            ("throttle reasons", throttle),
            ("total energy", energy),
        ]

    def _memory_used(self, gpu: _Gpu) -> Reading:
        used, no_v2 = memory_used_bytes(self._nvml, gpu.handle, v1=gpu.memory_v1)
        if no_v2 is not None:
            gpu.memory_v1 = True
            self.note_once(
                f"gpu{gpu.position} memory: no v2 memory call ({nvml_text(no_v2) or type(no_v2).__name__}); "
                "used memory includes what the driver reserves"
            )
        return {"mem_used_bytes": used}

    def calls(self) -> list[tuple[str, Callable[[], Reading]]]:
        """(what, read) per GPU and NVML call, each reading one GPU's cells: what bench/nvml_cost.py times."""
        return [
            (f"gpu{gpu.position} {what}", lambda gpu=gpu, read=read: read(gpu))
            for gpu in self._gpus
            for what, read in self._readers
        ]

    def energy_base_mj(self) -> list[int | None]:
        """Per GPU, the NVML total-energy counter (mJ since the driver loaded) at the first row: with
        gpu<i>_energy_j it gives back the counter itself (None until read, or where unsupported)."""
        return [gpu.energy_base_mj for gpu in self._gpus]

    def board_handles(self) -> tuple[Any, list[Any]]:
        """The binding and each visible GPU's handle (gpu<i> order), for collect/gpu_state.py."""
        return self._nvml, [gpu.handle for gpu in self._gpus]

    def columns(self) -> list[str]:
        return [gpu_column(gpu.position, suffix) for gpu in self._gpus for suffix in GPU_COLUMN_SUFFIXES]

    def sample(self, now: float) -> Reading:
        reading: Reading = dict.fromkeys(self.columns())
        for gpu in self._gpus:
            prefix = gpu_column(gpu.position, "")
            for what, read in self._readers:
                if gpu.lost:
                    break
                if what in gpu.unsupported:
                    continue
                try:
                    values = self._read(gpu, what, read, now)
                except Exception as exc:
                    self._handle_error(gpu, what, exc)
                    continue
                for suffix, value in values.items():
                    reading[prefix + suffix] = value
        return reading

    def _read(self, gpu: _Gpu, what: str, read: Callable[[_Gpu], Reading], now: float) -> Reading:
        """One call's cells; a held call's last reading until read_due says otherwise."""
        if what not in _HELD_READS:
            return read(gpu)
        kept = gpu.kept.get(what)
        if kept is not None and not read_due(what, kept[0], now):
            return kept[1]
        gpu.kept.pop(what, None)  # a read that fails leaves nothing to repeat
        values = read(gpu)
        gpu.kept[what] = (now, values)
        return values

    def expire(self) -> None:
        for gpu in self._gpus:
            gpu.kept.clear()

    def _handle_error(self, gpu: _Gpu, what: str, exc: Exception) -> None:
        code = getattr(exc, "value", None)
        message = nvml_text(exc) or type(exc).__name__
        if code == getattr(self._nvml, "NVML_ERROR_NOT_SUPPORTED", _NOT_SUPPORTED) or isinstance(
            exc, AttributeError | FieldValueError
        ):
            gpu.unsupported.add(what)
            self.note_once(f"gpu{gpu.position} {what}: not supported ({message}); its column stays empty")
        elif code == getattr(self._nvml, "NVML_ERROR_GPU_IS_LOST", _GPU_IS_LOST):
            gpu.lost = True
            self.note_once(
                f"gpu{gpu.position} was lost during the run ({message}); its cells are empty from then on"
            )
        else:
            self.note_once(f"gpu{gpu.position} {what}: {message} (those cells are empty)")

    def close(self) -> None:
        nvml, self._nvml = getattr(self, "_nvml", None), None
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:
                self.note_once("nvmlShutdown failed")
