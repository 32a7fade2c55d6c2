"""What every report section gets: the settings, the runs, their analyses and the comparisons.

A section is a function `section(ctx: ReportContext) -> Section` (sizing.model.Section: a dict for the
JSON output and tables for Markdown and HTML); sizing.report.SECTIONS lists them in report order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sizing.analysis.compare import Comparison, Group
from sizing.analysis.run import RunAnalysis
from sizing.analysis.tuning import TunedPair
from sizing.model import Prices, RunData, Thresholds

DEFAULT_TARGET_STEPS = 1000


@dataclass(frozen=True)
class ReportSettings:
    prices: Prices = field(default_factory=Prices)
    thresholds: Thresholds = field(default_factory=Thresholds)
    target_steps: int = DEFAULT_TARGET_STEPS
    target_loss: float | None = None
    baseline: str | None = None
    include_incomplete: bool = False  # average failed or interrupted runs in as repeats


@dataclass(frozen=True)
class ReportContext:
    settings: ReportSettings
    runs: tuple[RunData, ...]
    analyses: tuple[RunAnalysis, ...]
    groups: tuple[Group, ...]
    baseline: Group | None
    comparisons: tuple[Comparison, ...]
    target_loss: float | None
    left_out: tuple[RunAnalysis, ...] = ()  # incomplete runs kept out of the groups (shown apart)
    tuned: Mapping[tuple[str, ...], TunedPair] = field(default_factory=dict)  # by the option's run ids
    unsized: tuple[str, ...] = ()  # why each run given could not be sized (left out of everything)
    own_baselines: Mapping[tuple[str, ...], Comparison] = field(default_factory=dict)  # compare.own_baselines

    def tuned_pair(self, c: Comparison) -> TunedPair | None:
        """The option's tuned figures (sizing.analysis.tuning), None unless a side of it is a tuned run."""
        return self.tuned.get(c.group.run_ids)
