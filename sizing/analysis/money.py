"""Prices of a run's hardware, their amortisation, and break-even bounded by the hardware's life.

A price not given is unknown, never $0: a hardware price is a number only when every part it sums (the
host, each GPU the run used) was priced, else it names what is not. A GPU compared with another GPU pays
back the price difference. Break-even beyond the hours the hardware will work in its life (amortisation
years × 8,760 h × utilisation) is "does not pay back", not a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sizing.model import HOURS_PER_YEAR, Prices
from sizing.text import fmt_usd


@dataclass(frozen=True)
class HardwarePrice:
    host_usd: float | None
    gpu_usd: float | None  # the run's GPUs together; 0 for a CPU run; None unless every GPU is priced
    unpriced: tuple[str, ...]  # "host craftbox", "GPU Crafted H100"

    @property
    def usd(self) -> float | None:
        if self.host_usd is None or self.gpu_usd is None:
            return None
        return self.host_usd + self.gpu_usd

    @property
    def gpu_missing(self) -> str:
        gpus = sorted({u.removeprefix("GPU ") for u in self.unpriced if u.startswith("GPU ")})
        return f"GPU not priced ({', '.join(gpus)})" if gpus else ""

    @property
    def missing(self) -> str:
        """'GPU not priced (H100), host not priced', ... ('' when fully priced)."""
        parts = [self.gpu_missing] if self.gpu_usd is None else []
        return ", ".join(parts + (["host not priced"] if self.host_usd is None else []))


def _lookup(pairs: tuple[tuple[str, float], ...], *keys: str) -> float | None:
    wanted = {k.strip().lower() for k in keys if k and k.strip()}
    return next((usd for key, usd in pairs if key.strip().lower() in wanted), None)


def named_prices(prices: Prices, gpu_models: Sequence[str], hosts: Sequence[str]) -> tuple[Prices, list[str]]:
    """The prices with each MODEL or HOST key (`--gpu-price`, `--host-price`, `--cpu-tdp`) read as the one
    name of these runs it is (case aside) or is part of (`H100` for `NVIDIA H100 80GB HBM3`); and a line for
    each key read as a longer name and each that names none, or several, of them. `hosts`: the runs' host
    names and CPU models."""
    gpus, gpu_notes = _named(prices.gpu_price_by_model, gpu_models, "--gpu-price", "GPU")
    host_usd, host_notes = _named(prices.host_price_by_host, hosts, "--host-price", "host or CPU")
    tdps, tdp_notes = _named(prices.cpu_tdp_by_host, hosts, "--cpu-tdp", "host or CPU")
    named = replace(prices, gpu_price_by_model=gpus, host_price_by_host=host_usd, cpu_tdp_by_host=tdps)
    return named, gpu_notes + host_notes + tdp_notes


def _named(
    pairs: tuple[tuple[str, float], ...], names: Sequence[str], option: str, what: str
) -> tuple[tuple[tuple[str, float], ...], list[str]]:
    known = sorted({n.strip() for n in names if n and n.strip()}, key=str.lower)
    resolved, notes = [], []
    for key, value in pairs:
        wanted = key.strip().lower()
        same = [n for n in known if n.lower() == wanted]
        within = [n for n in known if wanted and wanted in n.lower()]
        if same or not known:
            resolved.append((same[0] if same else key, value))
        elif len(within) == 1:
            resolved.append((within[0], value))
            notes.append(f"{option} {key}={value:g} read as {what} {within[0]}")
        else:
            resolved.append((key, value))
            which = f"names {len(within)} of them" if within else "names none of them"
            notes.append(
                f"{option} {key}={value:g} applies to no {what} of these runs: theirs are "
                f"{', '.join(known)}, and it {which} (give a whole name)"
            )
    return tuple(resolved), notes


def gpu_price(model: str, prices: Prices) -> float | None:
    """One GPU of this model: its --gpu-price MODEL=USD, else the plain --gpu-price (every GPU)."""
    found = _lookup(prices.gpu_price_by_model, model)
    return found if found is not None else prices.gpu_price


def host_price(host: str, cpu_model: str, prices: Prices) -> float | None:
    """The host without GPUs: its --host-price HOST=USD (host name or CPU model), else --cpu-price."""
    found = _lookup(prices.host_price_by_host, host, cpu_model)
    return found if found is not None else prices.cpu_price


def hardware_price(kind: str, hardware: dict, prices: Prices) -> HardwarePrice:
    host = host_price(str(hardware.get("host") or ""), str(hardware.get("cpu_model") or ""), prices)
    unpriced = [] if host is not None else [f"host {hardware.get('host') or 'unknown'}"]
    if kind != "gpu":
        return HardwarePrice(host, 0.0, tuple(unpriced))
    models = [str(m) for m in hardware.get("gpus") or []] or ["GPU"]
    each = [(m, gpu_price(m, prices)) for m in models]
    unpriced += [f"GPU {m}" for m, usd in each if usd is None]
    gpus = None if any(usd is None for _, usd in each) else sum(usd for _, usd in each if usd is not None)
    return HardwarePrice(host, gpus, tuple(unpriced))


def life_hours(prices: Prices) -> float:
    """Hours the hardware will work in its life: amortisation years × 8,760 h × utilisation."""
    return prices.amortise_years * HOURS_PER_YEAR * prices.utilisation


def hardware_usd_per_1000(price: float | None, per_s: float | None, prices: Prices) -> float | None:
    """The price spread over its working hours, for the time 1,000 units take."""
    if price is None or not per_s or per_s <= 0:
        return None
    return price / life_hours(prices) * (1000.0 / per_s / 3600.0)


def energy_saving_per_gpu_hour(
    gpu_examples_per_s: float | None, gpu_usd_per_1k: float | None, base_usd_per_1k: float | None
) -> float | None:
    """Energy cost the baseline would pay for one GPU hour's examples, minus what the GPU run pays."""
    if not gpu_examples_per_s or gpu_usd_per_1k is None or base_usd_per_1k is None:
        return None
    return gpu_examples_per_s * 3600.0 / 1000.0 * (base_usd_per_1k - gpu_usd_per_1k)


PAYS_BACK, BEYOND_LIFE, NEVER, CANNOT_TELL = "pays back", "beyond the life", "never", "cannot tell"
UNVALUED = "time saved not valued: cannot tell"
VALUE_OPTION = "--value-per-hour would tell"


@dataclass(frozen=True)
class Payback:
    """Hours of training until an investment is paid back by what an hour saves: (speedup − 1) hours at
    the value per hour plus the energy saved. Without a value per hour the time saved is worth anything
    from $0 up, so the hours are a bound ("at most" for a faster side, "at least" for a slower one), or
    cannot be told."""

    hours: float | None  # None: never, or cannot tell (then: the energy alone's hours, when it saves)
    verdict: str  # PAYS_BACK (within the life), BEYOND_LIFE, NEVER or CANNOT_TELL
    bound: str = ""  # "", "at most", "at least"


def payback(
    amount_usd: float,
    speedup: float,
    energy_saving_per_h: float | None,
    value_per_hour: float | None,
    life_h: float,
) -> Payback:
    """The payback of `amount_usd` (≤ 0: costs nothing extra) within `life_h` working hours. With a
    value per hour the saving is one number (energy not measured counts nothing); without one it lies
    between the energy saving and what any value of an hour adds (sizing.sections.definitions: Break-even)."""
    inf = float("inf")
    if value_per_hour is not None:
        low = high = (speedup - 1.0) * value_per_hour + (energy_saving_per_h or 0.0)
    elif energy_saving_per_h is None:
        return Payback(None, CANNOT_TELL)
    elif speedup > 1.0:
        low, high = energy_saving_per_h, inf
    elif speedup < 1.0:
        low, high = -inf, energy_saving_per_h
    else:
        low = high = energy_saving_per_h
    if amount_usd <= 0:
        if low > 0:
            return Payback(0.0, PAYS_BACK)
        return Payback(None, NEVER) if high <= 0 else Payback(None, CANNOT_TELL)
    if high <= 0:
        return Payback(None, NEVER)
    exact = low == high
    if low > 0 and amount_usd / low <= life_h:
        return Payback(amount_usd / low, PAYS_BACK, "" if exact else "at most")
    if amount_usd / high > life_h:
        return Payback(amount_usd / high, BEYOND_LIFE, "" if exact else "at least")
    return Payback(amount_usd / low if low > 0 else None, CANNOT_TELL)


def assumptions_text(prices: Prices, investment_text: str, with_life: bool = True) -> str:
    """What a "never" or "does not pay back" rests on: the tariff, the price paid, the value of an hour
    and (unless the sentence says it) the life."""
    tariff = f"tariff ${prices.tariff_per_kwh:g}/kWh" if prices.tariff_per_kwh is not None else "no tariff"
    value = (
        f"an hour saved worth {fmt_usd(prices.value_per_hour)}"
        if prices.value_per_hour is not None
        else "time saved not valued (--value-per-hour)"
    )
    life = f"; {prices.amortise_years:g}-year life at {prices.utilisation:.0%} use" if with_life else ""
    return f"{tariff}; {investment_text}; {value}{life}"


def unvalued_reason(found: Payback, life_h: float, energy_measured: bool) -> str:
    """Why a payback cannot be told without a value per hour, and what would tell."""
    if not energy_measured:
        why = "energy not measured on both sides"
    elif found.hours is not None:
        why = f"the energy alone pays back after {found.hours:,.0f} h, beyond the {life_h:,.0f} h of the life"
    else:
        why = "the energy alone saves nothing"
    return f"{UNVALUED} ({why}; {VALUE_OPTION})"


@dataclass(frozen=True)
class BreakEven:
    """GPU training hours until the hardware paid back; None with a reason when there is no such number."""

    hours: float | None
    reason: str | None  # None when `hours` is a number within the hardware's life
    investment_usd: float | None
    investment_text: str  # "its $2,000", "the price difference $1,000 ($3,000 − $2,000)"
    hours_beyond_life: float | None = None
    is_estimate: bool = False
    bound: str = ""  # "at most": the energy alone pays back this soon, the time saved not valued


def investment(side: HardwarePrice, baseline: HardwarePrice, baseline_kind: str) -> tuple[float | None, str]:
    """What buying this side instead of the baseline costs: its GPUs less the baseline's (none for a
    CPU baseline), hosts included when both are priced; None with the reason when a GPU is not priced."""
    if side.gpu_usd is None:
        return None, f"{side.gpu_missing} (--gpu-price)"
    if baseline.gpu_usd is None:
        return None, f"the baseline's {baseline.gpu_missing} (--gpu-price)"
    hosts = side.host_usd is not None and baseline.host_usd is not None
    side_total = side.gpu_usd + (side.host_usd or 0.0 if hosts else 0.0)
    base_total = baseline.gpu_usd + (baseline.host_usd or 0.0 if hosts else 0.0)
    amount = side_total - base_total
    if baseline_kind != "gpu" and (not hosts or side.host_usd == baseline.host_usd):
        return amount, f"its {fmt_usd(side.gpu_usd)}"
    what = "hardware" if hosts else "GPU"
    return amount, (
        f"the {what} price difference {fmt_usd(abs(amount))} ({fmt_usd(side_total)} − {fmt_usd(base_total)})"
    )


def break_even(
    speedup: float | None,
    side: HardwarePrice,
    baseline: HardwarePrice,
    baseline_kind: str,
    energy_saving: float | None,
    prices: Prices,
    is_estimate: bool = False,
) -> BreakEven:
    amount, text = investment(side, baseline, baseline_kind)
    if speedup is None:  # no price would give one: not "needs --gpu-price"
        return BreakEven(None, "not computed: speedup unknown", amount, text)
    if amount is None:
        return BreakEven(None, f"not computed: {text}", None, text)
    if prices.value_per_hour is None and energy_saving is None:
        return BreakEven(None, "not computed: needs the value of an hour saved (--value-per-hour) or "
                         "energy measured on both sides", amount, text)  # fmt: skip
    life = life_hours(prices)
    found = payback(amount, speedup, energy_saving, prices.value_per_hour, life)
    if found.verdict == PAYS_BACK and found.hours == 0:
        return BreakEven(0.0, None, amount, "costs no more than the baseline", None, is_estimate)
    if found.verdict == PAYS_BACK:
        return BreakEven(found.hours, None, amount, text, None, is_estimate, found.bound)
    if found.verdict == NEVER:
        what = "costs no more but saves nothing" if amount <= 0 else "it saves nothing"
        anyway = ", whatever an hour is worth" if prices.value_per_hour is None else ""
        reason = f"never pays back at these prices ({what}{anyway}: {assumptions_text(prices, text)})"
        return BreakEven(None, reason, amount, text)
    if found.verdict == CANNOT_TELL:
        return BreakEven(None, unvalued_reason(found, life, True), amount, text, found.hours, is_estimate)
    needed = f"{found.bound} {found.hours:,.0f}" if found.bound else f"{found.hours:,.0f}"
    reason = (
        f"does not pay back within the {prices.amortise_years:g}-year life at {prices.utilisation:.0%} "
        f"use ({needed} GPU hours needed, {life:,.0f} available)"
    )
    return BreakEven(None, reason, amount, text, found.hours, is_estimate)
