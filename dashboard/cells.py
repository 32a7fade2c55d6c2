"""How the dashboard writes a value in a table cell: unknown as "n/a", never `None` or 0."""

from __future__ import annotations

from typing import Any

from dash import html

NA = "n/a"


def text(value: Any, unit: str = "") -> str:
    """A value for display: "n/a" for unknown (None, empty), never `None`."""
    if value is None or value == "" or value == []:
        return NA
    if isinstance(value, float):
        value = f"{value:.4g}"
    return f"{value} {unit}".rstrip()


def hint(message: str) -> Any:
    return html.P(message, className="hint")


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else NA
