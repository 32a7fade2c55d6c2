"""`python -m collect import-nvidia-smi` on logs written here in each documented nvidia-smi format."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from nvsmifixtures import (
    BASIC_FIELDS,
    FULL_FIELDS,
    Gpu,
    capped,
    dmon_log,
    four_gpus,
    query_gpu_log,
)

from collect.importers import nvsmi
from runformat import read_json

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
START = datetime(2026, 11, 23, 14, 2, 1, 120_000)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = nvsmi.run_cli(list(args))
    return code, capsys.readouterr().err


def importer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collect", "import-nvidia-smi", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def runs_in(data_dir: Path) -> list[Path]:
    runs = data_dir / "runs"
    return sorted(p for p in runs.iterdir() if not p.name.startswith(".")) if runs.exists() else []


def only_run(data_dir: Path) -> Path:
    (run_dir,) = runs_in(data_dir)
    return run_dir


def rows_of(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "telemetry.csv", encoding="ascii", newline="") as handle:
        return list(csv.DictReader(handle))


def imported(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *args: str) -> Path:
    log = write(tmp_path, "gpu.csv", text)
    data = tmp_path / "data"
    code, err = run_cli(capsys, str(log), "--data-dir", str(data), "--utc-offset", "+01:00", *args)
    assert code == 0, err
    return only_run(data)


def test_full_query_log_with_units_two_gpus_told_apart_by_index(capsys, tmp_path: Path) -> None:
    run_dir = imported(capsys, tmp_path, query_gpu_log([Gpu(0), capped(1)], samples=30))
    meta, rows = read_json(run_dir / "run.json"), rows_of(run_dir)
    assert len(rows) == 30 and meta["samples"] == 30 and meta["device"] == "gpu"
    assert run_dir.name == "20261123T130200Z-gpu-nvidia-smi"  # 14:02:01.120 at UTC+01:00, one interval before
    first = rows[0]
    assert float(first["time_unix"]) == datetime(2026, 11, 23, 13, 2, 1, 120_000, timezone.utc).timestamp()
    assert float(first["gpu0_util_pct"]) == 96 and float(first["gpu0_mem_used_bytes"]) == 30_512 * MIB
    assert float(first["gpu0_power_w"]) == 520.0  # power.draw.average
    assert float(first["gpu0_power_instant_w"]) == 535.0  # power.draw.instant
    assert float(first["gpu1_power_limit_w"]) == 700.0 and float(first["gpu1_sm_clock_mhz"]) == 1410
    assert int(first["gpu1_throttle_reasons"]) == 0x4 and int(first["gpu0_throttle_reasons"]) == 0
    assert first["gpu0_pstate"] == "0" and first["gpu0_fan_pct"] == ""  # [N/A] is empty, never 0
    assert first["gpu0_pcie_link_gen_current"] == "5"  # an unknown field, kept under its own name
    gpus = meta["system"]["gpus"]
    assert [g["uuid"] for g in gpus] == [Gpu(0).uuid, Gpu(1).uuid]
    assert gpus[1] | {"uuid": None} == {
        "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": None, "mem_total_bytes": 81559 * MIB,
        "power_limit_w": 700.0, "pci_bus_id": "00000000:1A:00.0", "sm_clock_max_mhz": 1980.0,
    }  # fmt: skip
    source = meta["imported_from"]
    assert source["tool"] == "nvidia-smi" and source["utc_offset"] == "+01:00"
    assert source["utc_offset_from"] == "--utc-offset" and source["gpus_by"] == "index column"
    assert source["kept_fields"] == {"pcie.link.gen.current": "pcie_link_gen_current"}
    notes = "\n".join(meta["notes"])
    assert "pcie.link.gen.current → gpu<N>_pcie_link_gen_current" in notes
    assert "gpu0_fan_pct, gpu1_fan_pct" in notes
    assert set(meta["not_recorded"]) == {"training GPUs", "CPU side", "training steps"}
    assert not meta["sources"]["cpu"]["available"] and meta["sources"]["nvml"]["available"]


def test_without_units_and_in_any_order_the_same_readings(capsys, tmp_path: Path) -> None:
    with_units = imported(capsys, tmp_path / "a", query_gpu_log([Gpu()], BASIC_FIELDS))
    shuffled = [BASIC_FIELDS[i] for i in (3, 0, 5, 1, 4, 2)]
    bare = imported(capsys, tmp_path / "b", query_gpu_log([Gpu()], shuffled, units=False))
    assert rows_of(with_units) == [
        {column: row[column] for column in rows_of(with_units)[0]} for row in rows_of(bare)
    ]
    assert float(rows_of(bare)[3]["gpu0_mem_used_bytes"]) == 30_512 * MIB  # MiB from the header's [MiB]


def test_windows_line_ends_and_byte_order_marks(capsys, tmp_path: Path) -> None:
    text = query_gpu_log([Gpu()], BASIC_FIELDS, samples=5).replace("\n", "\r\n")
    for name, data in (("utf16.csv", text.encode("utf-16")), ("bom.csv", "\ufeff".encode() + text.encode())):
        log = tmp_path / name
        log.write_bytes(data)
        code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / name.split(".")[0]))
        assert code == 0, err
        assert len(rows_of(only_run(tmp_path / name.split(".")[0]))) == 5


def test_a_log_without_header_needs_its_fields(capsys, tmp_path: Path) -> None:
    text = query_gpu_log([Gpu()], BASIC_FIELDS, header=False, units=False)
    log = write(tmp_path, "noheader.csv", text)
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"))
    assert code == 2 and "no header line" in err and "--fields" in err and len(err.splitlines()) == 1
    assert runs_in(tmp_path / "data") == []
    fields = "--query-gpu=" + ",".join(BASIC_FIELDS)
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"), f"--fields={fields}")
    assert code == 0, err
    rows = rows_of(only_run(tmp_path / "data"))
    assert float(rows[0]["gpu0_mem_used_bytes"]) == 30_512 * MIB  # memory is MiB without a header too


def test_unavailable_cells_are_empty_and_said(capsys, tmp_path: Path) -> None:
    def cells(k: int, gpu: int, field: str, text: str) -> str:
        if field == "temperature.memory":
            return "[Not Supported]"
        if field == "power.draw.instant" and k % 2:
            return "[N/A]"
        return "[Unknown Error]" if field == "clocks.sm" and k == 3 else text

    run_dir = imported(capsys, tmp_path, query_gpu_log([Gpu()], cells=cells, samples=6))
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    assert {row["gpu0_mem_temp_c"] for row in rows} == {""}
    assert [row["gpu0_power_instant_w"] == "" for row in rows] == [False, True] * 3
    assert rows[3]["gpu0_sm_clock_mhz"] == "" and rows[2]["gpu0_sm_clock_mhz"] == "1980"
    assert any("gpu0_mem_temp_c" in note and "[N/A]" in note for note in meta["notes"])


def test_older_field_names_and_named_throttle_reasons(capsys, tmp_path: Path) -> None:
    fields = ["timestamp", "name", "utilization.gpu", "power.draw", "power.limit", "clocks.current.sm",
              "clocks_throttle_reasons.sw_power_cap", "clocks_throttle_reasons.hw_slowdown"]  # fmt: skip
    run_dir = imported(capsys, tmp_path, query_gpu_log([capped()], fields, samples=5))
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    assert {int(row["gpu0_throttle_reasons"]) for row in rows} == {0x4}
    assert float(rows[0]["gpu0_power_w"]) == 696.0 and float(rows[0]["gpu0_power_limit_w"]) == 700.0
    assert float(rows[0]["gpu0_sm_clock_mhz"]) == 1410.0
    assert any("built from the named clocks-event reasons" in note for note in meta["notes"])
    assert "training GPUs" not in meta["not_recorded"]  # one GPU: it is the one


def test_interleaved_gpus_without_an_id_column_need_gpus(capsys, tmp_path: Path) -> None:
    log = write(tmp_path, "four.csv", query_gpu_log(four_gpus(straggler=2), BASIC_FIELDS, samples=20))
    data = str(tmp_path / "data")
    code, err = run_cli(capsys, str(log), "--data-dir", data)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "bursts of 4 lines 2 ms apart" in err and "--gpus 4" in err
    code, err = run_cli(capsys, str(log), "--data-dir", data, "--gpus", "2")
    assert code == 2 and "--gpus 2, but the timestamps come in bursts of 4 lines" in err
    assert runs_in(tmp_path / "data") == []
    code, err = run_cli(capsys, str(log), "--data-dir", data, "--gpus", "4")
    assert code == 0, err
    run_dir = only_run(tmp_path / "data")
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    assert len(rows) == 20 and meta["system"]["gpu_count"] == 4
    assert meta["imported_from"]["gpus_by"] == "line order (--gpus 4)"
    assert [float(rows[0][f"gpu{i}_util_pct"]) for i in range(4)] == [97, 97, 22, 97]
    assert float(rows[1]["time_unix"]) - float(rows[0]["time_unix"]) == pytest.approx(1.0)


def test_mixed_gpu_counts_are_refused(capsys, tmp_path: Path) -> None:
    two = query_gpu_log([Gpu(0), Gpu(1)], BASIC_FIELDS, samples=20)
    four = query_gpu_log(
        four_gpus(), BASIC_FIELDS, samples=20, start=START + timedelta(minutes=1), header=False
    )
    log = write(tmp_path, "mixed.csv", two + four)
    for extra in ([], ["--gpus", "2"]):
        code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"), *extra)
        assert code == 2 and "mixed GPU counts" in err and len(err.strip().splitlines()) == 1, err
    assert runs_in(tmp_path / "data") == []


def test_dmon_output_with_repeated_headers(capsys, tmp_path: Path) -> None:
    run_dir = imported(capsys, tmp_path, dmon_log([Gpu(0), capped(1)], samples=25, repeat_header=10))
    rows, meta = rows_of(run_dir), read_json(run_dir / "run.json")
    assert len(rows) == 25 and meta["imported_from"]["format"] == "dmon"
    assert float(rows[0]["gpu1_power_w"]) == 696 and float(rows[0]["gpu0_sm_clock_mhz"]) == 1980
    assert float(rows[0]["gpu0_mem_used_bytes"]) == 30_512 * MIB and rows[0]["gpu0_mem_temp_c"] == ""
    assert rows[0]["gpu0_dmon_enc"] == "0" and "enc" in meta["imported_from"]["kept_fields"]
    assert meta["interval_s"] == 1.0
    plain = "# gpu    pwr  gtemp  mtemp     sm    mem\n# Idx      W      C      C      %      %\n"
    log = write(tmp_path, "dmon-plain.txt", plain + "    0     43     28      -      0      0\n")
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "other"))
    assert code == 2 and "nvidia-smi dmon -o DT" in err


def test_a_10_ms_log(capsys, tmp_path: Path) -> None:
    run_dir = imported(capsys, tmp_path, query_gpu_log([Gpu()], BASIC_FIELDS, samples=500, interval_s=0.01))
    meta, rows = read_json(run_dir / "run.json"), rows_of(run_dir)
    assert meta["interval_s"] == 0.01 and len(rows) == 500
    assert meta["imported_from"]["gpus_by"] == "one GPU (one line per sample)"


def test_interleaved_gpus_at_10_ms_are_told_by_their_rhythm(capsys, tmp_path: Path) -> None:
    text = query_gpu_log(four_gpus(straggler=1), BASIC_FIELDS, samples=100, interval_s=0.01)
    log = write(tmp_path, "fast.csv", text)  # lines 2 ms apart, samples 10 ms apart: gaps 2, 2, 2, 4 ms
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"))
    assert code == 2 and "--gpus 4" in err
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"), "--gpus", "4")
    assert code == 0, err
    rows = rows_of(only_run(tmp_path / "data"))
    assert len(rows) == 100 and {float(r["gpu1_util_pct"]) for r in rows} <= {22.0, 23.0, 24.0}


def test_a_truncated_last_line_is_left_out_with_a_warning(tmp_path: Path) -> None:
    text = query_gpu_log([Gpu()], FULL_FIELDS, samples=10)
    log = write(tmp_path, "cut.csv", text[:-40])
    done = importer(str(log), "--data-dir", str(tmp_path / "data"), "--utc-offset", "+01:00")
    assert done.returncode == 0, done.stderr
    assert "warning: line 11 is cut short" in done.stderr and "Traceback" not in done.stderr
    run_dir = only_run(tmp_path / "data")
    assert len(rows_of(run_dir)) == 9
    assert any(
        note.startswith("warning: line 11 is cut short") for note in read_json(run_dir / "run.json")["notes"]
    )
    unended = write(tmp_path, "unended.txt", dmon_log([Gpu()], samples=8)[:-1])  # cut before its line end
    done = importer(str(unended), "--data-dir", str(tmp_path / "dmon"))
    assert done.returncode == 0 and "line 10 is cut short (no line end" in done.stderr, done.stderr
    assert len(rows_of(only_run(tmp_path / "dmon"))) == 7
    lines = text.splitlines()
    middle = write(tmp_path, "middle.csv", "\n".join([*lines[:5], lines[5][:30], *lines[6:]]) + "\n")
    done = importer(str(middle), "--data-dir", str(tmp_path / "other"))
    assert done.returncode == 0 and "warning: 1 line that is not a reading left out (line 6: " in done.stderr
    assert len(rows_of(only_run(tmp_path / "other"))) == len(lines) - 2  # the header and line 6


def test_nvidia_smis_own_messages_in_the_log_are_left_out_and_said(tmp_path: Path) -> None:
    """`nvidia-smi -l 1 > gpu.csv 2>&1` logs its own messages too: a GPU lost mid-log keeps every reading."""
    lines = query_gpu_log([Gpu()], samples=12).splitlines()
    lost = "Unable to determine the device handle for GPU 0000:00:06.0: GPU is lost.  Reboot the system"
    log = write(tmp_path, "gpu.csv", "\n".join([*lines[:8], lost, *lines[8:]]) + "\n")
    done = importer(str(log), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    said = f"warning: 1 line that is not a reading left out (line 9: '{lost}': 1 fields, the header has"
    assert said in done.stderr
    run_dir = only_run(tmp_path / "data")
    assert len(rows_of(run_dir)) == 12
    notes = read_json(run_dir / "run.json")["notes"]
    assert any(note.startswith("warning: 1 line that is not a reading") for note in notes)
    garbled = write(tmp_path, "garbled.csv", "\n".join([lines[0], *[lost] * 6, *lines[1:7]]) + "\n")
    done = importer(str(garbled), "--data-dir", str(tmp_path / "other"))  # half of it is not readings
    assert done.returncode == 2 and "line 2: 1 fields" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_line_whose_gpu_index_is_an_error_is_left_out_not_another_gpu(tmp_path: Path) -> None:
    """A GPU that fails mid-log prints `[Unknown Error]` in every cell, its index too: that line names
    no GPU, so it is left out and said, and the run keeps its two GPUs."""

    def broken(k: int, gpu: int, field: str, text: str) -> str:
        return "[Unknown Error]" if (k, gpu) == (5, 1) and field != "timestamp" else text

    log = write(tmp_path, "gpu.csv", query_gpu_log([Gpu(0), Gpu(1)], samples=12, cells=broken))
    done = importer(str(log), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert "its GPU index is '[Unknown Error]'" in done.stderr, done.stderr
    run_dir = only_run(tmp_path / "data")
    rows = rows_of(run_dir)
    assert len(rows) == 12 and not any(name.startswith("gpu2_") for name in rows[0])
    assert rows[5]["gpu1_util_pct"] == "" and rows[5]["gpu0_util_pct"] != ""
    dmon = dmon_log([Gpu(0), Gpu(1)], samples=8).splitlines()
    at = next(i for i, line in enumerate(dmon) if not line.startswith("#") and line.split()[2] == "1")
    cells = dmon[at].split()
    dmon[at] = " ".join([*cells[:2], "-", *["-"] * (len(cells) - 3)])
    log = write(tmp_path, "dmon.txt", "\n".join(dmon) + "\n")
    done = importer(str(log), "--data-dir", str(tmp_path / "dmon"))
    assert done.returncode == 0 and "its gpu is '-'" in done.stderr, done.stderr
    columns = rows_of(only_run(tmp_path / "dmon"))[0]
    assert not any(name.startswith(("gpu2_", "gpu-_")) for name in columns)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty file"),
        (b"\x96\xd5\x00\x01binary", "not text"),
        (b"hello, world\nthis is not a log\n", "not an nvidia-smi log"),
        (b"# hostname;interval;timestamp;CPU;%user\n", "not an nvidia-smi log"),
        (b"index, name, utilization.gpu [%]\n0, H100, 50 %\n", "no timestamp field"),
        (b"timestamp, utilization.gpu [%]\n", "no readings after the header"),
        (
            b"timestamp, utilization.gpu [%]\n2026/13/45 99:00:00.000, 5 %\n2026/11/23 10:00:00.000, 5 %\n",
            "line 2",
        ),
    ],
)
def test_malformed_input_is_one_line_and_exit_2(
    capsys, tmp_path: Path, content: bytes, expected: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content)
    code, err = run_cli(capsys, str(bad), "--data-dir", str(tmp_path / "data"))
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert runs_in(tmp_path / "data") == []


def test_usage_errors_through_the_cli(tmp_path: Path) -> None:
    log = write(tmp_path, "gpu.csv", query_gpu_log([Gpu()], BASIC_FIELDS, samples=3))
    for args, expected in (
        ([str(log), "--utc-offset", "CET"], "use ±HH:MM"),
        ([str(log), "--gpus", "0"], "a whole number ≥ 1"),
        ([str(tmp_path / "absent.csv")], "no such file"),
        ([str(log), "--into", str(tmp_path), "--data-dir", str(tmp_path)], "not allowed with"),
        ([str(log), "--into", str(tmp_path)], "not a run directory"),
    ):
        done = importer(*args)
        assert done.returncode == 2 and expected in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_default_offset_is_this_machines_zone_and_run_json_says_so(capsys, tmp_path: Path) -> None:
    log = write(tmp_path, "gpu.csv", query_gpu_log([Gpu()], BASIC_FIELDS, samples=3))
    code, err = run_cli(capsys, str(log), "--data-dir", str(tmp_path / "data"))
    assert code == 0, err
    meta = read_json(only_run(tmp_path / "data") / "run.json")
    local = START.astimezone()
    assert meta["imported_from"]["utc_offset_from"].startswith("assumed: this machine's time zone")
    assert float(rows_of(only_run(tmp_path / "data"))[0]["time_unix"]) == round(local.timestamp(), 3)


@pytest.mark.parametrize("identifier", ["uuid", "pci.bus_id"])
def test_gpus_told_apart_by_uuid_or_bus_id(capsys, tmp_path: Path, identifier: str) -> None:
    fields = ["timestamp", identifier, "name", "utilization.gpu", "power.draw"]
    run_dir = imported(capsys, tmp_path, query_gpu_log(four_gpus(straggler=3), fields, samples=10))
    meta, rows = read_json(run_dir / "run.json"), rows_of(run_dir)
    assert meta["imported_from"]["gpus_by"] == f"{identifier} column" and len(rows) == 10
    gpus = meta["system"]["gpus"]
    assert [g["uuid" if identifier == "uuid" else "pci_bus_id"] for g in gpus] == [
        Gpu(i).uuid if identifier == "uuid" else Gpu(i).bus_id for i in range(4)
    ]
    assert [float(rows[0][f"gpu{i}_util_pct"]) for i in range(4)] == [97, 97, 97, 22]
