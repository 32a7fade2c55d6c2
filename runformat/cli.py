"""Command-line pieces every entry point shares: one-line usage errors, duration arguments."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, NoReturn

from runformat.duration import parse_duration

USAGE_ERROR = 2


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit code 2, instead of argparse's usage block. A value that
    begins with a minus and a digit (`--interval -1s`, a duration `-5m`) is a value, whose own check then
    refuses it, not an unknown option: "expected one argument" (Python 3.13's argparse reads it so)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def duration_type(minimum_s: float = 0.0, what: str = "duration") -> Callable[[str], float]:
    """An argparse `type=` turning `90s`, `75m`, `1h30m`... into seconds, with parse_duration's message."""

    def seconds(text: str) -> float:
        try:
            return parse_duration(text, minimum_s=minimum_s, what=what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return seconds
