"""Is the GPU worth it? The sizing report: pure functions over run directories (docs/sizing.md).

Dash-free and independent of collect/, training/ and dashboard/ (which may import it). `build_report`
turns parsed runs (RunData, from `load_runs` or the dashboard's own readers) into a Report; output.render
writes it as Markdown, HTML or JSON; `python -m sizing` is the command line.
"""

from sizing.analysis.load import load_run_dir, load_runs
from sizing.context import ReportSettings
from sizing.model import Prices, RunData, Section, Table, Thresholds, UsageError
from sizing.report import SECTIONS, Report, build_report, to_json


def report_main(argv: list[str], prog: str = "python -m sizing") -> int:
    """The command line (`python -m sizing`), for front ends that offer it under another name."""
    from sizing.cli import main

    return main(argv, prog=prog)


__all__ = [
    "SECTIONS",
    "Prices",
    "Report",
    "ReportSettings",
    "RunData",
    "Section",
    "Table",
    "Thresholds",
    "UsageError",
    "build_report",
    "load_run_dir",
    "load_runs",
    "report_main",
    "to_json",
]
