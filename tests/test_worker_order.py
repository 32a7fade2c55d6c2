"""tests/conftest.py's scheduling: the costly shared fixtures' tests on one worker, and started first."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest


@functools.cache
def _conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _item(fixtures: tuple[str, ...], slow: bool = False, module_scoped: str | None = None) -> SimpleNamespace:
    definitions = {module_scoped: [SimpleNamespace(scope="module")]} if module_scoped else {}
    return SimpleNamespace(
        fixturenames=(*fixtures, *([module_scoped] if module_scoped else [])),
        _fixtureinfo=SimpleNamespace(name2fixturedefs=definitions),
        nodeid="tests/x/test_m.py::test_t",
        get_closest_marker=lambda name: object() if (slow and name == "slow") else None,
    )


def test_costliest_shared_fixture_first_then_groups_then_slow_then_the_rest() -> None:
    conftest = _conftest()
    tf_and_torch = _item(("torch_run", "cpu_script_run"))
    assert conftest.worker_group(tf_and_torch) == "cpu_script_run"  # the costlier fixture names the group
    module_group = _item((), module_scoped="server")
    assert conftest.worker_group(module_group) == "tests/x/test_m.py"
    assert conftest.worker_group(_item(("frameworks_in_process",))) == "torch_run"
    items = [_item(()), _item((), slow=True), module_group, _item(("chromium",)), tf_and_torch]
    ranks = [conftest.start_rank(item, conftest.worker_group(item)) for item in items]
    assert ranks == [len(conftest.SHARED_ON_ONE_WORKER) + 2, len(conftest.SHARED_ON_ONE_WORKER) + 1,
                     len(conftest.SHARED_ON_ONE_WORKER), 3, 0]  # fmt: skip


def test_this_sessions_tests_run_in_that_order(request: pytest.FixtureRequest) -> None:
    conftest = _conftest()
    ranks = [conftest.start_rank(item, conftest.worker_group(item)) for item in request.session.items]
    assert ranks == sorted(ranks)
