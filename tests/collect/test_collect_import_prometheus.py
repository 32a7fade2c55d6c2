"""import-prometheus's arithmetic on raw samples: rates between scrapes, counter resets, CPU from per-mode
seconds, steps from a step counter, the instance matcher and time parsing (the server itself:
test_collect_prometheus_server.py)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from collect.importers.promapi import PrometheusClient, Series
from collect.importers.promcli import parse_time
from collect.importers.promcolumns import (
    Grid,
    busiest_disk_bytes,
    cpu_columns,
    cpu_frequency_columns,
    increase_since_first,
    physical_disks,
)
from collect.importers.prometheus import instance_matcher
from collect.importers.promtraining import training_rows


def series(times: list[float], values: list[float], **labels: str) -> Series:
    return Series(dict(labels), list(times), list(values))


def test_rate_uses_the_real_gap_between_scrapes_and_survives_a_reset() -> None:
    counter = series([0, 10, 20, 30, 40], [100, 200, 300, 50, 150])  # restarted between 20 and 30
    assert counter.rate(20, 10, 25) == 10.0
    assert counter.rate(30, 10, 25) == 5.0  # 300 -> reset -> 50: increase 50 over 10 s
    assert counter.rate(25, 10, 25) == 10.0  # between scrapes: the last pair
    assert counter.rate(5, 1, 25) is None  # one sample so far
    assert counter.rate(200, 10, 25) is None  # stale: the target stopped being scraped
    assert counter.adjusted == [100, 200, 300, 350, 450]


def test_step_shorter_than_the_scrape_interval_repeats_the_last_rate() -> None:
    counter = series([0, 15, 30], [0, 150, 450])
    assert [counter.rate(t, 1, 35) for t in (15, 16, 29, 30)] == [10.0, 10.0, 10.0, 20.0]


def test_cpu_utilization_counts_iowait_as_idle_and_needs_every_cpu() -> None:
    def cpu(name: str, mode: str, per_second: float) -> Series:
        return series([0, 1, 2], [0, per_second, 2 * per_second], cpu=name, mode=mode)

    data = [
        cpu("0", "user", 0.5), cpu("0", "system", 0.1), cpu("0", "idle", 0.3), cpu("0", "iowait", 0.1),
        cpu("1", "user", 0.2), cpu("1", "idle", 0.7), cpu("1", "steal", 0.1),
    ]  # fmt: skip
    columns = cpu_columns(data, Grid([0, 1, 2], 1, 2.5))
    expected = ["cpu_util_pct", "cpu_iowait_pct", "cpu_steal_pct", "cpu0_util_pct", "cpu1_util_pct"]
    assert list(columns) == expected
    assert columns["cpu_iowait_pct"] == [None, 5.0, 5.0]  # sysstat's %iowait: a share of all CPUs' time
    assert columns["cpu_steal_pct"] == [None, 5.0, 5.0]
    assert columns["cpu0_util_pct"] == [None, 60.0, 60.0]
    assert columns["cpu1_util_pct"] == [None, 30.0, 30.0]  # steal is busy, as the collector counts it
    assert columns["cpu_util_pct"] == [None, 45.0, 45.0]


def test_per_cpu_frequency_columns() -> None:
    data = [series([0, 1], [2.0e9, 2.0e9], cpu="1"), series([0, 1], [3.0e9, 1.0e9], cpu="0")]
    columns = cpu_frequency_columns(data, Grid([0, 1], 1, 2.5))
    assert list(columns) == ["cpu_freq_mhz", "cpu0_freq_mhz", "cpu1_freq_mhz"]
    assert columns["cpu0_freq_mhz"] == [3000.0, 1000.0] and columns["cpu_freq_mhz"] == [2500.0, 1500.0]


def test_energy_since_the_first_row_across_a_wrap_and_two_packages() -> None:
    package0 = series([0, 1, 2], [1000, 1010, 5])  # wrapped: counted from 0 again
    package1 = series([0, 1, 2], [7, 8, 9])
    assert increase_since_first([package0, package1], Grid([0, 1, 2], 1, 2.5), 1.0) == [0, 11, 17]


def test_only_whole_physical_disks() -> None:
    names = [
        "sda",
        "sda1",
        "nvme0n1",
        "nvme0n1p2",
        "vda",
        "vda3",
        "dm-0",
        "loop4",
        "zram0",
        "md127",
        "mmcblk0",
    ]
    kept = [s.labels["device"] for s in physical_disks([series([0], [0], device=n) for n in names])]
    assert kept == ["sda", "nvme0n1", "vda", "mmcblk0"]


def test_the_busiest_disks_bytes_follow_the_disk_busiest_at_each_time() -> None:
    """disk_busiest_bps as the collector writes it: the bytes of the disk whose busy time rose most, not all
    disks' (sda busy first, then nvme0n1)."""
    seconds = [0, 1, 2]
    busy = [series(seconds, [0, 0.9, 1.0], device="sda"), series(seconds, [0, 0.1, 0.9], device="nvme0n1")]
    read = [series(seconds, [0, 100, 150], device="sda"), series(seconds, [0, 5000, 6000], device="nvme0n1")]
    written = [series([0, 1, 2], [0, 10, 20], device="sda")]
    assert busiest_disk_bytes(busy, (read, written), Grid([1, 2], 1, 2.5)) == [110.0, 1000.0]
    assert busiest_disk_bytes([], (read, written), Grid([1], 1, 2.5)) == [None]


def test_steps_from_a_step_counter() -> None:
    steps = series([0, 1, 2, 3, 4, 5], [5, 5, 9, 13, 2, 6])  # the job restarted at 4 s
    rates = series([0, 1, 2, 3, 4, 5], [8, 8, 8, 8, 8, 8])
    rows = training_rows(steps, rates, 0, 5, 2.5)
    assert [(r["time_unix"], r["step"], r["step_time_s"]) for r in rows] == [
        (0, 5, None), (2, 9, 0.5), (3, 13, 0.25), (5, 6, 0.25),
    ]  # fmt: skip
    assert {r["examples_per_s"] for r in rows} == {8} and {r["loss_total"] for r in rows} == {None}


def test_instance_matcher_and_times() -> None:
    assert instance_matcher("gpu-box-1:9100") == 'instance="gpu-box-1:9100"'
    pattern = instance_matcher("gpu.box")
    assert pattern.startswith("instance=~")
    regex = re.compile(pattern.split("=~", 1)[1].strip('"').replace("\\\\", "\\"))
    assert (
        regex.fullmatch("gpu.box:9100") and regex.fullmatch("gpu.box") and not regex.fullmatch("gpuxbox:9100")
    )
    assert parse_time("1795093375.5") == 1795093375.5
    assert (
        parse_time("2026-11-21T13:02:55Z")
        == datetime(2026, 11, 21, 13, 2, 55, tzinfo=timezone.utc).timestamp()
    )
    assert parse_time("2026-11-21T13:02:55") == parse_time("2026-11-21T14:02:55+01:00")
    assert parse_time("now", now=1000.0) == 1000.0 and parse_time("now-90s", now=1000.0) == 910.0
    for bad in ("yesterday", "now-x", ""):
        with pytest.raises(ValueError):
            parse_time(bad)
    with pytest.raises(ValueError):
        PrometheusClient("prometheus:9090")
