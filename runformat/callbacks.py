"""Progress from your own training job to the workbench's collector, in one line of your code.

When `collect timed ... -- COMMAND` (or ./scripts/collect_cpu.sh / collect_gpu.sh ... -- COMMAND) runs your
job, its environment holds WORKBENCH_PROGRESS, the path of a file: one JSON object per line appended there is
a step (docs/run-format.md, "The progress protocol"). The collector also puts this checkout on the job's
PYTHONPATH, so these import as they are (elsewhere: `sys.path.append("/path/to/gpu-workbench")` first):

    from runformat.callbacks import KerasProgress      # model.fit(..., callbacks=[KerasProgress(32)])
    from runformat.callbacks import LightningProgress  # Trainer(..., callbacks=[LightningProgress()])
    from runformat.callbacks import HFProgress         # Trainer(..., callbacks=[HFProgress()])
    from runformat.callbacks import ProgressFile       # any loop: ProgressFile().step(step, examples, loss)

Each callback class is built on first use from its library (keras, lightning, transformers), so importing
this module needs none of them. Outside the collector (no WORKBENCH_PROGRESS) they do nothing. With several
processes (DDP) only rank 0 writes. Standard library only.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

PROGRESS_ENV = "WORKBENCH_PROGRESS"
_BUILT: dict[str, type] = {}


class ProgressFile:
    """Appends protocol lines to the file WORKBENCH_PROGRESS names (or `path`); each line is one write to a
    file opened for appending, so lines of several processes never interleave. A no-op without a path."""

    def __init__(self, path: str | None = None) -> None:
        target = path if path is not None else os.environ.get(PROGRESS_ENV)
        self._fd = (
            os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644) if target else None
        )

    @property
    def active(self) -> bool:
        return self._fd is not None

    def write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        line = json.dumps(record, separators=(",", ":"), default=_plain) + "\n"
        try:
            os.write(self._fd, line.encode())
        except OSError:
            self.close()  # a full disk or a vanished file must not stop the training

    def step(self, step: int, examples: float | None = None, loss: float | None = None, **extra: Any) -> None:
        """A step: `step` global and ≥ 1, `examples` seen so far (cumulative), `loss`; extra numbers kept."""
        record: dict[str, Any] = {"step": int(step), "time_unix": time.time()}
        if examples is not None:
            record["examples"] = int(examples)
        if loss is not None and _finite_or_nan(loss) is not None:
            record["loss"] = _finite_or_nan(loss)
        record.update(extra)
        self.write(record)

    def declare(self, **facts: Any) -> None:
        """What the job is: batch_size (global), precision, framework, framework_version, library,
        workload_name, flops_per_example (forward + backward FLOPs of one example: the report's MFU). None
        values are left out."""
        known = {name: value for name, value in facts.items() if value is not None}
        if known:
            self.write(known)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _plain(value: Any) -> Any:
    """numpy and framework scalars as Python numbers."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _finite_or_nan(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isinf(number) else number


def __getattr__(name: str) -> type:
    """KerasProgress, LightningProgress and HFProgress, built from their library on first use."""
    builders = {"KerasProgress": _keras, "LightningProgress": _lightning, "HFProgress": _hf}
    if name not in builders:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _BUILT:
        _BUILT[name] = builders[name]()
    return _BUILT[name]


def _keras() -> type:
    import keras

    def precision() -> str | None:
        config = getattr(keras, "config", None)
        policy = config.dtype_policy() if config and hasattr(config, "dtype_policy") else None
        policy = policy or keras.mixed_precision.global_policy()
        return getattr(policy, "name", None)

    def backend() -> str:
        return keras.backend.backend() if hasattr(keras.backend, "backend") else "tensorflow"

    class KerasProgress(keras.callbacks.Callback):
        """`model.fit(..., callbacks=[KerasProgress(batch_size=32)])`: a step per training batch; examples
        from `batch_size` (the global batch) when given (Keras does not tell a callback its batch size)."""

        def __init__(self, batch_size: int | None = None, every_n_steps: int = 1) -> None:
            super().__init__()
            self.batch_size, self.every = batch_size, max(1, int(every_n_steps))
            self.out = ProgressFile()
            self.global_step = 0

        def on_train_begin(self, logs: dict | None = None) -> None:
            engine = backend()
            engine_version = None
            try:
                engine_version = __import__(engine).__version__
            except (ImportError, AttributeError):
                engine_version = None
            self.out.declare(framework=engine, framework_version=engine_version,
                             library=f"keras {keras.__version__}", precision=precision(),
                             batch_size=self.batch_size)  # fmt: skip

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self.global_step += 1
            if self.global_step % self.every:
                return
            examples = self.global_step * self.batch_size if self.batch_size else None
            self.out.step(self.global_step, examples, (logs or {}).get("loss"))

    return KerasProgress


def _lightning() -> type:
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    precisions = {"32": "float32", "16": "float16", "bf16": "bfloat16", "64": "float64"}

    def batch_length(batch: Any) -> int | None:
        """The length of the batch's first tensor (a dict's, a tuple's, or the batch itself)."""
        items = list(batch.values()) if isinstance(batch, dict) else batch
        items = items if isinstance(items, (list, tuple)) else [items]
        for item in items:
            shape = getattr(item, "shape", None)
            if shape is not None and len(shape):
                return int(shape[0])
        return None

    class LightningProgress(pl.Callback):
        """`Trainer(callbacks=[LightningProgress()])`: a step per optimizer step (trainer.global_step), the
        examples counted from each batch's length × the world size, the loss the training_step returned."""

        def __init__(self, every_n_steps: int = 1) -> None:
            super().__init__()
            self.every = max(1, int(every_n_steps))
            self.out = ProgressFile()
            self.examples = 0
            self.counted = True

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if not trainer.is_global_zero:
                self.out.close()
                return
            import torch

            setting = str(trainer.precision)
            self.out.declare(framework="torch", framework_version=torch.__version__,
                             library=f"lightning {pl.__version__}",
                             precision=precisions.get(setting.split("-")[0], setting))  # fmt: skip

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            if not self.out.active:
                return
            length = batch_length(batch)
            self.counted = self.counted and length is not None
            self.examples += (length or 0) * trainer.world_size
            step = trainer.global_step
            if step < 1 or step % self.every:
                return
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            loss = loss.detach().float().item() if hasattr(loss, "detach") else loss
            self.out.step(step, self.examples if self.counted else None, loss)

    return LightningProgress


def _hf() -> type:
    import transformers

    class HFProgress(transformers.TrainerCallback):
        """`Trainer(..., callbacks=[HFProgress()])`: a step per optimizer step (state.global_step), examples
        = steps × the global batch (per device × devices × gradient accumulation), the loss it logs (every
        logging_steps) on the step after it."""

        def __init__(self) -> None:
            self.out = ProgressFile()
            self.batch_size: int | None = None
            self.pending_loss: float | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not state.is_world_process_zero:
                self.out.close()
                return
            import torch

            self.batch_size = int(args.per_device_train_batch_size * max(1, args.n_gpu)
                                  * args.gradient_accumulation_steps * args.world_size)  # fmt: skip
            precision = "bfloat16" if args.bf16 else "float16" if args.fp16 else "float32"
            self.out.declare(framework="torch", framework_version=torch.__version__,
                             library=f"transformers {transformers.__version__}", precision=precision,
                             batch_size=self.batch_size)  # fmt: skip

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if logs and "loss" in logs:
                self.pending_loss = _finite_or_nan(logs["loss"])

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self.out.active or state.global_step < 1:
                return
            examples = state.global_step * self.batch_size if self.batch_size else None
            self.out.step(state.global_step, examples, self.pending_loss)
            self.pending_loss = None

    return HFProgress
