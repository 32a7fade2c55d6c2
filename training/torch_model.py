"""torchvision Faster R-CNN for the two presets, from scratch (nothing downloaded).

`small` mirrors the TF `small` preset (training.experiment.PRESETS) part for part, because a framework
comparison must compare frameworks, not configurations (torchvision's defaults cost ~5x more at 256 px,
see training/README.md): ResNet-18, FPN levels 2-5 with 128 channels and no extra level, anchors of
6 x stride (24-192 px) with aspect ratios 0.5/1/2, 256 proposals in training (100 at test), 128 sampled
RoIs, a box head of 2 fully connected layers of 512, 256 px. `standard` is torchvision's own
`fasterrcnn_resnet50_fpn_v2` at 640 px, as Model Garden's ResNet-50-FPN is the TF one as shipped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

NUM_CLASSES = 2  # background + the target


@dataclass(frozen=True)
class TorchPreset:
    name: str
    architecture: str
    image_size: int
    base_learning_rate_per_example: float
    warmup_steps: int


TORCH_PRESETS = {
    "small": TorchPreset("small", "resnet18_fpn128", 256, 0.01, 100),
    "standard": TorchPreset("standard", "fasterrcnn_resnet50_fpn_v2", 640, 0.12 / 64, 500),
}
SMALL_HEAD = {
    "rpn_pre_nms_top_n_train": 1000,
    "rpn_post_nms_top_n_train": 256,
    "rpn_pre_nms_top_n_test": 500,
    "rpn_post_nms_top_n_test": 100,
    "box_batch_size_per_image": 128,
    "box_detections_per_img": 100,
}
WEIGHT_DECAY = 4e-5  # Model Garden's l2_weight_decay for this experiment


def model_config(preset: str) -> dict[str, Any]:
    """What training.json records as `config` for the torch path (enough to rebuild the model)."""
    chosen = TORCH_PRESETS[preset]
    config: dict[str, Any] = {
        "framework": "torch",
        "preset": preset,
        "architecture": chosen.architecture,
        "num_classes": NUM_CLASSES,
        "image_size": chosen.image_size,
        "weight_decay": WEIGHT_DECAY,
        "momentum": 0.9,
        "clip_grad_norm": 10.0,
        "warmup_steps": chosen.warmup_steps,
    }
    if preset == "small":
        config.update(
            fpn_channels=128,
            fpn_levels=[2, 3, 4, 5],
            anchor_sizes=[24, 48, 96, 192],
            aspect_ratios=[0.5, 1.0, 2.0],
            box_head_fc=[512, 512],
            **SMALL_HEAD,
        )
    return config


def build_model(config: dict[str, Any]):
    """The Faster R-CNN `config` describes, randomly initialised."""
    from torchvision.models.detection import FasterRCNN, fasterrcnn_resnet50_fpn_v2

    size = int(config["image_size"])
    if config["architecture"] == "fasterrcnn_resnet50_fpn_v2":
        return fasterrcnn_resnet50_fpn_v2(
            weights=None,
            weights_backbone=None,
            num_classes=config["num_classes"],
            min_size=size,
            max_size=size,
        )
    if config["architecture"] != "resnet18_fpn128":
        raise ValueError(f"unknown architecture {config['architecture']!r}")
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    channels = int(config["fpn_channels"])
    levels = len(config["fpn_levels"])
    anchors = AnchorGenerator(
        sizes=tuple((int(s),) for s in config["anchor_sizes"]),
        aspect_ratios=(tuple(config["aspect_ratios"]),) * levels,
    )
    roi_pool = MultiScaleRoIAlign(
        featmap_names=[str(i) for i in range(levels)], output_size=7, sampling_ratio=2
    )
    fc = config["box_head_fc"]
    return FasterRCNN(
        ResNetFpn(channels),
        num_classes=None,
        min_size=size,
        max_size=size,
        rpn_anchor_generator=anchors,
        box_roi_pool=roi_pool,
        box_head=TwoMLPHead(channels * 7 * 7, int(fc[0])),
        box_predictor=FastRCNNPredictor(int(fc[-1]), config["num_classes"]),
        **{key: int(config[key]) for key in SMALL_HEAD},
    )


def _resnet_fpn_class():
    from torch import nn
    from torchvision.models import resnet18
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork

    class _ResNetFpn(nn.Module):
        """ResNet-18 (layers 1-4, strides 4-32) under an FPN without the extra pooled level: levels 2-5."""

        def __init__(self, channels: int) -> None:
            super().__init__()
            body = resnet18(weights=None)
            returned = OrderedDict((f"layer{i + 1}", str(i)) for i in range(4))
            self.body = IntermediateLayerGetter(body, return_layers=returned)
            self.fpn = FeaturePyramidNetwork([64, 128, 256, 512], channels)
            self.out_channels = channels

        def forward(self, x):
            return self.fpn(self.body(x))

    return _ResNetFpn


def ResNetFpn(channels: int):  # a factory that reads like the class it builds
    return _resnet_fpn_class()(channels)
