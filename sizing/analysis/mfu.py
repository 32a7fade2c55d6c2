"""Model FLOPs utilization (MFU): the FLOPs a run's examples/s did against the dense peak of the dtype its
math ran in (analysis.peaks) times the devices that trained. Rules: sections.definitions_gpu ("MFU")."""

from __future__ import annotations

from collections.abc import Sequence

from runformat.records import MIN_FLOPS_PER_EXAMPLE
from sizing.analysis import peaks
from sizing.analysis.signature import precision_class
from sizing.analysis.throughput import Throughput
from sizing.model import number

COUNT_FLOPS = "count it with `python -m training flops RUN_DIR`"
FLOPS_DTYPES = {"tf32": "tf32", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
PRECISION_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
TF32_DEFAULT = (
    "float32 on a GPU with TF32 tensor cores: PyTorch's cuDNN convolutions and TensorFlow use TF32 by "
    "default (Ampere and newer)"
)


def _flops(info: dict) -> tuple[float | None, str | None, str | None]:
    """FLOPs per training example from training.json `flops`, how they were counted, or why unknown."""
    flops = info.get("flops")
    if not isinstance(flops, dict):
        if isinstance(info.get("workload"), dict):  # a lab's own job: our counter cannot count its model
            return None, None, "the job declares no FLOPs per example: give --flops-per-example"
        return None, None, f"training.json has no FLOP count: {COUNT_FLOPS}"
    per_example = number(flops.get("per_example"))
    method = flops.get("method") if isinstance(flops.get("method"), str) else None
    uncounted = [str(u) for u in flops.get("uncounted") or [] if isinstance(u, str)]
    if uncounted:
        method = f"{method or 'method not recorded'}; counted as zero: {', '.join(uncounted)}"
    if per_example is None:
        why = flops.get("reason") if isinstance(flops.get("reason"), str) else "no reason given"
        return None, method, f"training.json's FLOP count is missing ({why})"
    if per_example <= 0:
        return None, method, "training.json flops.per_example is not a positive number"
    if per_example < MIN_FLOPS_PER_EXAMPLE:
        return (
            None,
            method,
            (
                f"training.json flops.per_example {per_example:g} is fewer FLOPs than any network's training "
                f"example ({MIN_FLOPS_PER_EXAMPLE:g}): a count in GFLOPs? (give FLOPs: e.g. 7.8e9)"
            ),
        )
    return per_example, method, None


def math_dtype(info: dict, kind: str, gpu_name: str | None) -> tuple[str | None, str]:
    """The peak's dtype the math ran in, and how it was decided."""
    flops = info.get("flops")
    stated = flops.get("math_dtype") if isinstance(flops, dict) else None
    if isinstance(stated, str) and stated in FLOPS_DTYPES:
        return FLOPS_DTYPES[stated], "training.json flops.math_dtype"
    precision = precision_class(info.get("precision"))
    if precision is None:
        return None, "the dtype trained in is not recorded (training.json precision)"
    dtype = PRECISION_DTYPES.get(precision)
    if dtype is None:
        return None, f"no peak for precision {precision}"
    if dtype == "fp32" and kind == "gpu":
        settings = info.get("settings")
        if isinstance(settings, dict) and settings.get("tf32") is False:  # --no-tf32: float32 is float32
            return "fp32", "float32 with TF32 switched off (training.json settings.tf32)"
        entry = peaks.gpu_peaks(gpu_name)
        if entry is None or "tf32" in entry.tflops:
            return "tf32", TF32_DEFAULT
        return "fp32", "float32 on a GPU without TF32 tensor cores"
    return dtype, f"training.json precision {info.get('precision')}"


UNSTATED_DEVICES = "world_size not recorded, so every GPU that did work counts"


def device_count(info: dict, kind: str) -> int:
    """GPUs trained in parallel (training.json `world_size`, 1 when absent); a CPU run: its hosts."""
    key = "world_size" if kind == "gpu" else "nnodes"
    count = number(info.get(key))
    return int(count) if count is not None and count >= 1 and count == int(count) else 1


def mfu_of(
    info: dict,
    system: dict,
    kind: str,
    gpu_names: Sequence[str],
    rate: Throughput,
    gpus_at_work: int = 1,
    cpu_facts_doubt: str | None = None,
) -> dict:
    """The MFU fields of Headroom (sizing.sections.definitions "MFU"). `gpus_at_work`: the run's GPUs that
    did work; with no `world_size` recorded, more than one of them is the peak's device count and the MFU
    a lower bound (some of them may have worked for another job). `cpu_facts_doubt`: why run.json's CPU
    facts may be another host's, so a CPU's peak is not known."""
    names = list(dict.fromkeys(gpu_names))
    gpu_name = names[0] if len(names) == 1 else None
    dtype, basis = math_dtype(info, kind, gpu_name)
    devices = device_count(info, kind)
    unstated = kind == "gpu" and number(info.get("world_size")) is None and gpus_at_work > 1
    devices = gpus_at_work if unstated else devices
    per_example, method, reason = _flops(info)
    if kind == "gpu":
        if len(names) > 1:
            peak = peaks.Peak(
                None, dtype or "", " + ".join(names), "mixed GPU models: no single peak applies"
            )
        else:
            peak = peaks.gpu_peak(gpu_name, dtype or "")
    elif cpu_facts_doubt:
        peak = peaks.Peak(None, dtype or "", str(system.get("cpu_model") or "CPU"), cpu_facts_doubt)
    else:
        peak = peaks.cpu_peak(system, dtype or "")
    total = peak.flops_per_s * devices if peak.flops_per_s is not None else None
    achieved = per_example * rate.examples_per_s if per_example and rate.examples_per_s else None
    if dtype is None:
        reason = reason or basis
    elif not peak.known:
        reason = reason or peak.source
    elif rate.examples_per_s is None:
        reason = reason or f"examples/s {rate.examples_unknown}"
    mfu = achieved / total if achieved is not None and total and reason is None else None
    if mfu is not None and mfu > 1:  # more than the hardware can do: an input is wrong, not the run fast
        reason = (
            f"the counted FLOPs at this rate would be {mfu * 100:,.0f} % of the peak, which no run reaches: "
            "the FLOP count (training.json flops) or the peak does not fit this run"
        )
        mfu = None
    return {
        "kind": kind,
        "mfu": mfu,
        "achieved_flops_per_s": achieved,
        "peak_flops_per_s": total,
        "math_dtype": dtype,
        "dtype_basis": basis,
        "device": peak.device,
        "devices": devices,
        "peak_source": peak.source,
        "mfu_is_lower_bound": peak.lower_bound_mfu or unstated,
        "mfu_reason": reason,
        "flops_method": method,
    }
