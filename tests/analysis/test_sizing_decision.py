"""The Decision block (issue 35): one short line per GPU option, at most three caveats by weight, and a
speedup interval that never vanishes when repeats disagree (sections.decision, analysis.speedup)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sizingfixtures import (
    GPU_TRAIN_START,
    reference_cpu,
    reference_gpu,
    renamed,
    training_frame,
    with_info,
    with_system,
)

from sizing import Prices, ReportSettings, build_report, to_json
from sizing.analysis import speedup as sp
from sizing.analysis.run import RunAnalysis, analyse_run
from sizing.cli import main as sizing_main
from sizing.model import RunData, Thresholds
from sizing.output.render import render_markdown
from sizing.sections import decision as dc
from sizing.sections import decision_caveats as dcv

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
H100_RUNS = ["20261124T111406Z-cpu-vm", "20261124T110829Z-gpu-vm", "20261124T113233Z-gpu-vm",
             "20261124T112303Z-gpu-vm"]  # fmt: skip


def gpu_at(run_id: str, step_s: float) -> RunData:
    """reference_gpu with its 199 steady steps `step_s` long (0.1 s: 20 examples/s)."""
    run = renamed(reference_gpu(), run_id)
    losses = [4 - 0.02 * k for k in range(1, 201)]
    return replace(run, training=training_frame(GPU_TRAIN_START, [20.0] + [step_s] * 199, losses))


def analysis(rate: float, ci: tuple[float, float] | None, run_id: str = "r") -> RunAnalysis:
    """An analysed run with examples/s `rate` and a within-run interval of examples/s `ci` (batch 2)."""
    base = analyse_run(reference_gpu(run_id), Prices(), Thresholds())
    steps_ci = (ci[0] / 2, ci[1] / 2) if ci else None
    throughput = replace(
        base.throughput, examples_per_s=rate, steps_per_s=rate / 2, steps_per_s_ci95=steps_ci
    )
    return replace(base, run_id=run_id, throughput=throughput)


def test_repeats_on_one_side_give_the_ratios_range_widened_by_the_single_runs_interval() -> None:
    gpus = [analysis(20.0, (19.0, 21.0), "g1"), analysis(27.0, (26.0, 28.0), "g2")]
    (cpu,) = [analysis(1.0, (0.9, 1.1), "c")]
    found = sp.speedup_interval(gpus, [cpu])
    assert found is not None and found.basis == sp.ONE_SIDE
    assert found.low == pytest.approx(20.0 / 1.1) and found.high == pytest.approx(27.0 / 0.9)
    assert sp.SPREAD_NOT_MEASURED in found.text
    reverse = sp.speedup_interval([cpu], gpus)  # the baseline repeated, the other side single
    assert reverse is not None and reverse.low == pytest.approx(0.9 / 27.0)
    assert reverse.high == pytest.approx(1.1 / 20.0)


def test_one_run_a_side_always_says_the_run_to_run_spread_is_not_measured() -> None:
    gpu, cpu = analyse_run(reference_gpu(), Prices(), Thresholds()), analyse_run(reference_cpu(), Prices(),
                                                                                 Thresholds())  # fmt: skip
    found = sp.speedup_interval([gpu], [cpu])
    assert found is not None and found.basis == sp.WITHIN_RUN
    assert found.text.endswith("from batch means; run-to-run spread not measured")


def test_repeats_on_both_sides_get_a_t_interval() -> None:
    gpus = [analysis(20.0, None, "g1"), analysis(22.0, None, "g2")]
    cpus = [analysis(1.0, None, "c1"), analysis(1.1, None, "c2")]
    found = sp.speedup_interval(gpus, cpus)
    assert found is not None and found.basis == sp.REPEATS and found.low < 21.0 / 1.05 < found.high


@pytest.mark.parametrize(("second_low", "disagree"), [(21.0, False), (21.01, True)])
def test_repeats_disagree_where_their_intervals_do_not_overlap(second_low: float, disagree: bool) -> None:
    runs = [analysis(20.0, (19.0, 21.0), "a"), analysis(22.0, (second_low, 23.0), "b")]
    found = sp.repeats_disagree(runs)
    assert bool(found) is disagree
    if disagree:
        assert found.startswith(
            "repeats disagree: not the same conditions (b 21.0–23.0 examples/s, a 19.0–21.0"
        )


@pytest.mark.parametrize(("fastest", "disagree"), [(22.0, False), (22.001, True)])
def test_repeats_without_intervals_disagree_beyond_ten_percent(fastest: float, disagree: bool) -> None:
    runs = [analysis(20.0, None, "a"), analysis(fastest, (fastest - 1, fastest + 1), "b")]
    assert bool(sp.repeats_disagree(runs)) is disagree
    assert sp.repeats_disagree(runs[:1]) == ""  # one run: nothing to disagree with


def test_two_gpu_runs_that_differ_by_35_percent_keep_an_interval_and_say_they_disagree() -> None:
    runs = [reference_cpu(), gpu_at("gpu-a", 0.1), gpu_at("gpu-b", 0.1 / 1.35)]
    report = build_report(runs, ReportSettings())
    (option,) = report.decision.options
    assert option.interval is not None and option.interval.basis == sp.ONE_SIDE
    assert option.interval.high / option.interval.low > 1.3
    assert "range" in option.line
    workload = "tensorflow/small/resnet18/256px/batch 2/float32"
    assert report.decision.caveats[0].startswith(f"GPU Crafted H100 · {workload}: repeats disagree")
    gpu_line = next(line for line in report.headline if line.startswith("GPU "))
    assert "repeats disagree" in gpu_line and "(range " in gpu_line  # never a bare figure
    comparison = to_json(report)["comparisons"][0]
    assert comparison["speedup_interval"]["basis"] == "repeats on one side"
    assert comparison["repeats_disagree"] and comparison["repeats_disagree"][0].startswith("repeats disagree")


def test_the_decision_opens_the_report_before_any_table() -> None:
    prices = Prices(gpu_price=2000.0, cpu_price=1000.0, value_per_hour=10.0)
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings(prices))
    markdown = render_markdown(report)
    assert markdown.index("## Decision") < markdown.index("## Summary") < markdown.index("| ")
    (option,) = report.decision.options
    assert option.line.startswith("Crafted H100: 20.0× faster (within-run ")
    assert "pays back after 10.5 GPU hours (3-year life at 100% use)" in option.line
    assert "17,500 J and $0.0023 (energy + hardware) per 1,000 examples" in option.line
    assert not option.usd_is_energy_only
    assert report.decision.baseline.startswith("Against Crafted Xeon 8-core, 8 logical CPUs (CPU) training ")
    data = to_json(report)["decision"]
    assert data["options"][0]["break_even_hours"] == pytest.approx(option.break_even_hours)
    assert data["caveats"] == list(report.decision.caveats)


def test_energy_only_money_says_so_in_the_decision() -> None:
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings())
    (option,) = report.decision.options
    assert "$0.00073 (energy only)" in option.line and option.usd_is_energy_only
    assert "break-even: needs --gpu-price" in option.line
    assert report.decision.caveats[-1].startswith("No break-even without prices")


def test_no_gpu_run_says_what_to_add() -> None:
    report = build_report([reference_cpu()], ReportSettings())
    assert report.decision.options == ()
    assert report.decision.lines_without_option == (
        "No GPU run to compare with the baseline: add one of the same workload (./scripts/collect_gpu.sh).",
    )


def test_a_job_with_no_gpu_run_is_told_to_record_the_same_command() -> None:
    job = with_info(reference_cpu(), workload={"name": "python train.py", "command": "python train.py"})
    assert build_report([job], ReportSettings()).decision.lines_without_option == (
        "No GPU run to compare with the baseline: add one of the same workload "
        "(./scripts/collect_gpu.sh with the same command after --).",
    )


def _steps_only_job(run: RunData, run_id: str, slower: float = 1.0) -> RunData:
    """`run` as a lab's job that declares no batch and logs no examples, its steps `slower` times longer."""
    run = renamed(run, run_id)
    rows = run.training.drop(columns=["examples_per_s"])
    first = rows["time_unix"].iloc[0]
    stretched = {name: rows[name] * slower for name in ("elapsed_s", "step_time_s")}
    rows = rows.assign(time_unix=first + (rows["time_unix"] - first) * slower, **stretched)
    kept = ("format_version", "status", "device_requested", "device_used", "gpu_names", "gpu_uuids",
            "start_unix", "steps", "initial_step", "global_step", "duration_budget_s",
            "warmup_steps_excluded")  # fmt: skip
    info = {k: v for k, v in run.training_info.items() if k in kept}
    return replace(run, training=rows, training_info={**info, "workload": {"name": "python train.py"}})


def test_the_baseline_of_jobs_counting_steps_only_is_the_fastest_cpu() -> None:
    """Two CPUs ran the job (steps/s only, no examples): the speedup is against the faster, as with examples;
    the first given, half as fast, would double the GPU's speedup."""
    slow = with_system(reference_cpu(), cpu_model="Small VM CPU", cpu_cores_logical=2)
    runs = [_steps_only_job(slow, "cpu-slow", 2.0), _steps_only_job(reference_cpu(), "cpu-fast"),
            _steps_only_job(reference_gpu(), "gpu")]  # fmt: skip
    report = build_report(runs, ReportSettings())
    decision = report.decision
    assert "(0.500 steps/s, examples per step not known (--batch gives them); " in report.headline[0]
    assert "unknown (examples per step not known)" in render_markdown(report)  # the tables' examples/s
    assert not any("no work counter" in line for line in report.headline)  # steps were counted
    assert decision.baseline.startswith("Against Crafted Xeon 8-core, 8 logical CPUs (CPU) training python")
    assert "0.500 steps/s, examples per step not known (--batch gives them)." in decision.baseline
    (option,) = decision.options
    assert option.line.startswith("Crafted H100: 20.0× faster in steps/s")


def test_repeats_of_a_job_counting_steps_only_are_bounded_and_checked_in_steps() -> None:
    """Two runs of the job on one CPU, one twice as slow: the speedup gets its range over them and the
    baseline's repeats are said to disagree, in steps/s; before, both needed examples/s ("One run a side")."""
    runs = [_steps_only_job(reference_cpu(), "cpu-slow", 2.0), _steps_only_job(reference_cpu(), "cpu-fast"),
            _steps_only_job(reference_gpu(), "gpu")]  # fmt: skip
    decision = build_report(runs, ReportSettings()).decision
    (option,) = decision.options
    assert "faster in steps/s (examples per step not known; range 20.0–40.0× over repeats of one side)" in (
        option.line
    )
    assert any(c.startswith("The baseline's repeats disagree") and "steps/s" in c for c in decision.caveats)


def test_a_speedup_unknown_for_want_of_examples_per_step_says_how_to_get_it() -> None:
    """The job's CPU run was recorded with --batch, its GPU run without: examples/s on one side only."""
    cpu = _steps_only_job(reference_cpu(), "cpu")
    cpu = replace(cpu, training_info={**cpu.training_info, "batch_size": 2})
    gpu = _steps_only_job(reference_gpu(), "gpu")
    (option,) = build_report([cpu, gpu], ReportSettings()).decision.options
    assert "speedup unknown (its examples per step not known: record it with --batch); " in option.line


def test_no_cpu_run_says_so_and_never_asks_for_a_gpu_run() -> None:
    """Only GPU runs: the baseline is a GPU, and 'add a GPU run' would be wrong."""
    alone = build_report([reference_gpu()], ReportSettings()).decision
    assert alone.options == () and alone.lines_without_option == (
        "No CPU run to compare the GPU with: add one of the same workload (./scripts/collect_cpu.sh).",
    )
    failed_cpu = replace(reference_cpu(), training_info={**reference_cpu().training_info, "status": "failed"})
    left_out = build_report([failed_cpu, reference_gpu()], ReportSettings()).decision
    assert left_out.lines_without_option[0].startswith(
        "No CPU run to compare the GPU with: every CPU run was left out as incomplete"
    )
    bf16 = with_info(gpu_at("bf16-gpu", 0.05), precision="bfloat16")
    two_gpus = build_report([reference_gpu(), bf16], ReportSettings()).decision
    assert len(two_gpus.options) == 1
    said = "No CPU run to compare the GPU with: the lines compare GPUs with a GPU, not with CPUs."
    assert said in two_gpus.caveats
    with_cpu = build_report([reference_cpu(), reference_gpu()], ReportSettings()).decision
    assert not any("No CPU run" in c for c in (*with_cpu.caveats, *with_cpu.lines_without_option))


@pytest.mark.skipif(not (EXAMPLES / "20261127T031121Z-gpu-vm").is_dir(), reason="no shipped H100 run")
def test_a_gpu_baseline_says_what_held_it(tmp_path: Path) -> None:
    """A lone GPU run (or a GPU named --baseline) is the baseline: its line says how far it ran from the
    peak and why, as a GPU option's would, where a CPU baseline's gives its MFU alone."""
    out = tmp_path / "report.json"
    run = "20261127T031121Z-gpu-vm"
    assert sizing_main(["--data-dir", str(EXAMPLES.parent), run, "--out", str(out)]) == 0
    baseline = json.loads(out.read_text())["decision"]["baseline"]
    assert baseline.endswith(
        "; MFU 0.24 % (TF32): waiting on the host, so the code feeding the GPU, not the GPU, sets this rate."
    ), baseline


def test_caveats_are_at_most_three_the_weightiest_first() -> None:
    shared = reference_gpu("shared-gpu")
    telemetry = shared.telemetry.copy()
    telemetry["gpu0_util_pct"] = np.where(np.arange(len(telemetry)) < 5, 60.0, 95.0)  # busy before training
    runs = [reference_cpu(), replace(shared, telemetry=telemetry)]
    report = build_report(runs, ReportSettings())
    weighted = dcv.caveats(report.context, [c for c in report.context.comparisons if not c.is_baseline])
    weights = [w for w, _ in weighted]
    assert weights == sorted(weights) and len(weights) == 4
    assert report.decision.caveats[0] == "shared-gpu: GPU utilization not attributable: the GPU was shared."
    assert len(report.decision.caveats) == dc.MAX_CAVEATS
    assert report.decision.caveats_not_shown == len(weighted) - dc.MAX_CAVEATS == 1


def test_a_gpu_whose_clocks_heat_pulled_down_says_so() -> None:
    """reference_gpu: SW thermal in 5 of its 41 training samples (12 % ≥ 5 %); without them, nothing."""
    said = build_report([reference_cpu(), reference_gpu()], ReportSettings()).decision.caveats
    assert (
        "GPU Crafted H100 · tensorflow/small/resnet18/256px/batch 2/float32: the GPU's clocks were pulled "
        "down (ref-gpu gpu0 thermal (SW) in 12% of samples): the speedup is below what the board gives "
        "cooled and healthy."
    ) in said
    cool = reference_gpu()
    idle_only = np.where(np.arange(len(cool.telemetry)) < 5, 1, 0)
    telemetry = cool.telemetry.assign(gpu0_throttle_reasons=idle_only)
    calm = build_report([reference_cpu(), replace(cool, telemetry=telemetry)], ReportSettings()).decision
    assert not any("pulled down" in c for c in calm.caveats)


@pytest.mark.parametrize(("mfu", "says"), [(0.0999, True), (0.10, False)])
def test_far_below_the_peak_with_the_gpu_waiting_says_the_code_sets_the_speedup(
    mfu: float, says: bool
) -> None:
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings())
    comparison = next(c for c in report.context.comparisons if not c.is_baseline)
    (a,) = comparison.group.analyses
    from sizing.analysis.headroom import HOST_WAIT, Headroom

    room = Headroom("gpu", mfu, 1.0, 1.0, "tf32", "", "Crafted H100", 1, "", False, None, None, HOST_WAIT,
                    True, "evidence")  # fmt: skip
    group = replace(comparison.group, analyses=(replace(a, headroom=room),))
    option = dc.option(replace(comparison, group=group), report.context)
    assert ("not the GPU, sets this speedup" in option.line) is says
    assert f"MFU {mfu * 100:.2g} % (TF32): waiting on the host" in option.line


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in H100_RUNS), reason="the H100 runs are not shipped"
)
def test_the_shipped_h100_report_opens_with_a_short_decision(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    assert sizing_main([*H100_RUNS, "--data-dir", str(EXAMPLES.parent), "--out", str(out)]) == 0
    decision = out.read_text(encoding="utf-8").split("## Decision")[1].split("## Summary")[0]
    options = [line for line in decision.splitlines() if line.startswith("- ")]
    assert len(options) == 3 and all(len(line) < 420 for line in options)
    assert options[0].startswith(
        "- NVIDIA H100 80GB HBM3: 9.0× faster (within-run 8.5–9.7×; run-to-run spread"
    )
    assert "MFU 0.32 % (TF32)" in options[0] and "not the GPU, sets this speedup" in options[0]
    assert "NOT like-for-like: batch_size 32 vs 2" in options[1]
    caveats = [line for line in decision.splitlines() if line[:3] in ("1. ", "2. ", "3. ")]
    assert 1 <= len(caveats) <= 3 and "4. " not in decision


@pytest.mark.skipif(
    not all((EXAMPLES / r).is_dir() for r in H100_RUNS), reason="the H100 runs are not shipped"
)
def test_the_after_block_in_docs_sizing_is_what_the_report_prints(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    assert sizing_main([*H100_RUNS, "--data-dir", str(EXAMPLES.parent), "--out", str(out)]) == 0
    printed = out.read_text(encoding="utf-8").split("## Decision")[1].split("## Summary")[0].strip()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sizing.md").read_text(encoding="utf-8")
    after = doc.split("After, the same runs open with:")[1].split("```text\n")[1].split("\n```")[0].strip()
    assert after == printed


def test_a_gpu_run_without_host_columns_says_the_host_was_not_recorded() -> None:
    gpu = reference_gpu()
    host = [c for c in gpu.telemetry.columns if c.startswith(("cpu", "disk", "proc_"))]
    report = build_report([reference_cpu(), replace(gpu, telemetry=gpu.telemetry.drop(columns=host))],
                          ReportSettings())  # fmt: skip
    weighted = dcv.caveats(report.context, [c for c in report.context.comparisons if not c.is_baseline])
    said = "The host was not recorded (ref-gpu): what the GPU waited on is not known."
    assert (dcv.UNSURE, said) in weighted


def test_only_failed_gpu_runs_say_so_instead_of_asking_for_one() -> None:
    gpu = reference_gpu()
    failed = replace(gpu, training_info={**gpu.training_info, "status": "failed"})
    report = build_report([reference_cpu(), failed], ReportSettings())
    assert report.decision.options == ()
    (line,) = report.decision.lines_without_option
    assert line.startswith("No complete GPU run: every GPU run was left out")
    assert report.decision.caveats[0] == "Left out as incomplete: ref-gpu (training failed)."


def test_a_cpu_run_of_an_options_workload_elsewhere_in_the_report_is_named_as_its_baseline() -> None:
    """A whole data directory: the baseline is the small CPU run, and a standard GPU run is measured
    against it, not like for like, while a standard CPU run is in the report too: the Decision names it
    and the --baseline that compares them. With that baseline the small pair is named the same way."""
    from sizingfixtures import with_info

    standard = {"preset": "standard", "backbone": "resnet50", "image_size": 640}
    cpu_std = with_info(renamed(reference_cpu(), "cpu-std"), **standard)
    gpu_std = with_info(renamed(reference_gpu(), "gpu-std"), **standard)
    runs = [reference_cpu(), reference_gpu(), cpu_std, gpu_std]
    said = (
        "cpu-std (tensorflow/standard/resnet50/640px/batch 2/float32) trains the workload of a GPU option "
        "here: its line gives the like-for-like speedup; --baseline cpu-std compares them in full."
    )
    report = build_report(runs, ReportSettings())
    assert said in report.decision.caveats
    other = build_report(runs, ReportSettings(baseline="cpu-std")).decision.caveats
    assert any(c.startswith("ref-cpu (tensorflow/small/") for c in other)
    alone = build_report([reference_cpu(), reference_gpu(), gpu_std], ReportSettings()).decision.caveats
    assert not any("trains the workload of" in c for c in alone)


def test_an_option_not_like_for_like_gives_its_speedup_against_its_own_workloads_cpu_run() -> None:
    """Before: "NOT like-for-like: preset standard vs small …: 4.8× faster" and a caveat naming the
    --baseline to give, while the report held the standard CPU run that made it 66× like for like."""
    from sizingfixtures import with_info

    standard = {"preset": "standard", "backbone": "resnet50", "image_size": 640}
    cpu_std = with_info(renamed(reference_cpu(), "cpu-std"), **standard)
    gpu_std = with_info(renamed(reference_gpu(), "gpu-std"), **standard)
    report = build_report([reference_cpu(), reference_gpu(), cpu_std, gpu_std], ReportSettings())
    by_group = {o.group: o for o in report.decision.options}
    plain, std = by_group[("ref-gpu",)], by_group[("gpu-std",)]
    assert plain.own_baseline is None and "like for like, against" not in plain.line
    assert std.own_baseline is not None and std.own_baseline.baseline.run_ids == ("cpu-std",)
    assert std.own_baseline.speedup == pytest.approx(plain.speedup)  # the same pair of runs, renamed
    assert f"(CPU, cpu-std) training its workload: {plain.speedup:.1f}× faster" in std.line
    option = next(o for o in dc.decision_json(report.decision)["options"] if o["group"] == ["gpu-std"])
    assert option["like_for_like"]["baseline_runs"] == ["cpu-std"]
    assert option["like_for_like"]["speedup"] == pytest.approx(plain.speedup)
    (summary,) = [line for line in report.headline if "standard/resnet50" in line and line.startswith("GPU")]
    assert f"like for like, {plain.speedup:.2f}× the examples/s of cpu-std, its workload's CPU run" in summary


@pytest.mark.parametrize(("util", "idle"), [(1.0, False), (np.nextafter(1.0, 0.0), True)])
def test_a_gpu_that_did_no_work_marks_its_option_and_invalidates_it(util: float, idle: bool) -> None:
    """A job whose code never moved to the GPU: its rate is the host's (validity.IDLE_GPU_UTIL_PCT)."""
    from sizing.analysis import validity

    assert validity.IDLE_GPU_UTIL_PCT == 1.0
    gpu = reference_gpu()
    before = np.arange(len(gpu.telemetry)) < 5
    telemetry = gpu.telemetry.assign(gpu0_util_pct=np.where(before, 0.0, util))
    decision = build_report([reference_cpu(), replace(gpu, telemetry=telemetry)], ReportSettings()).decision
    (option,) = decision.options
    assert ("(its GPU did no work)" in option.name) is idle
    assert option.line.endswith(": its GPU did no work.") is idle  # not its utilization verdict
    said = [c for c in decision.caveats if "its GPU did no work" in c]
    assert bool(said) is idle
    if idle:
        assert said[0] == decision.caveats[0] and "the rate is its host's, not a GPU's" in said[0]


def test_an_idle_named_gpu_beside_a_busy_unnamed_one_says_the_record_may_be_wrong() -> None:
    """training.json names gpu0, idle, while gpu1 was busy: either another job used gpu1 (the rate is the
    host's) or the record names the wrong GPU; the caveat must not claim the first alone."""
    from energyfixtures import multi_gpu

    run = multi_gpu("named-idle", [0.0, 95.0], [60.0, 300.0], ["GPU-0"])
    decision = build_report([reference_cpu(), run], ReportSettings()).decision
    (said,) = [c for c in decision.caveats if "its GPU did no work" in c]
    assert said.endswith(
        "the rate is its host's, not a GPU's, unless it trained on the busy GPU its record does not name "
        "(gpu1 95 %): then training.json's gpu_uuids are wrong."
    )


def test_the_caveat_names_the_side_whose_spread_is_not_measured() -> None:
    """Repeats on one side only: 'One run a side' would say the repeated side was run once too."""

    def every_caveat(runs: list[RunData]) -> list[str]:
        ctx = build_report(runs, ReportSettings()).context
        return [text for _, text in dcv.caveats(ctx, dcv.gpu_options(ctx))]

    gpus = [gpu_at("gpu-a", 0.1), gpu_at("gpu-b", 0.101)]
    caveats = every_caveat([reference_cpu(), *gpus])
    assert "One run of the baseline: its run-to-run spread not measured; repeat it to bound it." in caveats
    assert not any(c.startswith("One run a side") for c in caveats)
    cpus = [renamed(reference_cpu(), "cpu-a"), _slower(renamed(reference_cpu(), "cpu-b"))]
    report = build_report([*cpus, reference_gpu()], ReportSettings())
    name = next(g.name for g in report.context.groups if g.kind == "gpu")
    once = f"One run of {name}: its run-to-run spread not measured; repeat it to bound it."
    assert once in every_caveat([*cpus, reference_gpu()])
    alone = every_caveat([reference_cpu(), reference_gpu()])
    assert "One run a side: run-to-run spread not measured; repeat the runs to bound it." in alone


def _slower(run: RunData) -> RunData:
    """The run with each step 1 % longer: a repeat, not a copy of the same measurement."""
    frame = run.training.copy()
    start = frame["time_unix"].iloc[0]
    frame["time_unix"] = start + (frame["time_unix"] - start) * 1.01
    return replace(run, training=frame)


def test_a_workload_only_not_known_to_match_is_not_said_to_differ() -> None:
    """No batch size on record (nor step times its step log's batch would come from): the runs may train the
    same work, so the caveat must not say they do not."""
    unknown = {k: v for k, v in reference_gpu().training_info.items() if k != "batch_size"}
    gpu = replace(reference_gpu(), training_info=unknown)
    gpu = replace(gpu, training=gpu.training.drop(columns=["step_time_s"]))
    caveats = build_report([reference_cpu(), gpu], ReportSettings()).decision.caveats
    assert (
        "No GPU run is known to train the baseline's workload (batch_size not recorded): no speedup is known "
        "to compare the same work." in caveats
    )
    differs = with_info(reference_gpu(), batch_size=8)
    caveats = build_report([reference_cpu(), differs], ReportSettings()).decision.caveats
    assert "No GPU run trains the baseline's workload: no speedup compares the same work." in caveats


def test_the_caveat_names_the_cpu_run_the_option_line_is_compared_with() -> None:
    """Two CPU runs of the standard workload on two hosts: the line compares with the faster; the caveat
    named the first found (the slower) with its --baseline before, two answers to one question. (The small
    CPU run is the fastest, so the small pair's baseline wins the tie of one pair each.)"""
    from sizingfixtures import CPU_TRAIN_START, training_frame, with_info, with_system

    def stepping(run, seconds: float):
        losses = [4 - 0.1 * k for k in range(1, 31)]
        return replace(run, training=training_frame(CPU_TRAIN_START, [10.0] + [seconds] * 29, losses))

    standard = {"preset": "standard", "backbone": "resnet50", "image_size": 640}
    small = stepping(reference_cpu(), 0.5)
    slow = with_info(renamed(reference_cpu(), "cpu-std-slow"), **standard)
    fast = stepping(
        with_system(with_info(renamed(reference_cpu(), "cpu-std-fast"), **standard), cpu_model="Fast"), 1.0
    )
    gpu_std = with_info(renamed(reference_gpu(), "gpu-std"), **standard)
    report = build_report([small, reference_gpu(), slow, fast, gpu_std], ReportSettings())
    assert report.context.baseline.run_ids == ("ref-cpu",)
    std = next(o for o in report.decision.options if o.group == ("gpu-std",))
    assert std.own_baseline is not None and std.own_baseline.baseline.run_ids == ("cpu-std-fast",)
    assert any(c.startswith("cpu-std-fast (") and "its line gives the like-for-like speedup" in c
               for c in report.decision.caveats)  # fmt: skip
    assert not any(c.startswith("cpu-std-slow (") for c in report.decision.caveats)
