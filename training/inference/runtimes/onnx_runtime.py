"""ONNX Runtime on the model converted to ONNX: tf2onnx for a SavedModel, torch.onnx for TorchScript.

The conversion is cached as model/model.onnx (export replaces model/ as a whole, so it never goes
stale); its time is reported, not measured as inference.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from training.inference.runtimes.base import (
    ONNX_FILE,
    SAVED_MODEL_FILE,
    TORCHSCRIPT_FILE,
    CannotTake,
    Loaded,
    model_input_size,
)

NAME = "onnxruntime"
OPSET = 17


def check(run_dir: Path) -> None:
    if not ((run_dir / SAVED_MODEL_FILE).is_file() or (run_dir / TORCHSCRIPT_FILE).is_file()):
        raise CannotTake(f"nothing to convert: neither {SAVED_MODEL_FILE} nor {TORCHSCRIPT_FILE}")
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise CannotTake(f"onnxruntime is not installed (pip install '.[infer]'): {exc}") from exc


def load(run_dir: Path, device: str) -> Loaded:
    check(run_dir)
    import onnxruntime as ort

    provider = "CUDAExecutionProvider" if device == "gpu" else "CPUExecutionProvider"
    if provider not in ort.get_available_providers():
        raise CannotTake(
            f"onnxruntime {ort.__version__} has no {provider} here "
            f"(has: {', '.join(ort.get_available_providers())})"
        )
    notes = []
    onnx_path = run_dir / ONNX_FILE
    from_torch = not (run_dir / SAVED_MODEL_FILE).is_file()
    if onnx_path.is_file():
        notes.append(f"reused {ONNX_FILE}")
    else:
        started = time.monotonic()
        converter = _convert_torchscript if from_torch else _convert_saved_model
        tool = converter(run_dir, onnx_path)
        notes.append(f"converted to {ONNX_FILE} with {tool} in {time.monotonic() - started:.1f} s")
    try:
        session = ort.InferenceSession(str(onnx_path), providers=[provider])
    except Exception as exc:
        raise CannotTake(f"onnxruntime could not load the converted model: {_one_line(exc)}") from exc
    feeds = [i.name for i in session.get_inputs()]

    def prepare(batch: np.ndarray):
        if not from_torch:
            return {feeds[0]: batch}
        if len(batch) != len(feeds):
            raise CannotTake(
                f"the torch.onnx export takes a fixed list of {len(feeds)} image(s), not {len(batch)}"
            )
        pairs = zip(feeds, batch, strict=True)
        return {name: (image.transpose(2, 0, 1) / 255.0).astype(np.float32) for name, image in pairs}

    def run(inputs) -> None:
        session.run(None, inputs)

    return Loaded(
        name=NAME,
        version=f"onnxruntime {ort.__version__} ({provider})",
        prepare=prepare,
        run=run,
        notes=notes,
    )


def _convert_saved_model(run_dir: Path, onnx_path: Path) -> str:
    import tensorflow as tf
    import tf2onnx
    from tf2onnx import convert

    from training.inference.runtimes.tf_savedmodel import load_signature

    _, serve, _ = load_signature(run_dir, "cpu")
    height, width = model_input_size(run_dir)
    wrapped = tf.function(lambda images: serve(inputs=images))
    staging = onnx_path.with_name(f".{onnx_path.name}.tmp-{os.getpid()}")
    try:
        convert.from_function(
            wrapped,
            input_signature=[tf.TensorSpec([None, height, width, 3], tf.uint8, name="inputs")],
            opset=OPSET,
            output_path=str(staging),
        )
        staging.replace(onnx_path)
    except Exception as exc:
        raise CannotTake(
            f"tf2onnx {tf2onnx.__version__} could not convert the SavedModel: {_one_line(exc)}"
        ) from exc
    finally:
        staging.unlink(missing_ok=True)
    return f"tf2onnx {tf2onnx.__version__} (opset {OPSET})"


def _convert_torchscript(run_dir: Path, onnx_path: Path) -> str:
    import torch
    import torchvision  # noqa: F401  (registers torchvision::nms and roi_align for TorchScript)

    scripted = torch.jit.load(str(run_dir / TORCHSCRIPT_FILE), map_location="cpu").eval()
    height, width = model_input_size(run_dir)
    staging = onnx_path.with_name(f".{onnx_path.name}.tmp-{os.getpid()}")
    try:
        torch.onnx.export(
            scripted, ([torch.rand(3, height, width)],), str(staging), opset_version=OPSET, dynamo=False
        )
        staging.replace(onnx_path)
    except Exception as exc:
        raise CannotTake(
            f"torch.onnx {torch.__version__} could not export the TorchScript model: {_one_line(exc)}"
        ) from exc
    finally:
        staging.unlink(missing_ok=True)
    return f"torch.onnx {torch.__version__} (opset {OPSET}, TorchScript exporter)"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "…") if len(text) > 300 else (text or type(exc).__name__)
