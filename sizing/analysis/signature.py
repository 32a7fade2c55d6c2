"""What a run did (workload signature) and on what (hardware signature): repeats share both.

Two runs are like-for-like when every field of their workload signatures is known and equal: a field
unknown on either side (a run without training.json, an imported run) is never equal to anything, not even
to another unknown. They are repeats of one configuration when, in addition, their device kind and
hardware signature are equal.

The hardware signature also carries the machine's identity (run.json `system.machine_id_hash`,
`instance_id_hash`, `boot_id_hash`), which grouping leaves out: two VMs of one kind are repeats of one
configuration, and `machine_count` says how many different machines the repeats ran on (their spread is
then run-to-run on different machines of that kind, not one machine's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from runformat.records import training_framework
from sizing.model import gpu_indices, number, values_of

# How frameworks and labs spell a dtype (Keras policies, Lightning's precision flags, fp16/bf16 flags):
# one spelling per dtype, so float32 and FP32 are the same work. Mixed precision reads as its compute dtype.
DTYPE_ALIASES = {
    **dict.fromkeys(("fp32", "f32", "32", "32-true", "single", "tf32"), "float32"),
    **dict.fromkeys(("fp16", "f16", "half", "16", "16-mixed", "16-true", "mixed_float16"), "float16"),
    **dict.fromkeys(("bf16", "bf16-mixed", "bf16-true", "mixed_bfloat16"), "bfloat16"),
    **dict.fromkeys(("fp64", "f64", "64", "64-true", "double"), "float64"),
}
CPU_EMULATED_DTYPES = {"float16"}
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of a CPU with native bfloat16 math
EMULATED_ON_CPU = "emulated on a CPU"
WORKLOAD_FIELDS = ("framework", "preset", "backbone", "image_size", "batch_size", "precision", "dataset")
SAME_JOB_HINT = " (if one job run two ways, record both with one --workload-name)"
JOB_FIELDS = ("job", "framework", "batch_size", "precision")  # a job's (collect timed ... -- COMMAND)
IDENTITY_FIELDS = ("machine_id_hash", "instance_id_hash")  # what tells machines apart (a boot does not)
HARDWARE_FIELDS = (
    "cpu_model", "cpu_cores_logical", "mem_gib", "gpus", "gpu_driver", "gpu_settings", "node_hardware",
)  # fmt: skip


def device_kind(meta: dict, training_info: dict, telemetry: pd.DataFrame | None = None) -> str:
    """'gpu' when training ran on a GPU, else 'cpu'; training.json's device_used wins over run.json, and a
    run that says neither (another tool's recording) is a GPU run when it has GPU utilization samples."""
    used = training_info.get("device_used")
    if isinstance(used, str) and used.strip():
        return "cpu" if used.strip().upper() == "CPU" else "gpu"
    device = meta.get("device") or training_info.get("device_requested")
    if isinstance(device, str) and device.strip():
        return "gpu" if device.lower().startswith(("gpu", "cuda")) else "cpu"
    if telemetry is not None:
        busy = [values_of(telemetry, f"gpu{i}_util_pct") for i in gpu_indices(telemetry)]
        if any(v is not None and (v[v == v] > 0).any() for v in busy):
            return "gpu"
    return "cpu"


def asked_for_a_gpu_ran_on_cpu(meta: dict, training_info: dict) -> str | None:
    """Why a run recorded for a GPU (run.json device, training.json device_requested) is a CPU run
    (training.json device_used), by device_kind's own reading of each; None otherwise."""
    asked = device_kind(meta, {**training_info, "device_used": None})
    if asked != "gpu" or device_kind(meta, training_info) != "cpu":
        return None
    return (
        "recorded for a GPU (run.json device or training.json device_requested) but trained on the CPU "
        "(training.json device_used): sized as a CPU run, not as a GPU option"
    )


def precision_class(precision: object, kind: str | None = None) -> str | None:
    """The dtype trained in, however it is spelled (DTYPE_ALIASES); float16 on a CPU is marked emulated, a
    class of its own (many times slower than float16 on a GPU)."""
    if not isinstance(precision, str) or not precision.strip():
        return None
    dtype = DTYPE_ALIASES.get(precision.strip().lower(), precision.strip().lower())
    return f"{dtype} ({EMULATED_ON_CPU})" if kind == "cpu" and dtype in CPU_EMULATED_DTYPES else dtype


def dataset_fingerprint(training_info: dict) -> str | None:
    """A short hash of training.json's dataset_info (generator, seed, sizes), else the dataset's name."""
    info = training_info.get("dataset_info")
    if isinstance(info, dict) and info:
        canonical = json.dumps(info, sort_keys=True, default=str)
        kind = str(info.get("kind") or "dataset")
        return f"{kind}:{hashlib.sha1(canonical.encode()).hexdigest()[:10]}"
    name = training_info.get("dataset")
    return str(name).rstrip("/").rsplit("/", 1)[-1] if name else None


def workload(training_info: dict, kind: str | None = None) -> dict:
    """framework, preset, backbone, image size, batch, precision class and dataset fingerprint; None for
    each field the run does not record. A job's: job_workload."""
    job = training_info.get("workload")
    if isinstance(job, dict) and job.get("name"):
        return job_workload(training_info, kind)
    framework = training_framework(training_info)
    batch = number(training_info.get("batch_size"))
    return {
        "framework": str(framework) if framework else None,
        "preset": training_info.get("preset"),
        "backbone": training_info.get("backbone"),
        "image_size": training_info.get("image_size"),
        "batch_size": int(batch) if batch is not None else None,
        "precision": precision_class(training_info.get("precision"), kind),
        "dataset": dataset_fingerprint(training_info),
    }


def job_workload(training_info: dict, kind: str | None = None) -> dict:
    """A job's signature: `job`, its name (--workload-name, else its command line), and the fields it
    declared (framework, batch, precision; None where not declared; a job has no preset, backbone, image
    size or dataset of ours). A field that neither of two jobs declared is not compared: the same job
    stands for it; one declared on one side only is unknown on the other."""
    batch = number(training_info.get("batch_size"))
    return {
        **dict.fromkeys(WORKLOAD_FIELDS),
        "job": str(training_info["workload"]["name"]),
        "framework": str(training_info["framework"]) if training_info.get("framework") else None,
        "batch_size": int(batch) if batch is not None else None,
        "precision": precision_class(training_info.get("precision"), kind),
    }


def _fields(*sides: dict) -> tuple[str, ...]:
    """The workload fields signatures are compared on (jobs: `job` and what either side declared)."""
    jobs = [side.get("job") is not None for side in sides]
    if not any(jobs):
        return WORKLOAD_FIELDS
    if not all(jobs):
        return ("job", *WORKLOAD_FIELDS)
    return ("job", *(name for name in JOB_FIELDS[1:] if any(side.get(name) is not None for side in sides)))


def listed_gpus(meta: dict) -> list[dict]:
    """run.json's system GPUs that are objects (anything else reads as not listed)."""
    system = meta.get("system")
    gpus = system.get("gpus") if isinstance(system, dict) else None
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []


@dataclass(frozen=True)
class UuidMatch:
    """training.json's `gpu_uuids` against run.json's GPUs."""

    named: tuple[dict, ...]  # the listed GPUs the training names
    unmatched: tuple[str, ...]  # its UUIDs where the listed GPUs carry UUIDs and it names none of them


def match_uuids(training_info: dict, listed: list[dict]) -> UuidMatch:
    """The one reading of `gpu_uuids`. A MIG slice's UUID names no board: it is left to gpu_state, never
    unmatched."""
    uuids = training_info.get("gpu_uuids")
    uuids = [str(u) for u in uuids] if isinstance(uuids, list) else []
    named = tuple(g for g in listed if g.get("uuid") in uuids)
    recorded = any(isinstance(g.get("uuid"), str) for g in listed)
    mig = any(u.startswith("MIG-") for u in uuids)
    return UuidMatch(named, () if named or not recorded or mig else tuple(uuids))


def used_gpus(meta: dict, training_info: dict) -> tuple[list[dict], str]:
    """The run.json GPU entries the training used, and how that was decided.

    training.json's `gpu_uuids` name them; without it a single-GPU host's GPU is the one; with several
    GPUs and no UUIDs every GPU is taken (and the report says so).
    """
    gpus = listed_gpus(meta)
    named = match_uuids(training_info, gpus).named
    if named:
        return list(named), "gpu_uuids in training.json"
    if len(gpus) <= 1:
        return gpus, "the host's only GPU" if gpus else "no GPU"
    return gpus, f"all {len(gpus)} GPUs (training.json names none)"


def hardware(
    meta: dict,
    training_info: dict,
    kind: str,
    gpu_settings: str | None = None,
    charged: Sequence[int] | None = None,
) -> dict:
    """`gpu_settings`: the GPU's state that changes what it can do (analysis.gpu_state: 'power cap 200 W',
    'MIG', 'clocks held by a setting', 'shared'); None for a GPU at its defaults, alone on its board.
    `charged`: the run.json GPUs (by position) charged when training.json does not name them."""
    system = meta.get("system") or {}
    mem = number(system.get("mem_total_bytes"))
    gpus, _ = used_gpus(meta, training_info) if kind == "gpu" else ([], "")
    if kind == "gpu" and charged is not None:
        listed = listed_gpus(meta)
        gpus = [listed[i] for i in charged if i < len(listed)] or gpus
    names = [str(g.get("name")) for g in gpus if g.get("name")]
    if kind == "gpu" and not names:
        names = [str(n) for n in training_info.get("gpu_names") or [] if n][:1]
    cores = number(system.get("cpu_cores_logical"))
    return {
        "host": meta.get("host"),
        "cpu_model": system.get("cpu_model"),
        "cpu_cores_logical": int(cores) if cores is not None else None,
        "mem_gib": round(mem / 2**30) if mem is not None else None,
        "gpus": names,
        "gpu_uuids": [g.get("uuid") for g in gpus if g.get("uuid")],
        "gpu_driver": system.get("gpu_driver_version") if kind == "gpu" else None,
        "gpu_settings": gpu_settings if kind == "gpu" else None,
        "virtual_machine": system.get("virtual_machine"),
        "cgroup_cpu_limit_cpus": number(system.get("cgroup_cpu_limit_cpus")),
        "cpu_affinity_cpus": number(system.get("cpu_affinity_cpus")),
        "cpu_simd": _texts(system.get("cpu_simd")),
        **{name: _text(system.get(name)) for name in (*IDENTITY_FIELDS, "boot_id_hash")},
    }


def _texts(value: object) -> list[str] | None:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def same_machine(hw: dict, other: dict) -> bool | None:
    """False when an identity known on both sides differs (two VMs cloned from one image share a
    machine-id but not an instance id); True when one is known on both and none differs; else None."""
    both = [(hw.get(f), other.get(f)) for f in IDENTITY_FIELDS if hw.get(f) and other.get(f)]
    if any(a != b for a, b in both):
        return False
    return True if both else None


def machine_count(hardwares: Sequence[dict]) -> int | None:
    """How many different machines the runs were recorded on; None when that cannot be told (a run
    without a recorded identity, or two runs that share no identity field)."""
    machines: list[dict] = []
    for hw in hardwares:
        if not any(hw.get(f) for f in IDENTITY_FIELDS):
            return None
        found = [same_machine(hw, m) for m in machines]
        if None in found:
            return None
        if True not in found:
            machines.append(hw)
    return len(machines) if machines else None


def hardware_name(hw: dict, kind: str) -> str:
    """The GPUs (a GPU run) or the CPU; a multi-node job's nodes ("2 nodes × H100", sizing.analysis.jobs)."""
    per_node = hw.get("node_hardware")
    if isinstance(per_node, list) and len(per_node) > 1:
        if len(set(per_node)) == 1:
            return f"{len(per_node)} nodes × {per_node[0]}"
        return f"{len(per_node)} nodes: " + "; ".join(str(n) for n in per_node)
    if kind == "gpu":
        settings = f" ({hw['gpu_settings']})" if hw.get("gpu_settings") else ""
        return (_counted(hw["gpus"]) or "GPU") + settings
    cores = f", {hw['cpu_cores_logical']} logical CPUs" if hw.get("cpu_cores_logical") else ""
    return f"{hw.get('cpu_model') or 'CPU'}{cores}"


def _counted(names: Sequence[str]) -> str:
    """'4 × NVIDIA H100 80GB HBM3' for four of one model; 'A + B' for a mix."""
    groups = list(dict.fromkeys(names))
    return " + ".join(n if (k := list(names).count(n)) == 1 else f"{k} × {n}" for n in groups)


def workload_name(wl: dict) -> str:
    """The known fields joined by '/', always ending in the dtype (or "dtype unknown")."""
    if wl.get("job"):  # "python train.py [torch, batch 32, float32]"
        name = wl["job"] if len(wl["job"]) <= 60 else wl["job"][:59] + "…"
        batch = f"batch {wl['batch_size']}" if wl.get("batch_size") else None
        dtype = wl.get("precision") or "dtype not declared"
        return f"{name} [{', '.join(str(p) for p in (wl.get('framework'), batch, dtype) if p)}]"
    parts = [
        wl.get("framework"),
        wl.get("preset"),
        wl.get("backbone"),
        f"{wl['image_size']}px" if wl.get("image_size") else None,
        f"batch {wl['batch_size']}" if wl.get("batch_size") else None,
    ]
    known = "/".join(str(p) for p in parts if p) or "unknown workload"
    return f"{known}/{wl.get('precision') or 'dtype unknown'}"


def workload_key(wl: dict) -> tuple:
    if wl.get("job"):
        return tuple((f, wl.get(f)) for f in _fields(wl))
    return tuple(wl.get(f) for f in WORKLOAD_FIELDS)


def hardware_unknown(kind: str, hw: dict) -> list[str]:
    """The hardware fields that identify the device and are unknown (no run.json, an imported run)."""
    needed = ("gpus",) if kind == "gpu" else ("cpu_model", "cpu_cores_logical")
    return [name for name in needed if not hw.get(name)]


def hardware_key(kind: str, hw: dict) -> tuple:
    return (kind, *(tuple(hw[f]) if isinstance(hw.get(f), list) else hw.get(f) for f in HARDWARE_FIELDS))


def unknown_fields(wl: dict, baseline: dict | None = None) -> list[str]:
    """The workload fields unknown on either side."""
    sides = [wl] if baseline is None else [wl, baseline]
    return [name for name in _fields(*sides) if any(side.get(name) is None for side in sides)]


def differences(wl: dict, baseline: dict) -> list[str]:
    """What is known to differ between two workloads, one phrase per field ("batch_size 16 vs 2")."""
    return [
        f"{name} {wl.get(name)} vs {baseline.get(name)}" + (SAME_JOB_HINT if name == "job" else "")
        for name in _fields(wl, baseline)
        if wl.get(name) is not None and baseline.get(name) is not None and wl.get(name) != baseline.get(name)
    ]


def like_for_like(wl: dict, baseline: dict) -> bool:
    """Every workload field known on both sides and equal."""
    return not unknown_fields(wl, baseline) and not differences(wl, baseline)
