"""TensorFlow running the exported SavedModel's `serving_default` signature (the framework's own runtime)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import numpy as np

from runformat import MODEL_DIR
from training.inference.runtimes.base import (
    SAVED_MODEL_FILE,
    CannotTake,
    Loaded,
    ModelFacts,
    model_input_size,
    one_line,
)

NAME = "tf-savedmodel"
SHARED_NOTE = "the SavedModel was already loaded in this process (evaluate, a runtime): load_s leaves it out"
OUTPUT_KEYS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections")


def check(run_dir: Path) -> None:
    """Cheap, imports nothing heavy: CannotTake unless the run has a SavedModel."""
    if not (run_dir / SAVED_MODEL_FILE).is_file():
        raise CannotTake(f"no SavedModel at {SAVED_MODEL_FILE} (not a TensorFlow export)")


def load(run_dir: Path, device: str) -> Loaded:
    check(run_dir)
    shared = signature_loaded(run_dir, device)
    tf, serve, device_name = load_signature(run_dir, device)

    def prepare(batch: np.ndarray):
        with tf.device(device_name):
            return tf.identity(tf.constant(batch, dtype=tf.uint8))

    def run(inputs) -> None:
        with tf.device(device_name):
            outputs = serve(inputs=inputs)
        fetch_outputs(outputs)

    return Loaded(
        name=NAME,
        version=f"tensorflow {tf.__version__}",
        prepare=prepare,
        run=run,
        gpu_memory=TfGpuMemory(tf) if device == "gpu" else None,
        facts=model_facts(tf, run_dir, serve),
        notes=[SHARED_NOTE] if shared else [],
    )


# One load per process, model and device: after training, evaluate loads the SavedModel, and detect, the
# TF runtimes and the ONNX conversion use it again (a load is 6-10 s of CPU; export replaces model/ as a
# whole, and a new export is a new key).
_SIGNATURES: dict[tuple[str, int, str], tuple] = {}


def load_signature(run_dir: Path, device: str):
    """(tensorflow, the serving signature, the TF device name); CannotTake if TF sees no GPU for `gpu`."""
    key = _signature_key(run_dir, device)
    if key not in _SIGNATURES:
        _SIGNATURES[key] = _load_signature(run_dir, device)
    return _SIGNATURES[key]


def signature_loaded(run_dir: Path, device: str) -> bool:
    """Whether load_signature already holds this model for this device (its next call costs nothing)."""
    return _signature_key(run_dir, device) in _SIGNATURES


def _signature_key(run_dir: Path, device: str) -> tuple[str, int, str]:
    model = run_dir / SAVED_MODEL_FILE
    try:
        modified = model.stat().st_mtime_ns
    except OSError:  # loading says what is wrong
        modified = -1
    return str(model.resolve()), modified, device


def _load_signature(run_dir: Path, device: str):
    import tensorflow as tf

    from training.device import silence_python_loggers

    silence_python_loggers()
    if device == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise CannotTake(f"TensorFlow {tf.__version__} sees no GPU")
        for gpu in gpus:
            with contextlib.suppress(RuntimeError):  # already initialised by an earlier runtime
                tf.config.experimental.set_memory_growth(gpu, True)
    loaded = tf.saved_model.load(str(run_dir / MODEL_DIR))
    serve = loaded.signatures["serving_default"]
    serve._workbench_owner = loaded  # keep the variables alive as long as the signature
    return tf, serve, "/GPU:0" if device == "gpu" else "/CPU:0"


def fetch_outputs(outputs: dict) -> None:
    """Copy the detections to host memory: the call is done only when they are there."""
    for key in OUTPUT_KEYS:
        if key in outputs:
            outputs[key].numpy()


class TfGpuMemory:
    def __init__(self, tf) -> None:
        self._tf = tf

    def reset(self) -> None:
        self._tf.config.experimental.reset_memory_stats("GPU:0")

    def peak_bytes(self) -> int | None:
        return int(self._tf.config.experimental.get_memory_info("GPU:0")["peak"])


def model_facts(tf, run_dir: Path, serve) -> ModelFacts:
    facts = ModelFacts()
    try:
        variables = tf.train.list_variables(str(run_dir / MODEL_DIR / "variables" / "variables"))
        facts.parameters = int(
            sum(int(np.prod(shape)) for name, shape in variables if not name.startswith("_CHECKPOINTABLE"))
        )
        facts.parameters_note = "all variables of the SavedModel (weights and BatchNorm statistics)"
    except Exception as exc:
        facts.parameters_note = f"not measured: {one_line(exc)}"
    facts.flops_per_image, facts.flops_note = profiled_flops(tf, serve, model_input_size(run_dir))
    return facts


def profiled_flops(tf, serve, size: tuple[int, int]) -> tuple[float | None, str]:
    """FLOPs of one image: convolutions counted from the frozen graph's shapes, the rest by TF's profiler.

    The batch dimension is dynamic inside the exported graph, so the profiler alone sees no convolution
    shape; each Conv2D is counted as 2 × output pixels × output channels × kernel volume instead.
    """
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    from tensorflow.python.profiler import model_analyzer, option_builder

    try:
        concrete = tf.function(lambda images: serve(inputs=images)).get_concrete_function(
            tf.TensorSpec([1, size[0], size[1], 3], tf.uint8)
        )
        graph_def = convert_variables_to_constants_v2(concrete).graph.as_graph_def()
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.import_graph_def(graph_def, name="")
        conv_flops, convs = _conv_flops(graph)
        options = option_builder.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        with _native_output_silenced(), contextlib.redirect_stderr(io.StringIO()):  # "N ops no flops stats"
            by_type = model_analyzer.profile(graph, cmd="op", options=options)
        other_flops = sum(c.float_ops for c in by_type.children if c.name not in CONV_TYPES)
    except Exception as exc:
        return None, f"not measured: {one_line(exc)}"
    if not convs:
        return None, "not measured: no convolution with static shapes in the exported graph"
    return float(conv_flops + other_flops), (
        f"{convs} convolutions counted from the graph's shapes (2 × output elements × kernel volume) "
        "plus TF's profiler (float_operation) for the other ops with static shapes (the box head's "
        "matmuls); at batch 1; NMS and RoI loops not counted"
    )


CONV_TYPES = ("Conv2D", "DepthwiseConv2dNative")


@contextlib.contextmanager
def _native_output_silenced():
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _conv_flops(graph) -> tuple[int, int]:
    total = counted = 0
    for op in graph.get_operations():
        if op.type not in CONV_TYPES:
            continue
        out, kernel = op.outputs[0].shape, op.inputs[1].shape
        if out.rank != 4 or None in out.as_list()[1:] or not kernel.is_fully_defined():
            continue
        kh, kw, cin, _ = kernel.as_list()
        height, width, channels = out.as_list()[1:]
        per_output = kh * kw * (cin if op.type == "Conv2D" else 1)
        total += 2 * height * width * channels * per_output
        counted += 1
    return total, counted
