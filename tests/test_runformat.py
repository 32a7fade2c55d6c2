"""The shared run-directory helpers: durations, run ids, atomic JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from runformat import (
    format_duration,
    is_valid_run_id,
    new_run_id,
    parse_duration,
    read_json,
    resolve_run_dir,
    write_json_atomic,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("75m", 4500.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("2m30s", 150.0),
        ("10ms", 0.01),
        ("100ms", 0.1),
        ("45", 45.0),
        ("0.5", 0.5),
        (" 1H ", 3600.0),
    ],
)
def test_parse_duration_accepts_what_people_type(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "   ", "0", "0s", "-5m", "75x", "m", "1.5.2s", "30m1h", "5 m", "1h1h", "ms"]
)
def test_parse_duration_rejects_nonsense_with_one_line(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert "\n" not in str(info.value)


def test_parse_duration_minimum() -> None:
    with pytest.raises(ValueError, match="minimum"):
        parse_duration("1ms", minimum_s=0.01)
    assert parse_duration("10ms", minimum_s=0.01) == pytest.approx(0.01)


@pytest.mark.parametrize(("seconds", "text"), [(0.25, "250ms"), (90, "1m30s"), (4500, "1h15m"), (7200, "2h")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_duration_cli_uses_only_the_standard_library() -> None:
    ok = subprocess.run(
        [sys.executable, "-S", "-m", "runformat", "duration", "1h30m"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ok.returncode, ok.stdout.strip()) == (0, "5400")
    bad = subprocess.run(
        [sys.executable, "-S", "-m", "runformat", "duration", "-5m"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1


def test_new_run_id_is_sortable_and_valid() -> None:
    when = datetime(2026, 11, 21, 13, 2, 55, tzinfo=timezone.utc)
    run_id = new_run_id("gpu", now=when, host="lab box/../7")
    assert run_id.startswith("20261121T130255Z-gpu-")
    assert is_valid_run_id(run_id)
    assert "/" not in run_id


@pytest.mark.parametrize("bad", ["", "..", "../etc", "a/b", ".hidden", "a..b", "x" * 200, "a b", "run\x00"])
def test_invalid_run_ids(bad: str) -> None:
    assert not is_valid_run_id(bad)


def test_resolve_run_dir_never_escapes(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "examples" / "e1").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    assert resolve_run_dir(tmp_path, "r1") == tmp_path / "runs" / "r1"
    assert resolve_run_dir(tmp_path, "e1") == tmp_path / "examples" / "e1"
    assert resolve_run_dir(tmp_path, "../secret") is None
    assert resolve_run_dir(tmp_path, "nope") is None


def test_write_json_atomic_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "b": [1, 2]})
    assert read_json(target) == {"a": 2, "b": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_write_json_atomic_leaves_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_json_atomic(target, {"ok": True})

    class Unserialisable:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_json_atomic(target, {"bad": Unserialisable()})
    assert json.loads(target.read_text()) == {"ok": True}
    assert os.listdir(tmp_path) == ["run.json"]


@pytest.mark.parametrize("content", ["", "{trunc", "[1, 2]", "\xff\xfe"])
def test_read_json_gives_one_line_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(ValueError) as info:
        read_json(path)
    assert "\n" not in str(info.value)


def test_one_line_parser_and_duration_type(capsys: pytest.CaptureFixture[str]) -> None:
    from runformat.cli import OneLineParser, duration_type

    parser = OneLineParser(prog="tool")
    parser.add_argument("--every", type=duration_type(minimum_s=0.01))
    assert parser.parse_args(["--every", "1m30s"]).every == 90.0
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--every", "5ms"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tool: error: argument --every:") and "minimum" in err
    assert err.count("\n") == 1
