"""Host identity in the hardware signature: VMs of one kind are repeats of one configuration, and the group
knows how many different machines they ran on."""

from __future__ import annotations

from sizingfixtures import reference_gpu, renamed, with_system

from sizing import ReportSettings, build_report, to_json
from sizing.analysis import compare as cmp
from sizing.analysis import signature
from sizing.analysis.run import analyse_run
from sizing.model import Prices, Thresholds


def on(run_id: str, **identity: str | None):
    run = with_system(renamed(reference_gpu(), run_id), **identity)
    return analyse_run(run, Prices(), Thresholds())


def test_two_vms_with_one_host_name_and_hardware_are_repeats_on_two_machines() -> None:
    a = on("vm-a", machine_id_hash="aaaa000000000001", boot_id_hash="b1")
    b = on("vm-b", machine_id_hash="aaaa000000000002", boot_id_hash="b2")
    assert a.hardware["host"] == b.hardware["host"] and signature.hardware_key("gpu", a.hardware) == \
        signature.hardware_key("gpu", b.hardware)  # fmt: skip
    (group,) = cmp.group_runs([a, b])
    assert group.run_ids == ("vm-a", "vm-b") and group.machines == 2
    assert a.hardware["machine_id_hash"] == "aaaa000000000001" and a.hardware["boot_id_hash"] == "b1"


def test_a_reboot_is_the_same_machine_and_a_clone_with_another_instance_is_not() -> None:
    first = on("r1", machine_id_hash="m1", instance_id_hash="i1", boot_id_hash="boot1")
    rebooted = on("r2", machine_id_hash="m1", instance_id_hash="i1", boot_id_hash="boot2")
    as_user = on("r3", machine_id_hash="m1")  # not root: product_uuid unreadable, machine-id agrees
    clone = on("r4", machine_id_hash="m1", instance_id_hash="i2")  # one image, another VM
    assert cmp.make_group([first, rebooted, as_user]).machines == 1
    assert cmp.make_group([first, rebooted, clone]).machines == 2
    assert signature.same_machine(first.hardware, clone.hardware) is False
    assert signature.same_machine(first.hardware, as_user.hardware) is True


def test_machines_unknown_when_a_run_has_no_identity_or_none_to_compare() -> None:
    known = on("k", machine_id_hash="m1")
    unknown = on("u")  # an older run, an imported log
    only_instance = on("i", instance_id_hash="i9")
    assert unknown.hardware["machine_id_hash"] is None and unknown.hardware["instance_id_hash"] is None
    assert cmp.make_group([known, unknown]).machines is None
    assert signature.same_machine(known.hardware, only_instance.hardware) is None
    assert cmp.make_group([known, only_instance]).machines is None
    assert cmp.make_group([known]).machines == 1
    wrong_type = on("w", machine_id_hash=12345)  # not text: read as unknown
    assert wrong_type.hardware["machine_id_hash"] is None


def test_the_json_hardware_carries_the_hashes() -> None:
    run = with_system(reference_gpu(), machine_id_hash="m1", boot_id_hash="b1")
    data = to_json(build_report([run], ReportSettings()))
    (run,) = data["runs"]
    assert run["hardware"]["machine_id_hash"] == "m1" and run["hardware"]["instance_id_hash"] is None
