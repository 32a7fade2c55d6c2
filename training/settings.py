"""The setting a training runs at (runformat.tuning.Setting): checked before anything starts, applied to
the framework before the model is built, and recorded in training.json `settings`.

What each option does per framework (docs/usage.md): `--tf32` lets float32 matmuls and convolutions run
on TF32 tensor cores and `--no-tf32` neither (without either, the framework's default stands);
`--threads N` sets the CPU's intra-op threads; `--compile` is torch.compile of the backbone (torch) or XLA
of the train step (tf); `--channels-last`, `--loader-workers N` and `--pin-memory` are torch's alone
(training.torch_settings, training.torch_loader).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from runformat.tuning import Setting


def settings_problem(args: argparse.Namespace) -> str | None:
    """The first thing wrong with the setting options, one line; None when they fit together."""
    if args.framework == "tf":
        if args.channels_last:
            return "--channels-last is for --framework torch (TensorFlow's layers are NHWC already)"
        if args.loader_workers:
            return (
                "--loader-workers is for --framework torch (the tf path's tf.data pipeline is already "
                "parallel and prefetched)"
            )
        if args.pin_memory:
            return "--pin-memory is for --framework torch (tf.data copies to the device itself)"
    if args.tf32 is not None and args.device != "gpu":
        flag = "--tf32" if args.tf32 else "--no-tf32"
        return f"{flag} is for --device gpu (TF32 runs on a GPU's tensor cores; a CPU computes float32)"
    if args.pin_memory and not args.loader_workers:
        return "--pin-memory pins the loader workers' batches: add --loader-workers N"
    if args.pin_memory and args.device != "gpu":
        return "--pin-memory is for --device gpu (pinned host memory speeds copies to a GPU)"
    if args.no_checkpoint and not args.no_export:
        return "--no-checkpoint leaves no checkpoint to export, evaluate or infer from: add --no-export"
    return None


def apply_settings(options: Any) -> None:
    """Set the framework up for options' setting, before the model and the input pipeline are built."""
    if options.framework == "torch":
        from training.torch_settings import apply_torch_settings

        apply_torch_settings(options)
    else:
        apply_tf_settings(options)


def apply_tf_settings(options: Any) -> None:
    """Intra-op threads (before TensorFlow's runtime starts), and TF32 when asked either way."""
    import tensorflow as tf

    if options.threads is not None:
        tf.config.threading.set_intra_op_parallelism_threads(options.threads)
    if options.tf32 is not None:
        tf.config.experimental.enable_tensor_float_32_execution(options.tf32)


def threads_in_use(options: Any) -> int | None:
    """The intra-op threads the framework now uses, when --threads set them; None: its default."""
    if options.threads is None:
        return None
    if options.framework == "torch":
        import torch

        return torch.get_num_threads()
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads()


def tf_intra_op_threads(tf: Any) -> int:
    """The intra-op threads TensorFlow uses: the count set, else TF_NUM_INTRAOP_THREADS, else (its 0, "the
    system picks") the CPUs this process may run on, as TensorFlow's DefaultNumIntraOpThreads picks them."""
    chosen = tf.config.threading.get_intra_op_parallelism_threads()
    if chosen > 0:
        return chosen
    try:
        from_env = int(os.environ.get("TF_NUM_INTRAOP_THREADS", "0"))
    except ValueError:
        from_env = 0
    return from_env if from_env > 0 else len(os.sched_getaffinity(0))


def setting_of_options(options: Any) -> Setting:
    return Setting(
        batch=options.batch_size,
        precision=options.precision,
        tf32=options.tf32,
        channels_last=options.channels_last,
        compile=options.compile,
        threads=threads_in_use(options),
        loader_workers=options.loader_workers,
        pin_memory=options.pin_memory,
    )


def settings_record(options: Any) -> dict[str, Any]:
    """training.json `settings`: batch per device, the precision used, the rest as asked."""
    return setting_of_options(options).record()
