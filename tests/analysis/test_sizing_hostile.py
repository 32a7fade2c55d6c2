"""Issue 18 item 11: malformed input is a warning, never a traceback. Hostile copies of a real run from
data/examples go through `python -m sizing` and the dashboard's Sizing tab."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from test_sizing_view import DEFAULTS, all_text

from dashboard import sizing_view
from sizing import ReportSettings, build_report
from sizing.analysis.load import load_run_dir
from sizing.cli import main as sizing_main

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
REAL = sorted(p for p in EXAMPLES.glob("*") if (p / "training.csv").is_file()) if EXAMPLES.is_dir() else []
pytestmark = pytest.mark.skipif(not REAL, reason="no recorded run in data/examples")


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text())
    result = change(data)
    path.write_text(json.dumps(data if result is None else result))


def set_field(*keys: str, value: object) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return change


def cut_rows(path: Path) -> None:
    """Rows cut short in the middle of the file and at its end (a writer killed mid-line)."""
    lines = path.read_text().splitlines(keepends=True)
    lines[5] = lines[5][: len(lines[5]) // 2] + "\n"
    path.write_text("".join(lines[:-1]) + lines[-1][:10])


def bad_cells(path: Path) -> None:
    """NaN, inf, -inf and text in numeric cells."""
    lines = path.read_text().splitlines(keepends=True)
    for i, cell in zip(range(3, 40, 9), ("nan", "inf", "-inf", "fast", "1e999"), strict=False):
        fields = lines[i].split(",")
        fields[2] = cell
        fields[0] = cell if i == 12 else fields[0]  # one row's time is infinite too
        lines[i] = ",".join(fields)
    path.write_text("".join(lines))


def in_milliseconds(path: Path) -> None:
    """Every time_unix in milliseconds (another tool's export): no timestamp of seconds can be that late."""
    lines = path.read_text().splitlines(keepends=True)
    body = []
    for line in lines[1:]:
        time, rest = line.split(",", 1)
        body.append(f"{float(time) * 1000:.0f},{rest}")
    path.write_text(lines[0] + "".join(body))


def in_milliseconds_alone(path: Path) -> None:
    """in_milliseconds, without the elapsed_s that would place the rows: nothing says what they are."""
    in_milliseconds(path)
    lines = path.read_text().splitlines(keepends=True)
    column = lines[0].rstrip("\n").split(",").index("elapsed_s")
    kept = [
        ",".join(c for i, c in enumerate(line.rstrip("\n").split(",")) if i != column) + "\n"
        for line in lines
    ]
    path.write_text("".join(kept))


def twice(path: Path) -> None:
    """The file with itself appended (two copies of one recording joined with cat)."""
    path.write_text(path.read_text() * 2)


def timeless(path: Path) -> None:
    """Another tool's names for the time columns: no row can be placed in time."""
    path.write_text(path.read_text().replace("time_unix,elapsed_s", "t,e", 1))


def gzipped(path: Path) -> None:
    """Archived: only telemetry.csv.gz is left."""
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()


def packed_as(suffix: str, content: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Archived: only the file's compressed copy (`suffix`) is left, holding `content` of its bytes."""

    def change(path: Path) -> None:
        path.with_name(path.name + suffix).write_bytes(content(path.read_bytes()))
        path.unlink()

    return change


def zipped(raw: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("telemetry.csv", raw)
    return buffer.getvalue()


def shuffled(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    body = lines[1:]
    path.write_text(lines[0] + "".join(body[1::2] + body[0::2]))


HOSTILE: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "system is a list": ("run.json", lambda p: edit_json(p, set_field("system", value=[1, 2])),
                         "run.json field system is a list, not an object"),
    "cores as text": ("run.json",
                      lambda p: edit_json(p, set_field("system", "cpu_cores_logical", value="two")),
                      "run.json field system.cpu_cores_logical is text, not a whole number ≥ 0"),
    "gpus an object": ("run.json", lambda p: edit_json(p, set_field("system", "gpus", value={"0": "x"})),
                       "run.json field system.gpus is an object, not a list"),
    "run.json a list": ("run.json", lambda p: p.write_text("[1, 2]"), "run.json is not a JSON object"),
    "batch as text": ("training.json", lambda p: edit_json(p, set_field("batch_size", value="two")),
                      "training.json field batch_size is text, not a whole number ≥ 0"),
    "batch astronomic": ("training.json", lambda p: edit_json(p, set_field("batch_size", value=1e308)),
                         "training.json field batch_size is a number, not a whole number ≥ 0"),
    "precision a number": ("training.json", lambda p: edit_json(p, set_field("precision", value=16)),
                           "training.json field precision is a number, not text"),
    "dataset_info a list": ("training.json", lambda p: edit_json(p, set_field("dataset_info", value=[])),
                            "training.json field dataset_info is a list, not an object"),
    "rate NaN": ("training.json", lambda p: edit_json(p, set_field("steady_steps_per_s", value=float("nan"))),
                 "training.json field steady_steps_per_s is nan, not a number"),
    "uuids text": ("training.json", lambda p: edit_json(p, set_field("gpu_uuids", value="GPU-0")),
                   "training.json field gpu_uuids is text, not a list of text"),
    "flops a number": ("training.json", lambda p: edit_json(p, set_field("flops", value=3e10)),
                       "training.json field flops is a number, not an object"),
    "flops per example as text": (
        "training.json", lambda p: edit_json(p, set_field("flops", value={"per_example": "many"})),
        "training.json field flops.per_example is text, not a number"),
    "gpu_state a list": ("run.json", lambda p: edit_json(p, set_field("gpu_state", value=[])),
                         "run.json field gpu_state is a list, not an object"),
    "training.json a string": ("training.json", lambda p: p.write_text('"done"'),
                               "training.json is not a JSON object"),
    "cut rows": ("training.csv", cut_rows, "training.csv: truncated last line ignored"),
    "bad cells": ("telemetry.csv", bad_cells, "telemetry.csv: 4 infinite cell(s) read as empty"),
    "bad training cells": ("training.csv", bad_cells, "training.csv: 1 time_unix cell(s) read as no "
                           "number (dates? seconds since 1970 belong there): rebuilt from elapsed_s and "
                           "training.json's start_unix"),
    "out of order": ("telemetry.csv", shuffled, "telemetry.csv: rows out of time order"),
    "times in ms": ("telemetry.csv", in_milliseconds,
                    "telemetry.csv: time_unix is in milliseconds since 1970 (it fits run.json's start_unix + "
                    "elapsed_s): read in seconds"),
    "times in ms, no elapsed_s": ("telemetry.csv", in_milliseconds_alone,
                                  "with a time_unix past the year 9999 left out (not seconds since 1970: "
                                  "milliseconds?)"),
    "training out of order": ("training.csv", shuffled, "training.csv: rows out of time order"),
    "telemetry twice": ("telemetry.csv", twice, "row(s) repeat an earlier row's time: the first kept"),
    "pipes": ("training.csv", lambda p: p.write_text(p.read_text().replace(",", "|")),
              "training.csv has no time_unix and step columns (its header begins 'time_unix|elapsed_s|"),
    "no time column": ("telemetry.csv", timeless,
                       "telemetry.csv has no time_unix or elapsed_s column (its header begins 't, e, "),
    "gzipped": ("telemetry.csv", gzipped, "telemetry.csv.gz: read decompressed"),
    "zstd": ("telemetry.csv", packed_as(".zst", lambda raw: b"(\xb5/\xfd" + raw[:100]),
             "telemetry.csv.zst is compressed: decompress it to read it"),
    "corrupt gzip": ("telemetry.csv", packed_as(".gz", lambda raw: gzip.compress(raw)[:200]),
                     "telemetry.csv.gz is unreadable (EOFError"),
    "phases without status": ("phases.csv", lambda p: p.write_text(
        "".join(line.rsplit(",", 1)[0] + "\n" for line in p.read_text().splitlines())),
        "phases.csv has no status column: read as unknown"),
    "empty run.json": ("run.json", lambda p: p.write_text(""), "run.json is unreadable (JSONDecodeError"),
    "empty training.json": ("training.json", lambda p: p.write_text(""), "training.json is unreadable"),
    "empty telemetry": ("telemetry.csv", lambda p: p.write_text(""), ""),
    "header only": ("training.csv", lambda p: p.write_text(p.read_text().splitlines()[0] + "\n"), ""),
}  # fmt: skip


def hostile_copy(tmp_path: Path, case: str) -> Path:
    file, change, _ = HOSTILE[case]
    run_dir = tmp_path / "runs" / REAL[0].name
    shutil.copytree(REAL[0], run_dir)
    change(run_dir / file)
    return run_dir


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_run_is_sized_with_a_warning_naming_file_and_field(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = hostile_copy(tmp_path, case)
    out = tmp_path / "report.json"
    assert sizing_main([str(run_dir), "--out", str(out)]) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    expected = HOSTILE[case][2]
    assert not expected or any(expected in w for w in report["warnings"]), report["warnings"]
    assert report["runs"][0]["run_id"] == run_dir.name
    text = json.dumps(report)
    assert "NaN" not in text and "Infinity" not in text
    for name in ("report.md", "report.html"):
        assert sizing_main([str(run_dir), "--out", str(tmp_path / name)]) == 0


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_the_sizing_tab_never_fails_on_a_hostile_run(tmp_path: Path, case: str) -> None:
    run_dir = hostile_copy(tmp_path, case)
    text = all_text(sizing_view.sizing_content(tmp_path, [run_dir.name], DEFAULTS))
    assert "Baseline:" in text or "nothing to size" in text


def test_validation_is_idempotent_and_keeps_good_fields(tmp_path: Path) -> None:
    run = load_run_dir(hostile_copy(tmp_path, "cores as text"))
    assert "cpu_cores_logical" not in run.meta["system"] and run.meta["system"]["cpu_model"] == "AMD EPYC"
    report = build_report([run], ReportSettings())
    assert sum("cpu_cores_logical" in w for w in report.warnings) == 1


def test_an_unsizable_run_is_named_and_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "runs" / "good"
    shutil.copytree(REAL[0], good)
    empty = tmp_path / "runs" / "empty"
    empty.mkdir()
    (empty / "telemetry.csv").write_text("time_unix,cpu_util_pct\nnan,5\ninf,6\n")
    (empty / "run.json").write_text("{}")
    out = tmp_path / "r.json"
    assert sizing_main([str(good), str(empty), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [r["run_id"] for r in report["runs"]] == ["good"]
    assert any(w.startswith("run 'empty' has neither") and "left out" in w for w in report["warnings"])
    decision = report["decision"]
    assert decision["options"] == []
    assert "Not in this decision: run 'empty' has neither telemetry.csv nor" in " ".join(decision["caveats"])
    assert decision["lines_without_option"] == [
        "No GPU run to compare with the baseline: 1 run(s) given could not be sized (see the caveats)."
    ]
    assert sizing_main([str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to size" in err and "Traceback" not in err
    text = all_text(sizing_view.sizing_content(tmp_path, ["empty"], DEFAULTS))
    assert "nothing to size" in text


GPU_RUN = next((p for p in REAL if p.name.endswith("-gpu-vm") and (p / "phases.csv").is_file()), None)


@pytest.mark.skipif(GPU_RUN is None, reason="no GPU run with phases in data/examples")
@pytest.mark.parametrize("damage", ["utf-16", "no time column"])
def test_utf16_telemetry_is_read_and_timeless_telemetry_is_left_unread(tmp_path: Path, damage: str) -> None:
    """A spreadsheet's "Unicode text" is read as it was; telemetry with no time column is not read, and the
    GPU checks that place samples before training never index it with no times."""
    assert GPU_RUN is not None
    run_dir = tmp_path / GPU_RUN.name
    shutil.copytree(GPU_RUN, run_dir)
    telemetry = run_dir / "telemetry.csv"
    if damage == "utf-16":
        telemetry.write_bytes(telemetry.read_text().encode("utf-16"))
    else:
        timeless(telemetry)
    original = load_run_dir(GPU_RUN)
    run = load_run_dir(run_dir)
    report = build_report([run], ReportSettings())
    (analysed,) = report.analyses
    if damage == "utf-16":
        assert run.telemetry.shape == original.telemetry.shape and not run.warnings
        assert analysed.steady_energy is not None and analysed.steady_energy.total_j
    else:
        assert run.telemetry.empty
        assert any("telemetry.csv has no time_unix or elapsed_s column" in w for w in report.warnings)


@pytest.mark.skipif(GPU_RUN is None, reason="no GPU run with phases in data/examples")
def test_the_sizing_tab_leaves_timeless_telemetry_unread_as_the_report_does(tmp_path: Path) -> None:
    """The dashboard parses the CSVs itself; the rule lives in the checks both apply, so its Sizing tab does
    not size a GPU run through telemetry with no time (which crashed its shared-board check)."""
    assert GPU_RUN is not None
    run_dir = tmp_path / "runs" / GPU_RUN.name
    shutil.copytree(GPU_RUN, run_dir)
    timeless(run_dir / "telemetry.csv")
    text = all_text(sizing_view.sizing_content(tmp_path, [run_dir.name], DEFAULTS))
    assert "could not be sized (" not in text and "Baseline:" in text
    assert "telemetry.csv has no time_unix or elapsed_s column" in text


@pytest.mark.parametrize(
    ("suffix", "content"),
    [(".gz", gzip.compress), (".xz", lzma.compress), (".bz2", bz2.compress), (".zip", zipped)],
)
def test_an_archived_runs_compressed_csvs_read_as_written(tmp_path: Path, suffix: str, content) -> None:
    """Before: "telemetry.csv.gz is compressed: decompress it to read it", and the run had no host, no
    energy and no GPU counters."""
    run_dir = tmp_path / "runs" / REAL[0].name
    shutil.copytree(REAL[0], run_dir)
    for name in ("telemetry.csv", "training.csv"):
        packed_as(suffix, content)(run_dir / name)
    assert sizing_main([str(REAL[0]), "--out", str(tmp_path / "untouched.json")]) == 0
    assert sizing_main([str(run_dir), "--out", str(tmp_path / "packed.json")]) == 0
    untouched, packed = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("untouched", "packed"))
    assert f"{REAL[0].name}: telemetry.csv{suffix}: read decompressed" in packed["warnings"]
    assert f"{REAL[0].name}: training.csv{suffix}: read decompressed" in packed["warnings"]
    for field in ("examples_per_s", "energy_j_per_1k_examples", "verdict"):
        assert packed["runs"][0][field] == untouched["runs"][0][field], field
