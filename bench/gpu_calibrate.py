"""Calibrate the GPU's counters against loads whose answer is known (issue 33, item 5).

The collector (`python -m collect sample --interval 100ms --device gpu`) records for the whole bench while
one CUDA device (PyTorch) runs, after a few idle seconds, each load for --seconds:

  gemm        bf16 torch.matmul, N = 8192: tensor activity high; MFU = 2·N³·iterations ÷ time ÷ the dense
              bf16 peak of the device by its name (sizing/analysis/peaks.py; where sizing does not import, the
              issue note's H100 and H200 figures, and it says so)
  copy        a 2 GiB tensor copy_ into another: DRAM activity high; bytes/s (read + write) against HBM's
  tiny        x.add_(1) on a 1-element tensor from a Python loop, synchronised every 5,000 launches: one
              host thread feeding the GPU, as a training waiting on Python does; utilization low (on an
              H100, 28 %: the thread cannot launch fast enough), SM activity low
  tiny_graph  the same adds, 1,000 to a CUDA graph, replayed: the kernels back to back, no Python between;
              utilization high, SM activity low (launch-bound)

For each load it prints what each counter read (the mean of the telemetry rows inside the load, less its
first 1.2 s, or two GPM periods and 0.2 s where that is longer: a row shows the last GPM read, held up to a
period, which spans the period before it) beside what the load should give, and a verdict per check: agrees, disagrees, or absent (no column, no reading,
no known peak). GPM columns (gpu<i>_sm_active_pct ...) exist only where the collector reads GPM.

    python bench/gpu_calibrate.py --out DIR            # on a GPU: about 90 s (4 loads of 15 s)
    python bench/gpu_calibrate.py --quick              # no GPU: the collector for about 3 s, idle only

Writes DIR/calibration.json (every read, check and verdict) and the run DIR/data/runs/<run_id>/; --quick
without --out uses a temporary directory. Exit 0 when it ran (disagreements are findings), 2 without a
CUDA device ("no CUDA device: why", one line) or for a usage error, 1 when the collector did not start.

Last line: gemm_mfu_pct=<pct> gemm_tensor_active_pct=<pct> copy_dram_active_pct=<pct> copy_bandwidth_pct=<pct> tiny_util_pct=<pct> tiny_sm_active_pct=<pct> tiny_graph_util_pct=<pct> tiny_graph_sm_active_pct=<pct> rows=<n> disagree=<n> absent=<n>
(nan where not measured: every *_pct with --quick; rows: telemetry rows read; disagree, absent: checks.)
"""  # noqa: E501

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple, NoReturn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runformat import RUN_JSON, TELEMETRY_CSV  # noqa: E402
from runformat.gpm import GPM_SUFFIXES  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration.loads import find_cuda, peaks, run_load  # noqa: E402

INTERVAL = "100ms"
IDLE_S, QUICK_IDLE_S, GAP_S = 4.0, 2.5, 1.0
NVML_UTIL_PERIOD_S = 1.0  # NVML's utilization covers the last 1/6 s to 1 s
LOADS = ("gemm", "copy", "tiny", "tiny_graph")
NVML_READS = ("util_pct", "mem_util_pct", "power_w", "sm_clock_mhz")
READS = NVML_READS + GPM_SUFFIXES


class Check(NamedTuple):
    key: str  # a READS suffix (telemetry gpu<i>_<key>) or a figure of the load (mfu_pct ...)
    op: str  # ">=", "<=", or "within" (|value| <= bound)
    bound: float

    def expected(self) -> str:
        return f"|x| <= {self.bound:g}" if self.op == "within" else f"{self.op} {self.bound:g}"

    def verdict(self, value: float | None) -> str:
        if value is None or not math.isfinite(value):
            return "absent"
        ok = {">=": value >= self.bound, "<=": value <= self.bound, "within": abs(value) <= self.bound}
        return "agrees" if ok[self.op] else "disagrees"


_IDLE_SMS = "sm_active_pct <= 20; tensor_active_pct <= 5"
EXPECTED_TEXT: dict[str, str] = {
    "idle": "util_pct <= 5; sm_active_pct <= 5; tensor_active_pct <= 1; dram_active_pct <= 5",
    "gemm": "util_pct >= 90; sm_active_pct >= 80; tensor_active_pct >= 50; mfu_pct >= 40; "
    "tensor_minus_mfu_pts >= -10",  # MFU cannot be much above the time the tensor pipes were active
    # no expectation of utilization: a same-device copy_ is a cudaMemcpyAsync, maybe not a kernel
    "copy": "dram_active_pct >= 50; tensor_active_pct <= 5; bandwidth_pct >= 50; "
    "dram_minus_bandwidth_pts within 20",  # DRAM activity is the share of the bandwidth used
    "tiny": f"util_pct <= 50; {_IDLE_SMS}",  # measured on an H100 (docs/gpu-evidence.md): 28 %
    "tiny_graph": f"util_pct >= 80; {_IDLE_SMS}",
}


def parse_checks(text: str) -> tuple[Check, ...]:
    """ "util_pct >= 90; x within 20" -> (Check("util_pct", ">=", 90.0), Check("x", "within", 20.0))"""
    return tuple(Check(key, op, float(bound)) for key, op, bound in (c.split() for c in text.split(";")))


EXPECTED: dict[str, tuple[Check, ...]] = {load: parse_checks(text) for load, text in EXPECTED_TEXT.items()}


def difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# ---- telemetry -----------------------------------------------------------------------------------------


def read_telemetry(path: Path) -> tuple[list[str], list[dict[str, float | None]]]:
    """telemetry.csv's header and its rows, every cell a float or None (empty or not a number)."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = [{key: _number(value) for key, value in row.items() if key} for row in reader]
    return header, [row for row in rows if row.get("time_unix") is not None]


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def window(start_unix: float, end_unix: float, settle_s: float) -> tuple[float, float]:
    """The rows that speak for a load: from settle_s after its start (a value held over a period, or
    averaged over one, covers time before it) to its end; a load no longer than settle_s keeps all."""
    return (start_unix + settle_s if end_unix - start_unix > settle_s else start_unix), end_unix


def mean_in(rows: list[dict[str, float | None]], column: str, lo: float, hi: float) -> float | None:
    values = [r[column] for r in rows if lo <= (r["time_unix"] or 0.0) <= hi and r.get(column) is not None]
    return sum(values) / len(values) if values else None  # type: ignore[arg-type]


def evaluate(load: dict, rows: list, header: list[str], gpu: int, settle_s: float) -> dict:
    """The load's window, its reads (None: absent or no reading), figures and checks, into `load`."""
    lo, hi = window(load["start_unix"], load["end_unix"], settle_s)
    reads = {key: mean_in(rows, f"gpu{gpu}_{key}", lo, hi) for key in READS}
    figures = load.setdefault("figures", {})
    figures["tensor_minus_mfu_pts"] = difference(reads["tensor_active_pct"], figures.get("mfu_pct"))
    figures["dram_minus_bandwidth_pts"] = difference(reads["dram_active_pct"], figures.get("bandwidth_pct"))
    values = {**reads, **figures}
    load.update(
        window_unix=[lo, hi],
        rows=sum(1 for r in rows if lo <= (r["time_unix"] or 0.0) <= hi),
        reads=reads,
        columns_absent=[key for key in READS if f"gpu{gpu}_{key}" not in header],
        checks=[
            {
                "key": c.key,
                "expected": c.expected(),
                "read": values.get(c.key),
                "verdict": c.verdict(values.get(c.key)),
            }
            for c in EXPECTED[load["name"]]
        ],
    )
    return load


def _cell(value: float | None, absent: bool) -> str:
    return "absent" if absent else "no reading" if value is None else f"{value:.1f}"


def print_load(load: dict, gpu: int) -> None:
    print(f"\n{load['name']}: {load['what']}")
    if load.get("error"):
        print(f"  failed: {load['error']}")
    lo, hi = load["window_unix"]
    print(f"  window {hi - lo:.1f} s, {load['rows']} telemetry rows")
    checks = {c["key"]: c for c in load["checks"]}
    print(f"  {'counter':36s} {'read':>10s}  {'expected':>12s}  verdict")
    for key in READS:
        check = checks.pop(key, None)
        line = f"  gpu{gpu}_{key:30s} {_cell(load['reads'][key], key in load['columns_absent']):>10s}"
        print(line + (f"  {check['expected']:>12s}  {check['verdict']}" if check else ""))
    for key, check in checks.items():
        print(
            f"  {key + ' (the load)':36s} {_cell(check['read'], False):>10s}  {check['expected']:>12s}  "
            f"{check['verdict']}"
        )


# ---- the collector --------------------------------------------------------------------------------------


class CollectorError(RuntimeError):
    pass


class Collector:
    """`python -m collect sample` in the background, stopped with SIGINT like a person would."""

    def __init__(self, data_dir: Path, device: str, label: str, log: Path) -> None:
        self.data_dir, self.log = data_dir, log
        self.earlier = set((data_dir / "runs").glob("*"))  # runs of an earlier bench in the same --out
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        command = [sys.executable, "-m", "collect", "sample", "--interval", INTERVAL, "--device", device]
        command += ["--data-dir", str(data_dir), "--label", label]
        with log.open("w") as out:
            self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_for_rows(self, rows: int = 2, timeout_s: float = 60.0) -> Path:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.process.poll() is None:
            for telemetry in (self.data_dir / "runs").glob(f"*/{TELEMETRY_CSV}"):
                if telemetry.parent in self.earlier:
                    continue
                with suppress(OSError), telemetry.open() as handle:
                    if sum(1 for _ in handle) > rows:
                        return telemetry.parent
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
        raise CollectorError(f"the collector did not start: {' '.join(tail) or 'no output'}")

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


# ---- main -----------------------------------------------------------------------------------------------


LAST_LINE = (("gemm", "mfu_pct"), ("gemm", "tensor_active_pct"), ("copy", "dram_active_pct"),
             ("copy", "bandwidth_pct"), ("tiny", "util_pct"), ("tiny", "sm_active_pct"),
             ("tiny_graph", "util_pct"), ("tiny_graph", "sm_active_pct"))  # fmt: skip


def last_line(loads: dict[str, dict], rows: int, totals: dict[str, int]) -> str:
    def value(name: str, key: str) -> float:
        load = loads.get(name, {})
        found = {**load.get("reads", {}), **load.get("figures", {})}.get(key)
        return math.nan if found is None else found

    pairs = " ".join(f"{name}_{key}={value(name, key):.2f}" for name, key in LAST_LINE)
    return f"{pairs} rows={rows} disagree={totals['disagrees']} absent={totals['absent']}"


def settling(run_dir: Path) -> tuple[float, dict | None]:
    try:
        gpm = json.loads((run_dir / RUN_JSON).read_text()).get("sources", {}).get("gpm")
    except (OSError, ValueError):
        gpm = None
    period = (gpm or {}).get("period_s") or 0.0
    return max(NVML_UTIL_PERIOD_S, 2 * float(period)) + 0.2, gpm


def _json_safe(value):  # type: ignore[no-untyped-def]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _one_load(name: str, torch, args: argparse.Namespace, flops: float | None, hbm: float | None) -> dict:
    try:
        return {
            "name": name,
            **run_load(name, torch, torch.device("cuda", args.gpu), args.seconds, flops, hbm),
        }
    except Exception as exc:  # a load that fails (out of memory, no graphs) leaves the others
        error, now = f"{type(exc).__name__}: {exc}".splitlines()[0], time.time()
        return {"name": name, "what": "failed", "error": error, "start_unix": now, "end_unix": now}
    finally:
        with suppress(Exception):
            torch.cuda.empty_cache()


def calibrate(args: argparse.Namespace, out: Path) -> int:
    cuda = None if args.quick else find_cuda(args.gpu)
    if isinstance(cuda, str):
        print(f"no CUDA device: {cuda}")
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"--out {out}: cannot create it ({exc.strerror or exc})")
        return 2
    torch, name = cuda if cuda else (None, "none (--quick)")
    if torch is not None:
        torch.cuda.set_device(args.gpu)  # CUDA graphs capture on the current device
    peak_flops, peak_bytes, peak_source = peaks(name)
    print(f"device {args.gpu}: {name}; peaks: {peak_source}")
    collector = Collector(
        out / "data", "cpu" if args.quick else "gpu", f"gpu_calibrate on {name}", out / "collect.log"
    )
    loads: dict[str, dict] = {}
    run_dir: Path | None = None
    try:
        run_dir = collector.wait_for_rows()
        started = time.time()
        time.sleep(QUICK_IDLE_S if args.quick else IDLE_S)
        loads["idle"] = {
            "name": "idle",
            "what": "nothing running",
            "start_unix": started,
            "end_unix": time.time(),
        }
        for load in [] if args.quick else args.loads:
            time.sleep(GAP_S)
            loads[load] = _one_load(load, torch, args, peak_flops, peak_bytes)
    except KeyboardInterrupt:  # a time limit: the loads that finished are still reported
        print(f"interrupted: reporting {', '.join(loads)}")
    except CollectorError as exc:
        print(str(exc))
        return 1  # the collector is stopped below
    finally:
        collector_exit = collector.stop()
    if run_dir is None:
        return 130
    settle_s, gpm = settling(run_dir)
    header, rows = read_telemetry(run_dir / TELEMETRY_CSV)
    print(
        f"collector exit {collector_exit}, {len(rows)} rows at {INTERVAL} in {run_dir}; GPM in run.json: "
        f"{json.dumps(gpm) if gpm else 'absent'}; each window skips its first {settle_s:.1f} s"
    )
    for load in loads.values():
        print_load(evaluate(load, rows, header, args.gpu, settle_s), args.gpu)
    verdicts = [c["verdict"] for load in loads.values() for c in load["checks"]]
    totals = {v: verdicts.count(v) for v in ("agrees", "disagrees", "absent")}
    summary = {
        "device": {"index": args.gpu, "name": name},
        "peaks": {"bf16_flops_per_s": peak_flops, "hbm_bytes_per_s": peak_bytes, "source": peak_source},
        "interval": INTERVAL,
        "settle_s": settle_s,
        "seconds": args.seconds,
        "run_dir": str(run_dir),
        "collector_exit": collector_exit,
        "gpm": gpm,
        "loads": loads,
        "totals": totals,
    }
    (out / "calibration.json").write_text(json.dumps(_json_safe(summary), indent=1) + "\n")
    print(
        f"\nchecks: {totals['agrees']} agree, {totals['disagrees']} disagree, {totals['absent']} absent; "
        f"{out / 'calibration.json'}"
    )
    print(last_line(loads, len(rows), totals))
    return 0


def _loads(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in LOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"loads are {', '.join(LOADS)}; got {text!r}")
    return names


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--seconds", type=float, default=15.0, help="each load's length (10-20 s; default 15)"
    )
    parser.add_argument("--gpu", type=int, default=0, help="the device (CUDA = NVML numbering; default 0)")
    parser.add_argument("--loads", type=_loads, default=list(LOADS), help=f"a subset of {','.join(LOADS)}")
    parser.add_argument("--out", type=Path, default=None, help="default bench/out/gpu-calibration")
    parser.add_argument("--quick", action="store_true", help="no GPU: the collector and the idle window only")
    args = parser.parse_args(argv)
    if not 1 <= args.seconds <= 60 or args.gpu < 0:
        parser.error("--seconds must be 1 to 60 and --gpu >= 0")
    if args.out is not None or not args.quick:
        return calibrate(args, args.out or REPO / "bench" / "out" / "gpu-calibration")
    with tempfile.TemporaryDirectory(prefix="gpu-calibrate-") as scratch:
        return calibrate(args, Path(scratch))


if __name__ == "__main__":
    sys.exit(main())
