"""The "Run details" tab: one card per selected run (system, sources, phases, GPU state, warnings)."""

from __future__ import annotations

from dashboard import views
from dashboard.tabs.base import content_tab

TAB = content_tab("details", "Run details", views.details_view)
