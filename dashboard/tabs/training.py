"""The "Training" tab: the training table and loss, step and examples/s of the selected training runs."""

from __future__ import annotations

from dashboard import views
from dashboard.tabs.base import WINDOW_ID, X_MODE_ID, content_tab

TAB = content_tab("training", "Training", views.training_view, (X_MODE_ID, WINDOW_ID))
