"""`python -m collect import-sysstat` on a real recording made here by Debian's sadc, read back with sadf."""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from collect.importers.sadf import SysstatImportError, parse_sadf
from runformat import read_json

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
# Recorded here by `sadc FILE; sadc -S DISK 1 3 FILE` of sysstat 11.2.14 (built from its source), whose
# file format (0x2173) this machine's sadf reads only after `sadf -c`.
OLDER_FORMAT = Path(__file__).parent / "fixtures" / "sa-sysstat-11.2.14"
CPU_HEADER = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle"
SADC_PLACES = ("/usr/lib/sysstat/sadc", "/usr/lib64/sa/sadc", "/usr/libexec/sysstat/sadc", "/usr/lib/sa/sadc")
CONTRACT_COLUMNS = {
    "time_unix",
    "elapsed_s",
    "cpu_util_pct",
    "cpu_iowait_pct",
    "cpu_steal_pct",
    "load1",
    "cpu_temp_c",
    "mem_used_bytes",
    "mem_util_pct",
    "swap_used_bytes",
    "disk_read_bps",
    "disk_write_bps",
    "disk_util_pct",
    "disk_busiest_bps",
    "net_rx_bps",
    "net_tx_bps",
}


def _sysstat_or_skip() -> tuple[str, str]:
    sadc = shutil.which("sadc") or next((p for p in SADC_PLACES if os.access(p, os.X_OK)), None)
    sadf = shutil.which("sadf")
    if sadc is None or sadf is None:
        message = "needs Debian's sysstat (sadc, sadf): apt-get install sysstat, as root"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sadc, sadf


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 4-sample, 1 s sadc recording taken while this test burns a CPU and writes to disk."""
    sadc, _ = _sysstat_or_skip()
    path = tmp_path_factory.mktemp("sysstat") / "sa-test"
    scratch_dir = tempfile.mkdtemp(prefix=".sysstat-test-", dir=REPO)  # a real disk, even if /tmp is tmpfs
    scratch = Path(scratch_dir) / "scratch.bin"
    load = subprocess.Popen(
        [
            PYTHON,
            "-c",
            "import os, time\n"
            f"end = time.time() + 5\nf = open({str(scratch)!r}, 'wb')\n"
            "while time.time() < end:\n"
            "    f.write(os.urandom(1 << 20)); f.flush(); os.fsync(f.fileno())\n",
        ]
    )
    try:
        subprocess.run([sadc, "-S", "XALL", "1", "5", str(path)], check=True, timeout=30)
    finally:
        load.wait(timeout=30)
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return path


def importer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "collect", "import-sysstat", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )


def read_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "telemetry.csv", encoding="ascii", newline="") as handle:
        return list(csv.DictReader(handle))


def only_run(data_dir: Path) -> Path:
    entries = list((data_dir / "runs").iterdir())
    assert len(entries) == 1, entries
    return entries[0]


def test_import_of_a_real_sadc_file(recording: Path, tmp_path: Path) -> None:
    _, sadf = _sysstat_or_skip()
    done = importer(str(recording), "--data-dir", str(tmp_path), "--label", "web01 last night")
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path)
    meta = read_json(run_dir / "run.json")
    assert meta["run_id"] == run_dir.name and run_dir.name.endswith(f"-cpu-{socket.gethostname()}")
    assert meta["host"] == socket.gethostname() and meta["label"] == "web01 last night"
    assert meta["interval_s"] == 1.0 and meta["samples"] == 4 and meta["end_reason"] == "completed"
    assert meta["system"]["cpu_cores_logical"] == os.cpu_count()
    assert meta["imported_from"]["tool"] == "sysstat" and meta["imported_from"]["sysstat_version"]
    assert meta["sources"]["cpu"]["available"] and not meta["sources"]["nvml"]["available"]
    assert "sysstat" in meta["sources"]["thermal"]["reason"]

    rows = read_rows(run_dir)
    assert len(rows) == 4
    columns = set(rows[0])
    per_core = {f"cpu{n}_util_pct" for n in range(os.cpu_count() or 1)}
    assert columns == CONTRACT_COLUMNS | per_core
    times = [float(row["time_unix"]) for row in rows]
    assert times == sorted(times) and abs(times[0] - 1.0 - meta["start_unix"]) < 1e-6
    # Strictly increasing; the exact times are sadf's own (below): on a loaded VM sadc may be a second late.
    assert all(later > earlier for earlier, later in itertools.pairwise(times))
    assert abs(times[0] - time.time()) < 120
    assert all(row["cpu_temp_c"] == "" for row in rows)
    assert sum(float(row["disk_write_bps"]) for row in rows) > 1e6  # the test's own fsync'ed writes
    assert all(0 <= float(row["disk_util_pct"]) <= 100 for row in rows)
    for row in rows:  # one device's bytes, at most all devices'
        all_disks = float(row["disk_read_bps"]) + float(row["disk_write_bps"])
        assert 0 <= float(row["disk_busiest_bps"]) <= all_disks + 1e-6 * max(1.0, all_disks)
    assert sum(float(row["disk_busiest_bps"]) for row in rows) > 1e6  # the writes, on this VM's only disk
    assert all(float(row["mem_used_bytes"]) > 0 for row in rows)

    # The figures are sadf's own: utilization = 100 - %idle - %iowait, per sample, all CPUs.
    text = subprocess.run(
        [sadf, "-d", "-U", str(recording), "--", "-u"], capture_output=True, text=True, check=True
    ).stdout
    header = next(line for line in text.splitlines() if line.startswith("#")).lstrip("# ").split(";")
    sadf_rows = [
        dict(zip(header, line.split(";"), strict=True))
        for line in text.splitlines()
        if line and not line.startswith("#")
    ]
    assert [float(r["timestamp"]) for r in sadf_rows] == times
    for ours, theirs in zip(rows, sadf_rows, strict=True):
        expected = 100 - float(theirs["%idle"]) - float(theirs["%iowait"])
        assert float(ours["cpu_util_pct"]) == pytest.approx(expected, abs=0.011)
        assert float(ours["cpu_iowait_pct"]) == float(theirs["%iowait"])
        assert float(ours["cpu_steal_pct"]) == float(theirs["%steal"])


def test_sadf_text_imports_like_the_binary_file(recording: Path, tmp_path: Path) -> None:
    _, sadf = _sysstat_or_skip()
    text_file = tmp_path / "sa-test.csv"
    with open(text_file, "w") as handle:  # timestamps as sadf prints them by default: "... UTC"
        subprocess.run(
            [sadf, "-d", str(recording), "--", "-u", "-P", "ALL", "-r", "-d"], stdout=handle, check=True
        )
    assert importer(str(recording), "--data-dir", str(tmp_path / "a")).returncode == 0
    done = importer(str(text_file), "--data-dir", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    binary, text = read_rows(only_run(tmp_path / "a")), read_rows(only_run(tmp_path / "b"))
    for column in ("time_unix", "cpu_util_pct", "cpu0_util_pct", "mem_util_pct", "disk_write_bps"):
        assert [float(r[column]) for r in text] == [float(r[column]) for r in binary], column
    assert "net_rx_bps" not in text[0] and "swap_used_bytes" not in text[0]  # not in that text: not invented
    meta = read_json(only_run(tmp_path / "b") / "run.json")
    assert meta["sources"]["network"] == {
        "available": False,
        "reason": "no network activity in the sysstat recording",
    }


def test_imported_run_lands_beside_a_previous_import(recording: Path, tmp_path: Path) -> None:
    assert importer(str(recording), "--data-dir", str(tmp_path)).returncode == 0
    assert importer(str(recording), "--data-dir", str(tmp_path)).returncode == 0
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(names) == 2 and names[1] == names[0] + "-2"
    assert read_json(tmp_path / "runs" / names[1] / "run.json")["run_id"] == names[1]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (os.urandom(4096), "neither a sysstat data file nor `sadf -d` text"),
        (b"\x96\xd5" + b"\x00" * 300, "sadf cannot read"),
        (b"root:x:0:0:root:/root:/bin/bash\n", "data before any `sadf -d` header"),
        (b"# hostname;interval;timestamp;kbmemfree;kbavail;kbmemused;%memused\n", "no CPU utilization"),
        (b"\xd5\x96" + b"\x00" * 300, "it was written on a big-endian machine"),
        (
            CPU_HEADER.encode() + b"\ndb1;60;8070450532247928832;-1;10.00;0.00;5.00;1.00;0.50;83.50\n",
            "not a believable recording: timestamp 8070450532247928832 (beyond any calendar) is decades away",
        ),
        (
            CPU_HEADER.encode() + b"\ndb1;60;315532800;-1;10.00;0.00;5.00;1.00;0.50;83.50\n",
            "not a believable recording: timestamp 315532800 (year 1980) is decades away",
        ),
        (
            CPU_HEADER.encode() + b"\ndb1;94608000;1795000060;-1;10.00;0.00;5.00;1.00;0.50;83.50\n",
            "not a believable recording: an interval of 94608000 s (3.0 years) between samples",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes, expected: str) -> None:
    if content[:2] in (b"\x96\xd5", b"\xd5\x96"):
        _sysstat_or_skip()
    bad = tmp_path / "bad"
    bad.write_bytes(content)
    done = importer(str(bad), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "runs").exists() or not list((tmp_path / "data" / "runs").iterdir())


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    done = importer(str(tmp_path / "nope"), "--data-dir", str(tmp_path))
    assert done.returncode == 2 and done.stderr.strip().endswith("no such file")


def test_restarts_and_gaps_are_noted_not_hidden() -> None:
    header = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle"
    lines = [
        header,
        "db1;60;1795000060;-1;10.00;0.00;5.00;1.00;0.50;83.50",
        "db1;-1;1795000100;LINUX-RESTART\t(4 CPU)",
        header,
        "db1;60;1795000300;-1;20.00;0.00;5.00;0.00;0.00;75.00",
    ]
    recording = parse_sadf(lines)
    assert recording.restarts == [(1795000100.0, 4)] and sorted(recording.rows) == [
        1795000060.0,
        1795000300.0,
    ]
    assert recording.rows[1795000060.0] == {"cpu_util_pct": 15.5, "cpu_iowait_pct": 1.0, "cpu_steal_pct": 0.5}


def test_local_time_stamps_are_refused() -> None:
    lines = [
        "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle",
        "db1;60;2026-11-23 06:59:25 CET;-1;10.00;0.00;5.00;1.00;0.50;83.50",
    ]
    with pytest.raises(SysstatImportError, match="not UTC"):
        parse_sadf(lines)


def test_a_recording_without_disk_activity_says_how_to_record_it(tmp_path: Path) -> None:
    sadc, _ = _sysstat_or_skip()
    recording = tmp_path / "sa-default"
    subprocess.run([sadc, "1", "2", str(recording)], check=True, timeout=30)  # sadc's defaults: no disks
    done = importer(str(recording), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path / "data")
    assert "disk_util_pct" not in read_rows(run_dir)[0] and "cpu_util_pct" in read_rows(run_dir)[0]
    disk = read_json(run_dir / "run.json")["sources"]["disk"]
    assert disk == {
        "available": False,
        "reason": "no disk activity in the sysstat recording (sadc records it with -S DISK)",
    }


def test_a_file_cut_short_imports_what_is_there_and_says_so(recording: Path, tmp_path: Path) -> None:
    _sysstat_or_skip()
    cut = tmp_path / "sa-cut"
    data = recording.read_bytes()
    cut.write_bytes(data[: len(data) - 500])  # the last record half-written, as after a crash
    done = importer(str(cut), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    meta = read_json(only_run(tmp_path / "data") / "run.json")
    assert 1 <= meta["samples"] < 4
    assert any("End of system activity file unexpected" in note for note in meta["notes"])


def test_a_file_from_another_sysstat_version_is_refused_with_the_way_out(
    recording: Path, tmp_path: Path
) -> None:
    _sysstat_or_skip()
    other = tmp_path / "sa-other-version"
    data = bytearray(recording.read_bytes())
    data[2] ^= 0x01  # the file-format magic after the sysstat magic: a format this sadf cannot read
    other.write_bytes(bytes(data))
    done = importer(str(other), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot read the format of this file (0x2174)" in done.stderr
    assert "`sadf -c` could not convert it either (Cannot convert the format of this file)" in done.stderr
    assert not (tmp_path / "data" / "runs").exists() or not list((tmp_path / "data" / "runs").iterdir())


def test_a_recording_that_starts_with_a_restart_imports(tmp_path: Path) -> None:
    """Every daily file of a day the host booted: `sadc FILE` at boot writes the LINUX-RESTART record."""
    sadc, sadf = _sysstat_or_skip()
    recording = tmp_path / "sa-boot"
    subprocess.run([sadc, str(recording)], check=True, timeout=30)
    subprocess.run([sadc, "1", "3", str(recording)], check=True, timeout=30)
    text = tmp_path / "sa-boot.txt"
    with open(text, "w") as handle:
        subprocess.run([sadf, "-d", str(recording), "--", "-u"], stdout=handle, check=True)
    assert text.read_text().splitlines()[0].split(";")[3].startswith("LINUX-RESTART")  # before any header
    for source, data_dir in ((recording, tmp_path / "a"), (text, tmp_path / "b")):
        done = importer(str(source), "--data-dir", str(data_dir))
        assert done.returncode == 0, done.stderr
        meta = read_json(only_run(data_dir) / "run.json")
        assert meta["samples"] == 2 and len(read_rows(only_run(data_dir))) == 2
        assert len(meta["imported_from"]["restarts"]) == 1
        assert meta["imported_from"]["restarts"][0]["cpus"] == os.cpu_count()
        assert meta["imported_from"]["restarts"][0]["time_unix"] <= meta["start_unix"] + 1
        assert any("the host restarted at" in note for note in meta["notes"])
        assert meta["system"]["cpu_cores_logical"] == os.cpu_count()


def test_a_restart_inside_the_recording_splits_nothing(tmp_path: Path) -> None:
    sadc, _ = _sysstat_or_skip()
    recording = tmp_path / "sa-reboot"
    subprocess.run([sadc, "1", "2", str(recording)], check=True, timeout=30)
    subprocess.run([sadc, str(recording)], check=True, timeout=30)  # the host "reboots"
    subprocess.run([sadc, "1", "2", str(recording)], check=True, timeout=30)
    done = importer(str(recording), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path / "data")  # one run, not two
    meta = read_json(run_dir / "run.json")
    rows = read_rows(run_dir)
    assert meta["samples"] == len(rows) == 2
    restart = meta["imported_from"]["restarts"][0]["time_unix"]
    assert float(rows[0]["time_unix"]) <= restart <= float(rows[1]["time_unix"])


def test_a_new_cpu_count_after_a_restart_is_honoured(tmp_path: Path) -> None:
    lines = [
        CPU_HEADER,
        "db1;60;1795000060;-1;10.00;0.00;5.00;1.00;0.50;83.50",
        "db1;60;1795000060;0;10.00;0.00;5.00;1.00;0.50;83.50",
        "db1;60;1795000060;1;10.00;0.00;5.00;1.00;0.50;83.50",
        "db1;-1;1795000100;LINUX-RESTART\t(4 CPU)",
        CPU_HEADER,
        "db1;60;1795000160;-1;20.00;0.00;5.00;0.00;0.00;75.00",
        *[f"db1;60;1795000160;{n};20.00;0.00;5.00;0.00;0.00;75.00" for n in range(4)],
    ]
    text = tmp_path / "sadf.txt"
    text.write_text("\n".join(lines) + "\n")
    done = importer(str(text), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path / "data")
    rows = read_rows(run_dir)
    assert [row["cpu3_util_pct"] for row in rows] == ["", "25"]  # no CPU 3 before the restart
    assert [row["cpu0_util_pct"] for row in rows] == ["15.5", "25"]
    meta = read_json(run_dir / "run.json")
    assert meta["system"]["cpu_cores_logical"] == 4
    assert meta["imported_from"]["restarts"] == [{"time_unix": 1795000100, "cpus": 4}]


def test_an_older_sysstat_format_is_converted_with_sadf_c(tmp_path: Path) -> None:
    _sysstat_or_skip()
    done = importer(str(OLDER_FORMAT), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path / "data")
    meta = read_json(run_dir / "run.json")
    assert meta["imported_from"]["format"] == "sa binary (sadf -c, then sadf -d -U)"
    assert meta["imported_from"]["sysstat_version"] == "11.2.14"
    assert any("(0x2173)" in note and "converted with `sadf -c`" in note for note in meta["notes"])
    assert meta["samples"] == 2 and len(meta["imported_from"]["restarts"]) == 1
    assert all(0 <= float(row["cpu_util_pct"]) <= 100 for row in read_rows(run_dir))
    assert not list((tmp_path / "data" / "runs").glob(".import-*"))
