"""Every definition the report's figures follow; printed at the end of every report and copied verbatim
into docs/sizing.md (a test checks they agree). Numbers come from the Thresholds in use."""

from __future__ import annotations

from sizing.model import Thresholds
from sizing.thermal import CONSTANT_FREQUENCY


def definitions(t: Thresholds | None = None) -> tuple[tuple[str, str], ...]:
    t = t or Thresholds()
    return (
        (
            "Workload signature",
            "framework (training.json `framework`, tensorflow when absent), preset, backbone, image "
            "size, batch size, precision class (float32, or mixed: float16 on a GPU and bfloat16 on a "
            "CPU count as the same class) and a dataset fingerprint (a hash of training.json "
            "`dataset_info`).",
        ),
        (
            "Hardware signature",
            "CPU model, logical CPUs, memory (GiB), the GPUs the run used (names) and the GPU driver.",
        ),
        (
            "Repeats",
            "runs with the same workload signature, device kind and hardware signature; their mean, "
            "sample standard deviation (n − 1), min and max are shown.",
        ),
        (
            "Like-for-like",
            "a comparison whose two sides have the same workload signature. Other comparisons are "
            "still shown, marked NOT like-for-like with the differing fields listed, in the headline "
            "too.",
        ),
        (
            "Baseline",
            "the group of `--baseline` when given; else the CPU group whose workload matches the most "
            "GPU groups, else the first CPU group, else the first group.",
        ),
        (
            "Warm-up",
            "the first `warmup_steps_excluded` steps of training.csv when training.json states it; "
            "otherwise the first 20 steps, or the first third when there are fewer than 60; at least "
            "one step.",
        ),
        (
            "Steady state",
            "from the end of the last warm-up step to the end of the last step: steps/s = steps in "
            "that span / its length; examples/s = steps/s × batch size. Without training.csv: "
            "training.json `steady_steps_per_s` (or steps over the time after the first step), marked "
            "from totals; without either, unknown (no work counter).",
        ),
        (
            "Windows",
            "training window: the `train` phases of phases.csv, else the whole telemetry; measurement "
            "window: the steady state clipped to it. Means, verdicts and per-unit energy use the "
            "measurement window; temperatures, throttling and total energy the training window.",
        ),
        (
            "Units",
            "speed, energy and cost per 1,000 examples (images); per 1,000 steps only where the batch "
            "sizes of the two sides match.",
        ),
        (
            "Energy",
            "GPU board energy of the GPUs the training used (training.json `gpu_uuids`; a single-GPU "
            "host's GPU; else all, with a warning) from the NVML counter, else integrated NVML power; "
            "the other GPUs' mean draw is listed apart, not charged. CPU package energy from RAPL, "
            "else, with a TDP (per host or for all), an ESTIMATE: TDP × (idle floor + (1 − idle "
            "floor) × CPU util). A CPU run counts CPU energy only. Board and package energy are not "
            "wall power. J per 1,000 examples = mean power in the measurement window × 1,000 / "
            "examples/s.",
        ),
        (
            "Cost",
            "energy (kWh) × tariff + the prices given (host, plus GPU for a GPU run) / (amortisation "
            "years × 8,760 h) × hours per 1,000 examples. A price not given is shown as no price "
            "given, never $0; a total needs both parts.",
        ),
        (
            "Speedup",
            "mean examples/s of a group / the baseline group's. With ≥ 2 repeats on both sides, a 95 "
            "% interval: log-ratio standard error by the delta method, Welch–Satterthwaite degrees of "
            "freedom, Student's t from a table.",
        ),
        (
            "Break-even",
            "GPU price / saving per GPU training hour, where one GPU hour saves (speedup − 1) hours "
            "of baseline time at the value per hour, plus the baseline's energy cost for that hour's "
            "examples minus the GPU run's. Never when the saving is ≤ 0; marked ESTIMATE when an "
            "energy estimate is in it.",
        ),
        (
            "Scaling",
            "runs that differ only in their device count (training.json `world_size`, 1 when absent): "
            "same workload signature except that the per-device batch replaces the global one, same "
            "device kind, host, CPU, memory and GPU model. Scaling efficiency = examples/s(N) / (N × "
            "examples/s(1)), n/a without a 1-device run. Hardware cost counts the host plus N × the GPU "
            "price. Marginal cost of a step = its extra $ per hour / the extra examples per hour it "
            "buys; its payback = the price of the added GPUs / what an hour at N saves against the "
            "previous count (time at the value per hour plus energy). The largest count that pays back "
            "is the last one reached by steps that each pay back within the amortisation years.",
        ),
        (
            "Throttling",
            "GPU clocks-event reasons decoded: idle 0x1, at power limit 0x4 (a state, not a fault), "
            "HW slowdown 0x8, sync boost 0x10, thermal SW 0x20, thermal HW 0x40, HW power brake 0x80; "
            "events = runs of consecutive samples. CPU: busy-core frequency (cores ≥ "
            f"{t.cpu_busy_pct:g} % busy, from `cpu<N>_freq_mhz`) ≥ {t.cpu_freq_drop_fraction:.0%} "
            f"below its {t.cpu_freq_baseline_quantile:.0%} percentile (recordings without per-core "
            f"frequency: `cpu_freq_mhz` only while the CPU is ≥ {t.core_saturated_pct:g} % busy); "
            f"{CONSTANT_FREQUENCY} when every frequency reading is the same.",
        ),
        ("Thermal", "peak temperature and time at or above the threshold (sum of the sample intervals)."),
        (
            "Verdicts",
            "over the measurement window, first match: GPU-bound (GPU run, busiest used GPU ≥ "
            f"{t.gpu_bound_util_pct:g} %); CPU-bound (CPU run, CPU ≥ {t.cpu_saturated_pct:g} %); "
            f"I/O-bound (iowait ≥ {t.iowait_pct:g} % or disk busy ≥ {t.disk_saturated_pct:g} %); "
            f"host-bound (GPU run with CPU ≥ {t.cpu_saturated_pct:g} %, or on average ≥ 1 logical CPU "
            f"≥ {t.core_saturated_pct:g} % busy while ≥ 1 is < {t.core_idle_pct:g} % and the "
            "training's processes use ≥ 0.8 core per saturated CPU); GPU underused (GPU < "
            f"{t.gpu_underused_util_pct:g} %, no other cause). Thermally throttled (thermal bits or "
            "CPU frequency drops) and HW slowdown (0x8, 0x80) are added in ≥ "
            f"{t.throttled_sample_fraction:.0%} of samples.",
        ),
    )


DEFINITIONS = definitions()
