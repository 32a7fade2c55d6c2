"""The run-directory contract shared by the collector, the training workload and the dashboard.

Writers and readers meet only in the run directory (see docs/run-format.md). This package holds the
file names, the run-id rule, the one reader of its JSON files (`read_run`, with the records of
runformat.records), the telemetry column names (runformat.columns) and the small helpers every side needs
to agree on; it has no dependencies beyond the standard library.
"""

from runformat.duration import format_duration, parse_duration
from runformat.jsonio import read_json, write_json_atomic
from runformat.layout import (
    CHECKPOINTS_DIR,
    COMMAND_LOG,
    DETECTIONS_DIR,
    DETECTIONS_JSON,
    EVAL_JSON,
    EXAMPLES_SUBDIR,
    FORMAT_VERSION,
    INFERENCE_CSV,
    INFERENCE_JSON,
    MODEL_DIR,
    PHASES_COLUMNS,
    PHASES_CSV,
    RUN_DIR_ENV,
    RUN_ID_ENV,
    RUN_JSON,
    RUNS_SUBDIR,
    TELEMETRY_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
    is_valid_run_id,
    new_run_id,
    resolve_run_dir,
    run_dirs,
)
from runformat.progress import (
    ENDED_UNRECORDED,
    LOSS_NOT_FINITE_FROM_STEP,
    TrainingProgress,
    training_progress,
)
from runformat.reader import RunFiles, read_run

__all__ = [
    "CHECKPOINTS_DIR",
    "COMMAND_LOG",
    "DETECTIONS_DIR",
    "DETECTIONS_JSON",
    "ENDED_UNRECORDED",
    "EVAL_JSON",
    "EXAMPLES_SUBDIR",
    "FORMAT_VERSION",
    "INFERENCE_CSV",
    "INFERENCE_JSON",
    "LOSS_NOT_FINITE_FROM_STEP",
    "MODEL_DIR",
    "PHASES_COLUMNS",
    "PHASES_CSV",
    "RUNS_SUBDIR",
    "RUN_DIR_ENV",
    "RUN_ID_ENV",
    "RUN_JSON",
    "TELEMETRY_CSV",
    "TRAINING_CSV",
    "TRAINING_JSON",
    "RunFiles",
    "TrainingProgress",
    "format_duration",
    "is_valid_run_id",
    "new_run_id",
    "parse_duration",
    "read_json",
    "read_run",
    "resolve_run_dir",
    "run_dirs",
    "training_progress",
    "write_json_atomic",
]
