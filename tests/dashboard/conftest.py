"""Fixtures for the dashboard tests: real run directories built to docs/run-format.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).parents[1] / "analysis"))

from browserfixtures import browser, chromium  # noqa: F401  (fixtures: one Chromium per session)
from dashfixtures import corrupt, make_run, truncate_last_line
from inferencefixtures import write_inference
from schemacheck import every_report_follows_the_schema  # noqa: F401  (autouse: every report is validated)

from dashboard import parsecache, runs

CPU_START = 1795093375.123456
GPU_START = CPU_START + 3600.0


@pytest.fixture(autouse=True)
def _fresh_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Empty in-memory caches, and Parquet sidecars in the test's own directory (never ~/.cache)."""
    monkeypatch.setenv(parsecache.CACHE_ENV, str(tmp_path / "parse-cache"))
    runs.clear_caches()
    yield
    parsecache.wait_for_writes()
    runs.clear_caches()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir with a CPU run (examples/), a fake-GPU run (runs/) and a broken run (runs/)."""
    make_run(
        tmp_path,
        device="cpu",
        host="buildbox",
        sub="examples",
        label="cpu baseline",
        start_unix=CPU_START,
        duration_s=120,
        cores=2,
        steps_per_s=0.5,
        map_50=0.38,
        seed=1,
    )
    make_run(
        tmp_path,
        device="gpu",
        host="gpubox",
        label="gpu h100",
        start_unix=GPU_START,
        duration_s=90,
        cores=4,
        gpus=1,
        cpu_temp_sensor=True,
        steps_per_s=6.0,
        map_50=0.44,
        seed=2,
    )
    broken = make_run(
        tmp_path,
        device="cpu",
        host="brokenbox",
        start_unix=CPU_START - 7200,
        duration_s=30,
        with_eval=False,
        seed=3,
    )
    truncate_last_line(broken / "telemetry.csv")
    corrupt(broken / "run.json")
    return tmp_path


@pytest.fixture
def run_ids(data_dir: Path) -> dict[str, str]:
    """{'cpu': id, 'gpu': id, 'broken': id} for the runs in `data_dir`."""
    found = {run.host: run.run_id for run in runs.discover_runs(data_dir)}
    broken = next(p.name for p in (data_dir / "runs").iterdir() if "brokenbox" in p.name)
    return {"cpu": found["buildbox"], "gpu": found["gpubox"], "broken": broken}


@pytest.fixture
def with_inference(data_dir: Path, run_ids: dict[str, str]) -> Path:
    """`data_dir` with an inference.json in its CPU and its GPU run."""
    write_inference(runs.get_run(data_dir, run_ids["cpu"]).path, "cpu", 1.0)
    write_inference(runs.get_run(data_dir, run_ids["gpu"]).path, "gpu", 0.05)
    return data_dir
