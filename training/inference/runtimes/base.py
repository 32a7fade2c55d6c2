"""What every runtime module offers, and the file names of the models they look for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from runformat import MODEL_DIR, TRAINING_JSON

SAVED_MODEL_FILE = f"{MODEL_DIR}/saved_model.pb"
# The PyTorch framework's export (torch.jit.script of the torchvision detector in eval mode: takes a list
# of CHW float tensors in 0..1, returns torchvision's list of {boxes, labels, scores}). One constant to align.
TORCHSCRIPT_FILE = f"{MODEL_DIR}/model.torchscript.pt"
ONNX_FILE = f"{MODEL_DIR}/model.onnx"  # a SavedModel's conversion, cached (torch: torch_onnx.onnx_file)
EXPORT_INFO_FILE = f"{MODEL_DIR}/export.json"


class CannotTake(Exception):
    """This runtime cannot take this model (or device); str() is the one-line reason."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 300 characters: a reason or a note in inference.json."""
    text = " ".join(str(exc).split())
    return (text[:300] + "…") if len(text) > 300 else (text or type(exc).__name__)


@dataclass
class ModelFacts:
    """Facts about the model itself, whatever runs it; None with a reason when not measured."""

    parameters: int | None = None
    parameters_note: str = ""
    flops_per_image: float | None = None
    flops_note: str = ""


@dataclass
class Loaded:
    """A model ready to run: `prepare` turns a uint8 NHWC batch into the runtime's input (not timed);
    `run` computes the detections and returns only once they are in host memory (timed)."""

    name: str
    version: str
    prepare: Any  # Callable[[np.ndarray], Any]
    run: Any  # Callable[[Any], None]
    gpu_memory: GpuMemory | None = None
    facts: ModelFacts | None = None
    notes: list[str] = field(default_factory=list)


class GpuMemory(Protocol):
    def reset(self) -> None: ...
    def peak_bytes(self) -> int | None: ...


def model_input_size(run_dir: Path) -> tuple[int, int]:
    """(height, width) the model was exported for: model/export.json, else training.json's image_size."""
    for path, key in ((run_dir / EXPORT_INFO_FILE, "input_size"), (run_dir / TRAINING_JSON, "image_size")):
        data = _read_json(path)
        value = data.get(key)
        if isinstance(value, list) and len(value) >= 2:
            return int(value[0]), int(value[1])
        if isinstance(value, int) and value > 0:
            return value, value
    raise CannotTake(f"no input size in {EXPORT_INFO_FILE} or {TRAINING_JSON}")


def framework_of(run_dir: Path) -> str:
    """`tensorflow` or `torch`, from training.json (default tensorflow, the original framework)."""
    return str(_read_json(run_dir / TRAINING_JSON).get("framework") or "tensorflow")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def as_uint8_batch(images: list[np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(np.stack(images).astype(np.uint8))
