"""Raise the sampling thread's scheduling priority where permitted, and put it back afterwards.

On Linux both the scheduling policy and the nice value belong to the calling thread, so only the
sampling loop is raised: the output pump thread and the command (started before) keep normal priority.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

REALTIME_PRIORITY = 10
NICE_BOOST = -10


@dataclass
class PriorityChange:
    description: str  # for run.json, e.g. "SCHED_FIFO 10" or "normal (raising not permitted)"
    _policy: int | None = None
    _nice: int | None = None

    def restore(self) -> None:
        try:
            if self._policy is not None:
                os.sched_setscheduler(0, self._policy, os.sched_param(0))
            if self._nice is not None:
                os.setpriority(os.PRIO_PROCESS, 0, self._nice)
        except OSError:
            pass


def raise_priority(realtime: bool = True) -> PriorityChange:
    """SCHED_FIFO if allowed (root or CAP_SYS_NICE), else nice -10, else unchanged; never raises."""
    if realtime and hasattr(os, "sched_setscheduler"):
        try:
            old_policy = os.sched_getscheduler(0)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
            return PriorityChange(f"SCHED_FIFO {REALTIME_PRIORITY}", _policy=old_policy)
        except (OSError, AttributeError):
            pass
    try:
        old_nice = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, old_nice + NICE_BOOST)
        if os.getpriority(os.PRIO_PROCESS, 0) < old_nice:
            return PriorityChange(f"nice {old_nice + NICE_BOOST}", _nice=old_nice)
    except (OSError, AttributeError):
        pass
    return PriorityChange("normal (raising the priority is not permitted)")
