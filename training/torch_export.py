"""Export and inference for the PyTorch path: TorchScript of the latest checkpoint, no TensorFlow.

model/ holds `model.torchscript.pt` (torch.jit.script of the detector in eval mode; load it with
torch.jit.load after `import torchvision`, which registers the ops it calls; it takes a list
of float CHW images in [0, 1] and returns `(losses, detections)`, detections being one dict per image
with `boxes` (x1, y1, x2, y2 in input pixels), `scores` and `labels`) and `export.json`. Should
scripting ever fail, model/ holds `state_dict.pt` instead and export.json the config that rebuilds the
model (training.torch_model.build_model); `format` in export.json says which.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from runformat import CHECKPOINTS_DIR, FORMAT_VERSION, write_json_atomic
from training.errors import RunDirError
from training.records import LabeledImage

TORCHSCRIPT_FILE = "model.torchscript.pt"
STATE_DICT_FILE = "state_dict.pt"
EXPORT_INFO = "export.json"

Predictor = Callable[[LabeledImage], tuple[list[list[float]], list[float], list[int]]]


def export_torch(run_dir: Path, training: dict[str, Any], staging: Path) -> dict[str, Any]:
    """Write the latest checkpoint's model into `staging` (the caller puts it in place as model/)."""
    import torch

    from training.torch_backend import _load, checkpoint_step, latest_checkpoint
    from training.torch_model import build_model

    checkpoint = latest_checkpoint(run_dir / CHECKPOINTS_DIR)
    if checkpoint is None:
        raise RunDirError(f"{run_dir / CHECKPOINTS_DIR}: no checkpoint to export (train first)")
    config = training["config"]
    model = build_model(config)
    model.load_state_dict(_load(torch, checkpoint, torch.device("cpu"))["model"])
    model.eval()
    staging.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "framework": "torch",
        "framework_version": torch.__version__,
        "checkpoint": f"{CHECKPOINTS_DIR}/{checkpoint.name}",
        "global_step": checkpoint_step(checkpoint),
        "input_size": [config["image_size"], config["image_size"]],
        "config": config,
        "input": "list of float32 CHW RGB images in [0, 1], any size (resized inside to input_size)",
        "output": "(losses, detections): per image boxes (x1, y1, x2, y2 pixels), scores, labels",
        "load": "import torchvision first (it registers the ops), then torch.jit.load(file)",
    }
    try:
        scripted = torch.jit.script(model)
        scripted.save(str(staging / TORCHSCRIPT_FILE))
        info.update(format="torchscript", file=TORCHSCRIPT_FILE)
    except Exception as exc:  # scripting is best effort; the state dict always works
        torch.save(model.state_dict(), staging / STATE_DICT_FILE)
        info.update(
            format="state_dict", file=STATE_DICT_FILE, torchscript_error=" ".join(str(exc).split())[:300]
        )
    info["exported_unix"] = time.time()
    write_json_atomic(staging / EXPORT_INFO, info)
    return info


def torch_predictor(model_dir: Path, info: dict[str, Any], device_kind: str = "cpu") -> Predictor:
    """A function from a labeled image to (boxes as ymin, xmin, ymax, xmax pixels, scores, classes)."""
    import torch
    import torchvision  # noqa: F401  (registers the nms and roi_align ops the TorchScript calls)

    device = torch.device("cuda:0" if device_kind == "gpu" else "cpu")
    path = model_dir / str(info.get("file", ""))
    if info.get("format") == "torchscript" and path.is_file():
        model = torch.jit.load(str(path), map_location=device)
    elif info.get("format") == "state_dict" and path.is_file():
        from training.torch_model import build_model

        model = build_model(info["config"])
        model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        model.to(device)
    else:
        raise RunDirError(f"{model_dir}: no exported torch model (run `python -m training export` first)")
    model.eval()

    def predict(item: LabeledImage) -> tuple[list[list[float]], list[float], list[int]]:
        pixels = np.ascontiguousarray(item.decoded().transpose(2, 0, 1))
        image = torch.from_numpy(pixels).to(device).float().div_(255.0)
        # On a GPU, no graph optimization: see training.inference.runtimes.torchscript.
        with torch.no_grad(), torch.jit.optimized_execution(device.type != "cuda"), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*always returns a .Losses, Detections. tuple")
            output = model([image])
        detections = output[1][0] if isinstance(output, tuple) else output[0]
        boxes = detections["boxes"].float().cpu().numpy().reshape(-1, 4)[:, [1, 0, 3, 2]]
        boxes[:, 0::2] = boxes[:, 0::2].clip(0, item.height)
        boxes[:, 1::2] = boxes[:, 1::2].clip(0, item.width)
        return (
            boxes.astype(float).tolist(),
            detections["scores"].float().cpu().numpy().astype(float).tolist(),
            detections["labels"].cpu().numpy().astype(int).tolist(),
        )

    return predict
