"""dashboard.runs: discovery, validation, tolerant and cached CSV reading."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashfixtures import make_run, truncate_last_line

from dashboard import csvcache, parsecache, runs


def test_discover_lists_runs_and_examples_newest_first(data_dir: Path, run_ids: dict[str, str]) -> None:
    found = runs.discover_runs(data_dir)
    assert [run.run_id for run in found] == [run_ids["gpu"], run_ids["cpu"], run_ids["broken"]]
    gpu, cpu = found[0], found[1]
    assert (gpu.kind, cpu.kind) == ("runs", "examples")
    assert (cpu.label, cpu.device, cpu.host, cpu.end_reason) == (
        "cpu baseline",
        "cpu",
        "buildbox",
        "completed",
    )
    assert cpu.duration_s == pytest.approx(120.0)
    assert cpu.start_utc.endswith("UTC")
    assert cpu.evaluation["map_50"] == pytest.approx(0.38)
    assert gpu.training["device_used"] == "NVIDIA H100 80GB HBM3"
    assert cpu.warnings == () and gpu.warnings == ()


def test_corrupt_run_json_is_a_warning_not_an_error(data_dir: Path, run_ids: dict[str, str]) -> None:
    broken = runs.get_run(data_dir, run_ids["broken"])
    assert broken is not None
    assert broken.meta == {}
    assert broken.label == run_ids["broken"] and broken.end_reason == "unknown"
    assert broken.start_unix == pytest.approx(broken.training["start_unix"])  # falls back to training.json
    assert broken.duration_s is None
    assert any(w.startswith("run.json is unreadable") for w in broken.warnings)


def test_truncated_last_line_is_dropped_with_warning(data_dir: Path, run_ids: dict[str, str]) -> None:
    broken = runs.get_run(data_dir, run_ids["broken"])
    frame = runs.read_telemetry(broken)
    assert len(frame) == 29  # 30 samples written, the last one cut
    assert frame["cpu_util_pct"].notna().all()
    assert frame.attrs["warnings"] == ["telemetry.csv: truncated last line ignored"]
    assert "telemetry.csv: truncated last line ignored" in runs.run_warnings(broken)


@pytest.mark.parametrize("bad_id", ["..", "../examples", "a/b", "", ".hidden", "x" * 200, "a..b", "/etc"])
def test_get_run_rejects_unsafe_ids(data_dir: Path, bad_id: str) -> None:
    assert runs.get_run(data_dir, bad_id) is None


def test_get_run_rejects_non_strings_and_unknown_ids(data_dir: Path) -> None:
    assert runs.get_run(data_dir, None) is None  # type: ignore[arg-type]
    assert runs.get_run(data_dir, "20990101T000000Z-cpu-nowhere") is None


def test_invalid_directory_names_and_files_are_not_runs(data_dir: Path) -> None:
    (data_dir / "runs" / ".partial").mkdir()
    (data_dir / "runs" / "has space").mkdir()
    (data_dir / "runs" / "stray-file").write_text("x")
    assert len(runs.discover_runs(data_dir)) == 3


def test_same_id_in_runs_and_examples_is_listed_once_from_runs(
    data_dir: Path, run_ids: dict[str, str]
) -> None:
    shutil.copytree(data_dir / "examples" / run_ids["cpu"], data_dir / "runs" / run_ids["cpu"])
    found = [run for run in runs.discover_runs(data_dir) if run.run_id == run_ids["cpu"]]
    assert [run.kind for run in found] == ["runs"]


def test_empty_or_missing_data_dir(tmp_path: Path) -> None:
    assert runs.discover_runs(tmp_path / "nothing") == []
    assert runs.discover_runs(tmp_path) == []


def test_open_run_dir_reads_any_directory(data_dir: Path, run_ids: dict[str, str]) -> None:
    run = runs.open_run_dir(data_dir / "runs" / run_ids["gpu"])
    assert (run.run_id, run.kind, run.device) == (run_ids["gpu"], "path", "gpu")


def test_read_telemetry_columns_and_values(data_dir: Path, run_ids: dict[str, str]) -> None:
    gpu = runs.get_run(data_dir, run_ids["gpu"])
    frame = runs.read_telemetry(gpu, ["time_unix", "gpu0_power_w", "no_such_column", "cpu_temp_c"])
    assert list(frame.columns) == ["time_unix", "gpu0_power_w", "cpu_temp_c"]
    assert len(frame) == 90
    assert frame["cpu_temp_c"].between(30, 80).all()
    cpu = runs.get_run(data_dir, run_ids["cpu"])
    assert runs.read_telemetry(cpu, ["cpu_temp_c"])["cpu_temp_c"].isna().all()  # empty cells: no reading
    assert frame["time_unix"].iloc[0] == pytest.approx(gpu.start_unix, abs=0.01)
    assert frame.dtypes.eq(np.float64).all()


def test_missing_files_give_empty_frames(data_dir: Path, run_ids: dict[str, str]) -> None:
    run_dir = data_dir / "runs" / run_ids["gpu"]
    for name in ("training.csv", "phases.csv", "telemetry.csv"):
        (run_dir / name).unlink()
    shutil.rmtree(run_dir / "detections")
    run = runs.get_run(data_dir, run_ids["gpu"])
    assert runs.read_training(run).empty and runs.read_training(run).attrs["warnings"] == []
    assert list(runs.read_phases(run).columns) == ["phase", "start_unix", "end_unix", "status"]
    assert runs.read_detections(run) == {}
    assert runs.read_telemetry(run).empty
    assert runs.run_warnings(run) == ["telemetry.csv is missing"]


def test_an_archived_telemetry_csv_is_read_as_the_report_reads_it(
    data_dir: Path, run_ids: dict[str, str]
) -> None:
    """The run's telemetry lies beside it compressed: read decompressed, said; a .zst (no standard-library
    reader) is named, not called missing."""
    run_dir = data_dir / "runs" / run_ids["gpu"]
    telemetry = run_dir / "telemetry.csv"
    written = runs.read_telemetry(runs.get_run(data_dir, run_ids["gpu"]))
    (run_dir / "telemetry.csv.gz").write_bytes(gzip.compress(telemetry.read_bytes()))
    telemetry.unlink()
    run = runs.get_run(data_dir, run_ids["gpu"])
    assert runs.run_warnings(run) == ["telemetry.csv.gz: read decompressed"]
    read = runs.read_telemetry(run)
    assert read.attrs["warnings"] == ["telemetry.csv.gz: read decompressed"]
    pd.testing.assert_frame_equal(read, written, check_like=True)
    cpu_dir = runs.get_run(data_dir, run_ids["cpu"]).path
    (cpu_dir / "telemetry.csv").rename(cpu_dir / "telemetry.csv.zst")
    run = runs.get_run(data_dir, run_ids["cpu"])
    compressed = "telemetry.csv.zst is compressed: decompress it to read it"
    assert compressed in runs.run_warnings(run)
    assert runs.read_telemetry(run).attrs["warnings"] == [compressed]


def test_training_and_phases(data_dir: Path, run_ids: dict[str, str]) -> None:
    cpu = runs.get_run(data_dir, run_ids["cpu"])
    training = runs.read_training(cpu)
    assert training["step"].tolist()[:3] == [1.0, 2.0, 3.0]
    assert {"loss_total", "examples_per_s", "step_time_s"} <= set(training.columns)
    phases = runs.read_phases(cpu)
    assert phases["phase"].tolist() == ["train", "export", "evaluate", "detect"]
    assert phases["start_unix"].dtype == np.float64


def test_detections_json_and_its_corruption(data_dir: Path, run_ids: dict[str, str]) -> None:
    cpu = runs.get_run(data_dir, run_ids["cpu"])
    detections = runs.read_detections(cpu)
    assert [image["image_id"] for image in detections["images"]] == ["val_0000", "val_0001", "val_0002"]
    (cpu.path / "detections" / "detections.json").write_text("[1, 2")
    assert runs.read_detections(cpu) == {}
    assert any(w.startswith("detections/detections.json is unreadable") for w in runs.run_warnings(cpu))


def test_non_numeric_cells_and_malformed_rows_become_warnings(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=20, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    lines = path.read_text().splitlines()
    fields = lines[5].split(",")
    fields[4] = "garbage"
    lines[5] = ",".join(fields)
    lines[7] = lines[7] + ",1,2,3"  # too many fields
    path.write_text("\n".join(lines) + "\n")
    frame = runs.read_telemetry(runs.open_run_dir(run_dir))
    assert len(frame) == 19
    assert np.isnan(frame["cpu_util_pct"].iloc[4])
    assert sorted(frame.attrs["warnings"]) == [
        "telemetry.csv: 1 cell(s) that hold no number read as unknown (cpu_util_pct 'garbage')",
        "telemetry.csv: 1 malformed row(s) skipped",
    ]


@pytest.mark.parametrize("content", [b"", b"\x00\x01\xff\xfe garbage", b"time_unix,cpu_util_pct"])
def test_empty_or_binary_csv_is_a_warning(tmp_path: Path, content: bytes) -> None:
    run_dir = make_run(tmp_path, duration_s=5, with_training=False, with_eval=False)
    (run_dir / "telemetry.csv").write_bytes(content)
    frame = runs.read_telemetry(runs.open_run_dir(run_dir))
    assert frame.empty
    assert len(frame.attrs["warnings"]) == 1
    assert frame.attrs["warnings"][0].startswith("telemetry.csv ")


def test_a_utf16_csv_is_read_as_the_report_reads_it(tmp_path: Path) -> None:
    """A telemetry.csv saved as a spreadsheet's "Unicode text" (UTF-16 with its byte-order mark)."""
    run_dir = make_run(tmp_path, duration_s=20, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    plain = runs.read_telemetry(runs.open_run_dir(run_dir))
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))
    runs.clear_caches()
    wide = runs.read_telemetry(runs.open_run_dir(run_dir))
    assert wide.attrs["warnings"] == [] and len(wide) == 20
    pd.testing.assert_frame_equal(wide, plain)


@pytest.mark.parametrize(
    ("saved", "change"),
    [
        ("with UTF-8's byte-order mark and CRLF", lambda text: "\ufeff" + text.replace("\n", "\r\n")),
        ("with a comma ending each line", lambda text: text.replace("\n", ",\n")),
    ],
)
def test_a_csv_an_editor_saved_is_read_as_the_report_reads_it(tmp_path: Path, saved: str, change) -> None:
    """Both read as "has no valid header line" here (the mark stuck to the first name, the last name
    empty) while the report read every row."""
    run_dir = make_run(tmp_path, duration_s=20, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    plain = runs.read_telemetry(runs.open_run_dir(run_dir))
    path.write_bytes(change(path.read_text(encoding="utf-8")).encode("utf-8"))
    runs.clear_caches()
    edited = runs.read_telemetry(runs.open_run_dir(run_dir))
    assert edited.attrs["warnings"] == [] and len(edited) == 20, saved
    pd.testing.assert_frame_equal(edited, plain)  # an empty last column is not one to pick


def test_csv_parsed_once_per_change_and_appends_incrementally(tmp_path: Path, monkeypatch) -> None:
    run_dir = make_run(tmp_path, duration_s=60, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    content = path.read_bytes()
    lines = content.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:31]) + lines[31][:10])  # header + 30 rows + a partial row
    run = runs.open_run_dir(run_dir)
    parsed_bytes: list[int] = []
    real_parse = csvcache._parse_lines
    monkeypatch.setattr(
        csvcache, "_parse_lines", lambda data, *a: parsed_bytes.append(len(data)) or real_parse(data, *a)
    )

    first = runs.read_telemetry(run)
    assert len(first) == 30 and first.attrs["warnings"] == ["telemetry.csv: truncated last line ignored"]
    runs.read_telemetry(run)
    runs.read_telemetry(run, ["cpu_util_pct"])
    assert len(parsed_bytes) == 1  # unchanged file: no new parse

    path.write_bytes(content)  # the writer finished the partial row and wrote the rest
    grown = runs.read_telemetry(run)
    assert len(parsed_bytes) == 2 and parsed_bytes[1] == len(b"".join(lines[31:]))  # only the new bytes
    assert grown.attrs["warnings"] == []
    runs.clear_caches()
    whole = runs.read_telemetry(run)
    pd.testing.assert_frame_equal(grown, whole)


def test_rewritten_file_is_parsed_again(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=30, with_training=False, with_eval=False)
    run = runs.open_run_dir(run_dir)
    assert len(runs.read_telemetry(run)) == 30
    lines = (run_dir / "telemetry.csv").read_text().splitlines(keepends=True)
    replacement = run_dir / "replacement.csv"
    replacement.write_text("".join(lines[:11]))
    os.replace(replacement, run_dir / "telemetry.csv")  # a new file (new inode), smaller
    assert len(runs.read_telemetry(run)) == 10


def test_files_signature_follows_file_changes(data_dir: Path, run_ids: dict[str, str]) -> None:
    run = runs.get_run(data_dir, run_ids["cpu"])
    before = runs.files_signature(run)
    assert {name for name, _, _ in before} >= {"run.json", "telemetry.csv", "training.csv", "eval.json"}
    assert runs.files_signature(run) == before
    with open(run.path / "telemetry.csv", "a") as handle:
        handle.write("1795093500.0" + ",0" * 24 + "\n")
    assert runs.files_signature(run) != before


def test_big_csv_is_kept_as_parquet_outside_the_run_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parsecache, "MIN_BYTES", 1)
    run_dir = make_run(tmp_path / "data", duration_s=50, with_training=False, with_eval=False)
    complete = (run_dir / "telemetry.csv").read_bytes()
    truncate_last_line(run_dir / "telemetry.csv")
    run = runs.open_run_dir(run_dir)
    parsed = runs.read_telemetry(run)
    parsecache.wait_for_writes()
    sidecar = parsecache.sidecar_of(run_dir / "telemetry.csv")
    assert sidecar is not None and sidecar.is_file() and sidecar.parent == tmp_path / "parse-cache"
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(["telemetry.csv", "run.json", "command.log"])

    runs.clear_caches()  # a restarted dashboard
    monkeypatch.setattr(
        csvcache, "_parse_lines", lambda *a: pytest.fail("parsed although the sidecar is current")
    )
    restored = runs.read_telemetry(run)
    pd.testing.assert_frame_equal(restored, parsed)
    assert restored.attrs["warnings"] == ["telemetry.csv: truncated last line ignored"]
    monkeypatch.undo()

    (run_dir / "telemetry.csv").write_bytes(complete)  # the writer finished the line: the sidecar is stale
    runs.clear_caches()
    assert len(runs.read_telemetry(run)) == 50


def test_unreadable_sidecar_or_cache_off_falls_back_to_parsing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parsecache, "MIN_BYTES", 1)
    run = runs.open_run_dir(make_run(tmp_path / "data", duration_s=20, with_training=False, with_eval=False))
    runs.read_telemetry(run)
    parsecache.wait_for_writes()
    parsecache.sidecar_of(run.path / "telemetry.csv").write_bytes(b"PAR1 garbage")
    runs.clear_caches()
    assert len(runs.read_telemetry(run)) == 20
    monkeypatch.setenv(parsecache.CACHE_ENV, "off")
    assert parsecache.sidecar_of(run.path / "telemetry.csv") is None
    runs.clear_caches()
    assert len(runs.read_telemetry(run)) == 20


def test_framework_comes_from_training_json_and_older_runs_are_tensorflow(tmp_path) -> None:
    from dashboard.runs import RunInfo

    def run(training: dict) -> RunInfo:
        return RunInfo(run_id="r", path=tmp_path, kind="runs", meta={}, training=training)

    assert run({"framework": "torch", "framework_version": "2.11.0"}).framework == "torch"
    assert run({"framework": "torch", "framework_version": "2.11.0"}).framework_version == "2.11.0"
    assert run({"tensorflow_version": "2.20.0"}).framework == "tensorflow"
    assert run({"config": {"task": {}}}).framework == "tensorflow"
    assert run({}).framework == "n/a"
    assert run({"framework": 3}).framework == "n/a"  # not a name: as the report reads it


def test_sentinel_cells_read_as_empty_in_the_charts_as_in_the_report(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, device="gpu", gpus=1, duration_s=20, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    frame = pd.read_csv(path).astype(float)
    frame.loc[3, "gpu0_util_pct"] = -1  # NVML's "not available"
    frame.loc[4, "gpu0_mem_used_bytes"] = 2.0**64 - 1
    frame.to_csv(path, index=False)
    run = runs.open_run_dir(run_dir)

    read = runs.read_telemetry(run, ["time_unix", "gpu0_util_pct", "gpu0_mem_used_bytes"])
    assert np.isnan(read["gpu0_util_pct"].iloc[3]) and np.isnan(read["gpu0_mem_used_bytes"].iloc[4])
    assert read["gpu0_util_pct"].drop(index=3).notna().all()
    assert [w for w in runs.run_warnings(run) if "no reading can hold" in w] == [
        "telemetry.csv: cells no reading can hold read as empty "
        "(gpu0_util_pct: 1 below 0; gpu0_mem_used_bytes: 1 above the GPU's 80 GiB)"
    ]
    assert runs.read_telemetry(run) is not runs.read_telemetry(run)  # callers get their own frame
    raw = pd.read_csv(path)
    assert raw.loc[3, "gpu0_util_pct"] == -1  # the file itself is left as recorded


def test_rows_out_of_time_order_and_infinite_cells_read_as_the_report_reads_them(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=20)
    telemetry = pd.read_csv(run_dir / "telemetry.csv").astype(float)
    telemetry.loc[2, "cpu_util_pct"] = np.inf
    telemetry.sample(frac=1, random_state=0).to_csv(run_dir / "telemetry.csv", index=False)
    training = pd.read_csv(run_dir / "training.csv")
    training.iloc[::-1].to_csv(run_dir / "training.csv", index=False)  # two step logs merged newest first
    run = runs.open_run_dir(run_dir)

    read = runs.read_telemetry(run)
    assert read["time_unix"].is_monotonic_increasing and len(read) == len(telemetry)
    assert not np.isinf(read["cpu_util_pct"]).any() and read["cpu_util_pct"].isna().sum() == 1
    steps = runs.read_training(run)
    assert steps["time_unix"].is_monotonic_increasing and list(steps["step"]) == sorted(steps["step"])
    warned = runs.run_warnings(run)
    assert "telemetry.csv: 1 infinite cell(s) read as empty" in warned
    assert any(w.startswith("telemetry.csv: rows out of time order") for w in warned)
    assert any(w.startswith("training.csv: rows out of time order") for w in warned)


def test_a_partial_last_line_is_warned_as_it_comes_and_goes(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=10, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    whole = path.read_bytes()
    run = runs.open_run_dir(run_dir)
    assert runs.read_telemetry(run).attrs["warnings"] == []
    path.write_bytes(whole + b"1795093999.5,4")  # the writer is mid-row: no complete row to parse
    assert runs.read_telemetry(run).attrs["warnings"] == ["telemetry.csv: truncated last line ignored"]
    path.write_bytes(whole)
    runs.clear_caches()
    assert runs.read_telemetry(run).attrs["warnings"] == []


@pytest.mark.parametrize("column", ["phase", "start_unix", "end_unix", "status"])
def test_a_phases_csv_without_a_column_reads_it_as_unknown(
    data_dir: Path, run_ids: dict[str, str], column: str
) -> None:
    """Found by a fuzz of hostile files: the Training tab's phase durations raised KeyError."""
    from dashboard import details

    run = runs.get_run(data_dir, run_ids["gpu"])
    frame = pd.read_csv(run.path / "phases.csv")
    frame.drop(columns=[column]).to_csv(run.path / "phases.csv", index=False)
    phases = runs.read_phases(run)
    assert phases[column].isna().all()
    assert f"phases.csv has no {column} column: read as unknown" in phases.attrs["warnings"]
    assert len(details.phase_durations(run)) == len(details.PHASES)
