"""The GPU's own state (analysis.gpu_state) on small crafted frames: each rule from run.json gpu_state and
from the telemetry alone, each threshold pinned at its boundary, and what the state does to the energy,
the verdict, busy but not computing and the hardware signature."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from energyfixtures import serving_cell, write_serving_run

from sizing.analysis import bottleneck, energy, signature
from sizing.analysis import gpu_settings as gsets
from sizing.analysis import gpu_state as gs
from sizing.analysis import gpu_verdicts as gv
from sizing.analysis.load import load_run_dir
from sizing.analysis.node_energy import job_energy
from sizing.analysis.run import analyse_run
from sizing.analysis.serving import serving_section
from sizing.model import Prices, RunData, Thresholds, samples_in

T = Thresholds()
START, TRAIN, END = 1000.0, 1100.0, 1300.0  # recording start, first train phase, its end
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "power_limit_w": 700.0,
        "sm_clock_max_mhz": 1980.0}  # fmt: skip
GIB = 2**30


def telemetry(**columns: object) -> pd.DataFrame:
    """One sample a second from START to END; gpu0 idle before TRAIN, busy after, unless given."""
    times = np.arange(START, END + 1.0)
    training = times >= TRAIN
    frame = pd.DataFrame({
        "time_unix": times,
        "gpu0_util_pct": np.where(training, 60.0, 0.0),
        "gpu0_mem_used_bytes": np.where(training, 6.0 * GIB, 0.45 * GIB),
        "gpu0_power_w": np.where(training, 400.0, 70.0),
        "gpu0_power_limit_w": 700.0,
        "gpu0_sm_clock_mhz": np.where(training, 1980.0, 345.0),
        "gpu0_throttle_reasons": np.where(training, 0.0, 1.0),
    })  # fmt: skip
    for name, value in columns.items():
        frame[name] = value(times) if callable(value) else value
    return frame


def run(frame: pd.DataFrame, state: dict | None = None, gpu: dict | None = None, info: dict | None = None,
        phases: bool = True) -> RunData:  # fmt: skip
    meta = {"device": "gpu", "system": {"gpus": [gpu or H100]}}
    if state is not None:
        meta["gpu_state"] = state
    rows = pd.DataFrame({"phase": ["train"], "start_unix": [TRAIN], "end_unix": [END], "status": ["ok"]})
    return RunData("r", meta, info or {}, {}, frame, pd.DataFrame(), rows if phases else pd.DataFrame())


def state_of(data: RunData, kind: str = "gpu", charged: tuple[int, ...] = (0,)) -> gs.GpuState:
    window = (TRAIN, END)
    return gs.read_gpu_state(data, kind, list(charged), samples_in(data.telemetry, window), window, T)


def board_state(**fields: object) -> dict:
    """A gpu_state STATE at the H100's defaults, with `fields` changed."""
    return {"index": 0, "power_limit_w": 700.0, "power_limit_default_w": 700.0, "power_limit_min_w": 200.0,
            "power_limit_max_w": 700.0, "applications_clock_sm_mhz": 1980, "applications_clock_mem_mhz": 2619,
            "default_applications_clock_sm_mhz": 1980, "default_applications_clock_mem_mhz": 2619,
            "mig_mode": "disabled", **fields}  # fmt: skip


def test_a_run_alone_on_its_board_at_its_defaults_has_no_finding() -> None:
    before = {"index": 0, "util_pct": 0.0, "mem_used_bytes": 0, "power_w": 70.0, "compute_processes": 0}
    state = {"start": [board_state()], "other_processes": [], "before_training": [before]}
    found = state_of(run(telemetry(), state))
    assert found.recorded and not found.shared and not found.mig
    assert found.signature is None and found.not_attributable is None and found.held_low == {}
    assert state_of(run(telemetry()), kind="cpu").gpus == ()


@pytest.mark.parametrize(
    ("util", "shared"), [(gs.SHARED_BEFORE_UTIL_PCT, True), (gs.SHARED_BEFORE_UTIL_PCT - 0.01, False)]
)
def test_telemetry_before_the_first_train_phase_busy_means_shared(util: float, shared: bool) -> None:
    frame = telemetry(gpu0_util_pct=lambda t: np.where(t >= TRAIN, 60.0, util))
    found = state_of(run(frame))
    assert found.shared is shared
    if shared:
        assert found.signature == "shared" and found.not_attributable == gs.SHARED
        assert "mean util 10.0 % ≥ 10 % in the 60 samples before the first train phase" in found.evidence[0]


@pytest.mark.parametrize(("memory", "shared"), [(2 * GIB, True), (2 * GIB - 1, False)])
def test_board_memory_before_the_training_far_above_idle_means_shared(memory: float, shared: bool) -> None:
    frame = telemetry(gpu0_mem_used_bytes=lambda t: np.where(t >= TRAIN, 8.0 * GIB, memory))
    assert state_of(run(frame)).shared is shared


def test_only_the_minute_before_the_training_is_read() -> None:
    """A tenant long gone before the training started (an all-day recording) did not share it."""
    edge = TRAIN - gs.BEFORE_TRAINING_S
    busy_at = lambda first: lambda t: np.where((t >= first) & (t < first + 1.0), 100.0 * 60, 0.0)  # noqa: E731
    assert state_of(run(telemetry(gpu0_util_pct=busy_at(edge)))).shared  # at the edge: read
    assert not state_of(run(telemetry(gpu0_util_pct=busy_at(edge - 1.0)))).shared  # before it: not


def test_without_phases_the_board_is_not_judged_from_telemetry() -> None:
    """No train phase: no sample is known to be before the training (its own memory is not a tenant's)."""
    frame = telemetry(gpu0_util_pct=90.0, gpu0_mem_used_bytes=40.0 * GIB)
    assert not state_of(run(frame, phases=False)).shared


def test_during_the_training_the_board_alone_proves_nothing() -> None:
    """Memory and utilization while the training runs are the board's, its own included: not evidence."""
    frame = telemetry(gpu0_util_pct=lambda t: np.where(t >= TRAIN, 100.0, 0.0),
                      gpu0_mem_used_bytes=lambda t: np.where(t >= TRAIN, 70.0 * GIB, 0.45 * GIB))  # fmt: skip
    assert not state_of(run(frame)).shared


@pytest.mark.parametrize(
    ("before", "shared"),
    [
        ({"util_pct": 10.0}, True),
        ({"util_pct": 9.9}, False),
        ({"compute_processes": 1}, True),
        ({"compute_processes": 0}, False),
        ({"mem_used_bytes": 2 * GIB}, True),
        ({"mem_used_bytes": 2 * GIB - 1}, False),
        ({"util_pct": None, "mem_used_bytes": None, "compute_processes": None}, False),  # unknown: no claim
    ],
)
def test_gpu_state_before_training(before: dict, shared: bool) -> None:
    state = {"start": [board_state()], "before_training": [{"index": 0, **before}], "other_processes": []}
    assert state_of(run(telemetry(), state)).shared is shared


def test_another_process_during_the_training_shares_the_gpu_it_is_on() -> None:
    process = {"index": 0, "pid": 4242, "name": "python3", "used_memory_bytes": 10 * GIB,
               "first_seen_unix": TRAIN + 50.0, "last_seen_unix": TRAIN + 60.0}  # fmt: skip
    found = state_of(run(telemetry(), {"other_processes": [process]}))
    assert found.shared and "pid 4242, python3 holding 10.0 GiB" in found.evidence[0]
    elsewhere = {**process, "index": 1}
    assert not state_of(run(telemetry(), {"other_processes": [elsewhere]})).shared  # not a charged GPU
    gone = {**process, "first_seen_unix": START, "last_seen_unix": TRAIN - 1.0}
    assert not state_of(run(telemetry(), {"other_processes": [gone]})).shared  # left before it began
    undated = {k: v for k, v in process.items() if not k.endswith("_unix")}
    assert state_of(run(telemetry(), {"other_processes": [undated]})).shared


@pytest.mark.parametrize(
    ("state", "gpu", "info"),
    [
        ({"start": [board_state(mig_mode="enabled")]}, H100, {}),
        (None, {**H100, "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb"}, {}),
        (None, {**H100, "uuid": "MIG-5e1f0000-aaaa-bbbb-cccc-000000000000"}, {}),
        (None, H100, {"gpu_uuids": ["MIG-5e1f0000-aaaa-bbbb-cccc-000000000000"]}),
        (None, H100, {"gpu_names": ["NVIDIA H100 80GB HBM3 MIG 1g.10gb"]}),
    ],
)
def test_a_mig_slice_from_any_of_its_evidence(state: dict | None, gpu: dict, info: dict) -> None:
    found = state_of(run(telemetry(), state, gpu, info))
    assert found.mig and found.signature == "MIG"
    assert found.not_attributable == gs.MIG_SLICE and found.utilization_note == gs.MIG_UTILIZATION
    assert not state_of(run(telemetry(), None, {**H100, "name": "NVIDIA H100 80GB HBM3 MIGHTY"})).mig


@pytest.mark.parametrize(("limit", "capped"), [(699.0, False), (698.9, True), (200.0, True)])
def test_a_power_limit_below_the_boards_own_default_is_a_cap(limit: float, capped: bool) -> None:
    found = state_of(run(telemetry().drop(columns="gpu0_power_limit_w"),
                         {"start": [board_state(power_limit_w=limit)]}))  # fmt: skip
    assert (found.signature == f"power cap {limit:.0f} W") is capped
    assert (found.signature is None) is not capped


@pytest.mark.parametrize(("limit", "capped"), [(630.0, False), (629.9, True), (200.0, True)])
def test_without_the_boards_default_a_cap_is_a_limit_a_tenth_below_the_models_board_power(
    limit: float, capped: bool
) -> None:
    """An H100 SXM5's datasheet 700 W is not every board's default: only a limit < 630 W is a cap."""
    found = state_of(run(telemetry(gpu0_power_limit_w=limit)))
    assert (found.signature == f"power cap {limit:.0f} W") is capped
    assert (found.signature is None) is not capped


def test_the_default_comes_from_gpu_state_else_the_models_board_power_else_no_claim() -> None:
    pcie = {**H100, "name": "NVIDIA H100 PCIe", "power_limit_w": 250.0}  # its SKUs: 300-350 W
    assert state_of(run(telemetry(gpu0_power_limit_w=250.0), gpu=pcie)).signature == "power cap 250 W"
    assert state_of(run(telemetry(gpu0_power_limit_w=300.0), gpu={**pcie, "power_limit_w": 300.0})
                    ).signature is None  # fmt: skip
    state = {"start": [board_state(power_limit_w=250.0, power_limit_default_w=250.0)]}
    assert state_of(run(telemetry(gpu0_power_limit_w=250.0), state, pcie)).signature is None
    nvl = {**H100, "name": "NVIDIA H200 NVL", "power_limit_w": 450.0}  # configurable up to 600 W
    assert state_of(run(telemetry(gpu0_power_limit_w=450.0), gpu=nvl)).signature is None
    unknown = {**H100, "name": "Some Future GPU"}
    assert state_of(run(telemetry(gpu0_power_limit_w=310.0), gpu=unknown)).signature is None
    only_run_json = telemetry().drop(columns="gpu0_power_limit_w")
    assert state_of(run(only_run_json, gpu={**H100, "power_limit_w": 300.0})).signature == "power cap 300 W"


def test_a_setting_changed_while_it_trained_makes_its_rate_a_blend() -> None:
    """A cap lowered halfway through: the run measured two settings, not the lowest one it ends at."""
    lowered = {"time_unix": TRAIN + 100.0, "index": 0, "field": "power_limit_w", "from": 700.0, "to": 300.0}
    state = {"start": [board_state()], "end": [board_state(power_limit_w=300.0)], "changes": [lowered]}
    found = state_of(run(telemetry().drop(columns="gpu0_power_limit_w"), state))
    assert found.changed_note == "gpu0 power limit 700 W → 300 W 100 s into the training"
    before = {**lowered, "time_unix": TRAIN - 10.0}  # set before the training: one setting throughout
    assert state_of(run(telemetry(), {**state, "changes": [before]})).changed_note is None
    first_read = {**lowered, "from": None}  # unknown until then: not a change
    assert state_of(run(telemetry(), {**state, "changes": [first_read]})).changed_note is None
    from_telemetry = telemetry(gpu0_power_limit_w=lambda t: np.where(t < TRAIN + 50.0, 700.0, 450.0))
    assert state_of(run(from_telemetry)).changed_note == (
        "gpu0 power limit 700 W → 450 W during the training (telemetry)"
    )
    sized = analyse_run(run(from_telemetry), Prices(), T)
    assert any("the GPU's settings changed while it trained (gpu0 power limit 700 W → 450 W" in c
               for c in sized.caveats)  # fmt: skip


@pytest.mark.parametrize(("sm_mhz", "held"), [(1979.0, False), (1978.9, True)])
def test_applications_clocks_below_their_default_hold_the_clocks(sm_mhz: float, held: bool) -> None:
    state = {"start": [board_state(applications_clock_sm_mhz=sm_mhz)]}
    found = state_of(run(telemetry(), state))
    assert (found.signature == gs.CLOCKS_HELD) is held and (0 in found.held_low) is held


def _reasons(flagged_busy: int, bit: int = gsets.CLOCK_SETTING_BIT) -> object:
    """`flagged_busy` of the 201 busy samples with `bit`; every idle sample with it too (not counted)."""

    def column(t: np.ndarray) -> np.ndarray:
        busy = np.flatnonzero(t >= TRAIN)
        values = np.where(t >= TRAIN, 0.0, float(bit | 0x1))
        values[busy[:flagged_busy]] = bit
        return values

    return column


def test_the_clock_setting_bit_in_enough_busy_samples_holds_the_clocks() -> None:
    busy = int(END - TRAIN) + 1
    at_fraction = int(np.ceil(T.throttled_sample_fraction * busy))  # 11 of 201 ≥ 5 %; 10 are < 5 %

    def low(flagged: int) -> object:  # the flagged samples at 1,200 MHz, the other busy ones at the max
        return lambda t: np.where(
            t >= TRAIN, np.where(np.arange(t.size) < 100 + flagged, 1200.0, 1980.0), 345.0
        )

    found = state_of(run(telemetry(gpu0_throttle_reasons=_reasons(at_fraction), gpu0_sm_clock_mhz=low(11))))
    assert found.signature == gs.CLOCKS_HELD
    assert (
        "in 5% of busy samples ≥ 5% (11 with clocks-event bit 0x2, SM clock 1200 MHz of its 1980 MHz max)"
        in (found.held_low[0])
    )
    below = state_of(
        run(telemetry(gpu0_throttle_reasons=_reasons(at_fraction - 1), gpu0_sm_clock_mhz=low(10)))
    )
    assert below.signature is None and below.held_low == {}


@pytest.mark.parametrize(("fraction", "held"), [(gsets.UNEXPLAINED_CLOCK_FRACTION, True), (0.7501, False)])
def test_busy_with_no_reason_far_below_the_max_clock_is_a_setting(fraction: float, held: bool) -> None:
    """NVML reports no clocks-event reason only with clocks as high as possible: a clock far below the
    max without one is held by something it does not name, a setting (the shipped runs: always the max)."""
    clocks = lambda t: np.where(t >= TRAIN, fraction * 1980.0, 345.0)  # noqa: E731
    found = state_of(run(telemetry(gpu0_sm_clock_mhz=clocks)))
    assert (found.signature == gs.CLOCKS_HELD) is held
    if held:
        assert "201 with no clocks-event reason at an SM clock ≤ 75% of its max" in found.held_low[0]
    no_reasons = telemetry(gpu0_sm_clock_mhz=clocks).drop(columns="gpu0_throttle_reasons")
    assert state_of(run(no_reasons)).signature is None  # no reasons recorded: nothing to tell it by


@pytest.mark.parametrize(("sm_mhz", "low"), [(1980.0, False), (1979.0, False), (1978.9, True)])
def test_clocks_locked_at_their_max_are_a_setting_but_not_held_low(sm_mhz: float, low: bool) -> None:
    clocks = lambda t: np.where(t >= TRAIN, sm_mhz, 345.0)  # noqa: E731
    found = state_of(run(telemetry(gpu0_throttle_reasons=_reasons(201), gpu0_sm_clock_mhz=clocks)))
    assert found.signature == gs.CLOCKS_HELD and (0 in found.held_low) is low


@pytest.mark.parametrize(("flagged", "low"), [(11, True), (10, False)])
def test_the_sw_power_cap_bit_in_enough_busy_samples_holds_a_capped_board_low(
    flagged: int, low: bool
) -> None:
    capped = telemetry(gpu0_power_limit_w=200.0, gpu0_throttle_reasons=_reasons(flagged, gv.SW_POWER_CAP))
    assert (0 in state_of(run(capped)).held_low) is low  # 11 of 201 busy samples ≥ 5 %; 10 are not


def test_a_cap_with_the_sw_power_cap_bit_holds_the_power_low() -> None:
    capped = telemetry(gpu0_power_limit_w=200.0, gpu0_throttle_reasons=_reasons(201, gv.SW_POWER_CAP))
    held = state_of(run(capped)).held_low[0]
    assert "power capped at 200 W (SW power cap bit in 100% of busy samples)" in held
    unbitten = telemetry(gpu0_power_limit_w=200.0)
    assert state_of(run(unbitten)).signature == "power cap 200 W" and state_of(run(unbitten)).held_low == {}


def test_the_signature_joins_the_phrases_and_names_a_gpu_that_differs() -> None:
    both = gs.GpuState((gs.GpuStateFinding(0, power_cap_w=200.0, clocks_held=("x",)),
                        gs.GpuStateFinding(1, power_cap_w=200.0, clocks_held=("x",))))  # fmt: skip
    assert both.signature == "power cap 200 W; clocks held by a setting"
    one = gs.GpuState((gs.GpuStateFinding(0), gs.GpuStateFinding(1, power_cap_w=250.0, shared=("y",))))
    assert one.signature == "gpu1 power cap 250 W; gpu1 shared"
    assert one.not_attributable == gs.SHARED  # partial is not whole: the run's GPU energy is unknown


def test_the_settings_join_the_hardware_signature_and_its_name() -> None:
    meta = {"system": {"gpus": [H100]}}
    plain = signature.hardware(meta, {}, "gpu")
    capped = signature.hardware(meta, {}, "gpu", "power cap 200 W")
    assert signature.hardware_key("gpu", plain) != signature.hardware_key("gpu", capped)
    assert signature.hardware_name(capped, "gpu") == "NVIDIA H100 80GB HBM3 (power cap 200 W)"
    assert signature.hardware(meta, {}, "cpu", "power cap 200 W")["gpu_settings"] is None


def test_energy_not_attributable_is_unknown_never_the_boards() -> None:
    frame = telemetry(gpu0_energy_j=lambda t: (t - START) * 400.0)
    measured = energy.energy_in(frame, (TRAIN, END), [0], None, 0.3, True)
    assert measured is not None and measured.gpu_j == pytest.approx(200 * 400.0)
    for reason, text in ((gs.SHARED, "energy not attributable: the GPU was shared"),
                         (gs.MIG_SLICE, "board energy not attributable to the slice")):  # fmt: skip
        marked = energy.Energy(**{**measured.__dict__, "not_attributable": reason})
        assert marked.gpu_j is None and marked.total_j is None and marked.missing == reason
        assert marked.covers == text and energy.joules_per_1000(marked.total_j, 200.0, 10.0) is None


def test_a_board_figure_verdict_is_withheld_where_the_board_is_not_the_runs() -> None:
    busy = telemetry(gpu0_util_pct=95.0, cpu_util_pct=20.0).iloc[100:]
    assert bottleneck.verdict("gpu", busy, [0], [], T).primary == bottleneck.GPU_BOUND
    withheld = bottleneck.verdict("gpu", busy, [0], [], T, (), gs.SHARED_UTILIZATION)
    assert withheld.primary == gs.SHARED_UTILIZATION and bottleneck.GPU_BOUND not in withheld.labels
    assert withheld.numbers["gpu_util_pct"] is None and withheld.numbers["gpu board util pct"] == 95.0
    idle = telemetry(gpu0_util_pct=5.0, cpu_util_pct=20.0).iloc[100:]
    slice_verdict = bottleneck.verdict("gpu", idle, [0], [], T, (), gs.MIG_UTILIZATION)
    assert bottleneck.GPU_UNDERUSED not in slice_verdict.labels
    host = telemetry(gpu0_util_pct=5.0, cpu_util_pct=95.0).iloc[100:]
    kept = bottleneck.verdict("gpu", host, [0], [], T, (), gs.SHARED_UTILIZATION)
    assert kept.primary == bottleneck.HOST_BOUND and gs.SHARED_UTILIZATION in kept.labels  # host figures
    stalled = gv.GpuFinding("gpu0", gv.BUSY_NOT_COMPUTING, "stalled", {}, primary=True)
    shared = bottleneck.verdict("gpu", busy, [0], [], T, (stalled,), gs.SHARED_UTILIZATION)
    assert gv.BUSY_NOT_COMPUTING not in shared.labels


def test_busy_but_not_computing_never_fires_while_a_setting_holds_the_clocks() -> None:
    spinning = telemetry(gpu0_util_pct=97.0, gpu0_power_w=120.0).iloc[100:]
    fired = gv.gpu_findings(spinning, [0], [H100], T)
    assert [f.label for f in fired] == [gv.BUSY_NOT_COMPUTING]
    held = gv.gpu_findings(spinning, [0], [H100], T, {0: "clocks held by a setting (bit 0x2 ...)"})
    assert [f.label for f in held] == [gv.HELD_BY_SETTING] and not held[0].primary
    assert "97.0 %" in held[0].evidence and "not busy but not computing" in held[0].evidence
    working = telemetry(gpu0_util_pct=97.0, gpu0_power_w=500.0).iloc[100:]
    said = gv.gpu_findings(working, [0], [H100], T, {0: "clocks held by a setting"})
    assert [f.evidence for f in said] == ["gpu0 clocks held by a setting"]


def test_a_jobs_energy_is_unknown_when_one_node_is_not_the_runs() -> None:
    frame = telemetry(gpu0_energy_j=lambda t: (t - START) * 400.0)
    alone = energy.energy_in(frame, (TRAIN, END), [0], None, 0.3, True)
    assert alone is not None
    shared = replace(alone, not_attributable=gs.SHARED)
    assert job_energy([(0, alone), (1, alone)], END - TRAIN, True).gpu_j == pytest.approx(2 * 200 * 400.0)
    job = job_energy([(0, alone), (1, shared)], END - TRAIN, True)
    assert job is not None and job.total_j is None and job.missing == gs.SHARED


@pytest.mark.parametrize("before_util", [0.0, 50.0])
def test_serving_on_a_shared_gpu_is_not_charged_the_boards_energy(tmp_path: Path, before_util: float) -> None:
    frame = telemetry(gpu0_util_pct=lambda t: np.where(t >= TRAIN, 60.0, before_util),
                      gpu0_energy_j=lambda t: (t - START) * 400.0)  # fmt: skip
    data = replace(run(frame), run_id="served", meta={**run(frame).meta, "run_id": "served"})
    cell = serving_cell(8, 400.0, END - 20.0, END - 10.0)
    (row,) = serving_section([load_run_dir(write_serving_run(tmp_path, data, "gpu", [cell]))], Prices()).rows
    if before_util:
        assert row.joules_per_1000_images is None and row.energy_method == f"energy {gs.SHARED}"
    else:
        assert row.joules_per_1000_images == pytest.approx(400.0 * 10 / 4000 * 1000)


def test_unchecked_tenants_are_said_not_assumed_absent() -> None:
    reason = "the collector runs in a pid namespace of its own (a container)"
    found = state_of(run(telemetry(), {"processes_checked": False, "processes_reason": reason}))
    assert found.tenants_unchecked == reason and not found.shared
    (line,) = gs.state_warnings("r1", found)
    assert f"not checked ({reason})" in line and "as if it had the GPU alone" in line
    assert gs.state_json(found)["tenants_unchecked"] == reason
    assert state_of(run(telemetry(), {"processes_checked": True})).tenants_unchecked is None


def _links(start: tuple[int, int] | None, end: tuple[int, int] | None) -> dict:
    def reading(link: tuple[int, int] | None) -> list[dict]:
        width = {"pcie_link_width": link[0], "pcie_link_width_max": link[1]} if link else None
        return [{"index": 0, **width}] if width else []

    return {"start": reading(start), "end": reading(end)}


def test_a_pcie_link_narrower_at_start_and_end_joins_the_signature() -> None:
    state = state_of(run(telemetry(), _links((4, 16), (4, 16))))
    assert state.signature == "PCIe x4 of x16"
    assert state.evidence == (
        "gpu0 PCIe x4 of x16 at start and end (gpu_state pcie_link_width and pcie_link_width_max)",
    )
    hardware = signature.hardware({"device": "gpu", "system": {"gpus": [H100]}}, {}, "gpu", state.signature)
    assert signature.hardware_name(hardware, "gpu").endswith("(PCIe x4 of x16)")


@pytest.mark.parametrize(
    ("start", "end"),
    [((16, 16), (16, 16)), ((4, 16), (16, 16)), ((16, 16), (8, 16)), ((4, 16), None), (None, None),
     ((0, 16), (0, 16))],
)  # fmt: skip
def test_a_link_narrow_at_one_reading_or_none_is_no_claim(start, end) -> None:
    """NVML may narrow an idle link on some boards: one narrow reading is not a slot wired narrow."""
    assert state_of(run(telemetry(), _links(start, end))).signature is None
