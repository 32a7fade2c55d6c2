"""Every definition the report's figures follow; printed at the end of every report and copied verbatim
into docs/sizing.md (a test checks they agree). Numbers come from the Thresholds in use."""

from __future__ import annotations

from runformat import bursts
from sizing.analysis import bottleneck as b
from sizing.analysis import sessions as ss
from sizing.analysis import speedup as sp
from sizing.analysis import validity
from sizing.analysis.coverage import BRIDGE_POWER_RANGE, COMPLETE_COVERAGE, LOCAL_SPACINGS, MAX_GAP_INTERVALS
from sizing.analysis.energy import (
    CROSS_CHECK_TOLERANCE,
    ESTIMATE_SPACING_S,
    MAX_BOARD_W,
    MIN_VALID_W,
    POWER_LIMIT_SLACK,
)
from sizing.analysis.jobs import NODE_STRAGGLER_GAP_PCT
from sizing.analysis.runchecks import (
    LOSS_ROSE_FACTOR,
    MIN_VERDICT_SAMPLES,
    RATE_MISMATCH_FRACTION,
    RECORDS_SLACK_S,
)
from sizing.analysis.spans import SHORT_SPAN_FRACTION
from sizing.analysis.thermal import CONSTANT_FREQUENCY, CPU_BELOW_PEAK
from sizing.analysis.throughput import LOSS_WINDOW_STEPS
from sizing.model import Thresholds
from sizing.sections import decision as dc
from sizing.sections.definitions_gpu import gpu_definitions


def definitions(t: Thresholds | None = None) -> tuple[tuple[str, str], ...]:
    t = t or Thresholds()
    return (
        (
            "Decision",
            "the block that opens the report: what every speedup is against (the baseline, with its MFU "
            "where known; a GPU baseline, with no CPU run or named by --baseline, also with why it is not "
            "at its limit, as a GPU line), then one "
            "line per GPU configuration, like-for-like first: its speedup with its interval (see Speedup "
            "interval) and, where the baseline does not train its workload but another CPU run of the "
            "report does, its speedup like for like against the fastest such run, J and $ per 1,000 "
            "examples (energy only, or GPU board only, said where so), its "
            "break-even or why there is none, and its MFU with why the GPU is not at its limit; below "
            f"{dc.FAR_BELOW_PEAK_MFU:.0%} MFU with the GPU waiting on the host, launch-bound or idle (or a "
            "host-bound, GPU underused or I/O-bound verdict), it says the code feeding the GPU, not the "
            f"GPU, sets the speedup. Then at most {dc.MAX_CAVEATS} caveats, the weightiest first: what "
            "makes a figure wrong (a weak baseline, no like-for-like GPU run, repeats that disagree, runs "
            "measured at the same time on one machine, a GPU that did no work, a "
            "board not the run's alone, a run given that could not be sized, a job whose steps are not "
            "timed (its step log in too few bursts), one recorded for a GPU that trained on the CPU; "
            "and where an option is not like for like, a CPU run of the report that "
            "trains its workload, with the --baseline that compares them in full), then what makes it unsure "
            "(runs left out as incomplete, a loss that rose, a verdict on too few samples or on "
            "telemetry with a gap or cut short, a run.json and training.json of two runs, a GPU run's host "
            f"kept busy by other processes (≥ 1 CPU and ≥ {validity.OTHERS_SHARE:.0%} of its CPUs outside "
            "the training), a GPU whose "
            "clocks heat or a HW slowdown "
            "pulled down, a GPU setting changed while it trained, no CPU run so that GPUs are compared "
            "with a GPU, an assumed UTC offset, a step "
            "log on a clock of its own, a step log whose step advances faster than its step times allow, "
            "run-to-run spread not measured, the host "
            "not recorded, a drifting rate, one holding pauses or one on too few steps for an interval), "
            "then what leaves it "
            "partial (energy of the GPU board only, no prices); how many more there are is said. The "
            "summary and the sections below keep every figure.",
        ),
        (
            "Speedup interval",
            "repeats on both sides: the 95 % confidence interval of the ratio of means (see Repeats). "
            "Repeats on one side only: the range from the slowest to the fastest of that side's runs "
            "over the other side's single run, each end widened by that run's within-run 95 % interval "
            "(see Stability); the single side's run-to-run spread is not measured. One run a side: the "
            'within-run interval, always with "run-to-run spread not measured" beside it; a run whose '
            "rate is training.json's totals (no usable step log) has none, and the Decision's line says "
            "so. Repeats disagree (not the same conditions) where two runs' within-run 95 % intervals of "
            "examples/s do not overlap, or, where a run has none, where the fastest is more than "
            f"{sp.REPEATS_DISAGREE_FRACTION:.0%} above the slowest: said in the headline and the "
            "Decision's caveats. A job that counts steps only (no examples per step on either side) has "
            "all of these in steps/s.",
        ),
        (
            "Workload signature",
            "framework (training.json `framework`; tensorflow when absent in a run with "
            "`tensorflow_version` or a Model Garden `config`, written before the field; else unknown), "
            "preset, backbone, image size, "
            "batch size, the dtype trained in (training.json `precision`, however a framework spells it: "
            "FP32, 32-true and tf32 read as float32, fp16, half, 16-mixed and the Keras policy "
            "mixed_float16 as float16, bf16, bf16-mixed and mixed_bfloat16 as bfloat16; float16 on a "
            "CPU is a class of its own, float16 "
            "(emulated on a CPU)) and a dataset fingerprint (a hash of training.json `dataset_info`). "
            "A field the run does not record is unknown; a batch size our training's training.json lost "
            "(absent, or text) is read as its step log's (`examples_per_s` × `step_time_s`, the median), "
            "said.",
        ),
        (
            "Hardware signature",
            "CPU model, logical CPUs, memory (GiB), the GPUs the run used (names), the GPU driver, and "
            "the GPU state that changes what the GPU can do (see GPU state: power cap N W, clocks held by "
            "a setting, MIG, shared), shown in brackets after the GPU names; a multi-node job's also each "
            "node's hardware.",
        ),
        (
            "Multi-node job",
            "runs given together whose run.json `nodes` share `rdzv_id`, `rdzv_endpoint` and `nnodes`, "
            "one per node rank 0 … N − 1 (the run directories of one data-parallel training, one per "
            "node), are sized as one job under node 0's run id: throughput from node 0's step log (every "
            "rank's examples; a synchronous step ends when the slowest node's gradients arrive, so it is "
            "the slowest node's pace); each node's telemetry read over the job's steady state and "
            "training window in unix time, clipped to that node's own `train` phase and recording, so a "
            "node that recorded part of the window covers only that part; energy (the mean powers of the "
            "nodes added), the GPUs charged and the hardware price (each node's host and GPUs) summed "
            "over the nodes; "
            "temperatures and throttling per node. The verdict is the slowest node's: of a GPU job, the "
            "node whose least busy GPU has the lowest mean util (a node waiting on its host reads low "
            "while the others spin in the collective, which reads busy); of a CPU job, or with fewer "
            "than two nodes' GPU util known, node 0. When the slowest node names no cause, the least busy "
            "node that waited does (host-bound, I/O-bound, GPU underused, busy but not computing, a GPU "
            "straggler). A node ≥ "
            f"{NODE_STRAGGLER_GAP_PCT:g} points of mean GPU util below the busiest node is the straggler "
            "node, named in a label and first in the evidence; every node that waited is a label "
            "(`node1: host-bound`); the other nodes' labels are added and their verdicts are evidence. "
            "A node's run given without the others, or a "
            "node rank given twice, is sized alone, with a warning.",
        ),
        (
            "Repeats",
            "runs with the same workload signature (every field known), device kind and hardware "
            "signature, and complete (see Valid runs); their mean, sample standard deviation (n − 1), "
            "min and max are shown. Runs with an unknown workload field, or whose CPU model and logical CPUs "
            "(a CPU run) or GPU names (a GPU run) are unknown, are never repeats. Runs on different "
            "machines of the same kind (run.json `system` machine or instance id hashes differ; a new boot "
            "id alone is the same machine) are repeats too; the Decision says on how many machines they "
            "ran, so their spread is the spread between machines of that kind.",
        ),
        (
            "Like-for-like",
            "a comparison whose two sides have the same workload signature, every field known on both "
            "sides. A field unknown on either side makes it not known to be like-for-like (unknown "
            "never equals unknown, not even another unknown), with the unknown fields listed; a known "
            "difference makes it NOT like-for-like, with the differing fields listed. Both are still "
            "shown, speedup and break-even included, marked in the same headline line.",
        ),
        (
            "Baseline",
            "the group of `--baseline` when given; else the CPU group like-for-like with the most GPU "
            "groups, the fastest (examples/s) of those tied, since a slower CPU would flatter the GPU; else "
            "the first CPU group, else the first group.",
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
            "from totals; without either, unknown (no work counter); with steps but no batch size or "
            "examples (a job), examples/s unknown (examples per step not known). A step log appended by "
            "a resumed run (or one paused: a stopped process or a machine that slept looks the same) is "
            "cut into sessions where `elapsed_s` or `step` goes back, `step` jumps by more than "
            f"{ss.STEP_JUMP_FACTOR:g}× its usual stride, or rows are more than {ss.GAP_MIN_S:g} s and "
            f"{ss.GAP_FACTOR:g}× the usual interval apart; each session has its own warm-up and the rate "
            "is the steady steps of all sessions over their steady time, never a span with a gap (the "
            "measurement window is the longest session's steady span; time to N steps counts training "
            "time only: each resumed session's elapsed_s continues from the end of the one before). "
            "Warned when it differs from training.json `steady_steps_per_s` by more than "
            f"{RATE_MISMATCH_FRACTION:.0%}, and when its steps span less than {COMPLETE_COVERAGE:.0%} of "
            "the steps training.json counts (a file cut at its head or tail: the rate is that part's). "
            "A job's step log whose rows came in bursts (at least "
            f"{bursts.BURST_ROW_SHARE:.0%} of its row gaps under {bursts.BURST_GAP_S * 1000:g} ms, adding up "
            f"to under {bursts.BURST_TIME_SHARE:.0%} of its span from the training's start: block-buffered "
            "output read a buffer at a time, or progress lines without their own time read together) is "
            "timed by each burst's last row only "
            f"(bursts less than {bursts.MERGE_SHARE:.0%} of the mean gap between bursts apart are one "
            "write read in parts): its steady span runs from the end of the burst the warm-up ends in to "
            "the end of the last burst but one (the last is often the buffer emptied at exit); with fewer "
            "than three bursts the rate is unknown (the Decision says why); fewer than "
            f"{bursts.MANY_BURSTS} bursts are said in the warnings. Our own training times each step "
            "itself, so its rows are never read so.",
        ),
        (
            "Valid runs",
            "a run whose training.json `status` is failed, interrupted, running or ended unrecorded, "
            "or (without a final training status) whose run.json `end_reason` is failed, interrupted "
            "or running, is incomplete: shown in the tables, named in the headline and the warnings, "
            "and left out of every average and comparison unless `--include-incomplete` is given. A "
            "run that records neither is taken as complete, and so is a failed one without a training "
            "status whose phases.csv records its train phase ok and only later phases (export, evaluate, "
            "detect, infer) failed. A run whose training.csv `loss_total` is "
            "not finite (nan or inf) from some step to its last loss read diverged: it is incomplete too (a "
            "non-finite step followed by finite ones, as loss scaling skips a step, is not). A run whose "
            f"last loss reads (the larger of {LOSS_WINDOW_STEPS} and a tenth of its finite ones) average "
            f"more than {LOSS_ROSE_FACTOR:g}× its first as many may have diverged: a caveat, in the "
            "warnings and the Decision (a loss ever ≤ 0 is not compared by a ratio). Two runs whose "
            "measured windows overlap on one machine (the same run.json `system.boot_id_hash`) ran beside "
            "each other's load: a caveat that makes the figures wrong; without a boot on either, the same "
            "host name makes it unsure (machines may share a name). A run.json that cannot describe the "
            f"training its training.json records (the training began more than {RECORDS_SLACK_S:g} s before "
            "its start or after its end, or it names another device than training.json asks for: one of "
            "them copied from another run) is a caveat: the hardware, workload and settings they name may "
            "not be the run's. A run.json whose `system.cpu_cores_logical` its telemetry contradicts "
            "(another count of `cpu<N>_util_pct` columns with a reading) is a caveat, and the run is sized "
            "with the count the telemetry sampled; its CPU's peak, and so a CPU run's MFU, is not known "
            "(run.json's CPU facts may be another host's).",
        ),
        (
            "Stability",
            "the steady rows are cut into up to "
            f"{ss.BATCHES} contiguous batches of ≥ {ss.MIN_ROWS_PER_BATCH} rows; the within-run 95 % "
            "interval of steps/s is the rate ± t(k − 1) × sd(batch rates) / √k. With one run on each "
            "side the speedup gets a within-run interval from the two runs' batch rates (delta method "
            "as for repeats); it shows how well each run pins its own rate, not how repeats vary. "
            "Stationarity: steps/s over the first and the last third of the steady time; more than "
            f"{ss.DRIFT_WARN_FRACTION:.0%} apart is a warning and is said in the headline. Pauses: a "
            "stride of steady steps (a GPU run's loss reads apart, else a step) "
            f"≥ {ss.PAUSE_FACTOR:g}× the median stride's time per step holds a pause (a stopped or starved "
            "process, a checkpoint, an evaluation or a recompile in the step); pauses stay in the rate, and "
            f"where the time they took past the median pace is ≥ {ss.PAUSE_SHARE:.0%} of the steady time "
            "they are said in the headline, with the rate without them.",
        ),
        (
            "Weak baseline",
            "a CPU baseline that under-represents its hardware, named in the headline's baseline line "
            "and in every line compared with it: its training's processes averaged under "
            f"{t.weak_baseline_cpu_fraction:.0%} of its logical CPUs (`proc_cpu_pct`; without it, the "
            f"host under {t.weak_baseline_cpu_fraction:.0%} busy), saying so where other processes kept "
            f"≥ 1 CPU and ≥ {validity.OTHERS_SHARE:.0%} of them busy besides (a contended host), or its "
            "CPU use not measured; "
            f"hypervisor steal above {t.steal_pct:g} %; swap in use grown by ≥ "
            f"{validity.SWAP_GROWTH_BYTES / 2**30:g} GiB over the measured samples (`swap_used_bytes`: the "
            "host swapped); a CPU clock held down (its verdict thermally throttled, HW slowdown or CPU "
            "clock below peak); a cgroup CPU quota below its logical CPUs (run.json "
            "`cgroup_cpu_limit_cpus`), or a CPU set smaller than them (run.json `cpu_affinity_cpus`: "
            f"taskset, Slurm or a container's cpuset); a small host or VM (≤ {t.small_host_logical_cpus} "
            "logical CPUs); float16 emulated on a CPU; bfloat16 on a CPU whose run.json `cpu_simd` "
            "has neither avx512_bf16 nor amx_bf16; a host-bound verdict; or a GPU of its host busy "
            f"(averaging ≥ {validity.IDLE_GPU_UTIL_PCT:g} % over the measured samples) while it trained, "
            "said first: it may not have trained on the CPU alone. A GPU run whose "
            "verdict is host-bound, I/O-bound or GPU underused says so in its headline line, and one "
            "labelled thermally throttled or HW slowdown says its clocks were pulled down (the charged "
            "GPUs' fault reasons and their share of the training's samples). A GPU run whose busiest used "
            f"GPU averaged under {validity.IDLE_GPU_UTIL_PCT:g} % busy over the measurement window did no "
            "work (a job whose code never moved to the GPU; a shared or MIG board says nothing of it): its "
            "option is marked so and its rate is called its host's, unless another GPU of the host, one "
            "the run does not name, was busy then: the caveat says so, since the record of its GPUs may "
            "be wrong.",
        ),
        (
            "Windows",
            "training window: the `train` phases of phases.csv, else the whole telemetry (cut to the "
            "span its CPU and GPU columns share); measurement window: the steady state clipped to it. "
            "Means, verdicts and per-unit energy use the measurement window; temperatures, throttling "
            "and total energy the training window. The verdict's means are taken over the span its "
            "column families share within the measurement window (the host's CPU, iowait, disk and "
            "process columns; a GPU run's charged GPUs' utilization), each family's span from its own "
            "non-empty rows, so recordings merged from different spans (a sysstat day file and the "
            "job's nvidia-smi log) are judged over the time both saw; a merged run's warnings say that "
            f"span and its sources, and a shared span under {SHORT_SPAN_FRACTION:.0%} of the window is a "
            "caveat; families that do not overlap there leave the host's part unknown. An imported "
            "log read with an assumed UTC offset is a caveat.",
        ),
        (
            "Units",
            "speed, energy and cost per 1,000 examples (images); per 1,000 steps only where the batch "
            "sizes of the two sides match.",
        ),
        (
            "GPU attribution",
            "a GPU run is charged for the GPUs the training used: training.json `gpu_uuids` matched "
            "to run.json's GPUs; a host with one GPU, its GPU; otherwise the GPUs that did work (mean "
            "utilization ≥ 1 % over the measurement window, so idle neighbours are neither charged, "
            "priced nor named), every GPU when all or none did, with a warning in the headline. Serving "
            "charges by the same rule over each cell's window. The limiting GPU of data-parallel "
            "training is the least busy of them.",
        ),
        (
            "Energy",
            "GPU board energy of the charged GPUs (see GPU energy source); "
            "the other GPUs' mean draw is listed apart, not charged. CPU package energy from RAPL, "
            "else, with a TDP (per host or for all), an ESTIMATE: TDP × (idle floor + (1 − idle "
            "floor) × CPU util). A CPU run counts CPU energy only. Board and package energy are not "
            "wall power. J per 1,000 examples = mean power in the measurement window × 1,000 / "
            "examples/s.",
        ),
        (
            "Energy coverage",
            "each source is integrated over the time its valid readings cover: two readings at most "
            f"{MAX_GAP_INTERVALS:g} of the source's own sampling intervals apart (the median spacing "
            f"of the {LOCAL_SPACINGS} around them: a 5 s log merged into a 1 s run keeps its 5 s, a log "
            "whose interval changed keeps each part's) cover the time between "
            "them; a counter "
            "that goes down there (driver reload, GPU reset, wrap) covers nothing there and counts "
            "a reset (integrated piecewise). A counter measures across a gap inside the window too: its "
            "rise from the read before the gap to the read after counts (said) where its mean power "
            f"there is {BRIDGE_POWER_RANGE[0]:g}–{BRIDGE_POWER_RANGE[1]:g} × the 5th–95th percentiles "
            "of its mean power between its other reads (a reset in the gap would not be). A counter's "
            "step is spread linearly over the rows that "
            "repeat its previous value (a counter read less often than rows are written, or moving in "
            "steps coarser than the tick), so a window shorter than a step gets its share rather than "
            "the whole step or none; repeats that no later read bounds (before a gap or a reset, after "
            "the last read) are not covered: unknown, not zero. Mean "
            "power = energy / covered time. Below "
            f"{COMPLETE_COVERAGE:.0%} of the window a source gives no figure: not measured (covers "
            "N % of the run). A GPU run's energy needs every charged GPU measured, never the CPU "
            "package alone; without the CPU package it says GPU board only. A GPU's counter is "
            f"cross-checked against its integrated power (flagged above {CROSS_CHECK_TOLERANCE:.0%}); "
            f"a measured source that averages under {MIN_VALID_W:g} W (a stuck counter, a 0 W gauge) is "
            f"ignored, and so is a GPU source that averages over {POWER_LIMIT_SLACK:g} × the board's power "
            f"limit (`gpu<N>_power_limit_w`, the highest in the run), or over {MAX_BOARD_W:,.0f} W where no "
            "limit is recorded: more than the board can draw (a wrong unit, such as mW or mJ).",
        ),
        (
            "GPU energy source",
            "per GPU, the board's total-energy counter (`gpu<N>_energy_j`, NVML, Volta and newer), else "
            "instant power (`gpu<N>_power_instant_w`) integrated over time, else average power "
            "(`gpu<N>_power_w`: a 1 s running average on Ampere and newer except the A100) integrated; "
            "What it covers says which. Anything integrated from readings ≥ "
            f"{ESTIMATE_SPACING_S:g} s apart (median spacing) is an ESTIMATE: NVML samples power only "
            "part of the time (about a quarter of it on A100/H100, Yang et al., SC24) and a 1 s average "
            "smooths and lags a bursty load.",
        ),
        (
            "Cost",
            "energy (kWh) × tariff + hardware price / working hours × hours per 1,000 examples. "
            "Hardware price = the host (`--host-price HOST=USD`, else `--cpu-price`) + each GPU the "
            "run used (`--gpu-price MODEL=USD`, else `--gpu-price USD`); working hours = "
            "amortisation years × 8,760 h × utilisation. A price not given is no price given, "
            "never $0: a hardware cost or a total is shown only when every price it sums was "
            "given; otherwise the line says what it covers (energy only, GPU not priced).",
        ),
        (
            "Speedup",
            "mean examples/s of a group / the baseline group's. With ≥ 2 repeats on both sides, a 95 "
            "% interval: log-ratio standard error by the delta method, Welch–Satterthwaite degrees of "
            "freedom, Student's t from a table.",
        ),
        (
            "Break-even",
            "investment / saving per GPU training hour. Investment: the GPU side's GPUs (a GPU "
            "baseline's GPUs subtracted: the price difference; hosts included when both are "
            "priced). Saving: (speedup − 1) hours of baseline time at the value per hour, plus the "
            "baseline's energy cost for that hour's examples minus the GPU run's. Never when the "
            "saving is ≤ 0; does not pay back when it needs more GPU hours than the hardware's "
            "working hours; marked ESTIMATE when an energy estimate is in it. Its assumptions "
            "(life, utilisation, value per hour, what the energy covers) are printed beside it, and "
            "beside every never (tariff, price, value per hour, life). Without a value per hour the "
            "time saved is worth anything from nothing up: a faster side pays back at most after what the "
            'energy alone needs when that is within the working hours, else "time saved not valued: '
            'cannot tell" (--value-per-hour would tell); never only when no value of an hour could '
            "make the saving positive (no faster and no energy saved).",
        ),
        (
            "Scaling",
            "runs that differ only in their device count (training.json `world_size`, 1 when absent): "
            "same workload signature except that the per-device batch replaces the global one, same "
            "device kind, host, CPU, memory, GPU model and node count. Scaling efficiency = "
            "examples/s(N) / (N × "
            "examples/s(1)), n/a without a 1-device run. Hardware cost as in Cost (the host plus each GPU "
            "used, over the working hours). Marginal cost of a step = its extra $ per hour / the extra "
            "examples per hour it "
            "buys; its payback = the price of the added GPUs (nothing for processes on one host) / "
            "what an hour at N saves against the "
            "previous count (time at the value per hour plus energy; without a value per hour as in "
            "Break-even: a bound from the energy alone, or time saved not valued: cannot tell). The "
            "largest count that pays back is the last one reached by steps that each pay back within the "
            "working hours (life × utilisation); a step that cannot be told makes it cannot tell. "
            "Incomplete runs are left out of a series, and named on it, unless `--include-incomplete` "
            "is given: then they are averaged in as repeats and marked, and a count measured only by "
            "them is not judged: the next count's step is judged against the last count measured by a "
            "complete run, and the verdict never stops at it.",
        ),
        (
            "Throttling",
            "GPU clocks-event reasons decoded: idle 0x1, at power limit 0x4 (a state, not a fault), "
            "HW slowdown 0x8, sync boost 0x10, thermal SW 0x20, thermal HW 0x40, HW power brake 0x80; "
            "events = runs of consecutive samples. CPU: busy-core frequency (cores ≥ "
            f"{t.cpu_busy_pct:g} % busy, from `cpu<N>_freq_mhz`) ≥ {t.cpu_freq_drop_fraction:.0%} "
            f"below the {t.cpu_freq_baseline_quantile:.0%} percentile of the training window's "
            "samples with the same number of busy cores (turbo bins: fewer busy cores clock higher; "
            "recordings without per-core frequency: `cpu_freq_mhz` only while the CPU is ≥ "
            f"{t.core_saturated_pct:g} % busy); {CONSTANT_FREQUENCY} when every frequency reading is "
            "the same. A drop is thermal only with thermal evidence: `cpu_core_throttle_count` or "
            "`cpu_package_throttle_count` rising in the window, or `cpu_temp_c` at the temperature "
            f"threshold in a dropped sample; otherwise it is {CPU_BELOW_PEAK}, a state, not a fault.",
        ),
        ("Thermal", "peak temperature and time at or above the threshold (sum of the sample intervals)."),
        (
            "Verdicts",
            "over the measurement window, first match: GPU-bound (GPU run, least busy used GPU ≥ "
            f"{t.gpu_bound_util_pct:g} %); CPU-bound (CPU run, CPU ≥ {t.cpu_saturated_pct:g} %); "
            f"I/O-bound (iowait ≥ {t.iowait_pct:g} % or disk busy ≥ {t.disk_saturated_pct:g} %, unless the "
            f"training's own storage I/O, where recorded, was < {b.IO_OWN_SHARE:.0%} of the busiest disk's "
            "(of all disks' without `disk_busiest_bps`): other processes' then, said); "
            f"host-bound (GPU run with CPU ≥ {t.cpu_saturated_pct:g} %, or on average ≥ 1 logical CPU "
            f"≥ {t.core_saturated_pct:g} % busy while ≥ 1 is < {t.core_idle_pct:g} % and the "
            "training's processes use ≥ 0.8 core per saturated CPU, or, a GPU run, one host thread ≥ "
            f"{t.core_saturated_pct:g} % busy in ≥ {b.HOST_THREAD_SAMPLE_FRACTION:.0%} of the samples "
            f"or ≥ {b.HOST_THREAD_BUSY_MEAN_PCT:g} % busy on average while ≥ 1 logical CPU is < "
            f"{t.core_idle_pct:g} %: the training's busiest thread "
            "(`proc_busiest_thread_pct`) where recorded, else a logical CPU, the training's processes "
            f"then using ≥ {b.HOST_THREAD_TREE_CORES:g} core; in a GPU run these saturated CPUs or "
            "thread count only where the GPU's utilization, or a shared board's, is recorded, since a "
            "thread waiting on the GPU spins busy too); GPU underused (GPU < "
            f"{t.gpu_underused_util_pct:g} %, no other cause; where the busiest thread is not recorded it "
            "says that a thread the kernel moves between CPUs would not show in per-CPU utilization, and "
            "where no CPU column is recorded: host not recorded, cause unknown). Thermally throttled "
            "(thermal bits, or "
            "CPU frequency drops with thermal evidence), HW slowdown (0x8, 0x80) and CPU clock below "
            f"peak (cause unknown) are added in ≥ {t.throttled_sample_fraction:.0%} of samples. A verdict "
            f"on fewer than {MIN_VERDICT_SAMPLES} telemetry samples in its window is a guess, and one whose "
            f"samples cover less than {COMPLETE_COVERAGE:.0%} of the window (a merged recording's: the span "
            "its recordings share; two samples cover the time "
            f"between them when at most {MAX_GAP_INTERVALS:g} sampling intervals apart, as for energy: the "
            "collector paused, or rows were lost) reads only the rest, as does one whose telemetry "
            f"covers less than {COMPLETE_COVERAGE:.0%} of the steady state within the training (a file cut "
            "at its head or tail; its energy reads that part too): each a caveat, in the warnings and the "
            "Decision.",
        ),
        *gpu_definitions(t),
    )


DEFINITIONS = definitions()
