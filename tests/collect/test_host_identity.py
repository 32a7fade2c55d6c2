"""run.json `system` host identity: machine-id, boot id and a cloud instance id, hashed, from fake trees."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from collectfakes import fake_psutil, write_tree

from collect.sysinfo import host_identity, identity_hash, system_info

MACHINE = "4c4c4544004a4d10804ab4c04f503432"
BOOT = "1d8d2b6c-5b1f-4a40-9c6b-2f0b8e3d9a11"
UUID = "EC2A6F1E-1B9C-4D0B-8C1A-0123456789AB"
INSTANCE = "i-0123456789abcdef0"


def trees(tmp_path: Path, etc: dict, var: dict, proc: dict, sys_files: dict) -> tuple[Path, Path, Path, Path]:
    return (
        write_tree(tmp_path / "etc", etc),
        write_tree(tmp_path / "var", var),
        write_tree(tmp_path / "proc", proc),
        write_tree(tmp_path / "sys", sys_files),
    )


def test_ids_are_hashed_into_run_json_and_never_written_raw(tmp_path: Path) -> None:
    etc, var, proc, sys_root = trees(
        tmp_path,
        {"machine-id": MACHINE + "\n", "os-release": 'PRETTY_NAME="Test OS"\n'},
        {},
        {"sys/kernel/random/boot_id": BOOT + "\n", "cpuinfo": "model name\t: X\n"},
        {"class/dmi/id/board_asset_tag": INSTANCE + "\n", "class/dmi/id/product_uuid": UUID + "\n"},
    )
    info = system_info(proc, sys_root, psutil_module=fake_psutil(), etc_root=etc, var_root=var)
    assert info["machine_id_hash"] == identity_hash(MACHINE)
    assert info["boot_id_hash"] == identity_hash(BOOT)
    assert info["instance_id_hash"] == identity_hash(INSTANCE)  # AWS Nitro's asset tag first
    assert info["instance_id_from"] == "/sys/class/dmi/id/board_asset_tag"
    assert info["os"] == "Test OS"
    written = json.dumps(info).lower()
    assert all(raw.lower() not in written for raw in (MACHINE, BOOT, UUID, INSTANCE))
    digest = identity_hash(MACHINE)
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert digest != hashlib.sha256(MACHINE.encode()).hexdigest()[:16]  # keyed: matches no plain hash


def test_fallbacks_dbus_machine_id_then_product_uuid_then_xen(tmp_path: Path) -> None:
    etc, var, proc, sys_root = trees(
        tmp_path,
        {},
        {"lib/dbus/machine-id": MACHINE + "\n"},
        {},
        {"class/dmi/id/board_asset_tag": "Not Specified\n", "class/dmi/id/product_uuid": UUID + "\n"},
    )
    found = host_identity(etc, var, proc, sys_root)
    assert found["machine_id_hash"] == identity_hash(MACHINE)
    assert found["instance_id_hash"] == identity_hash(UUID.lower())  # case does not make another machine
    assert found["instance_id_from"] == "/sys/class/dmi/id/product_uuid"
    assert found["boot_id_hash"] is None  # unreadable: unknown
    xen = write_tree(tmp_path / "xen", {"hypervisor/uuid": "ec2a6f1e-0000-1111-2222-333344445555\n"})
    assert host_identity(etc, var, proc, xen)["instance_id_from"] == "/sys/hypervisor/uuid"


def test_unreadable_and_placeholder_ids_are_unknown_not_empty(tmp_path: Path) -> None:
    etc, var, proc, sys_root = trees(
        tmp_path,
        {"machine-id": "uninitialized\n"},
        {},
        {},
        {"class/dmi/id/product_uuid": "00000000-0000-0000-0000-000000000000\n"},
    )
    (proc / "sys/kernel/random/boot_id").mkdir(parents=True)  # unreadable even as root
    assert host_identity(etc, var, proc, sys_root) == {
        "machine_id_hash": None,
        "boot_id_hash": None,
        "instance_id_hash": None,
        "instance_id_from": None,
    }
    assert host_identity(*(tmp_path / "absent" for _ in range(4)))["machine_id_hash"] is None


def test_two_machines_and_two_boots_hash_apart(tmp_path: Path) -> None:
    def identity(name: str, machine: str, boot: str) -> dict:
        etc, var, proc, sys_root = trees(
            tmp_path / name, {"machine-id": machine}, {}, {"sys/kernel/random/boot_id": boot}, {}
        )
        return host_identity(etc, var, proc, sys_root)

    first, rebooted, other = (
        identity("a", MACHINE, BOOT),
        identity("b", MACHINE, "x" + BOOT[1:]),
        identity("c", MACHINE[::-1], BOOT),
    )
    assert first["machine_id_hash"] == rebooted["machine_id_hash"] != other["machine_id_hash"]
    assert first["boot_id_hash"] != rebooted["boot_id_hash"]
