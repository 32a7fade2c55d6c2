"""The GPU's definitions of the report (its verdicts, its state, MFU and why it is not at its limit), part
of sizing.sections.definitions and, like it, copied verbatim into docs/sizing.md."""

from __future__ import annotations

from runformat.records import MIN_FLOPS_PER_EXAMPLE
from sizing.analysis import bottleneck as b
from sizing.analysis import gpu_settings as gsets
from sizing.analysis import gpu_state as gs
from sizing.analysis import headroom as hr
from sizing.analysis.gpu_verdicts import (
    BUSY_UTIL_PCT,
    NOT_COMPUTING_POWER_FRACTION,
    POWER_LIMIT_MARGIN,
    STRAGGLER_GAP_PCT,
)
from sizing.analysis.peaks import FLOPS_PER_FMA, FMA_UNITS
from sizing.model import Thresholds


def gpu_definitions(t: Thresholds) -> tuple[tuple[str, str], ...]:
    return (
        (
            "GPU verdicts",
            "per used GPU over the measurement window, each with its numbers: at its power limit (a "
            f"state, not a fault) in ≥ {t.throttled_sample_fraction:.0%} of samples, a sample counting "
            f"when the SW power cap bit (0x4) is set or power is within {POWER_LIMIT_MARGIN:.0%} of the "
            "limit in force with the SM clock below its max (thermal only from thermal bits); busy but "
            f"not computing when mean util ≥ {BUSY_UTIL_PCT:g} % at a mean power ≤ "
            f"{NOT_COMPUTING_POWER_FRACTION:.0%} of the limit; straggler when one GPU's mean util is ≥ "
            f"{STRAGGLER_GAP_PCT:g} points below every other GPU while they are ≥ "
            f"{t.gpu_underused_util_pct:g} %. A straggler, else busy but not computing, names the "
            "bottleneck in place of GPU-bound or GPU underused. Busy but not computing never fires on a "
            "GPU whose clocks or power a setting holds low (see GPU state): the finding says so instead.",
        ),
        (
            "GPU state",
            "for the GPUs charged to a GPU run, from run.json `gpu_state` where recorded and from "
            "telemetry.csv, run.json `system.gpus` and training.json in any case. Shared: another process "
            "on the GPU while the training ran (`gpu_state.other_processes`), or the board busy before the "
            f"training: `gpu_state.before_training` with util ≥ {gs.SHARED_BEFORE_UTIL_PCT:g} %, a compute "
            f"process, or ≥ {gs.SHARED_BEFORE_MEM_BYTES / 2**30:g} GiB of memory in use, or telemetry over "
            f"the {gs.BEFORE_TRAINING_S:g} s before the first `train` phase with mean util ≥ "
            f"{gs.SHARED_BEFORE_UTIL_PCT:g} % or median used memory ≥ {gs.SHARED_BEFORE_MEM_BYTES / 2**30:g} "
            "GiB (an idle board holds under 1 GiB). While the training runs, and just after it, the "
            "board's figures include its own work, so a tenant that came later shows only in "
            "`gpu_state.other_processes`. A MIG slice: MIG mode enabled (`gpu_state`), a run.json GPU whose "
            "name has the word MIG or whose UUID starts MIG-, or training.json `gpu_uuids` starting MIG- or "
            f"`gpu_names` with MIG. Either makes the GPU board energy unknown with its reason ({gs.SHARED}; "
            f"{gs.MIG_SLICE}): J and $ per 1,000 examples unknown, never the whole board's; and the board's "
            "utilization is not the run's: no GPU-bound, GPU underused, busy but not computing or straggler "
            "verdict from board figures. A power cap: the lowest limit recorded (telemetry's median over "
            "the training, `gpu_state` at start and end, run.json `power_limit_w`) more than "
            f"{gsets.POWER_CAP_MARGIN_W:g} W below the board's default (`gpu_state`), else more than "
            f"{gsets.TABLE_POWER_MARGIN:.0%} below the GPU model's lowest default board power in "
            "sizing/analysis/peaks.py (a datasheet figure, not this board's: some SKUs ship lower; a "
            "configurable one has none); neither known: no claim. Clocks held by a setting: an "
            "applications clock "
            f"more than {gsets.CLOCK_MARGIN_MHZ:g} MHz below its default (`gpu_state`), or in ≥ "
            f"{t.throttled_sample_fraction:.0%} of busy samples (util > 0) the clocks-event bit 0x2 "
            "(applications or locked clocks) or no clocks-event reason at all at an SM clock ≤ "
            f"{gsets.UNEXPLAINED_CLOCK_FRACTION:.0%} of its max (NVML names no reason only at the highest "
            "clocks it can run). Held low: those clocks below the SM clock's max (or unknown), applications "
            "clocks below default, or a power cap with the SW power cap bit in ≥ "
            f"{t.throttled_sample_fraction:.0%} of busy samples. A narrow PCIe link: `gpu_state` "
            "`pcie_link_width` below `pcie_link_width_max` at both start and end (NVML lowers an idle "
            "link's generation, not its width, so only the width is judged; one narrow reading is no "
            "claim). MIG, power cap N W, clocks held by a setting, shared and PCIe xN of xM join the "
            "hardware signature, so such runs are never repeats of others. A setting changed while it "
            "trained (`gpu_state.changes` of the power limit, an applications clock or MIG mode inside the "
            "training window, from a value known before; else the telemetry's power limit going from one "
            f"value to another by more than {gsets.POWER_CAP_MARGIN_W:g} W) is a caveat: its rate blends "
            "both settings.",
        ),
        (
            "MFU",
            "model FLOPs utilization = achieved FLOP/s / peak FLOP/s. Achieved: training.json "
            "`flops.per_example` (forward + backward FLOPs of one training example, counted once: `python "
            "-m training flops RUN_DIR`; a job's, declared with `--flops-per-example` or the protocol's "
            "`flops_per_example`; ops counted as zero, `flops.uncounted`, make it an undercount) × "
            "the steady examples/s. Peak: the dense peak of the dtype the math ran in × the devices trained "
            "in parallel (training.json `world_size`; when absent, the GPUs the run's verdict reads, those "
            "its gpu_uuids name, else those that did work, more than one making the MFU a lower bound; a "
            "CPU run: its hosts), from a table "
            "keyed by NVML's device name, each figure with its source (sizing/analysis/peaks.py). The dtype: "
            "training.json `flops.math_dtype` when recorded, else `precision` (read as the workload "
            "signature reads it); float32 on a GPU with TF32 tensor cores counts as "
            "TF32, since PyTorch's cuDNN convolutions and TensorFlow run float32 in TF32 by default on "
            "Ampere and newer (PyTorch's float32 matmuls do not since 1.12; a detector's FLOPs are mostly "
            "convolutions), and as FP32 on a GPU without them (V100, T4) or where `--no-tf32` switched TF32 "
            "off (training.json `settings.tf32` false). A CPU's nominal FP32 peak: "
            "physical cores (the cgroup quota when smaller) × max clock × FP32 lanes (16 with avx512f, 8 "
            f"with avx2 and fma) × {FLOPS_PER_FMA} (a fused multiply-add) × {FMA_UNITS} FMA units per "
            "core, an assumption: an x86 server core issues at most two vector FMAs a cycle and its "
            "all-core vector clock is at most its max clock, so with cpufreq's max clock the peak is an "
            "upper bound and the MFU a lower bound, shown as ≥; with the model name's base clock, or the "
            "`cpu MHz` a VM without cpufreq reports, it is neither. A GPU not in the table, a dtype it has "
            "no peak for (TF32 or BF16 on a V100 or T4), "
            "a CPU without recorded vector flags or clock, an ARM CPU, or a run without a FLOP count: MFU "
            "not known, with the reason; never a guess. Nor is a result above 100 % of the peak, which no "
            "run reaches: the FLOP count or the peak does not fit the run, and the reason says so; nor one "
            f"from a FLOP count under {MIN_FLOPS_PER_EXAMPLE:g} a training example, fewer than any "
            "network's: a count in GFLOPs.",
        ),
        (
            "Why the GPU is not at its limit",
            "for a GPU run with profiling counters (NVML GPM: `gpu<N>_tensor_active_pct`, "
            "`_sm_active_pct`, `_dram_active_pct`, `_fp32_active_pct`, `_fp16_active_pct`, "
            "`_fp64_active_pct`), each counter's mean over the measurement window averaged over the "
            "charged GPUs, first match: compute-bound (tensor active ≥ "
            f"{hr.COMPUTE_BOUND_PIPE_PCT:g} %, or an FP32, FP16 or FP64 pipe ≥ "
            f"{hr.COMPUTE_BOUND_PIPE_PCT:g} %); memory-bound (DRAM active ≥ {hr.MEMORY_BOUND_DRAM_PCT:g} % "
            f"with tensor active < {hr.MEMORY_BOUND_TENSOR_BELOW_PCT:g} %); launch-bound (NVML util ≥ "
            f"{hr.LAUNCH_BOUND_UTIL_PCT:g} % with SM active < {hr.LAUNCH_BOUND_SM_BELOW_PCT:g} %: busy, "
            "but many small kernels: SMs idle); waiting on the host (NVML util, else graphics engine "
            f"active, < {hr.HOST_WAIT_UTIL_BELOW_PCT:g} % while one host thread is ≥ "
            f"{t.core_saturated_pct:g} % busy in ≥ {b.HOST_THREAD_SAMPLE_FRACTION:.0%} of the samples, "
            f"or the training's busiest thread ≥ {b.HOST_THREAD_BUSY_MEAN_PCT:g} % busy on average: "
            "the training's busiest thread where recorded, else a logical CPU with the training's "
            f"processes using ≥ {b.HOST_THREAD_TREE_CORES:g} core where `proc_cpu_pct` is recorded; on "
            "an H100 one Python thread launching tiny kernels back to back read NVML util 28 % and SM "
            "active 0 %, docs/gpu-evidence.md); idle most of the time: waiting outside the GPU (NVML "
            f"util < {hr.GPU_IDLE_UTIL_BELOW_PCT:g} % with no host thread saturated: input, I/O, "
            "synchronisation or transfers; or the host not recorded); "
            "else no single limit in the counters. Each with its numbers, in the bottleneck "
            "section and, as a label beside the MFU, in every GPU comparison's headline line. A run "
            "without the counters keeps its utilization verdict (Verdicts), said from utilization only; "
            "one without utilization either says the GPU's activity was not recorded.",
        ),
    )
