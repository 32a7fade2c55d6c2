"""The torch side of a setting (training.settings): threads, TF32, channels-last and torch.compile."""

from __future__ import annotations

from typing import Any

from training.failures import CompileFailed, from_compiler, out_of_memory

COMPILER = "torch.compile of the backbone"


def apply_torch_settings(options: Any) -> None:
    """Intra-op threads when asked; TF32 for matmuls and convolutions, or for neither, when asked (else
    torch's default: convolutions on TF32, matmuls in float32)."""
    import torch

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    if options.tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = options.tf32
        torch.backends.cudnn.allow_tf32 = options.tf32
        torch.set_float32_matmul_precision("high" if options.tf32 else "highest")


def to_channels_last(model: Any) -> None:
    """The model's weights in NHWC, and the batched images (the backbone's input) made NHWC too: the
    detection model batches its list of images itself, in NCHW."""
    import torch

    model.to(memory_format=torch.channels_last)
    model.backbone.register_forward_pre_hook(_channels_last_input)


def _channels_last_input(_module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    images, *rest = args
    return (images.contiguous(memory_format=torch.channels_last), *rest)


def compile_backbone(model: Any) -> None:
    """torch.compile of model.backbone in place (its state_dict keys stay as they are). The input shape is
    the preset's, so one static graph. Compilation itself happens at the first call."""
    try:
        model.backbone.compile(dynamic=False)
    except Exception as exc:
        raise CompileFailed(COMPILER, exc) from exc


def compile_failure(exc: BaseException) -> CompileFailed | None:
    """A step's exception as the compiler's failure, when torch's compiler raised it (out of memory is
    out of memory, even inside the compiler)."""
    if isinstance(exc, CompileFailed) or out_of_memory(exc) is not None or not from_compiler(exc):
        return None
    return CompileFailed(COMPILER, exc)
