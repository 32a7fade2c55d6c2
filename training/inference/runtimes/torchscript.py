"""PyTorch running the TorchScript export of the torch framework (never imports TensorFlow).

The file (base.TORCHSCRIPT_FILE) holds `torch.jit.script` of a torchvision detector in eval mode: it takes
a list of CHW float tensors in 0..1 and returns (losses, detections) or the detections, torchvision's
list of {boxes, labels, scores}.

On a GPU the graph executor's optimization (profiling and fusing) is off: once it has profiled a call
with no detections, the fused kernels fail with "Global alloc not supported yet" (pytorch/pytorch#144965;
seen on an H100 with torch 2.11, where a blank image is the first call).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from training.inference.runtimes.base import (
    TORCHSCRIPT_FILE,
    CannotTake,
    Loaded,
    ModelFacts,
    model_input_size,
)

NAME = "torchscript"


def check(run_dir: Path) -> None:
    if not (run_dir / TORCHSCRIPT_FILE).is_file():
        raise CannotTake(f"no TorchScript model at {TORCHSCRIPT_FILE} (not a PyTorch export)")


def load(run_dir: Path, device: str) -> Loaded:
    check(run_dir)
    import torch
    import torchvision  # noqa: F401  (registers torchvision::nms and roi_align for TorchScript)

    if device == "gpu" and not torch.cuda.is_available():
        raise CannotTake(f"torch {torch.__version__} sees no CUDA GPU")
    target = torch.device("cuda:0" if device == "gpu" else "cpu")
    try:
        model = torch.jit.load(str(run_dir / TORCHSCRIPT_FILE), map_location=target).eval()
    except Exception as exc:
        raise CannotTake(f"torch.jit.load failed: {' '.join(str(exc).split())[:300]}") from exc

    def prepare(batch: np.ndarray):
        images = torch.from_numpy(batch).to(target).permute(0, 3, 1, 2).float().div(255.0)
        return list(images.unbind(0))

    optimize = device != "gpu"

    def run(images) -> None:
        with torch.inference_mode(), torch.jit.optimized_execution(optimize):
            result = model(images)
        detections = result[1] if isinstance(result, tuple) else result
        for item in detections:
            item["boxes"].cpu()
            item["scores"].cpu()

    return Loaded(
        name=NAME,
        version=f"torch {torch.__version__} (TorchScript{'' if optimize else ', graph optimization off'})",
        prepare=prepare,
        run=run,
        gpu_memory=TorchGpuMemory(torch) if device == "gpu" else None,
        facts=model_facts(torch, model, prepare, run, model_input_size(run_dir)),
    )


class TorchGpuMemory:
    def __init__(self, torch) -> None:
        self._torch = torch

    def reset(self) -> None:
        self._torch.cuda.reset_peak_memory_stats()

    def peak_bytes(self) -> int | None:
        return int(self._torch.cuda.max_memory_allocated())


def model_facts(torch, model, prepare, run, size: tuple[int, int]) -> ModelFacts:
    facts = ModelFacts(
        parameters=int(sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())),
        parameters_note="all parameters and buffers of the TorchScript module (weights, BatchNorm stats)",
    )
    try:
        from torch.utils.flop_counter import FlopCounterMode

        images = prepare(np.zeros((1, size[0], size[1], 3), dtype=np.uint8))
        counter = FlopCounterMode(display=False)
        with counter:
            run(images)
        total = counter.get_total_flops()
    except Exception as exc:
        where = " in the TorchScript interpreter" if "TorchScript" in str(exc) else ""
        facts.flops_note = (
            f"not measured: torch FlopCounterMode could not run this model ({type(exc).__name__}{where})"
        )
        return facts
    if total:
        facts.flops_per_image = float(total)
        facts.flops_note = (
            "torch.utils.flop_counter on one blank image: aten ops with FLOP formulas (convolutions, "
            "matmuls), 2 FLOPs per multiply-add"
        )
    else:
        facts.flops_note = "not measured: torch FlopCounterMode saw no op it counts (TorchScript hides them)"
    return facts
