"""ONNX of the PyTorch framework's model, for the onnxruntime runtime: torch.onnx's tracing exporter
(`dynamo=False`) on the *eager* torchvision detector, kept only if it agrees with TorchScript.

TorchScript itself cannot be exported (torch.onnx does not know torchvision's scripted classes, e.g.
"Unknown type …BoxCoder"), so the eager detector is rebuilt from model/export.json's config and the
exported weights, and traced with its post-processing (box decoding, score threshold, NMS) in the graph.
The graph takes a float32 N×3×H×W batch in [0, 1] at the model's input size and returns, per image i,
`boxes_i` (x1, y1, x2, y2 in input pixels), `scores_i`, `labels_i`. N is fixed in the graph (the
detector loops over the images of a list), so each batch size has its own file (`onnx_file`).

Before a file is put in place, ONNX Runtime runs it on the very images it will be timed on, next to
the TorchScript export (the eager model for a state-dict export): every detection scoring above the
model's own threshold must have a counterpart of the same class within BOX_TOLERANCE_PX and
SCORE_TOLERANCE on the other side, both ways.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from runformat import MODEL_DIR
from training.inference.runtimes.base import EXPORT_INFO_FILE, CannotTake, one_line

OPSET = 17
BOX_TOLERANCE_PX = 0.5
SCORE_TOLERANCE = 0.005
DEFAULT_SCORE_THRESHOLD = 0.05  # torchvision's box_score_thresh, which build_model keeps
Detections = tuple[np.ndarray, np.ndarray, np.ndarray]  # boxes (n, 4), scores (n,), labels (n,)


def onnx_file(batch_size: int) -> str:
    return f"{MODEL_DIR}/model-batch{batch_size}.onnx"


@dataclass(frozen=True)
class Agreement:
    images: int
    detections: int  # the reference's detections above the score threshold, each matched
    max_box_diff_px: float
    max_score_diff: float

    def describe(self, reference: str) -> str:
        return (
            f"agrees with {reference} on the {self.images} image(s) it is timed on: its {self.detections} "
            "detections above the score threshold (and the ONNX ones) matched, boxes within "
            f"{self.max_box_diff_px:.2g} px, scores within {self.max_score_diff:.2g} "
            f"(tolerance {BOX_TOLERANCE_PX} px, {SCORE_TOLERANCE})"
        )


def export_info(run_dir: Path) -> dict[str, Any]:
    """model/export.json of a torch export with the config that rebuilds the eager model; else CannotTake."""
    path = run_dir / EXPORT_INFO_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CannotTake(
            f"{EXPORT_INFO_FILE} unreadable ({type(exc).__name__}): torch.onnx needs the eager model's "
            "config (run `python -m training export`)"
        ) from exc
    is_torch = isinstance(info, dict) and info.get("framework") == "torch"
    if not (is_torch and isinstance(info.get("config"), dict)):
        raise CannotTake(
            f"{EXPORT_INFO_FILE} has no torch model config to rebuild the eager model for torch.onnx"
        )
    return info


def convert(run_dir: Path, images: np.ndarray, target: Path) -> str:
    """Export the eager model for len(images) images into `target`, checked on `images` (float32 N×3×H×W)
    first; returns what was done, in one line. CannotTake (one line) if it cannot be exported or disagrees."""
    import torch

    info = export_info(run_dir)
    started = time.monotonic()
    eager = eager_model(run_dir, info)
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        _trace_export(torch, eager, images, staging)
        exported_s = time.monotonic() - started
        candidate = run_onnx(staging, images)
        reference, reference_name = _reference(run_dir, info, eager)
        agreement = compare(reference(images), candidate, _score_threshold(info), reference_name)
        staging.replace(target)
    finally:
        staging.unlink(missing_ok=True)
    return (
        f"converted to {target.parent.name}/{target.name} with torch.onnx {torch.__version__} "
        f"(tracing exporter of the eager model, opset {OPSET}) in {exported_s:.1f} s; "
        f"{agreement.describe(reference_name)}"
    )


def eager_model(run_dir: Path, info: dict[str, Any]):
    """The eager detector of export.json's config with the exported weights, in eval mode on the CPU."""
    import torch
    import torchvision  # noqa: F401  (registers the ops a TorchScript file calls)

    from training.torch_model import build_model

    weights_path = run_dir / MODEL_DIR / str(info.get("file", ""))
    if not weights_path.is_file():
        raise CannotTake(f"{MODEL_DIR}/{info.get('file')}: missing (run `python -m training export`)")
    try:
        model = build_model(info["config"])
        if info.get("format") == "torchscript":
            weights = torch.jit.load(str(weights_path), map_location="cpu").state_dict()
        else:
            weights = torch.load(weights_path, map_location="cpu", weights_only=True)
        model.load_state_dict(weights)
    except Exception as exc:
        raise CannotTake(
            f"could not rebuild the eager model from {EXPORT_INFO_FILE}: {one_line(exc)}"
        ) from exc
    return model.eval()


def _trace_export(torch, eager, images: np.ndarray, staging: Path) -> None:
    count = len(images)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation warnings: the check below decides
            torch.onnx.export(
                _tuple_outputs(torch, eager),
                (torch.from_numpy(images),),
                str(staging),
                opset_version=OPSET,
                dynamo=False,
                input_names=["images"],
                output_names=[f"{kind}_{i}" for i in range(count) for kind in ("boxes", "scores", "labels")],
            )
    except Exception as exc:
        raise CannotTake(
            f"torch.onnx {torch.__version__} could not export the eager model: {one_line(exc)}"
        ) from exc


def _tuple_outputs(torch, eager):
    class ListOutputs(torch.nn.Module):
        """The detector on a batch tensor, with its per-image dicts flattened to a tuple of tensors."""

        def __init__(self) -> None:
            super().__init__()
            self.detector = eager

        def forward(self, images):
            outputs = []
            for detections in self.detector(list(images.unbind(0))):
                outputs += [detections["boxes"], detections["scores"], detections["labels"]]
            return tuple(outputs)

    return ListOutputs().eval()


def run_onnx(path: Path, images: np.ndarray, provider: str = "CPUExecutionProvider") -> list[Detections]:
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(str(path), providers=[provider])
        outputs = session.run(None, {session.get_inputs()[0].name: images})
    except Exception as exc:
        raise CannotTake(f"onnxruntime could not run the torch.onnx export: {one_line(exc)}") from exc
    return [(outputs[i], outputs[i + 1], outputs[i + 2]) for i in range(0, len(outputs), 3)]


def _reference(run_dir: Path, info: dict[str, Any], eager):
    """TorchScript (what the torchscript runtime times) when the export has it, else the eager model."""
    import torch

    if info.get("format") == "torchscript":
        model = torch.jit.load(str(run_dir / MODEL_DIR / info["file"]), map_location="cpu").eval()
        name = "TorchScript"
    else:
        model, name = eager, "the eager model"

    def detect(images: np.ndarray) -> list[Detections]:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's "always returns a (Losses, Detections) tuple"
            result = model(list(torch.from_numpy(images).unbind(0)))
        per_image = result[1] if isinstance(result, tuple) else result
        return [(d["boxes"].numpy(), d["scores"].numpy(), d["labels"].numpy()) for d in per_image]

    return detect, name


def _score_threshold(info: dict[str, Any]) -> float:
    return float(info["config"].get("box_score_thresh", DEFAULT_SCORE_THRESHOLD))


def compare(
    reference: list[Detections],
    candidate: list[Detections],
    score_threshold: float,
    reference_name: str = "TorchScript",
) -> Agreement:
    """Both ways: each detection above score_threshold + SCORE_TOLERANCE (so that one side's detection
    just below the model's threshold may be missing on the other) needs a counterpart of the same label
    within the tolerances. CannotTake naming the first image and detection without one."""
    if len(reference) != len(candidate):
        raise CannotTake(f"the ONNX export returned {len(candidate)} images' detections for {len(reference)}")
    compared, box_diff, score_diff = 0, 0.0, 0.0
    for index, pair in enumerate(zip(reference, candidate, strict=True)):
        for side, (mine, other) in enumerate((pair, pair[::-1])):
            boxes, scores, labels = (np.asarray(a, dtype=np.float64) for a in mine)
            for box, score, label in zip(boxes.reshape(-1, 4), scores, labels, strict=True):
                if score < score_threshold + SCORE_TOLERANCE:
                    continue
                match = _counterpart(box, score, label, other)
                if match is None:
                    who = (reference_name, "ONNX") if side == 0 else ("ONNX", reference_name)
                    raise CannotTake(
                        f"the ONNX export disagrees with the model it was exported from: image {index}, "
                        f"{who[0]} detection (score {score:.3f}, box {np.round(box, 1).tolist()}) has no "
                        f"counterpart from {who[1]} within {BOX_TOLERANCE_PX} px and {SCORE_TOLERANCE}"
                    )
                compared += 1 if side == 0 else 0
                box_diff, score_diff = max(box_diff, match[0]), max(score_diff, match[1])
    return Agreement(len(reference), compared, box_diff, score_diff)


def _counterpart(box, score, label, other: Detections) -> tuple[float, float] | None:
    boxes, scores, labels = (np.asarray(a, dtype=np.float64) for a in other)
    if not len(scores):
        return None
    box_diffs = np.abs(boxes.reshape(-1, 4) - box).max(axis=1)
    score_diffs = np.abs(scores - score)
    fits = (labels == label) & (box_diffs <= BOX_TOLERANCE_PX) & (score_diffs <= SCORE_TOLERANCE)
    if not fits.any():
        return None
    best = int(np.argmin(np.where(fits, box_diffs, np.inf)))
    return float(box_diffs[best]), float(score_diffs[best])
