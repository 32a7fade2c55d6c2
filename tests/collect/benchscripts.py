"""bench/*.py scripts loaded as modules, so that tests can call their functions (they are not a package)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


@functools.cache
def load_bench(name: str) -> ModuleType:
    """bench/NAME.py, loaded once per test process."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
