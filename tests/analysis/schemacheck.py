"""Every sizing report the tests build is checked against docs/sizing.schema.json.

How (ReportWatch): `sizing.report.build_report` makes every report by calling the name `Report` in its own
module at call time, whatever name a test or the dashboard imported build_report under. For the length of a
test that name is a subclass whose __post_init__ turns the new report into JSON (sizing.report.to_json) and
validates it; a report that does not follow the schema is recorded, and the test fails at teardown with the
first error and its JSON path (recorded, not raised: a Dash callback or a thread that builds the report
would swallow an exception). Reports written by the CLI (`--out report.json`, in-process or a subprocess)
are JSON files: `validate_report_files` checks every one under a test's tmp_path at teardown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "sizing.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
checked: list[str] = []  # run ids of every validated report, so a test can see the check ran


def validate_report_json(data: dict) -> None:
    """Raise jsonschema.ValidationError (the first error, with its path) unless `data` follows the schema."""
    from sizing.output.render import _json_safe

    plain = json.loads(json.dumps(_json_safe(data), default=str))
    error = jsonschema.exceptions.best_match(VALIDATOR.iter_errors(plain))
    if error is not None:
        raise error
    checked.append(",".join(r["run_id"] for r in plain["runs"]))


def problem(error: jsonschema.ValidationError, where: str) -> str:
    path = "/".join(str(p) for p in error.absolute_path) or "(top)"
    return f"{where}: {path}: {error.message}"


class ReportWatch:
    """While installed, every report sizing.report.build_report makes is validated; `problems` lists
    those that did not follow the schema."""

    def __init__(self) -> None:
        import sizing.report

        self.module = sizing.report
        self.original = sizing.report.Report
        self.problems: list[str] = []
        self.reports = 0
        watch = self

        @dataclass(frozen=True)
        class CheckedReport(self.original):  # type: ignore[misc, valid-type]
            def __post_init__(self) -> None:
                watch.reports += 1
                ids = ", ".join(a.run_id for a in self.analyses)
                try:
                    validate_report_json(watch.module.to_json(self))
                except jsonschema.ValidationError as error:
                    watch.problems.append(problem(error, f"report of {ids}"))

        CheckedReport.__name__ = CheckedReport.__qualname__ = "Report"
        self.checked_class = CheckedReport

    def install(self) -> None:
        self.module.Report = self.checked_class

    def remove(self) -> None:
        self.module.Report = self.original


def is_report_json(data: object) -> bool:
    return isinstance(data, dict) and {"schema_version", "runs", "sections"} <= set(data)


def validate_report_files(folder: Path) -> list[str]:
    """Every sizing report JSON under `folder` (what `python -m sizing --out X.json` wrote) against the
    schema; one line per file that does not follow it."""
    found = []
    for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not is_report_json(data):
            continue
        try:
            validate_report_json(data)
        except jsonschema.ValidationError as error:
            found.append(problem(error, str(path)))
    return found


@pytest.fixture(autouse=True)
def every_report_follows_the_schema(request: pytest.FixtureRequest):
    """Autouse in a conftest (`from schemacheck import every_report_follows_the_schema`): every report the
    test builds, and every report JSON it writes under its tmp_path, follows the schema."""
    watch = ReportWatch()
    watch.install()
    try:
        yield watch
    finally:
        watch.remove()
    tmp = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    problems = watch.problems + (validate_report_files(tmp) if tmp is not None else [])
    if problems:
        pytest.fail("report(s) not following docs/sizing.schema.json:\n" + "\n".join(problems[:5]))
