"""`--procs N[,N...]` and `--gpus N[,N...]|all` of a timed run: parsing and the checks made before
anything starts (standard library only: the entry-point scripts run these before the virtualenv exists).

One count trains data-parallel on that many devices; several counts are a sweep, one run each.
"""

from __future__ import annotations

import contextlib
from typing import Any

ALL_GPUS = "all"


def parse_counts(text: str, flag: str) -> list[int] | str:
    """[1, 2, 4] from `1,2,4`; `all` for --gpus all; ValueError with a one-line reason otherwise."""
    if flag == "--gpus" and text == ALL_GPUS:
        return ALL_GPUS
    counts = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) < 1:
            raise ValueError(f"{flag} {text}: expected whole numbers >= 1, like 2 or 1,2,4")
        counts.append(int(part))
    if len(set(counts)) != len(counts):
        raise ValueError(f"{flag} {text}: a count appears twice")
    return counts


def counts_problem(device: str, framework: str, procs: str | None, gpus: str | None) -> str | None:
    """The first problem with --procs/--gpus for this device and framework, or None."""
    if procs is not None and device != "cpu":
        return "--procs is for the CPU (collect_cpu.sh); on GPUs use --gpus N"
    if gpus is not None and device != "gpu":
        return "--gpus is for GPUs (collect_gpu.sh); on the CPU use --procs N (with --framework torch)"
    for flag, text in (("--procs", procs), ("--gpus", gpus)):
        if text is None:
            continue
        try:
            counts = parse_counts(text, flag)
        except ValueError as exc:
            return str(exc)
        if flag == "--procs" and framework != "torch" and max(counts) > 1:
            return (
                "--procs N > 1 needs --framework torch (DDP over gloo); TensorFlow's mirrored strategy "
                "spreads one process over GPUs, not CPU processes (see README, Many GPUs)"
            )
    return None


def visible_gpu_count(load_nvml: Any, environ: dict[str, str]) -> int | None:
    """GPUs CUDA will number (NVML's, after CUDA_VISIBLE_DEVICES); None when NVML cannot tell."""
    from collect.sources.nvml import nvml_text, visible_gpu_indices

    try:
        nvml = load_nvml()
        nvml.nvmlInit()
    except Exception:  # no NVML: the training's own check (the framework's GPU count) decides
        return None
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        uuids = [nvml_text(nvml.nvmlDeviceGetUUID(handle)) for handle in handles]
        return len(visible_gpu_indices(environ.get("CUDA_VISIBLE_DEVICES"), uuids))
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def resolve_gpu_counts(counts: list[int] | str, visible: int | None) -> tuple[list[int], str | None]:
    """`all` made a number; a problem when a count exceeds the GPUs visible."""
    if counts == ALL_GPUS:
        if not visible:
            return [], "--gpus all: no GPU visible through NVML"
        return [visible], None
    assert isinstance(counts, list)
    if visible is not None and max(counts) > visible:
        return counts, f"--gpus {max(counts)}: this node has {visible} GPU(s) visible"
    return counts, None
