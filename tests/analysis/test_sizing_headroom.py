"""MFU and why the GPU is not at its limit (sizing.analysis.headroom): the arithmetic on crafted runs, every
unknown with its reason, each counter rule at and just past its boundary, the headline and the shipped
H100 runs."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sizingfixtures import reference_cpu, reference_gpu, telemetry_frame, with_info, with_system

from sizing import ReportSettings, build_report, to_json
from sizing.analysis import headroom as hr
from sizing.analysis import mfu
from sizing.analysis.bottleneck import Verdict
from sizing.analysis.gpu_state import first_train_start
from sizing.analysis.load import load_run_dir
from sizing.analysis.run import analyse_run
from sizing.cli import main as sizing_main
from sizing.model import Prices, RunData, Thresholds

H100 = "NVIDIA H100 80GB HBM3"
V100 = "Tesla V100-SXM2-16GB"
H100_TF32 = 494.7e12
NO_FLOPS = "training.json has no FLOP count: count it with `python -m training flops RUN_DIR`"


def on_gpu(run: RunData, name: str = H100) -> RunData:
    gpus = [{**g, "name": name} for g in run.meta["system"]["gpus"]]
    return with_info(with_system(run, gpus=gpus), gpu_names=[name])


def with_flops(run: RunData, per_example: float | None = 1e12, **more: object) -> RunData:
    return with_info(run, flops={"per_example": per_example, "method": "crafted", "uncounted": [], **more})


def room(run: RunData) -> hr.Headroom:
    found = analyse_run(run, Prices(), Thresholds()).headroom
    assert found is not None
    return found


def test_mfu_is_flops_per_example_times_examples_per_s_over_the_dense_peak() -> None:
    """reference_gpu: 20 examples/s; 1 TFLOP per example → 20 TFLOP/s of the H100's 494.7 TF32."""
    h = room(with_flops(on_gpu(reference_gpu())))
    assert h.achieved_flops_per_s == pytest.approx(20e12)
    assert h.peak_flops_per_s == pytest.approx(H100_TF32) and h.math_dtype == "tf32"
    assert h.mfu == pytest.approx(20e12 / H100_TF32) and h.mfu_reason is None
    assert "TF32 by default" in h.dtype_basis and "H100 SXM5" in h.peak_source
    assert hr.mfu_text(h) == f"ran at 4.0 % of the {H100}'s dense TF32 peak (MFU)"
    two = room(with_info(with_flops(on_gpu(reference_gpu())), world_size=2))
    assert two.peak_flops_per_s == pytest.approx(2 * H100_TF32) and two.mfu == pytest.approx(h.mfu / 2)
    assert hr.mfu_text(two) == f"ran at 2.0 % of 2 × {H100}'s dense TF32 peak (MFU)"


def test_gpus_that_did_work_with_no_world_size_are_the_peak_and_give_a_lower_bound() -> None:
    """Two busy GPUs, no training.json world_size and no gpu_uuids (a job under torchrun that declares
    neither): the peak is both GPUs', the MFU a lower bound; it was one GPU's, an MFU twice too high."""
    one = with_flops(on_gpu(reference_gpu()))
    telemetry = one.telemetry.assign(**{c.replace("gpu0_", "gpu1_"): one.telemetry[c]
                                        for c in one.telemetry if c.startswith("gpu0_")})  # fmt: skip
    gpus = [{**one.meta["system"]["gpus"][0], "index": i, "uuid": f"GPU-{i}"} for i in (0, 1)]
    info = {k: v for k, v in one.training_info.items() if k not in ("gpu_uuids", "world_size")}
    two = replace(with_system(one, gpus=gpus), telemetry=telemetry, training_info=info)
    h = room(two)
    assert h.devices == 2 and h.mfu_is_lower_bound and h.mfu == pytest.approx(room(one).mfu / 2)
    assert hr.mfu_text(h) == (
        f"ran at ≥ 2.0 % of 2 × {H100}'s dense TF32 peak (MFU, a lower bound: world_size not recorded, so "
        "every GPU that did work counts)"
    )
    (option,) = build_report([reference_cpu(), two], ReportSettings()).decision.options
    assert option.line.startswith(f"2 × {H100}: ") and "MFU ≥ 2 % (TF32)" in option.line
    stated = room(with_info(two, world_size=1))  # the run says one GPU trained: the other worked for another
    assert (stated.devices, stated.mfu_is_lower_bound) == (1, False)
    assert stated.mfu == pytest.approx(room(one).mfu)


def test_idle_neighbours_are_neither_charged_priced_nor_named_when_no_gpu_is_declared() -> None:
    """Four GPUs on the host, two busy, training.json naming none: the option was '4 × H100' with four
    boards' energy and price while its MFU counted two. Now the two that did work are the run's GPUs."""
    one = with_flops(on_gpu(reference_gpu()))
    copies = {c.replace("gpu0_", f"gpu{i}_"): one.telemetry[c] for i in (1, 2, 3)
              for c in one.telemetry if c.startswith("gpu0_")}  # fmt: skip
    telemetry = one.telemetry.assign(**copies)
    for i in (2, 3):  # idle boards: no work, idle power
        telemetry[[f"gpu{i}_util_pct", f"gpu{i}_power_w"]] = [0.0, 60.0]
        telemetry = telemetry.drop(columns=[c for c in telemetry if c.startswith(f"gpu{i}_energy")])
    gpus = [{**one.meta["system"]["gpus"][0], "index": i, "uuid": f"GPU-{i}"} for i in range(4)]
    info = {k: v for k, v in one.training_info.items() if k not in ("gpu_uuids", "world_size")}
    four = replace(with_system(one, gpus=gpus), telemetry=telemetry, training_info=info)
    prices = Prices(gpu_price=30_000.0, cpu_price=5_000.0, value_per_hour=10.0)
    report = build_report([reference_cpu(), four], ReportSettings(prices=prices))
    (option,) = report.decision.options
    assert option.line.startswith(f"2 × {H100}: ") and "MFU ≥ 2 % (TF32)" in option.line
    (a,) = [a for a in report.analyses if a.kind == "gpu"]
    assert a.charged_gpus == (0, 1) and a.hardware["gpus"] == [H100, H100]
    assert a.hardware_price.usd == pytest.approx(5_000.0 + 2 * 30_000.0)
    idle_columns = [c for c in telemetry if c.startswith(("gpu2_", "gpu3_"))]
    two_only = replace(four, telemetry=telemetry.drop(columns=idle_columns))
    alone = analyse_run(two_only, Prices(), Thresholds())
    assert a.steady_energy.total_j == pytest.approx(alone.steady_energy.total_j)
    said = (f"{a.run_id}: energy charged for the 2 of 4 GPUs that did work (gpu2, gpu3 under 1 % busy; which "
            "trained is not recorded); record gpu_uuids to charge only the used GPU")  # fmt: skip
    assert said in report.warnings


@pytest.mark.parametrize(
    ("name", "changes", "dtype", "tflops"),
    [
        (H100, {"precision": "bfloat16"}, "bf16", 989.4),
        (H100, {"precision": "mixed_bfloat16"}, "bf16", 989.4),
        (H100, {"precision": "mixed_float16"}, "fp16", 989.4),
        (H100, {"flops_math_dtype": "float32"}, "fp32", 66.9),  # TF32 switched off: stated by the count
        (H100, {"flops_math_dtype": "bfloat16"}, "bf16", 989.4),  # the count's dtype wins over precision
        (H100, {"settings": {"batch": 2, "tf32": False}}, "fp32", 66.9),  # --no-tf32, no count's dtype
        (H100, {"settings": {"batch": 2, "tf32": None}}, "tf32", 494.7),  # the framework's default
        (V100, {}, "fp32", 15.7),  # float32 where there is no TF32
        (V100, {"precision": "mixed_float16"}, "fp16", 125.0),
    ],
)
def test_the_peak_is_the_dtype_the_math_ran_in(name: str, changes: dict, dtype: str, tflops: float) -> None:
    stated = changes.pop("flops_math_dtype", None)
    run = with_info(on_gpu(reference_gpu(), name), **changes)
    per_example = 1e11  # 2 TFLOP/s at reference_gpu's 20 examples/s: under every peak here
    h = room(with_flops(run, per_example, math_dtype=stated) if stated else with_flops(run, per_example))
    assert h.math_dtype == dtype and h.peak_flops_per_s == pytest.approx(tflops * 1e12)
    assert h.mfu == pytest.approx(2e12 / (tflops * 1e12))


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (on_gpu(reference_gpu()), NO_FLOPS),
        (with_flops(on_gpu(reference_gpu()), None, reason="torch not installed"),
         "training.json's FLOP count is missing (torch not installed)"),
        (with_flops(on_gpu(reference_gpu()), 0.0),
         "training.json flops.per_example is not a positive number"),
        (with_flops(reference_gpu()),
         "Crafted H100 is not in the table of GPU peaks (sizing/analysis/peaks.py)"),
        (with_flops(on_gpu(reference_gpu(), V100), math_dtype="tf32"),
         f"no dense TF32 peak known for {V100}"),
        (with_flops(with_info(on_gpu(reference_gpu(), V100), precision="bfloat16")),
         f"no dense BF16 peak known for {V100}"),
        (with_flops(with_info(on_gpu(reference_gpu()), precision=None)),
         "the dtype trained in is not recorded (training.json precision)"),
    ],
)  # fmt: skip
def test_mfu_not_known_says_why_and_never_guesses(run: RunData, reason: str) -> None:
    h = room(run)
    assert h.mfu is None and h.mfu_reason == reason
    assert hr.mfu_text(h) == f"MFU not known ({reason})"


def test_an_mfu_past_the_peak_is_no_mfu_but_a_wrong_input() -> None:
    """No run computes faster than its hardware's peak: counted FLOPs that say so (a count of another
    model, batch or image size, or a wrong peak) give no MFU and say which inputs disagree."""
    at_peak = H100_TF32 / 20  # reference_gpu trains 20 examples/s
    assert room(with_flops(on_gpu(reference_gpu()), at_peak * 0.999)).mfu == pytest.approx(0.999)
    h = room(with_flops(on_gpu(reference_gpu()), at_peak * 54))
    assert h.mfu is None and h.achieved_flops_per_s == pytest.approx(54 * H100_TF32)
    assert h.mfu_reason == (
        "the counted FLOPs at this rate would be 5,400 % of the peak, which no run reaches: the FLOP count "
        "(training.json flops) or the peak does not fit this run"
    )


def test_a_gpu_run_without_gpu_readings_says_the_gpu_was_not_recorded() -> None:
    """No utilization and no counter in the window (telemetry lost, or without GPU columns): the why is
    not known because nothing was recorded, not because no rule matched."""
    run = with_flops(on_gpu(reference_gpu()))
    bare = replace(run, telemetry=run.telemetry[[c for c in run.telemetry if not c.startswith("gpu")]])
    h = room(bare)
    assert h.limit == hr.GPU_NOT_RECORDED and not h.limit_from_counters
    said = "why not known (GPU activity not recorded: no utilization or profiling counter in the window)"
    assert hr.limit_text(h) == said
    (option,) = build_report([reference_cpu(), bare], ReportSettings()).decision.options
    assert f"(TF32): {said}." in option.line


def test_mixed_gpu_models_and_an_unknown_rate_give_no_mfu() -> None:
    run = with_flops(on_gpu(reference_gpu()))
    h = mfu.mfu_of(run.training_info, run.meta["system"], "gpu", [H100, "NVIDIA A100-SXM4-80GB"],
                  analyse_run(run, Prices(), Thresholds()).throughput)  # fmt: skip
    assert h["mfu"] is None and h["mfu_reason"] == "mixed GPU models: no single peak applies"
    rate = replace(analyse_run(run, Prices(), Thresholds()).throughput, examples_per_s=None)
    h = mfu.mfu_of(run.training_info, run.meta["system"], "gpu", [H100], rate)
    assert h["mfu"] is None and h["mfu_reason"] == "examples/s unknown (examples per step not known)"
    rate = replace(rate, steps_per_s=None)
    h = mfu.mfu_of(run.training_info, run.meta["system"], "gpu", [H100], rate)
    assert h["mfu"] is None and h["mfu_reason"] == "examples/s unknown (no work counter)"


def test_a_cpu_run_gets_a_lower_bound_mfu_from_cores_clock_and_vector_width() -> None:
    """reference_cpu: 1 example/s × 100 GFLOP against 4 cores × 3 GHz × 8 lanes × 2 × 2 = 384 GFLOP/s."""
    cpu = with_system(reference_cpu(), cpu_cores_physical=4, cpu_max_mhz=3000.0,
                      cpu_max_mhz_source="cpufreq cpuinfo_max_freq", cpu_simd=["avx2", "fma"])  # fmt: skip
    h = room(with_flops(cpu, 1e11))
    assert h.math_dtype == "fp32" and h.peak_flops_per_s == pytest.approx(384e9)
    assert h.mfu == pytest.approx(1e11 / 384e9) and h.mfu_is_lower_bound and h.limit is None
    assert (
        hr.mfu_text(h)
        == "ran at ≥ 26.0 % of the Crafted Xeon 8-core's nominal FP32 peak (MFU, a lower bound)"
    )
    base = room(with_flops(with_system(cpu, cpu_max_mhz_source="model name"), 1e11))
    assert hr.mfu_text(base) == "ran at 26.0 % of the Crafted Xeon 8-core's nominal FP32 peak (MFU)"
    unknown = room(with_flops(reference_cpu(), 1e11))  # the shipped CPU runs record neither flags nor clock
    assert unknown.mfu is None and "vector flags are not recorded" in (unknown.mfu_reason or "")


# Why the GPU is not at its limit: crafted windows of 10 samples with neutral counters (no rule matches)
NEUTRAL = {"util_pct": 70.0, "sm_active_pct": 60.0, "tensor_active_pct": 30.0, "dram_active_pct": 30.0,
           "fp32_active_pct": 10.0, "fp16_active_pct": 0.0, "fp64_active_pct": 0.0}  # fmt: skip
UNDERUSED = Verdict("GPU underused", ("GPU underused",), ("mean GPU util 25.0 % < 50 %",))


def limit(saturated_samples: int = 0, core_pct: float = 95.0, proc: float | None = None, **counters: float):
    values = {**NEUTRAL, **counters}
    columns = {f"gpu0_{k}": v for k, v in values.items() if v is not None}
    busy = np.where(np.arange(10) < saturated_samples, core_pct, 10.0)
    samples = telemetry_frame(0.0, 10, cpu0_util_pct=busy, cpu1_util_pct=10.0, **columns)
    if proc is not None:
        samples = samples.assign(proc_cpu_pct=proc)
    return hr.gpu_limit(samples, [0], UNDERUSED, Thresholds())


@pytest.mark.parametrize(
    ("counters", "label"),
    [
        ({}, hr.NO_SINGLE_LIMIT),
        ({"tensor_active_pct": 50.0}, hr.COMPUTE_BOUND),
        ({"tensor_active_pct": 49.9}, hr.NO_SINGLE_LIMIT),
        ({"fp32_active_pct": 50.0}, hr.COMPUTE_BOUND),
        ({"fp32_active_pct": 49.9}, hr.NO_SINGLE_LIMIT),
        ({"fp16_active_pct": 50.0}, hr.COMPUTE_BOUND),
        ({"fp64_active_pct": 50.0}, hr.COMPUTE_BOUND),
        ({"dram_active_pct": 50.0, "tensor_active_pct": 24.9}, hr.MEMORY_BOUND),
        ({"dram_active_pct": 49.9, "tensor_active_pct": 24.9}, hr.NO_SINGLE_LIMIT),
        ({"dram_active_pct": 50.0, "tensor_active_pct": 25.0}, hr.NO_SINGLE_LIMIT),
        ({"dram_active_pct": 90.0, "tensor_active_pct": 50.0}, hr.COMPUTE_BOUND),  # the first rule wins
        ({"util_pct": 80.0, "sm_active_pct": 49.9}, hr.LAUNCH_BOUND),
        ({"util_pct": 79.9, "sm_active_pct": 49.9}, hr.NO_SINGLE_LIMIT),
        ({"util_pct": 80.0, "sm_active_pct": 50.0}, hr.NO_SINGLE_LIMIT),
    ],
)
def test_each_counter_rule_at_and_just_past_its_boundary(counters: dict, label: str) -> None:
    found, from_counters, evidence, numbers = limit(**counters)
    assert found == label and from_counters
    assert "tensor active" in evidence and "SM active" in evidence  # every verdict carries its numbers
    assert numbers["tensor_active_pct"] == pytest.approx({**NEUTRAL, **counters}["tensor_active_pct"])


def test_the_evidence_reads_as_the_rule_with_its_numbers() -> None:
    _, _, launch, _ = limit(util_pct=95.0, sm_active_pct=20.0)
    assert launch.startswith("busy, but many small kernels: SMs idle: NVML util 95.0 % ≥ 80 % with SM "
                             "active 20.0 % < 50 %")  # fmt: skip
    _, _, memory, _ = limit(dram_active_pct=70.0, tensor_active_pct=5.0)
    assert memory.startswith("DRAM active 70.0 % ≥ 50 % with tensor active 5.0 % < 25 %")
    _, _, none, _ = limit()
    assert none.startswith("no single limit in the counters: tensor active 30.0 %")


@pytest.mark.parametrize(
    ("saturated", "core_pct", "util", "proc", "label"),
    [
        (5, 90.0, 79.9, None, hr.HOST_WAIT),  # a CPU ≥ 90 % in 50 % of the samples, the GPU < 80 %
        (4, 90.0, 79.9, None, hr.NO_SINGLE_LIMIT),  # in 40 % of them
        (5, 89.9, 79.9, None, hr.NO_SINGLE_LIMIT),  # below the saturation threshold
        (5, 90.0, 80.0, None, hr.NO_SINGLE_LIMIT),  # the GPU busy enough
        (5, 90.0, 79.9, 80.0, hr.HOST_WAIT),  # the training's processes use 0.8 core
        (5, 90.0, 79.9, 79.9, hr.NO_SINGLE_LIMIT),  # the saturated CPU is not the training's
    ],
)
def test_waiting_on_the_host_at_its_boundaries(
    saturated: int, core_pct: float, util: float, proc: float | None, label: str
) -> None:
    found, _, evidence, numbers = limit(saturated, core_pct, proc, util_pct=util)
    assert found == label
    assert numbers["host_thread_saturated_fraction"] == pytest.approx(saturated / 10 if core_pct >= 90 else 0)
    if label == hr.HOST_WAIT:
        assert "while a logical CPU ≥ 90 % busy in 50% of samples" in evidence


def test_without_nvml_util_the_graphics_engine_judges_how_busy_the_gpu_was() -> None:
    assert limit(5, util_pct=None, gr_engine_active_pct=79.9)[0] == hr.HOST_WAIT
    found, _, evidence, _ = limit(5, util_pct=None, gr_engine_active_pct=80.0)
    assert found == hr.NO_SINGLE_LIMIT and "graphics engine active 80.0 %" in evidence


@pytest.mark.parametrize(
    ("busiest_mean_pct", "util", "label"),
    [
        (70.0, 79.9, hr.HOST_WAIT),  # the training's busiest thread busy 70 % on average, never saturated
        (69.9, 79.9, hr.NO_SINGLE_LIMIT),
        (70.0, 80.0, hr.NO_SINGLE_LIMIT),  # the GPU busy enough
        (69.9, 49.9, hr.IDLE_WAITING),  # no kernel most of the time, no thread to blame
        (69.9, 50.0, hr.NO_SINGLE_LIMIT),
        (70.0, 49.9, hr.HOST_WAIT),  # the thread is named first
    ],
)
def test_a_busy_thread_or_an_idle_gpu_at_their_boundaries(
    busiest_mean_pct: float, util: float, label: str
) -> None:
    busiest = np.array([busiest_mean_pct - 5.0, busiest_mean_pct + 5.0] * 5)
    counters = {f"gpu0_{k}": v for k, v in {**NEUTRAL, "util_pct": util}.items()}
    samples = telemetry_frame(0.0, 10, proc_busiest_thread_pct=busiest, proc_cpu_pct=250.0, **counters)
    found, _, evidence, _ = hr.gpu_limit(samples, [0], UNDERUSED, Thresholds())
    assert found == label
    if label == hr.HOST_WAIT:
        assert f"{busiest_mean_pct:.0f} % busy on average (≥ 70 % on average)" in evidence
    if label == hr.IDLE_WAITING:
        assert evidence.startswith("NVML util 49.9 % < 50 %: no kernel ran most of the time; no host thread")


def test_an_idle_gpu_without_host_columns_says_the_host_was_not_recorded() -> None:
    columns = {f"gpu0_{k}": v for k, v in {**NEUTRAL, "util_pct": 20.0}.items()}
    found, _, evidence, _ = hr.gpu_limit(telemetry_frame(0.0, 10, **columns), [0], UNDERUSED, Thresholds())
    assert found == hr.IDLE_WAITING and "host not recorded: cause unknown" in evidence


def test_a_run_without_counters_keeps_its_verdict_from_utilization_only() -> None:
    found, from_counters, evidence, _ = hr.gpu_limit(telemetry_frame(0.0, 10, gpu0_util_pct=25.0), [0],
                                                     UNDERUSED, Thresholds())  # fmt: skip
    assert found == "from utilization only: GPU underused" and not from_counters
    assert "no GPU profiling counters (GPM)" in evidence and "mean GPU util 25.0 % < 50 %" in evidence
    analysis = analyse_run(on_gpu(reference_gpu()), Prices(), Thresholds())
    h = analysis.headroom
    assert h is not None and h.limit == f"from utilization only: {analysis.verdict.primary}"
    assert hr.limit_text(h).startswith("why (from utilization only): ")


def launch_bound_gpu() -> RunData:
    """reference_gpu on an H100 with its counters: util 95 %, SM active 20 %: launch-bound."""
    run = with_flops(on_gpu(reference_gpu()))
    counters = {f"gpu0_{k}": v for k, v in {**NEUTRAL, "util_pct": 95.0, "sm_active_pct": 20.0}.items()}
    training = (run.telemetry["time_unix"] >= first_train_start(run.phases)).to_numpy()
    telemetry = run.telemetry.copy()
    for column, value in counters.items():  # the board idle before the training: not another tenant's
        telemetry[column] = np.where(training, value, 0.0)
    return replace(run, telemetry=telemetry)


def test_the_headline_and_the_bottleneck_section_say_how_far_and_why() -> None:
    report = build_report([reference_cpu(), launch_bound_gpu()], ReportSettings())
    (gpu_line,) = [line for line in report.headline if line.startswith("GPU ")]
    assert f"; ran at 4.0 % of the {H100}'s dense TF32 peak (MFU); why: launch-bound; " in gpu_line
    section = next(s for s in report.sections if s.key == "bottleneck")
    (table,) = section.tables
    assert table.headers[-2:] == ("MFU", "Why not at the GPU's limit")
    gpu_row = next(r for r in table.rows if r[0] == "ref-gpu")
    assert gpu_row[-2] == f"ran at 4.0 % of the {H100}'s dense TF32 peak (MFU)"
    assert gpu_row[-1].startswith(
        "why: launch-bound (busy, but many small kernels: SMs idle: NVML util 95.0 %"
    )
    data = to_json(report)  # validated against docs/sizing.schema.json by the autouse fixture
    run = next(r for r in data["runs"] if r["run_id"] == "ref-gpu")
    assert run["headroom"]["mfu"] == pytest.approx(20e12 / H100_TF32)
    assert run["headroom"]["gpu_limit"] == hr.LAUNCH_BOUND and run["headroom"]["gpu_limit_from_counters"]
    assert run["headroom"]["counters"]["sm_active_pct"] == pytest.approx(20.0)
    cpu = next(r for r in data["runs"] if r["run_id"] == "ref-cpu")
    assert cpu["headroom"]["gpu_limit"] is None and cpu["headroom"]["mfu_not_known_reason"]
    # a GPU line without a FLOP count says so, briefly, with the why-label
    bare = build_report([reference_cpu(), on_gpu(reference_gpu())], ReportSettings())
    (line,) = [line for line in bare.headline if line.startswith("GPU ")]
    assert f"MFU not known ({NO_FLOPS}); why (from utilization only): " in line


EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
# the shipped H100 runs, the FLOPs the issue counted (FlopCounterMode, one step) and the MFU of TF32 it gives
H100_RUNS = {
    "20261124T110829Z-gpu-vm": (26.6e9, 0.3),  # small, batch 2
    "20261124T113233Z-gpu-vm": (26.6e9, 1.0),  # small, batch 32
    "20261124T112303Z-gpu-vm": (974e9, 6.8),  # standard, batch 2
}


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in H100_RUNS), reason="the H100 runs are not shipped"
)
def test_the_shipped_h100_runs_ran_at_a_few_percent_of_the_tf32_peak(tmp_path: Path) -> None:
    """With training.json's FLOP count (the issue's own figures): 0.3 %, 1.0 %, 6.8 %."""
    for run_id, (issue_flops, issue_pct) in H100_RUNS.items():
        run_dir = shutil.copytree(EXAMPLES / run_id, tmp_path / "examples" / run_id)
        info = json.loads((run_dir / "training.json").read_text(encoding="utf-8"))
        shipped = info["flops"]["per_example"]  # counted after the run: python -m training flops
        assert shipped == pytest.approx(issue_flops, rel=0.01)
        analysis = analyse_run(load_run_dir(run_dir), Prices(), Thresholds())
        h = analysis.headroom
        assert h is not None and h.math_dtype == "tf32" and h.peak_flops_per_s == pytest.approx(H100_TF32)
        assert h.mfu == pytest.approx(shipped * analysis.throughput.examples_per_s / H100_TF32)
        assert f"{h.mfu * 100:.1f}" == f"{issue_pct:.1f}"
        assert h.limit is not None and h.limit.startswith("from utilization only: ")  # recorded before GPM
    cpu = "20261124T111406Z-cpu-vm"
    shutil.copytree(EXAMPLES / cpu, tmp_path / "examples" / cpu)
    out = tmp_path / "r.md"
    assert sizing_main([cpu, *H100_RUNS, "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    headline = out.read_text(encoding="utf-8").split("## Settings")[0]
    batch2 = next(line for line in headline.splitlines() if "batch 2/float32: 9.04×" in line)
    assert f"of the {H100}'s dense TF32 peak (MFU); why (from utilization only): GPU underused;" in batch2


def test_a_configurations_phrase_averages_its_runs_and_says_how_many_are_known() -> None:
    known = room(with_flops(on_gpu(reference_gpu())))
    half = replace(known, mfu=known.mfu / 2)
    unknown = room(on_gpu(reference_gpu()))
    assert hr.group_phrase([known, half]).startswith(f"ran at 3.0 % of the {H100}'s dense TF32 peak (MFU); ")
    phrase = hr.group_phrase([known, unknown])
    assert phrase.startswith(f"ran at 4.0 % of the {H100}'s dense TF32 peak (MFU), known in 1 of 2 runs; why")
    assert phrase.count("why (from utilization only)") == 1  # the same label said once
    assert hr.group_phrase([None]) == ""


def test_a_shared_board_or_a_mig_slice_gets_no_why_from_the_boards_counters_and_a_slice_no_mfu() -> None:
    run = launch_bound_gpu()
    shared = replace(run, telemetry=run.telemetry.assign(gpu0_util_pct=95.0))  # busy before training too
    h = analyse_run(shared, Prices(), Thresholds()).headroom
    assert h is not None and h.limit == hr.NOT_ATTRIBUTABLE and not h.limit_from_counters
    assert h.mfu is not None  # the FLOPs are the run's own, and the whole board was its device
    system = run.meta["system"]
    gpus = [{**system["gpus"][0], "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb"}]
    sliced = replace(run, meta={**run.meta, "system": {**system, "gpus": gpus}})
    h = analyse_run(sliced, Prices(), Thresholds()).headroom
    assert h is not None and h.mfu is None and h.mfu_reason == hr.MIG_PEAK_UNKNOWN
    assert h.limit == hr.NOT_ATTRIBUTABLE


def test_a_shared_board_whose_run_was_host_bound_says_which_of_the_two_feeds_the_conclusion() -> None:
    """A shared board's counters give no why; the verdict (the board at most 30 % busy, the training's
    thread saturated) is host-bound, and the Decision line says so before its conclusion."""
    run = launch_bound_gpu()
    before = (run.telemetry["time_unix"] < first_train_start(run.phases)).to_numpy()
    telemetry = run.telemetry.assign(
        gpu0_util_pct=np.where(before, 60.0, 30.0), proc_busiest_thread_pct=99.0, proc_cpu_pct=110.0,
        cpu_util_pct=20.0,
    )  # fmt: skip
    report = build_report([reference_cpu(), replace(run, telemetry=telemetry)], ReportSettings())
    (option,) = report.decision.options
    said = "not attributable: the board was not the run's alone; host-bound, so the code feeding the GPU"
    assert said in option.line


def test_an_undetermined_utilization_verdict_says_the_why_is_not_known() -> None:
    h = analyse_run(on_gpu(reference_gpu()), Prices(), Thresholds()).headroom
    assert h is not None
    undetermined = replace(h, limit=f"{hr.FROM_UTILIZATION}: undetermined", limit_from_counters=False)
    assert hr.limit_text(undetermined) == (
        "why not known (from utilization only: no rule matched; profiling counters would tell)"
    )


def test_the_decisions_baseline_line_says_how_far_the_cpu_ran_from_its_peak() -> None:
    cpu = with_system(reference_cpu(), cpu_cores_physical=4, cpu_max_mhz=3000.0,
                      cpu_max_mhz_source="cpufreq cpuinfo_max_freq", cpu_simd=["avx2", "fma"])  # fmt: skip
    baseline = build_report([with_flops(cpu, 1e11), reference_gpu()], ReportSettings()).decision.baseline
    assert baseline.endswith(": 1.000 examples/s; MFU ≥ 26 % (FP32).")
    named = with_system(cpu, cpu_max_mhz_source="model name")  # a base clock: no bound either way
    at_base_clock = build_report([with_flops(named, 1e11)], ReportSettings()).decision.baseline
    assert at_base_clock.endswith("; MFU 26 % (FP32).")
    unknown = build_report([with_flops(reference_cpu(), 1e11)], ReportSettings()).decision.baseline
    assert unknown.endswith(": 1.000 examples/s.")  # not known: the Bottleneck table says why
