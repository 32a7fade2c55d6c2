"""Choosing the device before TensorFlow starts: hide GPUs for `cpu`, insist on one for `gpu`."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
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


def prepare_device(kind: str) -> DeviceInfo:
    """Import TensorFlow configured for `kind`; DeviceError if `gpu` is asked for and none is usable."""
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
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    names = [gpu_name(tf, gpu) for gpu in gpus]
    devices = [d.name for d in tf.config.list_physical_devices()]
    used = ", ".join(names[:1]) if kind == "gpu" else "CPU"
    return DeviceInfo(kind=kind, used=used, gpu_names=names, tensorflow_devices=devices)


def gpu_name(tf, gpu) -> str:
    details = tf.config.experimental.get_device_details(gpu)
    return str(details.get("device_name") or gpu.name)


def prepare_torch_device(kind: str) -> DeviceInfo:
    """Import torch for `kind` (never TensorFlow); DeviceError if `gpu` is asked and CUDA is unusable."""
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
    used = names[0] if kind == "gpu" else "CPU"
    return DeviceInfo(kind=kind, used=used, gpu_names=names, tensorflow_devices=[])
