"""Scheduling priority of the sampling thread: raised where permitted, recorded, never fatal."""

from __future__ import annotations

import os

import pytest

from collect.lateness import LatenessSample
from collect.priority import raise_priority


@pytest.mark.skipif(os.geteuid() != 0, reason="raising the priority needs root here")
def test_root_gets_realtime_priority_and_gives_it_back() -> None:
    change = raise_priority()
    try:
        assert change.description == "SCHED_FIFO 10"
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
    finally:
        change.restore()
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_an_unprivileged_user_keeps_normal_priority_without_an_error() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child drops to "nobody" and reports what it got
        status = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(write_end, raise_priority().description.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as reader:
        description = reader.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert description == "normal (raising the priority is not permitted)"


def test_lateness_percentiles_from_a_bounded_sample() -> None:
    sample = LatenessSample(capacity=1000)
    for value in range(100_000):
        sample.add(value / 1000.0)
    assert len(sample.values) == 1000
    assert sample.maximum == 99.999
    assert sample.percentile(0.5) == pytest.approx(50.0, abs=5.0)
    assert sample.percentile(0.99) == pytest.approx(99.0, abs=2.0)
    assert LatenessSample().percentile(0.5) is None
