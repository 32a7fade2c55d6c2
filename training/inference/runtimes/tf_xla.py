"""TensorFlow with XLA: the SavedModel's serving signature wrapped in `tf.function(jit_compile=True)`.

XLA compiles once per input shape (each batch size), in the warm-up; a model with ops XLA cannot
compile (dynamic shapes, some detection post-processing) fails there, and that is reported as the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from training.inference.runtimes import tf_savedmodel
from training.inference.runtimes.base import CannotTake, Loaded

NAME = "tf-xla"
SHARED_NOTE = "the SavedModel loaded earlier in this process, wrapped for XLA: load_s is the wrapping only"


def check(run_dir: Path) -> None:
    tf_savedmodel.check(run_dir)


def load(run_dir: Path, device: str) -> Loaded:
    check(run_dir)
    shared = tf_savedmodel.signature_loaded(run_dir, device)
    tf, serve, device_name = tf_savedmodel.load_signature(run_dir, device)
    compiled = tf.function(lambda images: serve(inputs=images), jit_compile=True)

    def prepare(batch: np.ndarray):
        with tf.device(device_name):
            return tf.identity(tf.constant(batch, dtype=tf.uint8))

    def run(inputs) -> None:
        try:
            with tf.device(device_name):
                outputs = compiled(inputs)
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as exc:
            raise CannotTake(f"XLA could not compile the model: {_first_line(exc)}") from exc
        tf_savedmodel.fetch_outputs(outputs)

    return Loaded(
        name=NAME,
        version=f"tensorflow {tf.__version__} (XLA, jit_compile=True)",
        prepare=prepare,
        run=run,
        gpu_memory=tf_savedmodel.TfGpuMemory(tf) if device == "gpu" else None,
        notes=[SHARED_NOTE] if shared else [],
    )


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return (text[:300] + "…") if len(text) > 300 else text
