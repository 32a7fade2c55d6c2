"""Fakes at the hardware boundary only: a fake NVML module, fake /proc and /sys trees, a fake psutil."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


MESSAGES = {
    3: "Not Supported",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    15: "GPU is lost",
    999: "Unknown Error",
}


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return MESSAGES.get(self.value, f"NVML error {self.value}")


# A busy H100 training step, as GPM would read it (NVML_GPM_METRIC_* ids; % or MiB/s).
GPM_DEFAULTS = {1: 95.0, 2: 62.0, 3: 28.0, 5: 31.0, 7: 30.0, 9: 0.0, 6: 0.0, 10: 44.0, 11: 0.0, 12: 12.0,
                13: 3.0, 20: 850.0, 21: 1200.0, 60: 0.0, 61: 0.0}  # fmt: skip


@dataclass
class FakeProcess:
    pid: int
    used_memory: int | None = 2 * 1024**3
    name: str = "python"


@dataclass
class FakeGpmSample:
    gpu: FakeGpu | None = None
    snapshot: int = 0
    freed: bool = False


@dataclass
class FakeGpmMetric:
    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


class FakeGpmMetricsGet:
    """c_nvmlGpmMetricsGet_t: version, numMetrics, sample1, sample2, metrics[NVML_GPM_METRIC_MAX]."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: FakeGpmSample | None = None
        self.sample2: FakeGpmSample | None = None
        self.metrics = [FakeGpmMetric() for _ in range(477)]


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-11111111-2222-3333-4444-555555555555"
    mem_total: int = 80 * 1024**3
    mem_used: int = 1024**3  # what nvidia-smi shows as used (NVML v2 `used`)
    mem_reserved: int = 480 * 1024**2  # the driver's reserved memory: counted as used by v1 only
    memory_v2: bool = True  # the driver has nvmlDeviceGetMemoryInfo_v2
    util: int = 97
    mem_util: int = 40
    temp: int = 61
    power_mw: int = 312_500
    power_instant_mw: int = 341_250
    instant_field_error: int = 0  # the nvmlReturn of the instant-power field (3: not supported)
    sm_clock: int = 1980
    mem_clock: int = 2619
    fan: int = 30
    throttle: int = 0
    energy_mj: int = 5_000_000
    unsupported: set[str] = field(default_factory=set)
    failing: dict[str, int] = field(default_factory=dict)  # NVML function -> error code it raises
    lost: bool = False
    calls: int = 0
    # GPM (profiling counters): supported, and what each metric id reads (NVML's unit: % or MiB/s).
    gpm_supported: bool = True
    gpm_values: dict[int, float] = field(default_factory=lambda: dict(GPM_DEFAULTS))
    gpm_metric_errors: dict[int, int] = field(default_factory=dict)  # metric id -> its nvmlReturn
    gpm_snapshots: int = 0
    # The board's state (settings a sysadmin can change; tests never change a real one).
    power_limit_mw: int = 700_000
    power_default_mw: int = 700_000
    power_min_mw: int = 200_000
    power_max_mw: int = 700_000
    app_sm_clock: int = 1980
    app_mem_clock: int = 2619
    default_app_sm_clock: int = 1980
    default_app_mem_clock: int = 2619
    mig_mode: int = 0
    persistence: int = 1
    compute_mode: int = 0  # NVML_COMPUTEMODE_DEFAULT
    ecc: int = 1
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    processes: list[FakeProcess] = field(default_factory=list)  # compute processes on this board


class FakeNvml:
    """Just enough of pynvml's surface, with per-function failures."""

    NVMLError = FakeNVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_FI_DEV_POWER_INSTANT = 186
    nvmlMemory_v2 = 0x02000028
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_MAX = 477
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_IN_USE = 19
    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.initialized = False
        self.shut_down = False

    def _gpu(self, handle: FakeGpu, function: str) -> FakeGpu:
        handle.calls += 1
        if handle.lost:
            raise FakeNVMLError(15)
        if function in handle.unsupported:
            raise FakeNVMLError(3)
        if function in handle.failing:
            raise FakeNVMLError(handle.failing[function])
        return handle

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, h: FakeGpu) -> bytes:
        return self._gpu(h, "nvmlDeviceGetName").name.encode()  # old bindings return bytes

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu, version: int | None = None) -> SimpleNamespace:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        free = gpu.mem_total - gpu.mem_used - gpu.mem_reserved
        if not version:
            return SimpleNamespace(total=gpu.mem_total, used=gpu.mem_used + gpu.mem_reserved, free=free)
        if not gpu.memory_v2:
            raise FakeNVMLError(13)  # NVML_ERROR_FUNCTION_NOT_FOUND: a driver older than the v2 call
        return SimpleNamespace(
            version=version, total=gpu.mem_total, reserved=gpu.mem_reserved, used=gpu.mem_used, free=free
        )

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerManagementDefaultLimit").power_default_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: FakeGpu) -> list[int]:
        gpu = self._gpu(h, "nvmlDeviceGetPowerManagementLimitConstraints")
        return [gpu.power_min_mw, gpu.power_max_mw]

    def nvmlDeviceGetApplicationsClock(self, h: FakeGpu, clock: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetApplicationsClock")
        return gpu.app_sm_clock if clock == self.NVML_CLOCK_SM else gpu.app_mem_clock

    def nvmlDeviceGetDefaultApplicationsClock(self, h: FakeGpu, clock: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetDefaultApplicationsClock")
        return gpu.default_app_sm_clock if clock == self.NVML_CLOCK_SM else gpu.default_app_mem_clock

    def nvmlDeviceGetMigMode(self, h: FakeGpu) -> list[int]:
        gpu = self._gpu(h, "nvmlDeviceGetMigMode")
        return [gpu.mig_mode, gpu.mig_mode]

    def nvmlDeviceGetPersistenceMode(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetPersistenceMode").persistence

    def nvmlDeviceGetComputeMode(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetComputeMode").compute_mode

    def nvmlDeviceGetEccMode(self, h: FakeGpu) -> list[int]:
        gpu = self._gpu(h, "nvmlDeviceGetEccMode")
        return [gpu.ecc, gpu.ecc]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width_max

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[SimpleNamespace]:
        gpu = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_memory, gpuInstanceId=0xFFFFFFFF,
                            computeInstanceId=0xFFFFFFFF)
            for p in gpu.processes
        ]  # fmt: skip

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        for gpu in self.gpus:
            for process in gpu.processes:
                if process.pid == pid:
                    return process.name
        raise FakeNVMLError(999)

    # ---- GPM ----------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, h: FakeGpu) -> SimpleNamespace:
        gpu = self._gpu(h, "nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(version=1, isSupportedDevice=int(gpu.gpm_supported))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        return FakeGpmSample()

    def nvmlGpmSampleFree(self, sample: FakeGpmSample) -> None:
        sample.freed = True

    def nvmlGpmSampleGet(self, h: FakeGpu, sample: FakeGpmSample) -> FakeGpmSample:
        gpu = self._gpu(h, "nvmlGpmSampleGet")
        if not gpu.gpm_supported:
            raise FakeNVMLError(3)
        gpu.gpm_snapshots += 1
        sample.gpu, sample.snapshot = gpu, gpu.gpm_snapshots
        return sample

    def nvmlGpmMetricsGet(self, request: FakeGpmMetricsGet) -> FakeGpmMetricsGet:
        first, second = request.sample1, request.sample2
        if request.version != self.NVML_GPM_METRICS_GET_VERSION or first is None or second is None:
            raise FakeNVMLError(2)
        if first.gpu is None or first.gpu is not second.gpu or first.snapshot >= second.snapshot:
            raise FakeNVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT: two snapshots of one GPU, in order
        gpu = self._gpu(first.gpu, "nvmlGpmMetricsGet")
        for metric in request.metrics[: request.numMetrics]:
            metric.nvmlReturn = gpu.gpm_metric_errors.get(metric.metricId, 0)
            metric.value = gpu.gpm_values.get(metric.metricId, 0.0) if metric.nvmlReturn == 0 else 0.0
        return request

    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> SimpleNamespace:
        self._gpu(h, "nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId="00000000:19:00.0")

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> SimpleNamespace:
        gpu = self._gpu(h, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=gpu.util, memory=gpu.mem_util)

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._gpu(h, "nvmlDeviceGetTemperature").temp

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, field_ids: list[int]) -> list[SimpleNamespace]:
        gpu = self._gpu(h, "nvmlDeviceGetFieldValues")
        assert field_ids == [self.NVML_FI_DEV_POWER_INSTANT]
        value = SimpleNamespace(uiVal=gpu.power_instant_mw, dVal=0.0)
        return [SimpleNamespace(valueType=1, nvmlReturn=gpu.instant_field_error, value=value)]

    def nvmlDeviceGetMaxClockInfo(self, h: FakeGpu, clock: int) -> int:
        self._gpu(h, "nvmlDeviceGetMaxClockInfo")
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, clock: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetClockInfo")
        return gpu.sm_clock if clock == self.NVML_CLOCK_SM else gpu.mem_clock

    def nvmlDeviceGetFanSpeed(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetFanSpeed").fan

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons").throttle

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetTotalEnergyConsumption").energy_mj


def two_fake_gpus() -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(),
            FakeGpu(name="NVIDIA A100-SXM4-40GB", uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000", temp=55),
        ]
    )


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Lay out files (relative path -> content) under root, like /proc or /sys."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def fake_psutil(logical_cpus: int = 8, physical_cpus: int = 4, mem_total: int = 64 << 30) -> SimpleNamespace:
    return SimpleNamespace(
        cpu_count=lambda logical=True: logical_cpus if logical else physical_cpus,
        virtual_memory=lambda: SimpleNamespace(total=mem_total),
        swap_memory=lambda: SimpleNamespace(total=2 * 1024**3),
    )
