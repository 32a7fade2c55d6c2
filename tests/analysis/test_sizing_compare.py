"""Like-for-like: workload and hardware signatures, repeats, units, intervals, the headline's warning."""

from __future__ import annotations

import numpy as np
import pytest
from sizingfixtures import reference_cpu, reference_gpu, renamed, with_info, with_system

from sizing import ReportSettings, build_report, to_json
from sizing.analysis import compare as cmp
from sizing.analysis import signature
from sizing.analysis.run import analyse_run
from sizing.model import Prices, Thresholds


def analyse(run, prices: Prices | None = None):
    return analyse_run(run, prices or Prices(), Thresholds())


def test_workload_signature_fields_and_defaults() -> None:
    info = reference_gpu().training_info
    wl = signature.workload({**info, "precision": "float16", "dataset_info": {"seed": 0}})
    assert wl["framework"] == "tensorflow"  # no `framework` but tensorflow_version: early Model Garden
    unnamed = {k: v for k, v in info.items() if k != "tensorflow_version"}
    assert signature.workload(unnamed)["framework"] is None  # neither: not known, never guessed
    model_garden = {**unnamed, "config": {"task": {"model": {}}}}  # a Model Garden experiment config
    assert signature.workload(model_garden)["framework"] == "tensorflow"
    assert wl["precision"] == "float16"  # the real dtype, not a "mixed" class
    assert signature.workload({**info, "precision": "bfloat16"})["precision"] == "bfloat16"
    assert signature.workload({**info, "precision": "mixed_float16"})["precision"] == "float16"
    on_cpu = signature.workload({**info, "precision": "float16"}, "cpu")["precision"]
    assert on_cpu == "float16 (emulated on a CPU)" != wl["precision"]
    assert signature.workload({**info, "framework": "torch"})["framework"] == "torch"
    assert wl["dataset"].startswith("dataset:")
    assert signature.workload({**info, "dataset_info": {"seed": 1}})["dataset"] != wl["dataset"]


@pytest.mark.parametrize(
    ("spelled", "dtype"),
    [("FP32", "float32"), ("32-true", "float32"), ("tf32", "float32"), ("fp16", "float16"),
     ("16-mixed", "float16"), ("half", "float16"), ("BF16", "bfloat16"), ("bf16-mixed", "bfloat16"),
     ("mixed_bfloat16", "bfloat16"), ("fp8", "fp8")],
)  # fmt: skip
def test_a_dtype_is_one_class_however_a_framework_spells_it(spelled: str, dtype: str) -> None:
    info = reference_gpu().training_info
    assert signature.workload({**info, "precision": spelled})["precision"] == dtype
    plain = signature.workload({**info, "precision": dtype})
    assert signature.differences(plain, signature.workload({**info, "precision": spelled})) == []


def test_a_job_declared_fp32_compares_with_one_declared_float32() -> None:
    """A lab's GPU job declared `--precision FP32`, its CPU run float32: the same work, and the MFU's peak
    is the GPU's TF32 one, not 'no peak for precision fp32'."""
    gpu = with_info(reference_gpu(), precision="FP32")
    data = to_json(build_report([reference_cpu(), gpu], ReportSettings()))
    (comparison,) = data["comparisons"]
    assert comparison["like_for_like"] is True and comparison["differences"] == []
    assert "no peak for precision" not in str(data)


def test_mismatched_workloads_are_compared_but_marked() -> None:
    """The issue's case: a CPU small/batch-2 baseline against a GPU standard/640 px/batch-16 run."""
    gpu = with_info(reference_gpu(), preset="standard", backbone="resnet50", image_size=640, batch_size=16,
                    precision="float16")  # fmt: skip
    report = build_report([reference_cpu(), gpu], ReportSettings())
    data = to_json(report)
    (comparison,) = data["comparisons"]
    assert comparison["like_for_like"] is False
    assert "batch_size 16 vs 2" in comparison["differences"]
    assert "image_size 640 vs 256" in comparison["differences"]
    assert "precision float16 vs float32" in comparison["differences"]
    assert "NOT like-for-like" in report.headline[1] and "preset standard vs small" in report.headline[1]
    assert any("NOT like-for-like" in w for w in report.warnings)
    comparison_table = next(s for s in report.sections if s.key == "comparison").tables[0]
    gpu_row = comparison_table.rows[1]
    assert gpu_row[-2] == "n/a (batch differs)"  # no per-step figures across batch sizes


def test_like_for_like_pair_is_preferred_as_baseline() -> None:
    other_cpu = renamed(with_info(reference_cpu(), preset="standard", image_size=640), "cpu-standard")
    groups = cmp.group_runs([analyse(other_cpu), analyse(reference_cpu()), analyse(reference_gpu())])
    assert cmp.pick_baseline(groups).run_ids == ("ref-cpu",)  # its workload matches the GPU run's
    assert cmp.pick_baseline(groups, "cpu-standard").run_ids == ("cpu-standard",)


def test_repeats_need_the_same_hardware_not_only_the_cpu_model() -> None:
    small_vm = reference_cpu("vm-2")
    big_vm = with_system(reference_cpu("vm-64"), cpu_cores_logical=64)
    again = reference_cpu("vm-2-again")
    groups = cmp.group_runs([analyse(r) for r in (small_vm, big_vm, again)])
    assert [g.run_ids for g in groups] == [("vm-2", "vm-2-again"), ("vm-64",)]


def _slower(run, run_id: str, factor: float):
    training = run.training.copy()
    start = training["time_unix"].iloc[0] - training["elapsed_s"].iloc[0]
    training["elapsed_s"] = training["elapsed_s"] * factor
    training["time_unix"] = start + training["elapsed_s"]
    training["step_time_s"] *= factor
    return renamed(type(run)(**{**run.__dict__, "training": training}), run_id)


def test_repeats_give_mean_sd_and_a_t_interval_for_the_speedup() -> None:
    runs = [
        reference_cpu("c1"), _slower(reference_cpu(), "c2", 1.25),
        reference_gpu("g1"), _slower(reference_gpu(), "g2", 1.1),
    ]  # fmt: skip
    report = build_report(runs, ReportSettings())
    data = to_json(report)
    cpu_rates = np.array([1.0, 1.0 / 1.25])
    gpu_rates = np.array([20.0, 20.0 / 1.1])
    speedup = gpu_rates.mean() / cpu_rates.mean()
    first = data["comparisons"][0]
    assert first["speedup"] == pytest.approx(speedup)
    low, high = first["speedup_ci95"]
    assert low < speedup < high
    a = gpu_rates.std(ddof=1) ** 2 / (2 * gpu_rates.mean() ** 2)
    b = cpu_rates.std(ddof=1) ** 2 / (2 * cpu_rates.mean() ** 2)
    df = (a + b) ** 2 / (a**2 + b**2)  # n − 1 = 1 on both sides
    assert 1 <= df < 2  # → t = 12.706
    assert high == pytest.approx(speedup * np.exp(12.706 * np.sqrt(a + b)), rel=1e-6)
    assert "95 % CI" in report.headline[1]
    assert [c["run_id"] for c in data["comparisons"]] == ["g1", "g2"]
    comparison_table = next(s for s in report.sections if s.key == "comparison").tables[0]
    assert "± " in comparison_table.rows[0][2] and "n=2" in comparison_table.rows[0][2]


@pytest.mark.parametrize("slow_first", [True, False])
def test_the_baseline_is_the_fastest_cpu_of_the_gpus_workload(slow_first: bool) -> None:
    """Two CPUs train the GPU's workload: the speedup is against the faster, whatever the order given."""
    from dataclasses import replace

    from sizingfixtures import CPU_TRAIN_START, training_frame

    slow = with_system(renamed(reference_cpu(), "slow-cpu"), cpu_model="Crafted laptop", cpu_cores_logical=4)
    losses = [4 - 0.1 * k for k in range(1, 31)]
    slow = replace(slow, training=training_frame(CPU_TRAIN_START, [10.0] + [4.0] * 29, losses))  # 0.5 ex/s
    cpus = [slow, reference_cpu()] if slow_first else [reference_cpu(), slow]
    report = build_report([*cpus, reference_gpu()], ReportSettings())
    assert report.context.baseline.run_ids == ("ref-cpu",)
    assert "20.00×" in next(line for line in report.headline if line.startswith("GPU "))
    assert cmp.pick_baseline([g for g in report.context.groups if g.kind == "cpu"]).run_ids == (
        ("ref-cpu",) if not slow_first else ("slow-cpu",)
    )  # with no GPU group to pair with, the first CPU group, as before
