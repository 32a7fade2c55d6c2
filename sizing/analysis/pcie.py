"""A GPU whose PCIe link trained narrower than it can: a riser, a slot wired x4 or x8, a bad seat. Every
copy between host and GPU then gets a share of the bandwidth the board was built for.

NVML lowers the link's generation when the GPU idles, not its width, so only the width is judged, and
only when every reading run.json `gpu_state` holds (at start and at end) shows it narrower."""

from __future__ import annotations

from collections.abc import Sequence

from sizing.model import number

WHERE = "gpu_state pcie_link_width and pcie_link_width_max"


def narrow_link(readings: Sequence[dict]) -> str | None:
    """'PCIe x4 of x16' when one GPU's `gpu_state` readings (its start and end entries) each show a link
    narrower than its maximum; None when any reading is missing or full width."""
    widths = []
    for entry in readings:
        width, widest = number(entry.get("pcie_link_width")), number(entry.get("pcie_link_width_max"))
        if width is None or widest is None or not 0 < width < widest:
            return None
        widths.append((width, widest))
    if not widths:
        return None
    width, widest = max(widths)
    return f"PCIe x{width:.0f} of x{widest:.0f}"
