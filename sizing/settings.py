"""The report's settings, built in one place from the command line's parsed values or the Sizing tab's
form values: `report_settings` checks what no single option can (prices together, whole target steps)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sizing.context import DEFAULT_TARGET_STEPS, ReportSettings
from sizing.model import DEFAULT_UTILISATION, MAX_TEMP_THRESHOLD_C, Prices, Thresholds, UsageError


def gpu_prices(
    given: Sequence[tuple[str | None, float]],
) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """--gpu-price values: the one for every GPU (plain USD, at most once) and those per model."""
    plain = [usd for model, usd in given if model is None]
    if len(plain) > 1:
        raise UsageError("--gpu-price USD (every GPU) given more than once; use MODEL=USD per model")
    return (plain[0] if plain else None), tuple((m, usd) for m, usd in given if m is not None)


def report_settings(
    *,
    tariff: float | None,
    gpu_price: float | None = None,
    gpu_prices_by_model: Sequence[tuple[str, float]] = (),
    cpu_price: float | None = None,
    host_prices: Sequence[tuple[str, float]] = (),
    amortise_years: float | None = None,
    utilisation: float | None = None,
    value_per_hour: float | None = None,
    cpu_tdp_w: float | None = None,
    cpu_tdp_by_host: Sequence[tuple[str, float]] = (),
    idle_fraction: float | None = None,
    temp_threshold: float | None = None,
    target_steps: float | None = None,
    target_loss: float | None = None,
    baseline: str | None = None,
    include_incomplete: bool = False,
) -> ReportSettings:
    """The one constructor of ReportSettings (None = not given: the default where there is one);
    UsageError when the values do not make a report."""
    prices = Prices(
        tariff_per_kwh=tariff,
        gpu_price=gpu_price,
        cpu_price=cpu_price,
        amortise_years=Prices.amortise_years if amortise_years is None else amortise_years,
        value_per_hour=value_per_hour,
        cpu_tdp_w=cpu_tdp_w,
        cpu_tdp_by_host=tuple(cpu_tdp_by_host),
        idle_fraction=Prices.idle_fraction if idle_fraction is None else idle_fraction,
        gpu_price_by_model=tuple(gpu_prices_by_model),
        host_price_by_host=tuple(host_prices),
        utilisation=DEFAULT_UTILISATION if utilisation is None else utilisation,
    )
    problems = prices.problems()
    if problems:
        raise UsageError(problems[0])
    temp = Thresholds.temp_threshold_c if temp_threshold is None else temp_threshold
    if not math.isfinite(temp):
        raise UsageError(f"temperature threshold must be a finite number, got {temp_threshold!r}")
    if temp > MAX_TEMP_THRESHOLD_C:
        raise UsageError(
            f"temperature threshold {temp:g} °C is above any chip's (at most {MAX_TEMP_THRESHOLD_C:g} °C): "
            f"°F given? ({(temp - 32) * 5 / 9:.0f} °C)"
        )
    steps = DEFAULT_TARGET_STEPS if target_steps is None else target_steps
    if not math.isfinite(steps) or steps < 1 or steps != int(steps):
        raise UsageError(f"target steps must be a whole number ≥ 1, got {target_steps!r}")
    if target_loss is not None and not (math.isfinite(target_loss) and target_loss > 0):
        raise UsageError(f"target loss must be a number > 0, got {target_loss!r}")
    return ReportSettings(prices, Thresholds(temp_threshold_c=temp), int(steps), target_loss, baseline,
                          include_incomplete)  # fmt: skip


def settings_from_values(
    *,
    tariff: object,
    gpu_price: object = None,
    cpu_price: object = None,
    amortise_years: object = None,
    value_per_hour: object = None,
    cpu_tdp_w: object = None,
    idle_fraction: object = None,
    utilisation: object = None,
    gpu_prices_by_model: object = None,
    host_prices: object = None,
    temp_threshold: object = None,
    target_steps: object = None,
    target_loss: object = None,
) -> ReportSettings:
    """Settings from form values (None or blank = not given); UsageError if one is not a number."""
    return report_settings(
        tariff=_optional_float("tariff", tariff),
        gpu_price=_optional_float("GPU price", gpu_price),
        gpu_prices_by_model=_price_list("GPU prices per model", gpu_prices_by_model),
        cpu_price=_optional_float("CPU price", cpu_price),
        host_prices=_price_list("host prices", host_prices),
        amortise_years=_optional_float("amortisation years", amortise_years),
        utilisation=_optional_float("utilisation", utilisation),
        value_per_hour=_optional_float("value per hour", value_per_hour),
        cpu_tdp_w=_optional_float("CPU TDP", cpu_tdp_w),
        idle_fraction=_optional_float("idle fraction", idle_fraction),
        temp_threshold=_optional_float("temperature threshold", temp_threshold),
        target_steps=_optional_float("target steps", target_steps),
        target_loss=_optional_float("target loss", target_loss),
    )


def _price_list(name: str, text: object) -> tuple[tuple[str, float], ...]:
    """'A100=9000, H100=25000' (a form's text field) as (key, USD) pairs."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return ()
    found = []
    for item in str(text).replace(";", ",").split(","):
        if not item.strip():
            continue
        key, sep, usd = item.rpartition("=")
        value = _optional_float(f"{name} ({item.strip()!r})", usd) if sep and key.strip() else None
        if value is None:
            raise UsageError(f"{name}: expected NAME=USD, got {item.strip()!r}")
        found.append((key.strip(), value))
    return tuple(found)


def _optional_float(name: str, value: object) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number, got {value!r}") from None
