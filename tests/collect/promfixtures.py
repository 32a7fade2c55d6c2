"""Helpers of the Prometheus tests: free ports, scraping /metrics, a /sys with sensors and RAPL."""

from __future__ import annotations

import os
import socket
import urllib.request
from pathlib import Path

from collectfakes import write_tree
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(url: str) -> tuple[Samples, dict[str, str]]:
    """Every sample by name, and each family's type, from the text exposition format."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples, types


def one(samples: Samples, name: str, **labels: str) -> float:
    values = [value for found, value in samples.get(name, []) if labels.items() <= found.items()]
    assert len(values) == 1, (name, labels, samples.get(name))
    return values[0]


def sys_with_sensors_and_rapl(root: Path) -> Path:
    """A /sys whose CPU has a coretemp package sensor and a RAPL package counter; disks are the real ones."""
    write_tree(
        root,
        {
            "class/hwmon/hwmon1/name": "coretemp\n",
            "class/hwmon/hwmon1/temp1_label": "Package id 0\n",
            "class/hwmon/hwmon1/temp1_input": "67000\n",
            "class/powercap/intel-rapl:0/name": "package-0\n",
            "class/powercap/intel-rapl:0/energy_uj": "123456789\n",
            "class/powercap/intel-rapl:0/max_energy_range_uj": "262143328850\n",
        },
    )
    os.symlink("/sys/block", root / "block")
    return root
