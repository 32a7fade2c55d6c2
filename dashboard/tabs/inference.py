"""The "Inference" tab: latency and images/s per batch size, per runtime, CPU vs GPU (inference.json)."""

from __future__ import annotations

from dashboard import inference_view
from dashboard.tabs.base import content_id, content_tab

TAB_VALUE = "inference"
CONTENT_ID = content_id(TAB_VALUE)

TAB = content_tab(TAB_VALUE, "Inference", inference_view.inference_view)
