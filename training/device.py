"""Choosing the device before TensorFlow starts: hide GPUs for `cpu`, insist on one for `gpu`."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

DRIVER_MARKERS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg")


class DeviceError(RuntimeError):
    """The requested device is not usable; the message is one line for the user."""


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "gpu"
    used: str  # "CPU" or the GPU name(s)
    gpu_names: list[str]
    tensorflow_devices: list[str]
    gpu_uuids: list[str] = field(default_factory=list)  # the GPU(s) the training used, as NVML names them


def quiet_tensorflow_environment() -> None:
    """Set before importing TensorFlow: keep errors, drop info and warning chatter."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("GLOG_minloglevel", "2")
    os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(tensorflow|tf_keras|keras|official)")


def silence_python_loggers() -> None:
    import absl.logging

    absl.logging.set_verbosity(absl.logging.ERROR)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)


def nvidia_driver_present() -> bool:
    return any(Path(marker).exists() for marker in DRIVER_MARKERS)


def prepare_device(kind: str, count: int = 1) -> DeviceInfo:
    """Import TensorFlow configured for `kind`; DeviceError if `gpu` is asked for and fewer than `count`
    GPUs are usable."""
    quiet_tensorflow_environment()
    if kind == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    elif kind == "gpu" and not nvidia_driver_present():
        raise DeviceError(
            "--device gpu: no NVIDIA driver on this machine (no /proc/driver/nvidia/version); "
            "use --device cpu"
        )
    import tensorflow as tf

    silence_python_loggers()
    gpus = tf.config.list_physical_devices("GPU")
    if kind == "gpu" and not gpus:
        build = "a CUDA build" if tf.test.is_built_with_cuda() else "a build without CUDA"
        raise DeviceError(
            f"--device gpu: TensorFlow {tf.__version__} ({build}) sees no GPU; "
            "install the GPU extra (pip install '.[gpu]') or use --device cpu"
        )
    if kind == "gpu" and len(gpus) < count:
        raise DeviceError(f"--gpus {count}: TensorFlow sees {len(gpus)} GPU(s)")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    names = [gpu_name(tf, gpu) for gpu in gpus]
    devices = [d.name for d in tf.config.list_physical_devices()]
    used = ", ".join(names[:count]) if kind == "gpu" else "CPU"
    uuids = _used_uuids(count) if kind == "gpu" else []
    return DeviceInfo(kind=kind, used=used, gpu_names=names, tensorflow_devices=devices, gpu_uuids=uuids)


def _used_uuids(count: int) -> list[str]:
    return cuda_order_uuids(nvml_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))[:count]


def nvml_gpus() -> list[tuple[str, str]]:
    """(PCI bus id, UUID) of every GPU NVML sees; empty when NVML is unavailable."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML: the UUIDs stay unknown, the training goes on
        return []
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            bus, uuid = pynvml.nvmlDeviceGetPciInfo(handle).busId, pynvml.nvmlDeviceGetUUID(handle)
            found.append((_text(bus), _text(uuid)))
        return found
    except Exception:
        return []
    finally:
        pynvml.nvmlShutdown()


def cuda_order_uuids(gpus: list[tuple[str, str]], visible: str | None) -> list[str]:
    """UUIDs in CUDA's device order under CUDA_DEVICE_ORDER=PCI_BUS_ID (set by the collector), after
    CUDA_VISIBLE_DEVICES (indices or UUID prefixes); TensorFlow's GPU:0 is the first."""
    ordered = [uuid for _, uuid in sorted(gpus, key=lambda g: g[0].lower())]
    if visible is None or not visible.strip():
        return ordered
    chosen = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if index < 0 or index >= len(ordered):
                break  # CUDA stops at the first invalid entry
            chosen.append(ordered[index])
        else:
            matches = [u for u in ordered if u.startswith(entry)]
            if len(matches) != 1:
                break
            chosen.append(matches[0])
    return chosen


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_name(tf, gpu) -> str:
    details = tf.config.experimental.get_device_details(gpu)
    return str(details.get("device_name") or gpu.name)


def prepare_torch_device(kind: str, count: int = 1) -> DeviceInfo:
    """Import torch for `kind` (never TensorFlow); DeviceError if `gpu` is asked and CUDA is unusable
    or shows fewer than `count` GPUs. With `count` GPUs, rank r of torchrun trains on cuda:r."""
    if kind == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    elif kind == "gpu" and not nvidia_driver_present():
        raise DeviceError(
            "--device gpu: no NVIDIA driver on this machine (no /proc/driver/nvidia/version); "
            "use --device cpu"
        )
    import torch

    available = torch.cuda.is_available()
    if kind == "gpu" and not available:
        build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "a build without CUDA"
        raise DeviceError(
            f"--device gpu: torch {torch.__version__} ({build}) sees no GPU "
            "(torch.cuda.is_available() is false); use --device cpu"
        )
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else []
    if kind == "gpu" and len(names) < count:
        raise DeviceError(f"--gpus {count}: torch sees {len(names)} GPU(s)")
    used = ", ".join(names[:count]) if kind == "gpu" else "CPU"
    uuids = _used_uuids(count) if kind == "gpu" else []
    return DeviceInfo(kind=kind, used=used, gpu_names=names, tensorflow_devices=[], gpu_uuids=uuids)
