"""analysis.money.payback and break_even at each boundary: a value per hour given or not, a side faster,
as fast or slower, energy saved or not, the payback at the hardware's working hours or just past them."""

from __future__ import annotations

import pytest

from sizing.analysis import money
from sizing.model import Prices

LIFE_H = 1000.0


@pytest.mark.parametrize(
    ("amount", "speedup", "energy", "value", "expected"),
    [
        (100.0, 2.0, None, 1.0, (100.0, money.PAYS_BACK, "")),  # energy not measured counts nothing
        (100.0, 2.0, 0.0, 0.1, (1000.0, money.PAYS_BACK, "")),  # exactly the life: pays back
        (100.0, 2.0, 0.0, 0.0999, (100 / 0.0999, money.BEYOND_LIFE, "")),  # just past it
        (100.0, 1.0, 0.0, 50.0, (None, money.NEVER, "")),  # saves nothing
        (100.0, 0.9, 5.0, 10.0, (25.0, money.PAYS_BACK, "")),  # slower, but the energy pays
        (0.0, 1.5, 0.0, 1.0, (0.0, money.PAYS_BACK, "")),  # costs nothing extra
        (0.0, 1.0, 0.0, 1.0, (None, money.NEVER, "")),
    ],
)
def test_with_a_value_per_hour_the_saving_is_one_number(amount, speedup, energy, value, expected) -> None:
    found = money.payback(amount, speedup, energy, value, LIFE_H)
    hours, verdict, bound = expected
    assert (found.verdict, found.bound) == (verdict, bound)
    assert found.hours == (pytest.approx(hours) if hours is not None else None)


@pytest.mark.parametrize(
    ("amount", "speedup", "energy", "expected"),
    [
        (100.0, 1.7, None, (None, money.CANNOT_TELL, "")),  # neither time nor energy valued
        (100.0, 1.7, -0.5, (None, money.CANNOT_TELL, "")),  # the energy costs more: time decides
        (100.0, 1.7, 0.0, (None, money.CANNOT_TELL, "")),
        (100.0, 1.7, 0.1, (1000.0, money.PAYS_BACK, "at most")),  # the energy alone, exactly the life
        (100.0, 1.7, 0.0999, (100 / 0.0999, money.CANNOT_TELL, "")),  # just past it: cannot tell
        (100.0, 1.0, 0.1, (1000.0, money.PAYS_BACK, "")),  # no time saved: the value does not matter
        (100.0, 1.0, 0.0999, (100 / 0.0999, money.BEYOND_LIFE, "")),
        (100.0, 1.0, 0.0, (None, money.NEVER, "")),
        (100.0, 0.8, 0.0, (None, money.NEVER, "")),  # slower and no energy saved: whatever an hour is worth
        (100.0, 0.8, 0.0999, (100 / 0.0999, money.BEYOND_LIFE, "at least")),  # slower: time only costs
        (100.0, 0.8, 0.1, (None, money.CANNOT_TELL, "")),
        (0.0, 1.7, 0.0, (None, money.CANNOT_TELL, "")),  # no extra price, saves energy only if time counts
        (0.0, 1.7, 0.001, (0.0, money.PAYS_BACK, "")),
    ],
)
def test_without_a_value_per_hour_the_time_saved_is_not_valued(amount, speedup, energy, expected) -> None:
    found = money.payback(amount, speedup, energy, None, LIFE_H)
    hours, verdict, bound = expected
    assert (found.verdict, found.bound) == (verdict, bound)
    assert found.hours == (pytest.approx(hours) if hours is not None else None)


GPU = money.HardwarePrice(None, 2000.0, ())
CPU = money.HardwarePrice(None, 0.0, ())


def test_break_even_without_a_value_per_hour_never_says_never_for_a_faster_gpu() -> None:
    prices = Prices(tariff_per_kwh=0.15)
    for energy in (-1.0, 0.0):
        even = money.break_even(1.7, GPU, CPU, "cpu", energy, prices)
        assert even.hours is None and even.reason.startswith("time saved not valued: cannot tell (")
        assert "the energy alone saves nothing; --value-per-hour would tell" in even.reason
        assert "never" not in even.reason and even.hours_beyond_life is None
    beyond = money.break_even(1.7, GPU, CPU, "cpu", 0.05, prices)  # 40,000 h > 26,280 h of a 3-year life
    assert beyond.hours is None and beyond.hours_beyond_life == pytest.approx(40_000.0)
    assert "the energy alone pays back after 40,000 h, beyond the 26,280 h of the life" in beyond.reason
    within = money.break_even(1.7, GPU, CPU, "cpu", 0.1, prices)  # 20,000 h: within, at most
    assert within.hours == pytest.approx(20_000.0) and within.bound == "at most" and within.reason is None


def test_a_never_that_remains_prints_its_assumptions() -> None:
    valued = money.break_even(1.0, GPU, CPU, "cpu", 0.0, Prices(tariff_per_kwh=0.15, value_per_hour=10.0))
    assert valued.reason == (
        "never pays back at these prices (it saves nothing: tariff $0.15/kWh; its $2,000.00; an hour "
        "saved worth $10.00; 3-year life at 100% use)"
    )
    slower = money.break_even(0.5, GPU, CPU, "cpu", -1.0, Prices(tariff_per_kwh=None))
    assert slower.reason == (
        "never pays back at these prices (it saves nothing, whatever an hour is worth: no tariff; its "
        "$2,000.00; time saved not valued (--value-per-hour); 3-year life at 100% use)"
    )
    free = money.break_even(1.0, CPU, CPU, "cpu", 0.0, Prices(value_per_hour=10.0))
    assert free.reason.startswith("never pays back at these prices (costs no more but saves nothing: ")
    beyond = money.break_even(1.0, GPU, CPU, "cpu", 0.05, Prices(value_per_hour=10.0))  # 40,000 h
    assert beyond.reason == (
        "does not pay back within the 3-year life at 100% use (40,000 GPU hours needed, 26,280 available)"
    )
