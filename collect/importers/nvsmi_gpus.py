"""Which GPU each line of an nvidia-smi log is about, and which lines form one sample: by an id column,
or by line order (`--gpus N`) where the timestamps of one sample's lines come in a burst a few ms apart."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from collect.importers.nvsmi_fields import GpuLog, Line, NvsmiImportError, Value

BURST_GAP_FRACTION = 0.2  # lines closer than this share of the sampling interval belong to one sample
BURST_SHARE = 0.3  # this share of gaps being that small means several lines per sample
PERIOD_RATIO = 1.6  # every N-th gap this much longer than the rest: N lines per sample
MAX_GPUS = 16


def burst_sizes(moments: Sequence[datetime]) -> list[int] | None:
    """Lines per sample when consecutive timestamps come in bursts a few ms apart; None when they do not."""
    if len(moments) < 3:
        return None
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(moments)]
    ordered = sorted(gaps)
    interval = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    if interval <= 0:
        return None
    small = [gap < BURST_GAP_FRACTION * interval for gap in gaps]
    if sum(small) < BURST_SHARE * len(gaps):
        period = gap_period(gaps)
        return None if period is None else [period] * (len(moments) // period)
    sizes, size = [], 1
    for is_small in small:
        if is_small:
            size += 1
        else:
            sizes.append(size)
            size = 1
    sizes.append(size)
    return sizes


def gap_period(gaps: Sequence[float]) -> int | None:
    """At fast intervals (-lms 10) one sample's lines are not much closer than the samples: then every
    N-th gap is the longer one. The N whose one phase stands out most (≥ PERIOD_RATIO), or None."""
    best: tuple[float, int] | None = None
    for period in range(2, MAX_GPUS + 1):
        if len(gaps) < 4 * period:
            break
        phases = sorted(statistics.median(gaps[phase::period]) for phase in range(period))
        if phases[-2] <= 0:
            continue
        ratio = phases[-1] / phases[-2]
        if ratio >= PERIOD_RATIO and (best is None or ratio > best[0]):
            best = (ratio, period)
    return best[1] if best else None


def group_samples(log: GpuLog, parsed: list[Line], gpus: int | None) -> None:
    with_ids = parsed[0].gpu_id is not None
    if with_ids:
        ids = list(dict.fromkeys(line.gpu_id or "" for line in parsed))
        if all(i.isdigit() for i in ids):
            ids.sort(key=int)
        if gpus is not None and gpus != len(ids):
            raise NvsmiImportError(
                f"--gpus {gpus}, but the log's {log.identified_by} names {len(ids)} GPU(s)"
            )
        log.gpu_keys = ids
        current: dict[str, dict[str, Value]] = {}
        for line in parsed:
            assert line.gpu_id is not None
            if not current or line.gpu_id in current:
                current = {}
                log.samples.append((line.moment, current))
            current[line.gpu_id] = line.values
            log.descriptions.setdefault(line.gpu_id, {}).update(line.description)
        return
    count = _gpu_count_by_order(log, [line.moment for line in parsed], gpus)
    log.gpu_keys = [str(i) for i in range(count)]
    for start in range(0, len(parsed), count):
        chunk = parsed[start : start + count]
        log.samples.append((chunk[0].moment, {str(i): line.values for i, line in enumerate(chunk)}))
        for i, line in enumerate(chunk):
            log.descriptions.setdefault(str(i), {}).update(line.description)
    if len(parsed) % count:
        log.notes.append(
            f"the last sample has {len(parsed) % count} of {count} GPU lines (the log stopped mid-sample)"
        )


def _gpu_count_by_order(log: GpuLog, moments: list[datetime], gpus: int | None) -> int:
    sizes = burst_sizes(moments)
    whole = Counter(sizes[:-1] if sizes and len(sizes) > 1 else sizes or [])
    common = [size for size, n in whole.most_common() if n >= 0.05 * sum(whole.values())]
    if len(common) > 1:
        seen = ", ".join(f"{size} lines ({whole[size]} times)" for size in sorted(common))
        raise NvsmiImportError(
            f"mixed GPU counts: timestamps come in bursts of {seen}; import each part on its own"
        )
    burst = common[0] if common else 1
    if gpus is None:
        if burst > 1:
            gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(moments))
            spacing = statistics.median(gaps[: max(len(gaps) // 2, 1)])
            raise NvsmiImportError(
                f"timestamps come in bursts of {burst} lines {spacing * 1000:.0f} ms apart, and the log has "
                f"no index, uuid or pci.bus_id column: it looks like {burst} GPUs per sample; "
                f"give --gpus {burst} "
                "(lines in index order), or log with --query-gpu=timestamp,index,..."
            )
        return 1
    if burst > 1 and burst != gpus:
        raise NvsmiImportError(f"--gpus {gpus}, but the timestamps come in bursts of {burst} lines")
    log.identified_by = f"line order (--gpus {gpus})"
    return gpus
