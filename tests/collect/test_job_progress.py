"""A job's progress, piece by piece: patterns, the streamed output, the step counter, training.csv, the
protocol file. (The shipped formats against the real libraries' lines: tests/test_own_job_libraries.py.)"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from collect import jobrecord
from collect.joblines import LineScanner, clean, matches_in
from collect.jobpatterns import FORMATS, PatternError, compile_patterns
from collect.jobprotocol import MAX_RECORD_BYTES, TIME_SLACK_S, ProtocolReader, parse_record
from collect.jobsteps import Step, StepCounter, StepLog

START = 1_795_000_000.0


def test_a_regex_that_does_not_compile_or_counts_nothing_is_one_line() -> None:
    with pytest.raises(PatternError, match=r"^--progress-regex 'step \(\?P<step': not a regular expression"):
        compile_patterns(["step (?P<step"], None)
    with pytest.raises(PatternError, match="no named group step, batch, examples, epoch or loss"):
        compile_patterns([r"step (\d+)"], None)
    with pytest.raises(PatternError, match="nothing to count"):
        compile_patterns([r"loss (?P<loss>\S+)"], None)
    with pytest.raises(PatternError, match="expected one of keras, lightning, hf, tqdm"):
        compile_patterns(None, "fastai")
    both = compile_patterns([r"it (?P<step>\d+)"], "hf")
    assert len(both.patterns) == len(FORMATS["hf"]) + 1 and not both.has_epoch
    assert both.describe() == "--progress-format hf, --progress-regex 'it (?P<step>\\\\d+)'"
    assert compile_patterns(None, None).empty


def test_clean_drops_escapes_and_backspaces_and_makes_carriage_returns_line_ends() -> None:
    raw = b"\x1b[1m 3/12\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m loss: 0.5\x08\x08\x08\r\x1b]0;title\x07next\r\n"
    assert clean(raw) == " 3/12 \u2501 loss: 0.5\nnext\n\n"


def test_a_match_that_runs_across_lines_is_not_a_lines_match() -> None:
    patterns = compile_patterns([r"step\s+(?P<step>\d+)"], None)
    assert matches_in("step\n5\nstep 6\nstep  7", patterns) == [{"step": "6"}, {"step": "7"}]


def _scan(chunks: list[bytes], regex: str = r"step (?P<step>\d+)", **kw: int) -> tuple[LineScanner, list]:
    found: list[dict] = []
    scanner = LineScanner(compile_patterns([regex], None), found.append, **kw)
    for chunk in chunks:
        scanner.feed(chunk)
    scanner.close()
    return scanner, found


def test_lines_end_at_cr_and_lf_however_the_chunks_fall() -> None:
    output = (
        b"warming up\nstep 1\rstep 2\r\nstep 3\r\x1b[2Kstep 4 of the epoch\nno newline at the end: step 5"
    )
    whole, found = _scan([output])
    assert [g["step"] for g in found] == ["1", "2", "3", "4", "5"]
    byte_by_byte, again = _scan([output[i : i + 1] for i in range(len(output))])
    assert again == found and byte_by_byte.output_bytes == len(output)
    assert whole.tail()[-2:] == ["step 4 of the epoch", "no newline at the end: step 5"]


def test_a_line_longer_than_the_limit_is_cut_and_counted_once_and_the_next_line_still_counts() -> None:
    limit = 1000
    exactly, found = _scan([b"step 1 " + b"x" * (limit - 7), b"\nstep 2\n"], max_line_bytes=limit)
    assert exactly.cut_lines == 0 and [g["step"] for g in found] == ["1", "2"]
    over, found = _scan(
        [b"step 1 " + b"x" * (limit - 6), b"x" * 5000, b"step 9 never seen\nstep 2\n"], max_line_bytes=limit
    )
    assert over.cut_lines == 1 and [g["step"] for g in found] == ["1", "2"]


def test_the_tail_keeps_the_last_lines_only() -> None:
    scanner, _ = _scan([b"".join(f"line {i}\n".encode() for i in range(1000))], tail_lines=3)
    assert scanner.tail() == ["line 997", "line 998", "line 999"]


def test_batches_add_up_across_epochs_and_an_evaluation_bar_is_not_training() -> None:
    counter = StepCounter(has_epoch=True)
    lines = [{"epoch": "1"}, {"batch": "5", "batches": "10"}, {"batch": "9", "batches": "10", "loss": "0.7"},
             {"epoch": "2"}, {"batch": "3", "batches": "10"}, {"batch": "2"}, {"batch": "10"}]  # fmt: skip
    steps = [counter.feed(groups, 1.0) for groups in lines]
    # epoch 1's batch 10 was never printed: its bar total counts; batch 2 after 3 is an evaluation's bar
    assert [s.step if s else None for s in steps] == [None, 5, 9, None, 13, None, 20]
    assert steps[2] is not None and steps[2].loss == 0.7


def test_without_an_epoch_group_a_batch_going_back_starts_an_epoch() -> None:
    counter = StepCounter(has_epoch=False)
    steps = [counter.feed({"batch": b}, 1.0) for b in ("4", "8", "2", "6")]
    assert [s.step for s in steps if s] == [4, 8, 10, 14]


def test_a_loss_without_a_step_goes_to_the_next_step() -> None:
    counter = StepCounter(has_epoch=False)
    assert counter.feed({"loss": "0.5"}, 1.0) is None
    first = counter.feed({"step": "4"}, 1.0)
    second = counter.feed({"step": "5"}, 1.0)
    assert first is not None and first.loss == 0.5 and second is not None and second.loss is None


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_training_csv_has_a_row_per_step_going_forward_with_rates(tmp_path: Path) -> None:
    log = StepLog(tmp_path, START, batch_size=32)
    assert log.add(Step(0, START + 1)) is False  # no step done yet
    assert log.add(Step(2, START + 2.0, loss=0.9)) is True
    assert log.add(Step(2, START + 2.5)) is False and log.add(Step(1, START + 3)) is False
    assert log.add(Step(6, START + 4.0, loss=float("nan"))) is True
    log.close()
    rows = _rows(tmp_path / "training.csv")
    assert [r["step"] for r in rows] == ["2", "6"] and log.skipped == 3
    assert [float(r["step_time_s"]) for r in rows] == [1.0, 0.5]
    assert [float(r["examples_per_s"]) for r in rows] == [32.0, 64.0]
    assert rows[0]["loss_total"] == "0.9" and rows[1]["loss_total"] == "nan" and rows[1]["examples"] == ""


def test_examples_give_examples_per_s_and_extra_numbers_become_columns(tmp_path: Path) -> None:
    log = StepLog(tmp_path, START)
    log.add(Step(1, START + 1.0, examples=100, extras={"acc": 0.5, "bad name": 1.0}))
    log.add(Step(2, START + 3.0, examples=300, extras={"acc": 0.75, "late": 2.0}))
    log.add(Step(-1, START + 4.0, examples=500))  # examples alone: the next step
    log.close()
    rows = _rows(tmp_path / "training.csv")
    assert list(rows[0]) == ["time_unix", "elapsed_s", "step", "examples", "loss_total", "step_time_s",
                             "examples_per_s", "acc"]  # fmt: skip
    assert [r["examples_per_s"] for r in rows] == ["", "100.0000", "200.0000"]
    assert [r["acc"] for r in rows] == ["0.5", "0.75", ""] and rows[2]["step"] == "3"


def test_a_protocol_record_is_checked_key_by_key() -> None:
    seen = START + 10
    good = parse_record(b'{"step": 3, "examples": 96, "loss": 0.5, "acc": 0.8, "note": "x"}', seen, START)
    assert good.problem is None and good.step is not None
    assert (good.step.step, good.step.examples, good.step.loss, good.step.extras) == (
        3,
        96,
        0.5,
        {"acc": 0.8},
    )
    assert good.step.time_unix == seen
    assert parse_record(b'{"batch_size": 32, "precision": "bf16"}', seen, START).declared == {
        "batch_size": 32, "precision": "bf16"}  # fmt: skip
    assert parse_record(b'{"flops_per_example": 7800000000}', seen, START).declared == {
        "flops_per_example": 7.8e9}  # fmt: skip
    problems = {
        b"step 3": "not JSON",
        b"[1, 2]": "not a JSON object",
        b'{"step": "3"}': "step is not a whole number ≥ 0",
        b'{"step": 2.5}': "step is not a whole number ≥ 0",
        b'{"step": -1}': "step is not a whole number ≥ 0",
        b'{"step": true}': "step is not a whole number ≥ 0",
        b'{"step": 1, "loss": "low"}': "loss is not a number",
        b'{"step": 1, "examples": -5}': "examples is not a count ≥ 0",
        b'{"step": 1, "batch_size": 0}': "batch_size is not a whole number ≥ 1",
        b'{"framework": ""}': "framework is not a non-empty string",
        b'{"flops_per_example": 0}': "flops_per_example is not a number > 0",
        b'{"flops_per_example": "7.8e9"}': "flops_per_example is not a number > 0",
        b'{"flops_per_example": true}': "flops_per_example is not a number > 0",
    }
    assert {line: parse_record(line, seen, START).problem for line in problems} == problems


def test_a_protocol_time_is_believed_within_the_run_give_or_take_the_slack() -> None:
    seen = START + 100
    for when, kept in ((START - TIME_SLACK_S, True), (START - TIME_SLACK_S - 0.01, False),
                       (seen + TIME_SLACK_S, True), (seen + TIME_SLACK_S + 0.01, False)):  # fmt: skip
        parsed = parse_record(json.dumps({"step": 1, "time_unix": when}).encode(), seen, START)
        assert parsed.step is not None and parsed.step.time_unix == (when if kept else seen)


def test_the_protocol_file_is_followed_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2')
    reader = ProtocolReader(path, START)
    assert [p.step.step for p in reader.read(START + 1) if p.step] == [1]  # the half line waits
    with path.open("ab") as handle:
        handle.write(b', "loss": 1.5}\nnot json\n' + b"x" * (MAX_RECORD_BYTES + 10))
    assert [(p.step.step, p.step.loss) for p in reader.read(START + 2) if p.step] == [(2, 1.5)]
    with path.open("ab") as handle:
        handle.write(b"still the long line\n" + b'{"step": 3}')  # the job ended without a last newline
    assert [p.step.step for p in reader.read(START + 3, final=True) if p.step] == [3]
    assert (reader.lines, reader.malformed) == (5, 2)
    assert reader.problems == {"not JSON": 1, f"a line longer than {MAX_RECORD_BYTES} bytes": 1}
    path.write_bytes(b'{"step": 4}\n')  # truncated and written anew: read from its start again
    assert [p.step.step for p in reader.read(START + 4) if p.step] == [4]
    reader.close()


def test_the_live_line_of_a_job_says_it_waits_for_a_step_and_has_no_phase_after_training() -> None:
    from collect.progress import JOB_STARTING, ProgressReporter, render_line

    reporter = ProgressReporter(60.0, io.StringIO(), job=True)
    assert JOB_STARTING in render_line(5.0, 60.0, reporter.state, {"cpu_util_pct": 50.0})
    reporter.state.phases_done(["train"])
    assert render_line(61.0, 60.0, reporter.state, {}).split("  ")[1] == "finishing (training budget done)"
    ours = ProgressReporter(60.0, io.StringIO())
    ours.state.phases_done(["train"])
    assert ours.state.phase == "export"


def test_rows_a_bar_gave_before_the_jobs_first_protocol_step_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library's bar may print a step before the poller reads the job's own first protocol line (a
    loaded host): training.csv then starts at the protocol's first step, not at the bar's."""
    monkeypatch.setattr(jobrecord, "POLL_S", 3600.0)  # the poller waits: the reads below are its reads
    patterns = compile_patterns([r"step (?P<step>\d+)"], None)
    recorder = jobrecord.JobRecorder(["job"], patterns, jobrecord.JobDeclared(), "cpu", None)
    recorder.start(tmp_path)
    recorder.on_output(b"step 2\nstep 3\n")
    assert recorder.steps is not None and recorder.steps.rows == 2
    with (tmp_path / jobrecord.PROTOCOL_FILE).open("a") as protocol:
        protocol.writelines(json.dumps({"step": k, "loss": 1.0 / k}) + "\n" for k in (1, 2, 3))
    recorder._read_protocol(final=False)
    recorder.on_output(b"step 4\n")
    with (tmp_path / jobrecord.PROTOCOL_FILE).open("a") as protocol:
        protocol.write(json.dumps({"step": 4}) + "\n")
    recorder.stop()
    assert [r["step"] for r in _rows(tmp_path / "training.csv")] == ["1", "2", "3", "4"]
    assert recorder.output_steps_ignored == 3  # two rows dropped, one step after the protocol's first
