"""The Model Garden experiment we train: `fasterrcnn_resnetfpn_coco` with one-device overrides and presets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.records import TRAIN_PATTERN, VAL_PATTERN

EXPERIMENT = "fasterrcnn_resnetfpn_coco"
PRECISIONS = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Preset:
    name: str
    backbone_depth: int
    image_size: int
    base_learning_rate_per_example: float
    warmup_steps: int
    overrides: dict[str, Any]


# `small` is sized for CPUs and CI (measured ~0.4 s/step at batch 2 on 2 cores); `standard` keeps
# Model Garden's shipped ResNet-50-FPN model and only changes what one device and 640 px require.
PRESETS = {
    "small": Preset(
        name="small",
        backbone_depth=18,
        image_size=256,
        base_learning_rate_per_example=0.01,
        warmup_steps=100,
        overrides={
            "min_level": 2,
            "max_level": 5,
            "anchor": {"anchor_size": 6.0},
            "decoder": {"type": "fpn", "fpn": {"num_filters": 128}},
            "rpn_head": {"num_filters": 128},
            "detection_head": {"num_convs": 0, "num_fcs": 2, "fc_dims": 512},
            "roi_generator": {"num_proposals": 256, "test_num_proposals": 100},
            "roi_sampler": {"num_sampled_rois": 128},
        },
    ),
    "standard": Preset(
        name="standard",
        backbone_depth=50,
        image_size=640,
        base_learning_rate_per_example=0.12 / 64,  # the shipped schedule, scaled to the batch
        warmup_steps=500,
        overrides={},
    ),
}


# The workload's one precision default, on every device and in both frameworks, so that a CPU run and a
# GPU run of the same command are like-for-like; mixed precision is asked for (--precision).
DEFAULT_PRECISION = "float32"


def build_config(
    *,
    preset: str,
    dataset: Path,
    batch_size: int,
    precision: str,
    seed: int,
    init_checkpoint: str | None = None,
    num_gpus: int = 0,
    distribution_strategy: str = "one_device",
):
    """The full ExperimentConfig (validated), reading TFRecords from `dataset`: one device, or Model
    Garden's `mirrored` strategy over `num_gpus` GPUs (`batch_size` is then the global batch)."""
    from official.core import exp_factory
    from official.vision.configs import maskrcnn  # noqa: F401  (registers the experiment)

    chosen = PRESETS[preset]
    params = exp_factory.get_exp_config(EXPERIMENT)
    data_dtype = "bfloat16" if precision == "bfloat16" else "float32"
    learning_rate = chosen.base_learning_rate_per_example * batch_size
    model = {
        "num_classes": 2,
        "input_size": [chosen.image_size, chosen.image_size, 3],
        "backbone": {"type": "resnet", "resnet": {"model_id": chosen.backbone_depth}},
        "norm_activation": {"use_sync_bn": False},
        **chosen.overrides,
    }
    params.override(
        {
            "runtime": {
                "distribution_strategy": distribution_strategy,
                "num_gpus": num_gpus,
                "mixed_precision_dtype": precision,
            },
            "task": {
                "init_checkpoint": init_checkpoint or "",
                "init_checkpoint_modules": "backbone",
                "annotation_file": None,
                "use_coco_metrics": False,
                "model": model,
                "train_data": {
                    "input_path": str(Path(dataset) / TRAIN_PATTERN),
                    "global_batch_size": batch_size,
                    "dtype": data_dtype,
                    "shuffle_buffer_size": 1000,
                    "seed": seed,
                },
                "validation_data": {
                    "input_path": str(Path(dataset) / VAL_PATTERN),
                    "global_batch_size": 1,
                    "dtype": data_dtype,
                },
            },
            "trainer": {
                "steps_per_loop": 1,
                "summary_interval": 1,
                "checkpoint_interval": 1_000_000,
                "optimizer_config": {
                    "optimizer": {"type": "sgd", "sgd": {"momentum": 0.9, "global_clipnorm": 10.0}},
                    "learning_rate": {"type": "constant", "constant": {"learning_rate": learning_rate}},
                    "warmup": {
                        "type": "linear",
                        "linear": {
                            "warmup_steps": chosen.warmup_steps,
                            "warmup_learning_rate": learning_rate / 20,
                        },
                    },
                },
            },
        },
        is_strict=True,
    )
    params.validate()
    return params


def config_from_dict(config: dict[str, Any]):
    """Rebuild an ExperimentConfig from the dict stored in training.json."""
    from official.core import exp_factory
    from official.vision.configs import maskrcnn  # noqa: F401

    params = exp_factory.get_exp_config(EXPERIMENT)
    params.override(config, is_strict=False)
    params.validate()
    return params
