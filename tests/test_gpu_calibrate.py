"""bench/gpu_calibrate.py as far as a machine without a GPU can run it: --quick (the collector, its
telemetry, the windows, the expected-against-read table), the refusal without CUDA, and the arithmetic
and verdicts the GPU run will rest on, each at its boundary."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_calibrate.py"
sys.path.insert(0, str(REPO / "tests" / "collect"))

from benchscripts import load_bench  # noqa: E402

cal = load_bench("gpu_calibrate")
from calibration import loads  # noqa: E402  (bench/calibration/, on the path gpu_calibrate set)


def _bench(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, env={**os.environ, "PYTHONPATH": path},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def test_quick_runs_the_collector_and_reads_its_telemetry(tmp_path: Path) -> None:
    done = _bench("--quick", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    pairs = dict(pair.split("=") for pair in last.split())
    assert list(pairs) == [*(f"{load}_{key}" for load, key in cal.LAST_LINE), "rows", "disagree", "absent"]
    assert all(math.isnan(float(pairs[f"{load}_{key}"])) for load, key in cal.LAST_LINE)
    summary = json.loads((tmp_path / "calibration.json").read_text())
    run_dir = Path(summary["run_dir"])
    with (run_dir / "telemetry.csv").open() as handle:
        assert int(pairs["rows"]) == len(list(csv.DictReader(handle))) >= 10  # 100 ms for about 3 s
    assert (
        summary["collector_exit"] == 130
        and json.loads((run_dir / "run.json").read_text())["interval_s"] == 0.1
    )
    idle = summary["loads"]["idle"]
    lo, hi = idle["window_unix"]
    assert lo == pytest.approx(idle["start_unix"] + summary["settle_s"]) and hi == idle["end_unix"]
    assert 5 <= idle["rows"] <= 20 and list(summary["loads"]) == ["idle"]
    again = _bench("--quick", "--out", str(tmp_path))  # the same --out: its own run, not the earlier one
    assert again.returncode == 0 and json.loads((tmp_path / "calibration.json").read_text())[
        "run_dir"
    ] != str(run_dir)
    if "gpu0_util_pct" not in (run_dir / "telemetry.csv").read_text().splitlines()[0]:  # no NVML here
        assert {c["verdict"] for c in idle["checks"]} == {"absent"} and pairs["absent"] == "4"
        assert re.search(r"gpu0_util_pct +absent +<= 5 +absent", done.stdout)
        assert re.search(r"gpu0_sm_active_pct +absent +<= 5 +absent", done.stdout)


@pytest.mark.skipif(_has_cuda(), reason="a CUDA device is here: the bench would run its loads")
def test_without_cuda_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _bench("--out", str(tmp_path / "out"), "--seconds", "10")
    assert done.returncode == 2
    assert len(done.stdout.strip().splitlines()) == 1 and done.stdout.startswith("no CUDA device: ")
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()  # refused before anything


@pytest.mark.parametrize(
    "args",
    [("--seconds", "0"), ("--seconds", "61"), ("--seconds", "abc"), ("--loads", "gemm,fft"), ("--gpu", "-1")],
)
def test_usage_errors_in_one_line(args: tuple[str, str]) -> None:
    done = _bench("--quick", *args)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert len(done.stderr.splitlines()) == 1 and "gpu_calibrate.py: error: " in done.stderr, done.stderr


def test_an_out_it_cannot_create_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = _bench("--quick", "--out", str(tmp_path / "file" / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stdout.splitlines()) == 1, done.stdout
    assert done.stdout.startswith(f"--out {tmp_path / 'file' / 'out'}: cannot create it (")


def test_verdicts_at_their_bounds() -> None:
    at_least, at_most, within = (
        cal.Check("k", ">=", 90.0),
        cal.Check("k", "<=", 5.0),
        cal.Check("k", "within", 20.0),
    )
    assert [at_least.verdict(v) for v in (90.0, 89.99)] == ["agrees", "disagrees"]
    assert [at_most.verdict(v) for v in (5.0, 5.01)] == ["agrees", "disagrees"]
    assert [within.verdict(v) for v in (20.0, -20.0, 20.01, -20.01)] == [
        "agrees",
        "agrees",
        "disagrees",
        "disagrees",
    ]
    assert [at_least.verdict(v) for v in (None, math.nan)] == ["absent", "absent"]
    assert (at_least.expected(), within.expected()) == (">= 90", "|x| <= 20")
    assert cal.parse_checks("util_pct >= 90; d within 20") == (
        cal.Check("util_pct", ">=", 90.0), cal.Check("d", "within", 20.0),
    )  # fmt: skip
    assert set(cal.EXPECTED) == {"idle", *cal.LOADS}
    idle_sms = (cal.Check("sm_active_pct", "<=", 20.0), cal.Check("tensor_active_pct", "<=", 5.0))
    assert cal.EXPECTED["tiny"] == (cal.Check("util_pct", "<=", 50.0), *idle_sms)  # Python: mostly idle
    assert cal.EXPECTED["tiny_graph"] == (cal.Check("util_pct", ">=", 80.0), *idle_sms)


def test_mfu_and_bandwidth_arithmetic() -> None:
    # 2·8192³ = 1.0995e12 FLOP a GEMM; 450 of them in 1 s against 989.4 TFLOP/s is 50.0 % MFU
    gemm = loads.gemm_figures(8192, 450, 1.0, 989.4e12)
    assert gemm["tflops"] == pytest.approx(494.78, abs=0.01) and gemm["mfu_pct"] == pytest.approx(
        50.01, abs=0.01
    )
    assert loads.gemm_figures(8192, 450, 1.0, None)["mfu_pct"] is None  # peak unknown: MFU unknown
    copy = loads.copy_figures(2 * 1024**3, 500, 1.0, 3.35e12)  # 500 copies of 2 GiB, read + write
    assert copy["bytes_per_s"] == 2 * 2 * 1024**3 * 500 and copy["bandwidth_pct"] == pytest.approx(
        64.10, abs=0.01
    )
    assert loads.copy_figures(1, 1, 1.0, None)["bandwidth_pct"] is None


def test_peaks_by_device_name(monkeypatch: pytest.MonkeyPatch) -> None:
    flops, hbm, source = loads.peaks("NVIDIA H100 80GB HBM3")
    assert (flops, hbm) == (989.4e12, 3.35e12)
    assert "sizing/analysis/peaks.py" in source and "3.35 TB/s" in source
    assert loads.peaks("NVIDIA H100 PCIe")[:2] == (756e12, 2.0e12)
    assert loads.peaks("NVIDIA H200")[1] == 4.8e12
    assert loads.peaks("NVIDIA H200 141GB HBM3e")[:2] == (989.4e12, 4.8e12)  # by sizing's model, not the name
    flops, hbm, source = loads.peaks("NVIDIA Imaginary 9000")
    assert flops is None and hbm is None and "HBM bandwidth unknown" in source
    monkeypatch.setitem(sys.modules, "sizing.analysis.peaks", None)  # sizing does not import: the note's
    flops, hbm, source = loads.peaks("NVIDIA H100 80GB HBM3")
    assert (flops, hbm) == (989.4e12, 3.35e12) and "note: sizing/analysis/peaks.py does not import" in source
    assert loads.peaks("NVIDIA H200 141GB HBM3e")[:2] == (None, None)  # exact names only


def test_window_keeps_the_load_less_its_settling_time() -> None:
    assert cal.window(100.0, 115.0, 1.25) == (101.25, 115.0)
    assert cal.window(100.0, 101.5, 1.25) == (101.25, 101.5)
    assert cal.window(100.0, 101.25, 1.25) == (100.0, 101.25)  # no longer than the settling: all of it


def _telemetry(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_evaluate_reads_the_window_and_says_absent_and_disagrees(tmp_path: Path) -> None:
    # rows every 0.5 s from t=99; the load runs 100-110, settling 1.2 s: rows 101.5 ... 110 count
    times = [99 + 0.5 * i for i in range(30)]
    rows = [
        {"time_unix": t, "gpu0_util_pct": 0 if 101.2 <= t <= 110 else 100,
         "gpu0_tensor_active_pct": "" if t == 104 else 80.0, "gpu0_dram_active_pct": 3.0}
        for t in times
    ]  # fmt: skip
    header, read = cal.read_telemetry(_telemetry(tmp_path / "telemetry.csv", rows))
    assert len(read) == 30 and read[10]["gpu0_tensor_active_pct"] is None
    load = {"name": "gemm", "what": "", "start_unix": 100.0, "end_unix": 110.0, "figures": {"mfu_pct": 60.0}}
    cal.evaluate(load, read, header, 0, 1.2)
    assert load["window_unix"] == [101.2, 110.0] and load["rows"] == 18  # 101.5 ... 110.0
    assert load["reads"]["util_pct"] == 0.0 and load["reads"]["tensor_active_pct"] == 80.0
    assert load["reads"]["sm_active_pct"] is None and "sm_active_pct" in load["columns_absent"]
    assert load["figures"]["tensor_minus_mfu_pts"] == pytest.approx(20.0)
    verdicts = {c["key"]: c["verdict"] for c in load["checks"]}
    assert verdicts == {"util_pct": "disagrees", "sm_active_pct": "absent", "tensor_active_pct": "agrees",
                        "mfu_pct": "agrees", "tensor_minus_mfu_pts": "agrees"}  # fmt: skip
    line = cal.last_line({"gemm": load}, 30, {"disagrees": 1, "absent": 1})
    assert line.startswith("gemm_mfu_pct=60.00 gemm_tensor_active_pct=80.00 copy_dram_active_pct=nan ")
    zero = cal.last_line({"tiny": {"reads": {"util_pct": 0.0}}}, 1, {"disagrees": 0, "absent": 0})
    assert "tiny_util_pct=0.00 " in zero  # zero is a reading, not unknown


def test_mean_in_takes_both_ends_and_skips_empty_cells() -> None:
    rows = [
        {"time_unix": t, "x": v} for t, v in ((0.9, 50.0), (1.0, 10.0), (1.5, None), (2.0, 20.0), (2.1, 50.0))
    ]
    assert cal.mean_in(rows, "x", 1.0, 2.0) == 15.0
    assert cal.mean_in(rows, "y", 1.0, 2.0) is None and cal.mean_in(rows, "x", 1.1, 1.9) is None


class _Tensor:
    def __init__(self, value: int = 0) -> None:
        self.value = value

    def add_(self, n: int) -> _Tensor:
        self.value += n
        return self

    def copy_(self, _other: _Tensor) -> _Tensor:
        return self

    def item(self) -> int:
        return self.value


class _Graph:
    def replay(self) -> None:
        pass


class _BrokenGraph:
    def __init__(self) -> None:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")


class _FakeTorch:
    """What run_load calls of PyTorch, the boundary it is handed: every call returns at once."""

    bfloat16, float32, int64 = "bfloat16", "float32", "int64"

    def __init__(self, graph: type = _Graph) -> None:
        self.calls: list[str] = []
        cuda = types.SimpleNamespace(
            synchronize=lambda device: self.calls.append("sync"),
            Stream=lambda device: types.SimpleNamespace(wait_stream=lambda other: None),
            current_stream=lambda device: types.SimpleNamespace(wait_stream=lambda other: None),
            stream=lambda stream: contextlib.nullcontext(),
            graph=lambda graph: contextlib.nullcontext(),
            CUDAGraph=graph,
            set_device=lambda index: self.calls.append(f"set_device {index}"),
            empty_cache=lambda: self.calls.append("empty_cache"),
        )
        self.cuda = cuda

    def device(self, kind: str, index: int) -> str:
        return f"{kind}:{index}"

    def randn(self, *shape: int, device: object, dtype: str) -> _Tensor:
        assert shape == (loads.GEMM_N, loads.GEMM_N) and dtype == "bfloat16"
        return _Tensor()

    def ones(self, count: int, dtype: str, device: object) -> _Tensor:
        assert count * 4 == loads.COPY_BYTES and dtype == "float32"
        return _Tensor()

    def zeros(self, count: int, dtype: str, device: object) -> _Tensor:
        assert count == 1 and dtype == "int64"
        return _Tensor()

    def empty_like(self, _tensor: _Tensor) -> _Tensor:
        return _Tensor()

    def matmul(self, a: _Tensor, b: _Tensor, out: _Tensor) -> _Tensor:
        self.calls.append("matmul")
        return out


@pytest.mark.parametrize("name", cal.LOADS)
def test_each_load_counts_its_work_and_figures_with_a_fake_torch(name: str) -> None:
    torch = _FakeTorch()
    load = loads.run_load(name, torch, "cuda:0", 0.02, 989.4e12, 3.35e12)
    seconds = load["end_unix"] - load["start_unix"]
    assert seconds >= 0.02 and load["iterations"] > 0
    figures = load["figures"]
    if name == "gemm":
        assert torch.calls.count("matmul") == load["iterations"] + 3  # three warm-up products
        assert figures == loads.gemm_figures(loads.GEMM_N, load["iterations"], seconds, 989.4e12)
        assert load["iterations"] % 10 == 0 and torch.calls.count("sync") == load["iterations"] // 10 + 1
    elif name == "copy":
        assert figures == loads.copy_figures(loads.COPY_BYTES, load["iterations"], seconds, 3.35e12)
    else:
        per_step = 1 if name == "tiny" else loads.GRAPH_KERNELS
        assert figures["kernels_per_s"] == pytest.approx(load["iterations"] * per_step / seconds)
        assert f"{load['iterations'] * per_step} kernels" in load["what"]


def test_the_whole_gpu_path_with_a_fake_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """calibrate() as on the GPU, the loads short and the idle spell and gaps shortened: windows per load,
    the table with the load's own figures, calibration.json and the last line with the MFU in it."""
    torch = _FakeTorch(graph=_BrokenGraph)  # the last load fails; the others are still reported
    monkeypatch.setattr(cal, "find_cuda", lambda gpu: (torch, "NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(cal, "IDLE_S", 1.5)
    monkeypatch.setattr(cal, "GAP_S", 0.1)
    args = types.SimpleNamespace(quick=False, gpu=0, seconds=0.5, loads=list(cal.LOADS))
    assert cal.calibrate(args, tmp_path) == 0
    shown = capsys.readouterr().out
    summary = json.loads((tmp_path / "calibration.json").read_text())
    assert list(summary["loads"]) == ["idle", *cal.LOADS] and torch.calls[0] == "set_device 0"
    assert torch.calls.count("empty_cache") == len(cal.LOADS)
    gemm = summary["loads"]["gemm"]
    assert gemm["window_unix"] == [gemm["start_unix"], gemm["end_unix"]]  # shorter than the settling
    assert (
        summary["peaks"]["bf16_flops_per_s"] == 989.4e12
        and "sizing/analysis/peaks.py" in summary["peaks"]["source"]
    )
    assert re.search(r"mfu_pct \(the load\) +[0-9.]+ +>= 40 +agrees", shown)  # a fake GEMM is very fast
    assert re.search(r"tensor_minus_mfu_pts \(the load\) +no reading +>= -10 +absent", shown)
    pairs = dict(pair.split("=") for pair in shown.strip().splitlines()[-1].split())
    assert float(pairs["gemm_mfu_pct"]) == pytest.approx(gemm["figures"]["mfu_pct"], abs=0.01)
    assert math.isnan(float(pairs["gemm_tensor_active_pct"])) and int(pairs["disagree"]) == 0
    broken = summary["loads"]["tiny_graph"]
    assert broken["error"] == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert broken["rows"] == 0 and {c["verdict"] for c in broken["checks"]} == {"absent"}
    assert summary["loads"]["tiny"]["rows"] >= 3 and "failed: RuntimeError" in shown


def test_settling_spans_two_gpm_periods_where_run_json_has_one(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"sources": {"gpm": {"available": True, "period_s": 1.0}}}))
    assert cal.settling(tmp_path)[0] == pytest.approx(2.2)  # a row's held read covers up to 2 s before it
    (tmp_path / "run.json").write_text(
        json.dumps({"sources": {"gpm": {"available": True, "period_s": 0.25}}})
    )
    assert cal.settling(tmp_path)[0] == pytest.approx(1.2)  # NVML's utilization: up to 1 s
    (tmp_path / "run.json").write_text(json.dumps({"sources": {}}))
    assert cal.settling(tmp_path) == (pytest.approx(1.2), None)
