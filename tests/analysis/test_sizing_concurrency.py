"""Runs measured at the same time on one machine (sizing.analysis.concurrency): each ran beside the
other's load, and the Decision says so; runs one after the other, or on two machines, are not flagged."""

from __future__ import annotations

from dataclasses import replace

from sizingfixtures import reference_cpu, reference_gpu, renamed, with_info, with_system

from sizing import ReportSettings, build_report
from sizing.analysis import concurrency


def decision_of(*runs):
    report = build_report(list(runs), ReportSettings())
    return report.decision, report.warnings


def twin(run_id: str, **system: object):
    """A second GPU run over the same seconds as reference_gpu, in another precision (its own option)."""
    return with_info(with_system(renamed(reference_gpu(), run_id), **system), precision="bfloat16")


def test_two_runs_of_one_boot_at_the_same_time_invalidate_the_decision() -> None:
    decision, warnings = decision_of(
        reference_cpu(), with_system(reference_gpu(), boot_id_hash="b1"), twin("beside", boot_id_hash="b1")
    )
    said = [c for c in decision.caveats if "measured at the same time" in c]
    assert said == [
        "ref-gpu and beside were measured at the same time on one machine (one boot; 18 s, 100% of the "
        "shorter measurement): each ran beside the other's load."
    ]
    assert decision.caveats[0] == said[0]  # the weightiest: it invalidates both runs' figures
    assert any(w.startswith("ref-gpu and beside were measured at the same time") for w in warnings)


def test_one_host_name_without_a_boot_is_only_unsure() -> None:
    decision, _ = decision_of(reference_cpu(), reference_gpu(), twin("beside"))
    (said,) = [c for c in decision.caveats if "measured at the same time" in c]
    assert "on hosts of one name (no boot recorded;" in said and "if one machine, each ran" in said


def test_two_machines_or_two_times_are_not_flagged() -> None:
    apart = decision_of(reference_cpu(), with_system(reference_gpu(), boot_id_hash="b1"),
                        twin("elsewhere", boot_id_hash="b2"))[0]  # fmt: skip
    assert not any("same time" in c for c in apart.caveats)
    other = twin("other")
    other_host = replace(other, meta={**other.meta, "host": "otherbox"})
    elsewhere = decision_of(reference_cpu(), reference_gpu(), other_host)[0]
    assert not any("same time" in c for c in elsewhere.caveats)
    two_instances = decision_of(reference_cpu(), with_system(reference_gpu(), instance_id_hash="i1"),
                                twin("clone", instance_id_hash="i2"))[0]  # fmt: skip
    assert not any("same time" in c for c in two_instances.caveats)  # one image, two VMs: no boot to tell
    one_boot_in_turn = decision_of(
        with_system(reference_cpu(), boot_id_hash="b1"), with_system(reference_gpu(), boot_id_hash="b1")
    )[0]  # the CPU run trained 10,000 s before the GPU run
    assert not any("same time" in c for c in one_boot_in_turn.caveats)


def test_an_overlap_is_measured_on_the_windows_the_verdicts_read() -> None:
    report = build_report([reference_gpu(), twin("beside")], ReportSettings())
    (overlap,) = concurrency.overlaps(report.context.analyses)
    first, second = (a.measured_window for a in report.context.analyses)
    assert first == second and overlap.seconds == first[1] - first[0] and overlap.share == 1.0
    assert not overlap.same_boot


def test_a_copied_run_directory_is_one_measurement_counted_once() -> None:
    copy = renamed(reference_gpu(), "copied")
    report = build_report([reference_cpu(), reference_gpu(), copy], ReportSettings())
    assert [a.run_id for a in report.context.analyses] == ["ref-cpu", "ref-gpu"]
    assert not any("same time" in c or "repeat" in c.lower() for c in report.decision.caveats[:1])
    assert not concurrency.overlaps(report.context.analyses)
    assert (
        "copied holds the same measurement as ref-gpu (telemetry.csv, training.csv and training.json "
        "identical: a copied run directory): counted once, as ref-gpu"
    ) in report.warnings
    as_baseline = build_report([reference_gpu(), copy], ReportSettings(baseline="copied"))
    assert [a.run_id for a in as_baseline.context.analyses] == ["copied"]
    assert "ref-gpu holds the same measurement as copied" in as_baseline.warnings[0]
    twin_run = twin("beside")  # the same samples under another training record is no copy
    assert len(build_report([reference_gpu(), twin_run], ReportSettings()).context.analyses) == 2
