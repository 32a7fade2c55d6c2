"""`--prometheus HOST:PORT`: each tick's telemetry served at /metrics under the names node_exporter and
dcgm-exporter use, so the Grafana dashboards a fleet already has (Node Exporter Full, NVIDIA DCGM) show a
run live, plus the workbench's own (`workbench_run_info`, training step, examples/s, tick lateness).

Nothing is sampled twice: the sampling loop hands over the row it has just written and references to the
raw kernel counters its sources read for that row (one tuple per tick); the metric families are built when
Prometheus scrapes, in the HTTP server's threads. training.csv is followed at scrape time too.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from collect.exposition_families import StaticInfo, dcgm_families, node_families, uname_labels
from collect.progress import CsvTail
from collect.sources import SourceSet
from runformat import TRAINING_CSV, TRAINING_JSON, read_json

DEFAULT_HOST = "127.0.0.1"
# Sources whose raw counters the exposition publishes (see Source.last_raw).
RAW_SOURCES = ("cpu", "memory", "disk", "network", "thermal", "rapl")


class ExpositionError(ValueError):
    """A bad --prometheus value or an address that cannot be listened on: a usage error, one line."""


def parse_listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` -> (host, port); the host defaults to 127.0.0.1."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "", text.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ExpositionError(f"--prometheus {text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ExpositionError(f"--prometheus {text!r}: write an IPv6 host in brackets, e.g. [::1]:9101")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ExpositionError(
            f"--prometheus {text!r}: expected HOST:PORT or PORT, with a port from 1 to 65535"
        )
    return host or DEFAULT_HOST, int(port_text)


class PrometheusExposition:
    """An HTTP /metrics endpoint (listening from construction on) and the session's tick sink."""

    def __init__(self, address: str, framework: str | None = None) -> None:
        self.host, self.port = parse_listen_address(address)
        self.framework = framework
        self._latest: tuple[dict[str, Any], dict[str, Any]] | None = None
        self._raw_sources: list[tuple[str, Any]] = []
        self._nvml: Any = None
        self._static = StaticInfo(uname={})
        self._record: dict[str, Any] = {}
        self._training: CsvTail | None = None
        self._training_row: dict[str, str] = {}
        self._run_dir: Path | None = None
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # type: ignore[arg-type]  # a collector: it has collect()
        try:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ExpositionError(
                f"--prometheus: cannot listen on {self.url_host}:{self.port}: {reason}"
            ) from exc

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def url(self) -> str:
        return f"http://{self.url_host}:{self.port}/metrics"

    # ---- the session's side (sampling thread) ---------------------------------------------------

    def start(self, run_dir: Path, record: dict[str, Any], sources: SourceSet) -> None:
        """Called once the run directory and the sources exist, before the first tick."""
        by_name = {source.name: source for source in sources.sources}
        thermal, rapl = by_name.get("thermal"), by_name.get("rapl")
        self._static = StaticInfo(
            uname=uname_labels(str(record.get("host") or "")),
            gpus=list(sources.nvml.gpu_info) if sources.nvml is not None else [],
            sensors=list(getattr(thermal, "sensors", [])),
            rapl_zones=list(getattr(rapl, "zones", [])),
        )
        self._nvml = sources.nvml
        self._raw_sources = [(name, by_name[name]) for name in RAW_SOURCES if name in by_name]
        self._record = record
        self._run_dir = run_dir
        self._training = CsvTail(run_dir / TRAINING_CSV)

    def tick(self, row: dict[str, Any]) -> None:
        """The row just written; keeps references only (the sources replace, never mutate, their raw data)."""
        self._latest = (row, {name: source.last_raw for name, source in self._raw_sources})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ---- Prometheus's side (HTTP threads) -------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        latest = self._latest
        if latest is None:
            return
        row, raw = latest
        yield from node_families(row, raw, self._static)
        energy_base = self._nvml.energy_base_mj() if self._nvml is not None else []
        yield from dcgm_families(row, self._static.gpus, energy_base, str(self._record.get("host") or ""))
        yield from self._workbench_families(row)

    def _workbench_families(self, row: dict[str, Any]) -> Iterator[Metric]:
        record = self._record
        info = InfoMetricFamily("workbench_run", "The run this collector is recording (value 1).")
        info.add_metric(
            [],
            {
                "run_id": str(record.get("run_id", "")),
                "device": str(record.get("device", "")),
                "label": str(record.get("label", "")),
                "framework": self._framework(),
            },
        )
        yield info
        if row.get("late_ms") is not None:
            yield GaugeMetricFamily(
                "workbench_late_ms",
                "How late the last sampling tick started (ms).",
                value=float(row["late_ms"]),
            )
        training = self._follow_training()
        step, rate = _float(training.get("step")), _float(training.get("examples_per_s"))
        if step is not None:
            yield GaugeMetricFamily(
                "workbench_training_step", "Global step after the last training step.", value=step
            )
        if rate is not None:
            yield GaugeMetricFamily(
                "workbench_examples_per_second", "Examples per second of the last training step.", value=rate
            )

    def _follow_training(self) -> dict[str, str]:
        with self._lock:
            if self._training is not None:
                rows = self._training.new_rows()
                if rows:
                    self._training_row = rows[-1]
            return self._training_row

    def _framework(self) -> str:
        if self.framework:
            return self.framework
        if self._run_dir is not None and (self._run_dir / TRAINING_JSON).exists():
            try:
                return str(read_json(self._run_dir / TRAINING_JSON).get("framework") or "unknown")
            except ValueError:
                return "unknown"
        return "none" if self._record.get("command") is None else "unknown"


def _float(text: str | None) -> float | None:
    try:
        return None if text in (None, "") else float(text)  # type: ignore[arg-type]
    except ValueError:
        return None
