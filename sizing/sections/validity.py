"""The report section on whether each run is a valid measurement: complete or not (and averaged or shown
apart), its sessions, how well it pins its own steady rate, and why it would be a weak baseline."""

from __future__ import annotations

from sizing.analysis.validity import run_json_fields
from sizing.context import ReportContext
from sizing.model import Section, Table
from sizing.text import fmt


def validity_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        fields = run_json_fields(a, ctx)
        low, high = fields["steps_per_s_ci95_low"], fields["steps_per_s_ci95_high"]
        interval = f"{fmt(low, 3)}–{fmt(high, 3)}" if low is not None else "n/a (too few steady rows)"
        thirds = (
            f"{fmt(fields['steps_per_s_first_third'], 3)} → {fmt(fields['steps_per_s_last_third'], 3)} "
            f"({fmt(fields['steady_drift_pct'], 1, ' %')})"
            if fields["steady_drift_pct"] is not None
            else "n/a"
        )
        sessions = str(a.throughput.sessions)
        if a.throughput.sessions > 1:
            sessions += f" ({a.throughput.session_gaps_s:,.0f} s between, left out)"
        rows.append((
            a.run_id,
            "yes" if a.incomplete is None else f"NO: {a.incomplete}",
            "yes" if fields["in_averages"] else "no (shown apart)",
            sessions, interval, thirds,
            fmt(fields["steady_rate_vs_training_json_pct"], 1, " %"),
            fields["weak_baseline_reasons"] or "none",
        ))  # fmt: skip
        data.append({"run_id": a.run_id, **fields})
    headers = ("Run", "Complete", "In averages", "Sessions", "Steady steps/s, within-run 95 % interval",
               "Steps/s first → last third (drift)", "vs training.json's rate",
               "Weak as a baseline because")  # fmt: skip
    note = "Incomplete runs are left out of every average unless --include-incomplete is given."
    return Section("validity", "Validity", data, (Table("Validity", headers, tuple(rows), note),))
