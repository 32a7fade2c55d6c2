"""The end-of-run summary of `collect timed`: what the run directory's files say, and the peaks seen."""

from __future__ import annotations

from collect.session import SessionResult
from runformat import read_run
from runformat.records import InferenceRecord


def summary_lines(result: SessionResult, peaks: dict[str, float], matching: str | None = None) -> list[str]:
    """The end-of-run summary, from the run directory's files and the peaks seen while sampling."""
    run_dir = result.run_dir
    head = f"Run {run_dir.name}: {result.end_reason} (exit code {result.exit_code}), {result.samples} samples"
    lines = [head]
    files = read_run(run_dir)
    training, nodes = files.training, (files.run and files.run.nodes) or {}
    if nodes.get("node_rank"):
        lines.append(
            f"  training: node {nodes['node_rank']} of {nodes.get('nnodes')}; the step log, training.json "
            f"and checkpoints are in the run of node 0 ({nodes.get('step_log')})"
        )
    if training is not None and files.progress is not None:
        steady, progress = training.steady_steps_per_s, files.progress
        lines.append(
            f"  training: {progress.steps or 0} steps ({progress.status})"
            + (f", steady {steady:.2f} steps/s" if steady is not None else "")
            + (f", first step {training.first_step_s:.1f} s" if training.first_step_s else "")
            + f", device {training.device_used or '?'}"
        )
        if progress.note:
            lines.append(f"  note: {progress.note}")
        diverged = progress.loss_not_finite_from_step
        if diverged is not None:
            lines.append(
                f"  warning: the loss was not finite (nan or inf) from step {diverged} to the end: the "
                "training diverged, and the report leaves this run out"
            )
    evaluation = files.evaluation
    if evaluation:
        lines.append(
            f"  accuracy: mAP@0.5 {evaluation.get('map_50', float('nan')):.3f}, "
            f"recall {evaluation.get('recall_50', float('nan')):.3f} "
            f"on {evaluation.get('num_images', '?')} held-out images"
        )
    if files.inference is not None and files.inference.runtimes:
        lines.append("  inference: " + _inference_text(files.inference))
    lines.append("  peaks: " + _peaks_text(peaks))
    lines.append(f"  run directory: {run_dir}")
    lines.append("  compare runs: ./scripts/dashboard.sh, then open http://127.0.0.1:8050")
    if matching:
        lines.append(f"  the same workload on the other device: {matching}")
    return lines


def _inference_text(inference: InferenceRecord) -> str:
    """Best images/s of each runtime (and at which batch size), or why a runtime could not run."""
    parts = []
    for runtime in inference.runtimes or ():
        if cells := runtime.measured:
            best = max(cells, key=lambda c: c.images_per_s or 0.0)
            parts.append(f"{runtime.runtime} {best.images_per_s:.1f} images/s (batch {best.batch_size})")
        else:
            parts.append(f"{runtime.runtime} n/a")
    return ", ".join(parts)


def _peaks_text(peaks: dict[str, float]) -> str:
    parts = []
    if "cpu_temp_c" in peaks:
        parts.append(f"CPU {peaks['cpu_temp_c']:.0f} °C")
    else:
        parts.append("CPU temperature n/a (no sensor)")
    for name in sorted(peaks):
        if name.startswith("gpu"):
            unit = "°C" if name.endswith("_temp_c") else "W"
            parts.append(f"{name.split('_')[0].upper()} {peaks[name]:.0f} {unit}")
    return ", ".join(parts)
