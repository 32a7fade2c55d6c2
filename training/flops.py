"""FLOPs per training example (forward + backward), counted once per training: training.json's `flops`.

Both frameworks count the same operations, as MFU does (PaLM, arXiv 2204.02311, App. B): convolutions and
matrix products, forward and backward, 2 FLOPs per multiply-add. Elementwise, normalisation, pooling and
resampling ops count zero by that convention. Other ops that compute and that no formula covers are named
in `uncounted`: found in the step itself, never from a list (torch: the ops outside aten the step ran,
e.g. torchvision::roi_align and torchvision::nms; TensorFlow: the control-flow ops whose bodies compute).

torch: torch.utils.flop_counter.FlopCounterMode over one step (forward, loss, backward; no optimizer step)
on a copy of the model, with the random number generators forked, so the training itself is unchanged.
TensorFlow: the registered flops statistics of the ops of the step's traced graph that run (those the
step's outputs and side effects depend on). A count that fails is recorded with its reason, never raised.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

MATMUL_WORDS = "convolutions and matrix products only (2 FLOPs per multiply-add; elementwise, normalisation "
MATMUL_WORDS += "and pooling ops count zero, as MFU does)"
TF_COUNTED_TYPES = frozenset(
    {
        "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D", "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2", "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
        "Einsum",
    }
)  # fmt: skip
TF_CONTROL_FLOW = frozenset(
    {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase", "PartitionedCall",
     "StatefulPartitionedCall"}
)  # fmt: skip
TF_PLUMBING = frozenset({"Identity", "IdentityN", "Const", "NoOp", "Placeholder", "_Arg", "_Retval"})


def not_counted(reason: str, method: str = "", math_dtype: str | None = None) -> dict[str, Any]:
    return {
        "per_example": None,
        "method": method,
        "counted_batch": None,
        "uncounted": [],
        "math_dtype": math_dtype,
        "reason": reason,
    }


def guarded(framework: str, count: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """count(), or a null count whose reason says why it failed: counting never stops a training."""
    try:
        return count()
    except Exception as exc:  # anything a framework raises while counting
        text = " ".join(str(exc).split()) or type(exc).__name__
        return not_counted(f"{framework} step not counted: {type(exc).__name__}: {text}"[:500])


def counted(
    total: float, batch: int, method: str, uncounted: list[str], math_dtype: str, started: float, nothing: str
) -> dict[str, Any]:
    """`flops` of a count of `total` FLOPs over `batch` examples begun at perf_counter() `started`; a count
    of zero is not counted, for the reason `nothing`."""
    return {
        "per_example": total / batch if total > 0 else None,
        "method": method,
        "counted_batch": batch,
        "uncounted": uncounted,
        "math_dtype": math_dtype,
        "count_s": round(time.perf_counter() - started, 3),
        **({} if total > 0 else {"reason": nothing}),
    }


# --- torch ---------------------------------------------------------------------------------------------


def torch_math_dtype(torch, device, autocast_dtype) -> str:
    """What the convolutions and matrix products of a torch step ran in."""
    if autocast_dtype is not None:
        return str(autocast_dtype).removeprefix("torch.")
    # Convolutions are 90-96 % of these models' FLOPs: torch runs float32 ones in TF32 on compute capability
    # >= 8.0 unless cudnn.allow_tf32 is switched off (its float32 matmuls stay float32 by default).
    cuda = device.type == "cuda"
    if cuda and torch.backends.cudnn.allow_tf32 and torch.cuda.get_device_capability(device) >= (8, 0):
        return "tf32"
    return "float32"


def count_torch_step(model, images, targets, autocast_dtype=None, device_type: str = "cpu"):
    """(FLOPs, uncounted op names) of one forward + loss + backward of a torchvision detector in training
    mode. It changes `model` (gradients, BatchNorm statistics) and draws random numbers: pass a copy."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    ran: set[Any] = set()

    class _OpsRan(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.add(func)
            return func(*args, **(kwargs or {}))

    counter = FlopCounterMode(display=False)
    with counter, _OpsRan():
        with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            losses = model(images, targets)
        sum(losses.values()).backward()
    formulas = getattr(counter, "flop_registry", None) or torch.utils.flop_counter.flop_registry
    uncounted = sorted(
        {op._schema.name for op in ran if op.namespace not in ("aten", "prim", "prims")}
        - {op._schema.name for op in ran if op.overloadpacket in formulas}
    )
    return float(counter.get_total_flops()), uncounted


def count_torch_training(model, images, targets, autocast_dtype, device, where: str = "") -> dict[str, Any]:
    """`flops` for a torch training: one step on a copy of `model` on (images, targets), one batch."""
    import torch

    math_dtype = torch_math_dtype(torch, device, autocast_dtype)
    started = time.perf_counter()
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        total, uncounted = count_torch_step(
            copy.deepcopy(model), images, targets, autocast_dtype, device.type
        )
    batch = len(images)
    size = "x".join(str(side) for side in images[0].shape[-2:])
    resized = getattr(getattr(model, "transform", None), "min_size", None)
    resized = f", resized by the model to {resized[0]} px" if resized else ""
    method = (
        "torch.utils.flop_counter.FlopCounterMode over one training step (forward, loss, backward; no "
        f"optimizer step) on a copy of the model, one batch of {batch} images of {size} px{resized}, on "
        f"{device.type}{where}; {MATMUL_WORDS}"
    )
    nothing = "torch step not counted: FlopCounterMode counted nothing"
    return counted(total, batch, method, uncounted, math_dtype, started, nothing)


# --- TensorFlow ----------------------------------------------------------------------------------------


def tf_math_dtype(tf, device_kind: str) -> str:
    """What the convolutions and matrix products of a TensorFlow step run in: the mixed policy's compute
    dtype, else TF32 on a GPU of compute capability >= 8.0 while TensorFlow allows it (its default)."""
    import tf_keras

    compute = tf_keras.mixed_precision.global_policy().compute_dtype
    if compute in ("float16", "bfloat16"):
        return compute
    if device_kind == "gpu" and tf.config.experimental.tensor_float_32_execution_enabled():
        gpus = tf.config.list_physical_devices("GPU")
        capabilities = [
            tf.config.experimental.get_device_details(gpu).get("compute_capability") for gpu in gpus
        ]
        if capabilities and all(cc and tuple(cc) >= (8, 0) for cc in capabilities):
            return "tf32"
    return "float32"


def count_tf_graph(graph) -> tuple[float, list[str]]:
    """(FLOPs, uncounted) of one run of a traced step's graph: the registered flops statistics of its
    convolutions and matrix products among the ops that run."""
    from tensorflow.python.framework import ops

    total = 0.0
    uncounted: set[str] = set()
    for op in _live_ops(graph):
        if op.type in TF_COUNTED_TYPES:
            flops = ops.get_stats_for_node_def(graph, op.node_def, "flops").value
            if flops is None:
                uncounted.add(f"{op.type} {op.name} (no FLOPs formula for its shapes)")
            else:
                total += flops
        elif op.type in TF_CONTROL_FLOW and not _only_plumbing(graph, op):
            uncounted.add(f"{op.type} {op.name}")
    return total, sorted(uncounted)


def _live_ops(graph) -> list[Any]:
    """The ops the step's outputs and side effects depend on: what TensorFlow runs of the graph (the input
    gradient of the first convolution, for one, is built by the tape but never run)."""
    pending = [tensor.op for tensor in graph.outputs] + list(getattr(graph, "control_outputs", []))
    live: set[str] = set()
    while pending:
        op = pending.pop()
        if op.name in live:
            continue
        live.add(op.name)
        pending.extend(tensor.op for tensor in op.inputs)
        pending.extend(op.control_inputs)
    return [op for op in graph.get_operations() if op.name in live]


def _only_plumbing(graph, op) -> bool:
    """Whether every function a control-flow op runs holds only plumbing (no arithmetic to miss)."""
    for attr in op.node_def.attr.values():
        names = [attr.func.name] if attr.HasField("func") else [f.name for f in attr.list.func]
        for name in names:
            try:
                function = graph._get_function(name)
                definition = getattr(function, "cached_definition", None) or function.definition
            except Exception:
                return False  # a body we cannot read may compute
            if any(node.op not in TF_PLUMBING for node in definition.node_def):
                return False
    return True


def count_tf_step(concrete_function, global_batch: int, math_dtype: str, where: str = "") -> dict[str, Any]:
    """`flops` for a TensorFlow training from its traced step (all replicas: `global_batch` examples)."""
    started = time.perf_counter()
    total, uncounted = count_tf_graph(concrete_function.graph)
    method = (
        "TensorFlow's registered flops statistics (the tf.compat.v1.profiler's float_operation) over the "
        f"ops that run of the traced training step (forward, loss, gradients), global batch {global_batch}"
        f"{where}; {MATMUL_WORDS}; ops inside control-flow loops are not seen"
    )
    nothing = "TensorFlow step not counted: no convolution or matmul FLOPs"
    return counted(total, global_batch, method, uncounted, math_dtype, started, nothing)


# --- a run recorded before this existed ----------------------------------------------------------------


def recorded_math_dtype(training: dict[str, Any]) -> tuple[str | None, str]:
    """(math dtype, why) of a recorded run counted afterwards: its mixed precision where it trained in one;
    float32's is not known here (TF32 or not was the GPU's and the framework's at run time), so the report
    derives it from the precision and its table of GPUs (sizing/analysis/headroom.py `math_dtype`)."""
    precision = training.get("precision") or "float32"
    if precision in ("float16", "bfloat16"):
        return precision, f"{precision} from the recorded precision (mixed)"
    if training.get("device_used") in (None, "CPU") or not training.get("gpu_names"):
        return "float32", "float32 on the CPU"
    return None, "float32 on a GPU, TF32 not recorded at run time: the report derives it from the GPU"


def synthetic_torch_batch(batch: int, image_size: int):
    """`batch` images of the recorded size, each with one box, as the training's batches look."""
    import torch

    generator = torch.Generator().manual_seed(0)
    images = [torch.rand(3, image_size, image_size, generator=generator) for _ in range(batch)]
    side = max(8.0, image_size / 16)
    box = torch.tensor(
        [[image_size / 3, image_size / 3, image_size / 3 + side * 0.75, image_size / 3 + side]]
    )
    targets = [{"boxes": box.clone(), "labels": torch.tensor([1])} for _ in range(batch)]
    return images, targets


def recorded_torch_shape(training: dict[str, Any]) -> tuple[dict[str, Any], int, int, int]:
    """(model config, per-device batch, input image side, seed) of a recorded torch run; a ValueError says
    what the record lacks (every torch training records its model's `config`)."""
    from training.torch_model import TORCH_PRESETS

    config = training.get("config")
    known = sorted({preset.architecture for preset in TORCH_PRESETS.values()})
    if not isinstance(config, dict) or config.get("architecture") not in known:
        raise ValueError(f"no torch model to rebuild: config.architecture is not one of {', '.join(known)}")
    dataset = training.get("dataset_info")
    recorded = {
        "per_device_batch_size": training.get("per_device_batch_size") or training.get("batch_size") or 1,
        "config.image_size": config.get("image_size"),
        "dataset_info.image_size": (dataset.get("image_size") if isinstance(dataset, dict) else None)
        or config.get("image_size"),
        "seed": training.get("seed") or 0,
    }
    for name, value in recorded.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "seed" else 1):
            raise ValueError(f"{name} is {value!r}, not a whole number{'' if name == 'seed' else ' >= 1'}")
    return config, recorded["per_device_batch_size"], recorded["dataset_info.image_size"], recorded["seed"]


def count_recorded_torch_run(training: dict[str, Any], host: str) -> dict[str, Any]:
    """`flops` for a recorded torch run: its model rebuilt from training.json, counted on this CPU."""
    import torch

    from training.torch_model import build_model

    config, batch, input_size, seed = recorded_torch_shape(training)
    torch.manual_seed(seed)
    model = build_model(config).train()
    images, targets = synthetic_torch_batch(batch, input_size)
    math_dtype, why = recorded_math_dtype(training)
    where = f"; counted after the run, on {host}, with synthetic inputs of the recorded shape"
    flops = count_torch_training(model, images, targets, None, torch.device("cpu"), where)
    flops["math_dtype"] = math_dtype
    flops["method"] += f"; math dtype: {why}"
    return flops
