"""The runtimes `python -m training infer` knows, in report order; each module is imported only when used."""

from __future__ import annotations

import importlib
from types import ModuleType

RUNTIMES: dict[str, str] = {
    "tf-savedmodel": "training.inference.runtimes.tf_savedmodel",
    "tf-xla": "training.inference.runtimes.tf_xla",
    "onnxruntime": "training.inference.runtimes.onnx_runtime",
    "torchscript": "training.inference.runtimes.torchscript",
}


def runtime_module(name: str) -> ModuleType:
    return importlib.import_module(RUNTIMES[name])
