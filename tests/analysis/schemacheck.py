"""Every sizing report the tests produce as JSON is checked against docs/sizing.schema.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "sizing.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
checked: list[str] = []  # run ids of every validated report, so a test can see the check ran


def validate_report_json(data: dict) -> None:
    """Raise jsonschema.ValidationError (the first error, with its path) unless `data` follows the schema."""
    from sizing.render import _json_safe

    plain = json.loads(json.dumps(_json_safe(data), default=str))
    error = jsonschema.exceptions.best_match(VALIDATOR.iter_errors(plain))
    if error is not None:
        raise error
    checked.append(",".join(r["run_id"] for r in plain["runs"]))


def validating(to_json: Callable[..., dict]) -> Callable[..., dict]:
    def checked_to_json(report: object) -> dict:
        data = to_json(report)
        validate_report_json(data)
        return data

    return checked_to_json
