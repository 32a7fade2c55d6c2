"""ONNX Runtime on the model converted to ONNX: tf2onnx for a SavedModel, torch.onnx for a PyTorch export.

A SavedModel converts once, for any batch size, to model/model.onnx. A PyTorch export converts once
per batch size, to model/model-batch{N}.onnx, from the eager model, and is kept only if it agrees with
TorchScript on the images it is timed on (runtimes/torch_onnx.py). Conversions are cached (export
replaces model/ as a whole, so they never go stale); their time is reported, not measured as inference.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from training.inference.runtimes.base import (
    EXPORT_INFO_FILE,
    ONNX_FILE,
    SAVED_MODEL_FILE,
    CannotTake,
    Loaded,
    framework_of,
    model_input_size,
    one_line,
)

NAME = "onnxruntime"
OPSET = 17


def check(run_dir: Path) -> None:
    if not (run_dir / SAVED_MODEL_FILE).is_file():
        if framework_of(run_dir) != "torch":
            raise CannotTake(f"nothing to convert: no {SAVED_MODEL_FILE} and not a PyTorch run")
        if not (run_dir / EXPORT_INFO_FILE).is_file():
            raise CannotTake(f"nothing to convert: no {EXPORT_INFO_FILE} (run `python -m training export`)")
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
    if not (run_dir / SAVED_MODEL_FILE).is_file():
        return _torch_loaded(run_dir, ort, provider)
    notes = []
    onnx_path = run_dir / ONNX_FILE
    if onnx_path.is_file():
        notes.append(f"reused {ONNX_FILE}")
    else:
        started = time.monotonic()
        tool, retried = _convert_saved_model(run_dir, onnx_path)
        notes.append(f"converted to {ONNX_FILE} with {tool} in {time.monotonic() - started:.1f} s")
        if retried:
            notes.append(retried)
    session = _session(ort, onnx_path, provider)
    feed = session.get_inputs()[0].name

    def run(inputs) -> None:
        session.run(None, inputs)

    return Loaded(
        name=NAME,
        version=f"onnxruntime {ort.__version__} ({provider})",
        prepare=lambda batch: {feed: batch},
        run=run,
        notes=notes,
    )


def _torch_loaded(run_dir: Path, ort, provider: str) -> Loaded:
    """One ONNX file and session per batch size, converted (and checked) when `prepare` first sees it."""
    from training.inference.runtimes import torch_onnx

    torch_onnx.export_info(run_dir)  # refuse at load, not at the first batch, when nothing can be rebuilt
    notes: list[str] = []
    sessions: dict[int, Any] = {}

    def prepare(batch: np.ndarray):
        images = np.ascontiguousarray(batch.transpose(0, 3, 1, 2), dtype=np.float32) / np.float32(255.0)
        if len(images) not in sessions:
            path = run_dir / torch_onnx.onnx_file(len(images))
            if path.is_file():
                notes.append(f"reused {torch_onnx.onnx_file(len(images))}")
            else:
                notes.append(torch_onnx.convert(run_dir, images, path))
            sessions[len(images)] = _session(ort, path, provider)
        session = sessions[len(images)]
        return session, {session.get_inputs()[0].name: images}

    def run(inputs) -> None:
        session, feeds = inputs
        session.run(None, feeds)

    return Loaded(
        name=NAME,
        version=f"onnxruntime {ort.__version__} ({provider})",
        prepare=prepare,
        run=run,
        notes=notes,
    )


def _session(ort, path: Path, provider: str):
    try:
        return ort.InferenceSession(str(path), providers=[provider])
    except Exception as exc:
        raise CannotTake(f"onnxruntime could not load the converted model: {one_line(exc)}") from exc


def _convert_saved_model(run_dir: Path, onnx_path: Path) -> tuple[str, str | None]:
    """The tool that converted, and why it converted twice if it did."""
    import tensorflow as tf
    import tf2onnx
    from tf2onnx import convert

    from training.inference.runtimes.tf_savedmodel import load_signature

    _, serve, _ = load_signature(run_dir, "cpu")
    height, width = model_input_size(run_dir)
    wrapped = tf.function(lambda images: serve(inputs=images))
    staging = onnx_path.with_name(f".{onnx_path.name}.tmp-{os.getpid()}")

    def convert_to_staging() -> None:
        convert.from_function(
            wrapped,
            input_signature=[tf.TensorSpec([None, height, width, 3], tf.uint8, name="inputs")],
            opset=OPSET,
            output_path=str(staging),
        )

    try:
        retried = unguarded_then_guarded(convert_to_staging)
        staging.replace(onnx_path)
    except Exception as exc:
        raise CannotTake(
            f"tf2onnx {tf2onnx.__version__} could not convert the SavedModel: {one_line(exc)}"
        ) from exc
    finally:
        staging.unlink(missing_ok=True)
    return f"tf2onnx {tf2onnx.__version__} (opset {OPSET})", retried


def unguarded_then_guarded(convert: Callable[[], None]) -> str | None:
    """tf2onnx deep-copies the whole graph before every optimizer pass (36 for the Faster R-CNN) so that
    a pass that raises can be skipped: a fifth of the conversion. With TF2ONNX_CATCH_ERRORS set (tf2onnx
    1.17 reads its presence, not its value) the passes run on the graph itself, and an error ends the
    conversion: `convert` then runs again the guarded way, and the first error is returned as a note."""
    try:
        with _environment(TF2ONNX_CATCH_ERRORS="FALSE"):
            convert()
    except Exception as exc:
        convert()
        guard = "without tf2onnx's guard around each optimizer pass it failed"
        return f"converted twice: {guard} ({one_line(exc)})"
    return None


@contextlib.contextmanager
def _environment(**variables: str) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
