"""The "Mean & peak" tab: each component's mean and peak per selected run, in the window."""

from __future__ import annotations

from dashboard import views
from dashboard.tabs.base import WINDOW_ID, content_tab

TAB = content_tab("summary", "Mean & peak", views.summary_view, (WINDOW_ID,))
