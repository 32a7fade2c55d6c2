"""Progress patterns for a job's output: the user's `--progress-regex` and the shipped `--progress-format`s.

A pattern is a regular expression with named groups, searched in each line of the command's output after
ANSI escapes and backspaces are removed (a line ends at `\\n` or `\\r`, so each redraw of a progress bar is a
line). Groups that count:

- `step`: the global step (cumulative, as a library's global counter);
- `batch`: the batch within the epoch (it restarts each epoch; the steps before add up);
- `batches`: the batches of an epoch (a bar's total: the steps an epoch adds, even when its last batch was
  never printed);
- `epoch`: the epoch; a new value starts a new epoch for `batch`;
- `examples`: examples seen so far (cumulative);
- `loss`: the loss at that step (a line with a loss and no step gives it to the next step).

Other named groups are allowed and ignored. The shipped formats are several patterns each; a line may
match more than one (their groups are merged).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COUNTING_GROUPS = ("step", "batch", "examples")
KNOWN_GROUPS = (*COUNTING_GROUPS, "batches", "epoch", "loss")
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"

# Each from lines the library prints by default (tests/test_own_job_libraries.py runs the real libraries).
FORMATS: dict[str, tuple[str, ...]] = {
    # Keras 3 model.fit (verbose=1 bar redrawn with \r, or verbose=2 one line per epoch):
    #   "Epoch 2/5"  then  " 7/12 ━━━━━━━━━━━━━━━━━━━━ 0s 17ms/step - accuracy: 0.52 - loss: 0.7309"
    "keras": (
        r"^Epoch (?P<epoch>\d+)/\d+\s*$",
        r"^\s*(?P<batch>\d+)/(?:(?P<batches>\d+)|Unknown)\b.*?\d(?:s|ms|us)/(?:step|sample)\b"
        rf"(?:.*?(?<![\w])loss: (?P<loss>{NUMBER}))?",
    ),
    # PyTorch Lightning's progress bar: Rich where rich is installed (the collector sets TTY_COMPATIBLE=1 and
    # TTY_INTERACTIVE=1 so it redraws into a pipe), else tqdm:
    #   "Epoch 0/1  ━━━━━━━━━━━━ 5/16 0:00:00 • 0:00:01 17.58it/s train_loss: 0.044"
    #   "Epoch 0:  31%|███       | 5/16 [00:00<00:00, 17.5it/s, train_loss=0.044]"
    "lightning": (
        r"^Epoch (?P<epoch>\d+)(?:/\d+)?[: ].*?\s(?P<batch>\d+)/(?:(?P<batches>\d+)|\?)\s"
        rf"(?:.*?(?<![\w])(?:train_)?loss(?:_step)?(?:: |=)(?P<loss>{NUMBER}))?",
    ),
    # Hugging Face Trainer: a tqdm bar of global steps, and the logged dict every logging_steps:
    #   " 33%|███▎      | 8/24 [00:00<00:01,  9.71it/s]"   "{'loss': '0.6942', 'grad_norm': ...}"
    "hf": (
        r"^\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+ \[",
        rf"^\{{'loss': '?(?P<loss>{NUMBER})'?",
    ),
    # A plain tqdm bar over batches (restarting each epoch, or one bar for the whole run):
    #   "train:  40%|████      | 4/10 [00:01<00:01,  3.50it/s, loss=0.523]"   "12it [00:01, 9.50it/s]"
    "tqdm": (
        rf"\d+%\|[^|]*\|\s*(?P<batch>\d+)/(?:(?P<batches>\d+)|\?) \[(?:[^\]]*?\bloss=(?P<loss>{NUMBER}))?",
        r"(?:^|: )(?P<batch>\d+)it \[",
    ),
}

# What a format needs in the command's environment for its library to print progress into a pipe.
FORMAT_ENV: dict[str, dict[str, str]] = {
    "lightning": {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"},
}


class PatternError(ValueError):
    """A pattern the collector cannot use: one line."""


@dataclass(frozen=True)
class ProgressPatterns:
    """The compiled patterns, in order, and how they were asked for."""

    patterns: tuple[re.Pattern[str], ...]
    regexes: tuple[str, ...]  # the user's --progress-regex, as given
    format: str | None  # the --progress-format, if any
    has_epoch: bool  # an `epoch` group exists: a batch going back without a new epoch is not a restart

    @property
    def empty(self) -> bool:
        return not self.patterns

    def describe(self) -> str:
        parts = [f"--progress-format {self.format}"] if self.format else []
        parts += [f"--progress-regex {regex!r}" for regex in self.regexes]
        return ", ".join(parts)


def compile_patterns(regexes: list[str] | None, format_name: str | None) -> ProgressPatterns:
    """The patterns of a job; PatternError (one line) for a regex that does not compile or counts nothing."""
    if format_name is not None and format_name not in FORMATS:
        raise PatternError(f"--progress-format {format_name}: expected one of {', '.join(FORMATS)}")
    compiled: list[re.Pattern[str]] = []
    sources = list(FORMATS[format_name]) if format_name else []
    for regex in regexes or []:
        try:
            pattern = re.compile(regex, re.MULTILINE)
        except re.error as exc:
            raise PatternError(f"--progress-regex {regex!r}: not a regular expression ({exc})") from exc
        if not set(pattern.groupindex) & set(KNOWN_GROUPS):
            raise PatternError(
                f"--progress-regex {regex!r}: no named group step, batch, examples, epoch or loss, "
                r"e.g. 'step (?P<step>\d+)'"
            )
        compiled.append(pattern)
    compiled = [re.compile(source, re.MULTILINE) for source in sources] + compiled
    groups = {name for pattern in compiled for name in pattern.groupindex}
    if compiled and not groups & set(COUNTING_GROUPS):
        raise PatternError("the progress patterns have no step, batch or examples group: nothing to count")
    return ProgressPatterns(tuple(compiled), tuple(regexes or ()), format_name, "epoch" in groups)
