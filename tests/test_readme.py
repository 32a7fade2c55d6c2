"""What the README shows a command printing is what that command prints today (issue 37): the end summary
of a CPU run and the sizing report's Decision block, both from the shipped runs of data/examples."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from collect.options import SessionResult
from collect.timed import build_parser, matching_command, summary_lines

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
EXAMPLES = REPO / "data" / "examples"
CPU_RUN = "20261121T141926Z-cpu-vm"  # the shipped 10-minute CPU run
DECISION_RUNS = ["20261124T111406Z-cpu-vm", "20261124T110829Z-gpu-vm"]


def _block_after(marker: str) -> str:
    """The first ```text block after `marker` in the README."""
    rest = README.split(marker, 1)[1]
    return rest.split("```text\n", 1)[1].split("\n```", 1)[0]


def test_the_readme_is_a_short_guide_with_the_two_commands_on_its_first_screen() -> None:
    lines = README.splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:40])
    assert "./scripts/collect_cpu.sh 10m" in first_screen and "./scripts/test.sh" in first_screen
    assert (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().endswith("./scripts/test.sh")
    assert "python -m sizing" in "\n".join(lines[:90])
    assert not re.search(r"load average", README)  # figures live in docs/measurements.md


@pytest.mark.skipif(not (EXAMPLES / CPU_RUN).is_dir(), reason="the shipped CPU run is missing")
def test_the_end_summary_the_readme_shows_is_the_shipped_runs(tmp_path: Path, monkeypatch) -> None:
    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True)
    shutil.copytree(EXAMPLES / CPU_RUN, runs / CPU_RUN)
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["10m", "--device", "cpu"])
    result = SessionResult(Path("data/runs") / CPU_RUN, 0, "completed", 641)
    printed = summary_lines(result, {}, matching_command(args))
    shown = _block_after("It ends with a summary like this one")
    assert shown.splitlines() == printed


def _report_as_the_readme_runs_it(tmp_path: Path, monkeypatch, run_ids: list[str]) -> str:
    """`python -m sizing RUN RUN --out report.md` in a checkout-like folder whose data/examples are the
    shipped runs; the report's markdown."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "examples").symlink_to(EXAMPLES)
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sizing", *run_ids, "--out", "report.md"],
        capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return (tmp_path / "report.md").read_text(encoding="utf-8")


@pytest.mark.skipif(not all((EXAMPLES / r).is_dir() for r in DECISION_RUNS), reason="shipped runs missing")
def test_the_decision_the_readme_shows_is_what_the_report_prints(tmp_path: Path, monkeypatch) -> None:
    report = _report_as_the_readme_runs_it(tmp_path, monkeypatch, DECISION_RUNS)
    printed = report.split("## Decision\n", 1)[1].split("## Summary", 1)[0].strip()
    assert _block_after("it opens with:").strip() == printed


def test_sizing_the_data_directory_as_the_readme_shows_reads_every_run(tmp_path: Path, monkeypatch) -> None:
    assert ".venv/bin/python -m sizing data --out report.html               # every run under data/" in README
    report = _report_as_the_readme_runs_it(tmp_path, monkeypatch, ["data"])
    shipped = sorted(p.name for p in EXAMPLES.iterdir() if (p / "run.json").is_file())
    assert shipped and [run_id for run_id in shipped if run_id not in report] == []


TUNED_RUNS = ["20261127T090127Z-cpu-vm", "20261127T085638Z-gpu-vm"]  # the H100 --tune sweeps' final runs


@pytest.mark.skipif(not all((EXAMPLES / r).is_dir() for r in TUNED_RUNS), reason="shipped runs missing")
def test_the_tuned_clause_the_readme_shows_is_what_the_report_prints(tmp_path: Path, monkeypatch) -> None:
    decision = _report_as_the_readme_runs_it(tmp_path, monkeypatch, TUNED_RUNS).split("## Summary", 1)[0]
    (gpu_line,) = [line for line in decision.splitlines() if line.startswith("- NVIDIA H100")]
    shown = _block_after("the GPU's line\nends with:").strip()
    assert gpu_line.endswith("; " + shown)


def test_every_link_in_the_readme_resolves() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target


def test_a_dashboard_port_in_use_is_refused_with_one_line_as_troubleshooting_says(tmp_path: Path) -> None:
    assert "or a dashboard port in use. Nothing was\n  started." in README
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(REPO / "scripts" / "dashboard.sh"), "--data-dir", str(tmp_path), "--port", str(port)],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"python -m dashboard: error: cannot serve on 127.0.0.1:{port}: Address already in use"
    )
    assert "Serving Flask app" not in done.stderr + done.stdout
