"""Recordings made by other tools, laid out as run directories (docs/run-format.md, "Imported runs")."""
