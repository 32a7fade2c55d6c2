"""Raw samples from a Prometheus server's HTTP API, and reading them back on a regular time grid.

Samples are fetched as they were scraped (an instant query of a range selector returns every sample with
its scrape timestamp), so rates are computed here over the real scrape intervals, with counter resets
handled as Prometheus does: a drop means the counter restarted from zero.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

CHUNK_S = 6 * 3600  # one query covers at most this much history (keeps each answer small)
TIMEOUT_S = 60.0


class PrometheusError(Exception):
    """The server could not be asked or answered with an error; the message is one line."""


@dataclass
class Series:
    """One time series: its labels and its samples in time order; `adjusted` undoes counter resets."""

    labels: dict[str, str]
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    _adjusted: list[float] | None = None

    @property
    def adjusted(self) -> list[float]:
        if self._adjusted is None:
            offset, previous, adjusted = 0.0, None, []
            for value in self.values:
                if previous is not None and value < previous:
                    offset += previous
                adjusted.append(value + offset)
                previous = value
            self._adjusted = adjusted
        return self._adjusted

    def index_at(self, when: float, lookback_s: float) -> int | None:
        """The last sample at or before `when`, if it is no older than lookback_s."""
        index = bisect.bisect_right(self.times, when) - 1
        if index < 0 or self.times[index] < when - lookback_s:
            return None
        return index

    def value_at(self, when: float, lookback_s: float) -> float | None:
        index = self.index_at(when, lookback_s)
        return None if index is None else self.values[index]

    def pair_for(self, when: float, step_s: float, lookback_s: float) -> tuple[int, int] | None:
        """Two samples around the step ending at `when`: the last one before the step began and the last
        one at `when`; if both are the same sample (scrapes sparser than the step), the last two."""
        last = self.index_at(when, lookback_s)
        if last is None:
            return None
        first = bisect.bisect_right(self.times, when - step_s) - 1
        if first >= last or first < 0:
            first = last - 1
        if first < 0 or self.times[first] < when - step_s - lookback_s:
            return None
        return first, last

    def increase(self, first: int, last: int) -> float:
        return self.adjusted[last] - self.adjusted[first]

    def rate(self, when: float, step_s: float, lookback_s: float) -> float | None:
        pair = self.pair_for(when, step_s, lookback_s)
        if pair is None:
            return None
        first, last = pair
        return self.increase(first, last) / (self.times[last] - self.times[first])

    def median_interval(self) -> float | None:
        gaps = [b - a for a, b in zip(self.times, self.times[1:], strict=False) if b > a]
        return statistics.median(gaps) if gaps else None


class PrometheusClient:
    def __init__(self, base_url: str) -> None:
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{base_url!r} is not an http(s) URL of a Prometheus server")
        self.base_url = base_url.rstrip("/")

    def _get(self, path: str, params: dict[str, str]) -> object:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            answer = _json_or_none(exc)
            if not isinstance(answer, dict) or "error" not in answer:
                raise PrometheusError(f"{self.base_url}: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusError(f"cannot reach {self.base_url}: {reason}") from exc
        except ValueError as exc:
            raise PrometheusError(f"{self.base_url} did not answer like a Prometheus server ({exc})") from exc
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error") if isinstance(answer, dict) else answer
            raise PrometheusError(f"Prometheus at {self.base_url}: {error}")
        return answer.get("data")

    def raw_series(self, selector: str, start: float, end: float) -> list[Series]:
        """Every sample of `selector` scraped in (start, end], merged across chunks."""
        merged: dict[tuple[tuple[str, str], ...], Series] = {}
        chunk_end = end
        while chunk_end > start:
            span = min(CHUNK_S, chunk_end - start)
            data = self._get(
                "/api/v1/query",
                {"query": f"{selector}[{max(1, math.ceil(span * 1000))}ms]", "time": f"{chunk_end:.3f}"},
            )
            for item in _result(data, "matrix"):
                labels = dict(item.get("metric", {}))
                series = merged.setdefault(tuple(sorted(labels.items())), Series(labels))
                for when, value in item.get("values", []):
                    series.times.append(float(when))
                    series.values.append(float(value))
            chunk_end -= span
        for series in merged.values():
            order = sorted(range(len(series.times)), key=series.times.__getitem__)
            series.times = [series.times[i] for i in order]
            series.values = [series.values[i] for i in order]
        return [series for series in merged.values() if series.times]

    def label_values(self, label: str, selector: str, start: float, end: float) -> list[str]:
        data = self._get(
            f"/api/v1/label/{label}/values",
            {"match[]": selector, "start": f"{start:.3f}", "end": f"{end:.3f}"},
        )
        return sorted(str(value) for value in data) if isinstance(data, list) else []


def _result(data: object, kind: str) -> list[dict]:
    if not isinstance(data, dict) or data.get("resultType") != kind:
        raise PrometheusError(f"unexpected answer from Prometheus (expected a {kind})")
    result = data.get("result")
    return result if isinstance(result, list) else []


def _json_or_none(exc: urllib.error.HTTPError) -> object:
    try:
        return json.loads(exc.read())
    except (ValueError, OSError):
        return None
