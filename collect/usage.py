"""Checks of what the user named, before anything starts: each problem is one line for stderr."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from collect.devicecount import counts_problem

DATASET_JSON = "dataset.json"
JOB_ONLY_OPTIONS = ("--progress-regex", "--progress-format", "--workload-name", "--flops-per-example")


def data_dir_problem(data_dir: Path) -> str | None:
    """None if runs can be recorded under data_dir: an existing, writable directory, or a missing one
    whose parent is (the data directory itself is created, never a chain of missing parents)."""
    data_dir = Path(data_dir)
    if data_dir.exists():
        if not data_dir.is_dir():
            return f"--data-dir {data_dir}: not a directory"
        return _unwritable(data_dir, f"--data-dir {data_dir}")
    parent = data_dir.absolute().parent
    if not parent.is_dir():
        return f"--data-dir {data_dir}: no such directory, nor its parent {parent}"
    return _unwritable(parent, f"--data-dir {data_dir}")


def _unwritable(directory: Path, what: str) -> str | None:
    """A real probe (a file created and removed), so read-only mounts and root's view count too."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".workbench-probe-", dir=directory)
    except OSError as exc:
        return f"{what}: cannot write in {directory} ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(probe)
    return None


def command_problem(command: list[str]) -> str | None:
    """None if the command's program can be started: an executable path, or a name found on PATH."""
    if not command:
        return "missing command: use  run [options] -- COMMAND [ARGS...]"
    program = command[0]
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            return f"{program}: not an executable file"
        return None
    if shutil.which(program) is None:
        return f"{program}: command not found"
    return None


def dataset_problem(dataset: Path) -> str | None:
    """None if dataset looks like a training dataset this user can read (dataset.json or train*.tfrecord)."""
    dataset = Path(dataset)
    if not dataset.is_dir():
        return f"--dataset {dataset}: no such directory"
    try:
        names = os.listdir(dataset)
    except OSError as exc:
        return f"--dataset {dataset}: not readable ({exc.strerror or exc})"
    records = sorted(name for name in names if name.startswith("train") and ".tfrecord" in name)
    if not records and DATASET_JSON not in names:
        return f"--dataset {dataset}: no dataset there (no {DATASET_JSON}, no train*.tfrecord)"
    for name in [*records, *([DATASET_JSON] if DATASET_JSON in names else [])]:
        try:
            with (dataset / name).open("rb") as handle:
                handle.read(1)
        except OSError as exc:
            return f"--dataset {dataset}: cannot read {name} ({exc.strerror or exc})"
    return None


PRESET_NAMES = ("small", "standard")
FRAMEWORK_NAMES = {"tf": "tensorflow", "torch": "torch"}  # --framework -> training.json's `framework`
PRECISIONS = ("float32", "mixed")  # our workload's --precision
JOB_PRECISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")  # a job's: float32, bf16-mixed, FP16


def batch_problem(batch: str | int | None) -> str | None:
    """--batch as given (text before anything is installed, a number after argparse): a whole number ≥ 1."""
    if batch is None or (str(batch).isdigit() and int(batch) >= 1):
        return None
    return f"--batch {batch}: expected a whole number ≥ 1"


def job_precision_problem(precision: str | None) -> str | None:
    """A job's --precision: a dtype's name, as frameworks spell it (float32, bf16-mixed, FP16...)."""
    if precision is None or JOB_PRECISION.match(precision):
        return None
    return f"--precision {precision!r}: expected a dtype name (float32, bfloat16, mixed_float16...)"


def job_option_without_job(argv: list[str]) -> str | None:
    """An option that only a job takes (how to read its progress, what it is), given without one."""
    named = next((a.split("=", 1)[0] for a in argv if a.split("=", 1)[0] in JOB_ONLY_OPTIONS), None)
    if named is None:
        return None
    return f"{named} goes with your own training job: give its command after -- (e.g. -- python train.py)"


def options_problem(argv: list[str]) -> str | None:
    """The first problem of the timed-run options in argv that can be seen without installing anything
    (the entry-point scripts call this with the system python3); other options are left to the parser."""
    from runformat.cli import OneLineParser  # its reading of `-1s` as a value, not an option
    from runformat.duration import parse_duration, parse_interval

    class Parser(OneLineParser):
        def error(self, message: str) -> NoReturn:
            raise ValueError(message)  # one line, said by the caller: not argparse's usage block and exit

    job = "--" in argv
    argv = argv[: argv.index("--")] if job else argv  # a job's own command is not ours to read
    if not job and (misplaced := job_option_without_job(argv)):
        return misplaced
    parser = Parser(add_help=False, allow_abbrev=False)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--framework", default="tf")
    parser.add_argument("--procs")
    parser.add_argument("--gpus")
    parser.add_argument("--batch")
    parser.add_argument("--precision")
    parser.add_argument("--interval")
    parser.add_argument("--checkpoint-every")
    try:
        args, _ = parser.parse_known_args(argv)
        if args.interval is not None:
            parse_interval(args.interval)
        if args.checkpoint_every is not None:
            parse_duration(args.checkpoint_every)
    except ValueError as error:
        return str(error)
    if problem := batch_problem(args.batch):
        return problem
    if args.precision is not None and not job and args.precision not in PRECISIONS:
        return f"--precision {args.precision}: expected {' or '.join(PRECISIONS)}"
    if job and (problem := job_precision_problem(args.precision)):
        return problem
    if args.preset not in PRESET_NAMES:
        return f"--preset {args.preset}: expected one of {', '.join(PRESET_NAMES)}"
    if args.framework not in FRAMEWORK_NAMES:
        return f"--framework {args.framework}: expected tf (TensorFlow Model Garden) or torch (torchvision)"
    counts = counts_problem(args.device, args.framework, args.procs, args.gpus)
    if counts:
        return counts
    return data_dir_problem(args.data_dir) or (dataset_problem(args.dataset) if args.dataset else None)


def main(argv: list[str]) -> int:
    """`python3 -m collect.usage [OPTIONS]`: exit 2 with one line on stderr if the options are unusable."""
    problem = options_problem(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
