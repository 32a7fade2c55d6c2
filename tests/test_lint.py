"""House style is checked by the test suite, so a red lint means a red CI."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT_PACKAGES = ("runformat", "collect", "training", "sizing", "dashboard", "bench")


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_shell_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (./scripts/test.sh installs it when run as root)")
    found = [
        *(REPO / "scripts").glob("*.sh"), *(REPO / "scripts" / "slurm").glob("*.sbatch"),
        *(REPO / "bench").glob("*.sh"),
    ]  # fmt: skip
    scripts = [*sorted(str(p.relative_to(REPO)) for p in found), ".ci/run"]
    result = subprocess.run(
        ["shellcheck", "-x", *scripts], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _imports_of(source: Path, packages: tuple[str, ...]) -> list[str]:
    pattern = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(packages)})(?:[.\s]|$)")
    return [line.strip() for line in source.read_text(encoding="utf-8").splitlines() if pattern.match(line)]


def test_training_never_imports_collect_and_dashboard_never_imports_either() -> None:
    rules = {
        "training": ("collect", "sizing"),
        "collect": ("training", "sizing"),
        "dashboard": ("collect", "training"),
        "sizing": ("dashboard", "collect", "training", "dash", "plotly_resampler"),
    }
    offenders = [
        f"{source.relative_to(REPO)}: {line}"
        for package, forbidden in rules.items()
        for source in (REPO / package).rglob("*.py")
        for line in _imports_of(source, forbidden)
    ]
    assert not offenders, offenders


def test_only_sizing_itself_imports_its_command_line() -> None:
    """The dashboard builds its settings through sizing.settings, as the command line does."""
    offenders = [
        f"{source.relative_to(REPO)}: {line}"
        for package in PRODUCT_PACKAGES
        if package != "sizing"
        for source in (REPO / package).rglob("*.py")
        for line in _imports_of(source, ("sizing.cli",))
    ]
    assert not offenders, offenders
    assert _imports_of(REPO / "dashboard" / "sizing_view.py", ("sizing.settings",))


def test_sizing_runs_without_dash() -> None:
    """`python -m sizing` with the Dash packages made unimportable: the package must not need them."""
    code = (
        "import sys; sys.modules['dash'] = None; sys.modules['plotly_resampler'] = None\n"
        "import sizing, sizing.cli, sizing.output.render, sizing.output.figures\n"
        "assert not {'dashboard', 'collect', 'training'} & set(sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_layering_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("from collections.abc import Callable\nimport collectible\nfrom collect.x import y\n")
    assert _imports_of(source, ("collect",)) == ["from collect.x import y"]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the product modules it imports, at any depth of its code (a function-level import is
    still an import): `from a.b import c` names module a.b.c when there is one, else a.b."""
    paths = [path for package in packages for path in sorted((root / package).rglob("*.py"))]
    sources = {_module_name(path, root): path for path in paths}
    graph: dict[str, set[str]] = {name: set() for name in sources}

    def deepest_module(dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in sources:
                return ".".join(parts[:end])
        return None

    for name, path in sources.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            graph[name].update(t for t in map(deepest_module, targets) if t is not None and t != name)
    return graph


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_circles_among_the_product_packages() -> None:
    graph = _import_graph(REPO, PRODUCT_PACKAGES)
    assert "training.cli" in graph and "training.errors" in graph["training.cli"]  # the graph is real
    assert _import_cycles(graph) == []


def test_the_circle_check_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text("import pkg.a as again\nfrom pkg import missing_name\n")
    (package / "d.py").write_text("from pkg import a\n")  # imports into the circle, not part of it
    assert _import_cycles(_import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_the_tests_helper_modules_have_names_of_their_own() -> None:
    """The test folders put themselves on sys.path and import their helpers by bare name, so two helpers of
    one name in two folders make whichever folder loads second import the other's."""
    helpers: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("*.py"):
        if not path.name.startswith(("test_", "conftest", "__init__")):
            helpers.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in helpers.items() if len(paths) > 1} == {}
