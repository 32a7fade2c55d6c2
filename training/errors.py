"""The errors `python -m training` reports in one line, and its exit codes (imported by the CLI and by
the modules that raise them, so neither needs the other)."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(ValueError):
    """Bad arguments: one line on stderr, exit code 2."""


class RunDirError(ValueError):
    """The run directory lacks what a phase needs; the message is one line for the user."""


class DiskFullStop(Exception):
    """The training stopped because the disk (or the quota) was full: its records say so (training.json
    `failure`); the message is the one line for the console, the traceback is for the log."""
