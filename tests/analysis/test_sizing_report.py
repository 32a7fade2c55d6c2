"""`python -m sizing`: Markdown, HTML and JSON from run directories, figures by hand, bad input → 2."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from sizingfixtures import reference_cpu, reference_gpu, renamed, write_run

from sizing import Prices, ReportSettings, build_report
from sizing import cli as report

PRICES = ["--tariff", "0.15", "--cpu-price", "1000", "--gpu-price", "2000", "--value-per-hour", "10"]


def markdown_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """{section title: rows as {header: cell}} for every markdown table in the report."""
    tables: dict[str, list[dict[str, str]]] = {}
    title, headers = None, None
    for line in text.splitlines():
        if line.startswith("## "):
            title, headers = line[3:], None
        elif line.startswith("|") and title is not None:
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if headers is None:
                headers = cells
            elif not set(line) <= set("|-"):
                tables.setdefault(title, []).append(dict(zip(headers, cells, strict=True)))
    return tables


def by_run(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {row["Run"]: row for row in rows}


@pytest.fixture
def markdown(crafted_data_dir: Path, tmp_path: Path) -> str:
    out = tmp_path / "report.md"
    code = report.main(
        ["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), *PRICES, "--out", str(out)]
    )
    assert code == 0
    return out.read_text(encoding="utf-8")


def test_markdown_report_figures_match_hand_computations(markdown: str) -> None:
    tables = markdown_tables(markdown)
    runs = by_run(tables["Runs"])
    assert runs["ref-cpu"]["Steady steps/s"] == "0.500"  # 25 steps / 50 s
    assert runs["ref-cpu"]["Steady examples/s"] == "1.000"
    assert runs["ref-cpu"]["Steps within budget"] == "26 in 60.0 s"
    assert runs["ref-cpu"]["Throughput from"] == "step log"
    assert runs["ref-cpu"]["Workload"] == "tensorflow/small/resnet18/256px/batch 2/float32"
    assert runs["ref-gpu"]["Steady steps/s"] == "10.000"  # 180 steps / 18 s
    assert runs["ref-gpu"]["First step"] == "20.0 s"

    cpu_row, gpu_row = tables["Comparison"]
    assert cpu_row["Speedup"] == "1.00× (baseline)"
    assert gpu_row["Speedup"] == "20.00×"  # 20 / 1 examples/s
    assert gpu_row["Like-for-like"] == "yes"
    assert cpu_row["J per 1,000 examples"] == "40,000"  # 40 W × 1,000 s
    assert gpu_row["J per 1,000 examples"] == "17,500"  # 350 W × 50 s
    assert cpu_row["Energy $ per 1,000 examples"] == "$0.0017"  # 0.01111 kWh × $0.15
    assert cpu_row["Hardware $ per 1,000 examples"] == "$0.0106"  # $1,000 / 26,280 h × 0.2778 h
    assert cpu_row["Total $ per 1,000 examples"] == "$0.0122"
    assert gpu_row["Total $ per 1,000 examples"] == "$0.0023"  # 0.000729 + $3,000 / 26,280 h × 0.01389 h
    assert gpu_row["Per step (same batch only)"] == "10.000 steps/s, 35,000 J per 1,000 steps"
    assert gpu_row["Break-even (GPU hours)"] == "10.5"  # $2,000 / (19 × $10 + $0.0675)

    times = by_run(tables["Time to target"])
    assert times["ref-cpu"]["Time to 1,000 steps"] == "2,008 s (33m28s) (projected)"  # 68 + 970 / 0.5
    assert times["ref-gpu"]["Time to 1,000 steps"] == "119.9 s (projected)"  # 39.9 + 800 / 10
    # default target = 1.95, the CPU's lowest 20-step mean: reached at its last step (68 s); the GPU's
    # mean 4 − 0.02(k − 9.5) ≤ 1.95 first at k = 112, ending at 20 + 111 × 0.1 = 31.1 s
    assert times["ref-cpu"]["Time to loss ≤ 1.9500"] == "68.0 s (step 30)"
    assert times["ref-gpu"]["Time to loss ≤ 1.9500"] == "31.1 s (step 112)"

    energy = by_run(tables["Energy and cost"])
    assert energy["ref-cpu"]["What it covers"] == "CPU package (RAPL)"
    assert energy["ref-gpu"]["What it covers"] == "GPU board (NVML energy counter) + CPU package (RAPL)"
    assert energy["ref-gpu"]["Mean power (W)"] == "350.0"
    assert energy["ref-gpu"]["Training energy (kWh)"] == "0.0039"  # 350 W × 40 s = 14,000 J

    thermal = {(r["Run"], r["Sensor"]): r for r in tables["Thermal"]}
    assert thermal[("ref-gpu", "gpu0")]["Peak °C"] == "85.0"
    assert thermal[("ref-gpu", "gpu0")]["Time ≥ 80 °C"] == "10.0 s"
    throttle = {(r["Run"], r["Source"]): r for r in tables["Throttling (training window)"]}
    assert throttle[("ref-gpu", "gpu0")]["Category"] == "thermal (SW)"
    assert throttle[("ref-gpu", "gpu0")]["Samples"] == "5/41"
    assert throttle[("ref-gpu", "gpu0")]["Events"] == "2"
    assert throttle[("ref-cpu", "cpu")]["Samples"] == "cannot tell (constant frequency: VM or no cpufreq)"

    verdicts = by_run(tables["Bottleneck verdict"])
    assert verdicts["ref-cpu"]["Verdict"] == "CPU-bound"
    assert "90.0 % ≥ 85 %" in verdicts["ref-cpu"]["Why"]
    assert verdicts["ref-gpu"]["Verdict"] == "GPU-bound + thermally throttled"
    assert "thermal (SW) in 5/18 samples" in verdicts["ref-gpu"]["Why"]

    accuracy = by_run(tables["Accuracy bought"])
    assert (accuracy["ref-gpu"]["mAP@0.5"], accuracy["ref-gpu"]["Recall@0.5"]) == ("0.400", "0.700")
    assert accuracy["ref-cpu"]["Steps trained"] == "30"


def test_markdown_report_has_the_decision_and_definitions(markdown: str) -> None:
    # 2,000 / 190.0675 = 10.5226 GPU hours; × 20 = 210.45 baseline hours
    assert "20.00× the baseline's examples/s" in markdown
    assert (
        "pays back its $2,000.00 after 10.5 GPU training hours (≈ 210.5 hours of baseline training; "
        "3-year life at 100% use" in markdown
    )
    assert "## Definitions" in markdown
    assert "**Steady state**" in markdown and "**Break-even**" in markdown and "**Like-for-like**" in markdown


def test_html_report_is_self_contained(crafted_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert (
        report.main(["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), *PRICES, "--out", str(out)])
        == 0
    )
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<td>20.00×</td>" in text and "<td>17,500</td>" in text
    assert text.count("Plotly.newPlot") >= 3  # throughput, loss, temperature
    # plotly.js is inlined (the machines are offline): no script is loaded from anywhere
    assert re.search(r"<script[^>]*\bsrc=", text) is None
    assert len(text) > 1_000_000


def test_run_directory_paths_and_an_explicit_baseline(crafted_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    gpu_dir = crafted_data_dir / "runs" / "ref-gpu"
    args = ["ref-cpu", str(gpu_dir), "--data-dir", str(crafted_data_dir), "--baseline", str(gpu_dir)]
    assert report.main([*args, "--out", str(out)]) == 0
    comparison = markdown_tables(out.read_text(encoding="utf-8"))["Comparison"]
    assert comparison[1]["Speedup"] == "1.00× (baseline)"
    assert comparison[0]["Speedup"] == "0.05×"  # 1 / 20


def test_cpu_tdp_estimate_is_marked(tmp_path: Path) -> None:
    run = reference_cpu("no-rapl")
    run = type(run)(
        run.run_id,
        run.meta,
        run.training_info,
        run.evaluation,
        run.telemetry.drop(columns=["cpu_energy_j"]),
        run.training,
        run.phases,
    )
    write_run(tmp_path / "examples", run)
    out = tmp_path / "r.md"
    assert report.main(["no-rapl", "--data-dir", str(tmp_path), "--cpu-tdp-w", "100", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    energy = by_run(markdown_tables(text)["Energy and cost"])["no-rapl"]
    assert energy["What it covers"] == "ESTIMATE: CPU package from 100 W TDP, 30% idle floor, × CPU util"
    assert energy["J per 1,000 examples"] == "93,000 (ESTIMATE)"  # 100 W × (0.3 + 0.7 × 0.9) × 1,000 s
    assert "(ESTIMATE)" in text.split("## Settings")[0]  # in the headline too


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "unknown run 'nope'"),
        (["../examples/ref-cpu"], "unknown run"),
        (["ref-cpu", "--tariff", "-1"], "--tariff"),
        (["ref-cpu", "--tariff", "cheap"], "--tariff"),
        (["ref-cpu", "--tariff", "15"], "tariff 15 USD per kWh is above any grid's price (at most 5): cents"),
        (["ref-cpu", "--amortise-years", "0"], "--amortise-years"),
        (["ref-cpu", "--amortise-years", "36"], "than any hardware's life (at most 20): months given? (3"),
        (["ref-cpu", "--gpu-price", "nan"], "--gpu-price"),
        (["ref-cpu", "--temp-threshold", "inf"], "--temp-threshold"),
        (["ref-cpu", "--temp-threshold", "176"], "is above any chip's (at most 125 °C): °F given? (80 °C)"),
        (["ref-cpu", "--cpu-tdp-w", "270000"], "W is above any host's CPUs (at most 5000 W): milliwatts"),
        (["ref-cpu", "--cpu-tdp", "box=6000"], "CPU TDP of box 6000 W is above any host's CPUs"),
        (["ref-cpu", "--target-steps", "1.5"], "--target-steps"),
        (["ref-cpu", "--baseline", "ref-gpu"], "baseline"),
        (["ref-cpu", "ref-cpu"], "run given twice"),
        (["no-files"], "nothing to size"),
        (["ref-cpu", "--cpu-tdp", "box"], "--cpu-tdp"),
        (["ref-cpu", "--idle-fraction", "1"], "--idle-fraction"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    crafted_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (crafted_data_dir / "runs" / "no-files").mkdir()
    out = tmp_path / "r.md"
    code = report.main([*args, "--data-dir", str(crafted_data_dir), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not out.exists()


def test_a_file_given_for_a_run_says_what_to_give(
    crafted_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = crafted_data_dir / "examples" / "ref-cpu"
    archive, packed = tmp_path / "ref-cpu.tar.gz", tmp_path / "ref-cpu.7z"
    archive.write_bytes(b"\x1f\x8b")
    packed.write_bytes(b"7z")
    expected = {
        run_dir / "run.json": f"is a file, not a run directory: give its run directory, '{run_dir}'",
        archive: "cannot read the archive (EOFError: ",
        packed: "is a file, not a run directory: give its run directory, or an archive of runs (.tar, .tgz",
    }
    for given, message in expected.items():
        assert report.main([str(given), "--out", str(tmp_path / "r.md")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize(
    ("out", "message"),
    [("report.txt", "must end in .html, .md or .json"), ("missing/report.md", "does not exist")],
)
def test_bad_out_is_exit_2(
    crafted_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str, message: str
) -> None:
    code = report.main(["ref-cpu", "--data-dir", str(crafted_data_dir), "--out", str(tmp_path / out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_missing_out_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main(["ref-cpu"]) == 2
    assert "--out" in capsys.readouterr().err


def test_command_line_entry_point(crafted_data_dir: Path, tmp_path: Path) -> None:
    """Through the interpreter, as `python -m sizing` and its alias `python -m dashboard report`."""
    out = tmp_path / "r.json"

    def interpreter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, check=False,
                              timeout=60)  # fmt: skip

    done = interpreter("sizing", "ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and json.loads(out.read_text())["baseline"]["run_ids"] == ["ref-cpu"]
    bad = interpreter("dashboard", "report", "ref-cpu", "--data-dir", str(crafted_data_dir), "--tariff", "x",
                      "--out", str(out))  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("python -m dashboard report: error:")


def test_break_even_wording_without_prices_and_from_energy_alone() -> None:
    runs = [reference_cpu(), reference_gpu()]
    bare = build_report(runs, ReportSettings())
    assert "break-even: not computed: GPU not priced (Crafted H100) (--gpu-price)" in bare.headline[1]
    energy_only = build_report(runs, ReportSettings(prices=Prices(gpu_price=2000.0)))
    # no value per hour: the energy saved, $0.0675 per GPU hour, needs 2,000 / 0.0675 = 29,630 hours, beyond
    # the 26,280 hours of a 3-year life round the clock; the 20× time saved is not valued: cannot tell
    assert (
        "break-even: time saved not valued: cannot tell (the energy alone pays back after 29,630 h, beyond "
        "the 26,280 h of the life; --value-per-hour would tell)" in energy_only.headline[1]
    )
    assert "does not pay back" not in energy_only.headline[1] and "never" not in energy_only.headline[1]
    assert "29,629.6" not in energy_only.headline[1]
    longer = build_report(runs, ReportSettings(prices=Prices(gpu_price=2000.0, amortise_years=4.0)))
    assert "after 29,629.6 GPU training hours" in longer.headline[1]


def test_json_output_has_the_documented_fields(crafted_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert (
        report.main(["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), *PRICES, "--out", str(out)])
        == 0
    )
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["baseline"]["run_ids"] == ["ref-cpu"]
    run = {r["run_id"]: r for r in data["runs"]}["ref-gpu"]
    assert run["workload"]["batch_size"] == 2 and run["hardware"]["gpus"] == ["Crafted H100"]
    assert run["examples_per_s"] == pytest.approx(20.0) and run["steps_per_s"] == pytest.approx(10.0)
    assert run["energy_j_per_1k_examples"] == pytest.approx(17_500.0) and run["energy_is_estimate"] is False
    (comparison,) = data["comparisons"]
    assert comparison["run_id"] == "ref-gpu" and comparison["baseline"] == ["ref-cpu"]
    assert comparison["like_for_like"] is True and comparison["differences"] == []
    assert comparison["speedup"] == pytest.approx(20.0) and comparison["speedup_ci95"] is None
    assert comparison["break_even_hours"] == pytest.approx(2000 / 190.0675)
    assert isinstance(data["warnings"], list)
    no_prices = tmp_path / "bare.json"
    assert (
        report.main(["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--out", str(no_prices)]) == 0
    )
    assert json.loads(no_prices.read_text())["comparisons"][0]["break_even_hours"] is None


def test_a_directory_written_by_another_tool(tmp_path: Path) -> None:
    """Only telemetry.csv (elapsed_s, no run.json, no training files): a report still comes out."""
    run_dir = tmp_path / "foreign"
    run_dir.mkdir()
    rows = ["elapsed_s,cpu_util_pct,cpu_temp_c,mem_used_bytes,disk_util_pct,gpu0_temp_c"]
    rows += [f"{t},{97.0},{60 + t / 2},{1e9},{4.0},{66.0}" for t in range(60)]
    (run_dir / "telemetry.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.md"
    args = [str(run_dir), "--cpu-tdp", "foreign-host=65", "--out", str(out)]
    assert report.main([*args, "--data-dir", str(tmp_path)]) == 0
    tables = markdown_tables(out.read_text(encoding="utf-8"))
    assert by_run(tables["Runs"])["foreign"]["Steady examples/s"] == "unknown (no work counter)"
    assert by_run(tables["Bottleneck verdict"])["foreign"]["Verdict"] == "CPU-bound"
    thermal = {(r["Run"], r["Sensor"]): r["Peak °C"] for r in tables["Thermal"]}
    assert thermal == {("foreign", "cpu"): "89.5", ("foreign", "gpu0"): "66.0"}


def test_a_folder_of_runs_or_a_data_directory_sizes_every_run_in_it(crafted_data_dir: Path, capsys) -> None:
    """`python -m sizing data/` or `data/examples`: the runs inside, an id in runs/ and examples/ once."""
    from sizing.analysis.load import load_runs

    write_run(crafted_data_dir / "examples", reference_gpu())  # the same id as runs/ref-gpu
    (crafted_data_dir / "examples" / "notes").mkdir()  # not a run: skipped
    whole = load_runs(crafted_data_dir, [str(crafted_data_dir)])
    assert sorted(r.run_id for r in whole) == ["ref-cpu", "ref-gpu"]
    (gpu,) = [r for r in whole if r.run_id == "ref-gpu"]
    assert gpu.telemetry.equals(reference_gpu().telemetry)
    folder = load_runs(crafted_data_dir, [str(crafted_data_dir / "examples")])
    assert sorted(r.run_id for r in folder) == ["ref-cpu", "ref-gpu"]
    out = crafted_data_dir / "report.md"
    assert report.main([str(crafted_data_dir / "runs"), str(crafted_data_dir / "examples" / "ref-cpu"),
                        "--data-dir", str(crafted_data_dir), "--out", str(out)]) == 0  # fmt: skip
    empty = crafted_data_dir / "empty"
    empty.mkdir()
    assert report.main([str(empty), "--out", str(out)]) == 2
    assert "nothing to size: run 'empty' has neither" in capsys.readouterr().err
    assert report.main(["", "--data-dir", str(crafted_data_dir), "--out", str(out)]) == 2  # "$RUN" unset
    assert capsys.readouterr().err == (
        "python -m sizing: error: an empty run given (an unset shell variable?): name a run id or directory\n"
    )


def test_runs_copied_deeper_into_a_data_directory_are_found_and_a_backup_counted_once(
    crafted_data_dir: Path, capsys
) -> None:
    """The GPU machine's runs unpacked into data/gpu-box/runs/ were not seen: "No GPU run to compare". A
    backup of one under the same id is one measurement; the same id for two different ones is refused."""
    from sizing.analysis.load import load_runs

    data = crafted_data_dir
    (data / "runs" / "ref-gpu").rename(data / "moved")
    write_run(data / "gpu-box" / "home" / "runs", reference_gpu())
    write_run(data / "backup" / "old", reference_gpu())
    write_run(data / "examples" / "ref-cpu" / "nested", renamed(reference_gpu(), "in-a-run"))  # not searched
    write_run(data / "datasets" / "waldo", renamed(reference_gpu(), "in-a-dataset"))  # not searched
    whole = load_runs(data, [str(data)])
    assert sorted(r.run_id for r in whole) == ["moved", "ref-cpu", "ref-gpu"]
    (gpu,) = [r for r in whole if r.run_id == "ref-gpu"]
    assert gpu.warnings[-1] == (
        f"ref-gpu: also at {(data / 'gpu-box' / 'home' / 'runs' / 'ref-gpu').resolve()}, the same "
        f"measurement: counted once, from {(data / 'backup' / 'old' / 'ref-gpu').resolve()}"
    )
    shutil.rmtree(data / "gpu-box" / "home" / "runs" / "ref-gpu")
    write_run(data / "gpu-box" / "home" / "runs", renamed(reference_cpu(), "ref-gpu"))  # a stale other run
    whole = load_runs(data, [str(data)])
    (gpu,) = [r for r in whole if r.run_id == "ref-gpu"]
    backup, stale = data / "backup" / "old" / "ref-gpu", data / "gpu-box" / "home" / "runs" / "ref-gpu"
    assert gpu.meta["device"] == "gpu" and gpu.warnings[-1] == (
        f"ref-gpu: another run under this id, at {stale.resolve()}, differs from the one sized (at "
        f"{backup.resolve()}): left out; give its path to size it"
    )
    out = data / "report.md"
    named_apart = [str(backup), str(stale)]
    assert report.main([*named_apart, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m sizing: error: run given twice: ref-gpu (") and err.count("\n") == 1
    assert "differ: give one of them" in err


def test_a_run_reached_through_a_folder_and_by_itself_is_sized_once(crafted_data_dir: Path, capsys) -> None:
    """`python -m sizing data data/examples` or `data/examples data/examples/<cpu run>` (everything, and
    the run that matters): refused as "run given twice" for every run the folders share. A directory
    reached twice counts once; a run named twice itself is still refused."""
    data, out = crafted_data_dir, crafted_data_dir / "report.md"
    examples = data / "examples"
    for specs, count in (([data, examples], 2), ([examples, examples / "ref-cpu"], 1), ([data, data], 2)):
        given = [str(spec) for spec in specs]
        assert report.main([*given, "--data-dir", str(data), "--out", str(out)]) == 0, capsys.readouterr().err
        assert f"({count} run(s), markdown)" in capsys.readouterr().out
    twice = [str(examples / "ref-cpu"), "ref-cpu"]
    assert report.main([*twice, "--data-dir", str(data), "--out", str(out)]) == 2
    assert "run given twice: ref-cpu" in capsys.readouterr().err


def test_runs_packed_in_an_archive_are_sized_as_they_are(tmp_path: Path, capsys) -> None:
    """The GPU machine's runs come back as `gpu-runs.tgz` (or a zip): refused with "unpack the archive
    first". They are sized from the archive; a run packed from inside its directory takes the archive's
    name; warnings name the archive, not a temporary directory; an archive that is not one, or holds no
    run, is one line."""
    import tarfile
    import zipfile

    runs = tmp_path / "runs"
    write_run(runs, reference_cpu())
    gpu = write_run(runs, reference_gpu())
    write_run(tmp_path / "backup", reference_gpu())  # the same run twice in one archive: counted once
    (gpu / "checkpoints").mkdir()
    (gpu / "checkpoints" / "ckpt-1.pt").write_bytes(b"\0" * 1024)  # not unpacked
    with tarfile.open(tmp_path / "gpu-runs.tgz", "w:gz") as tar:
        tar.add(gpu, arcname="runs/ref-gpu")
        tar.add(tmp_path / "backup" / "ref-gpu", arcname="backup/ref-gpu")
    with tarfile.open(tmp_path / "h100-final.tar", "w") as tar:
        for path in gpu.iterdir():
            tar.add(path, arcname=path.name)
    with zipfile.ZipFile(tmp_path / "both.zip", "w") as packed:
        for path in runs.rglob("*"):
            packed.write(path, path.relative_to(tmp_path).as_posix())
    out = tmp_path / "report.json"
    cpu = str(runs / "ref-cpu")
    for specs, gpu_id in (([cpu, "gpu-runs.tgz"], "ref-gpu"), ([cpu, "h100-final.tar"], "h100-final"),
                          (["both.zip"], "ref-gpu")):  # fmt: skip
        given = [spec if spec == cpu else str(tmp_path / spec) for spec in specs]
        assert report.main([*given, "--out", str(out)]) == 0, capsys.readouterr().err
        data = json.loads(out.read_text())
        assert sorted(r["run_id"] for r in data["runs"]) == sorted(["ref-cpu", gpu_id])
        assert data["decision"]["options"], data["decision"]
    report.main([cpu, str(tmp_path / "gpu-runs.tgz"), "--out", str(out)])
    text = " ".join(json.loads(out.read_text())["warnings"])
    archive = tmp_path / "gpu-runs.tgz"
    said = (
        f"ref-gpu: also at {archive}:backup/ref-gpu, the same measurement: counted once, from {archive}:runs"
    )
    assert said in text, text
    assert "sizing-archives-" not in text
    (tmp_path / "junk.tgz").write_bytes(b"not an archive")
    with tarfile.open(tmp_path / "norun.tgz", "w:gz") as tar:
        tar.add(gpu / "checkpoints", arcname="checkpoints")
    for name, said in (
        ("junk.tgz", "cannot read the archive (ReadError: "),
        ("norun.tgz", "holds no run's files"),
    ):
        assert report.main([str(tmp_path / name), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err


def test_an_archive_without_room_to_unpack_is_one_line_and_runs_need_none(
    crafted_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """No temporary directory can be made (a full or missing /tmp): runs given as directories are sized as
    ever (nothing is unpacked for them); an archive is one line, not a traceback."""
    import tarfile

    archive = tmp_path / "runs.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(crafted_data_dir / "runs", arcname="runs")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "no-such-dir"))
    out = tmp_path / "report.md"
    assert report.main(["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--out", str(out)]) == 0
    capsys.readouterr()
    assert report.main([str(archive), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot make a temporary directory to read an archive in (" in err and err.count("\n") == 1, err


def test_two_recordings_whose_directories_share_a_name_are_both_sized_named_by_their_paths(
    tmp_path: Path, capsys
) -> None:
    """A lab's `cpu-box/latest` and `gpu-box/2026-11/latest`: the GPU run was left out ("No GPU run to
    compare") from a folder, and refused given by path. Their run.json name two recordings: both are sized,
    named by their paths below the folder they share; --baseline takes such a path."""
    from sizing.analysis.load import load_runs

    cpu = replace(reference_cpu(), run_id="latest")
    gpu = replace(reference_gpu(), run_id="latest")
    write_run(tmp_path / "lab" / "cpu-box", cpu)
    write_run(tmp_path / "lab" / "gpu-box" / "2026-11", gpu)
    write_run(tmp_path / "lab" / "backup", gpu)  # a copy of the GPU run: still counted once
    runs = load_runs(tmp_path, [str(tmp_path / "lab")])
    assert sorted(r.run_id for r in runs) == ["backup/latest", "cpu-box/latest"]
    (named,) = [r for r in runs if r.run_id == "backup/latest"]
    assert "backup/latest: named by its path: another run directory given is also called 'latest'" in (
        named.warnings
    )
    assert any(w.startswith("backup/latest: also at ") for w in named.warnings)
    out = tmp_path / "report.md"
    given = [
        str(tmp_path / "lab" / "cpu-box" / "latest"),
        str(tmp_path / "lab" / "gpu-box" / "2026-11" / "latest"),
    ]
    assert report.main([*given, "--baseline", given[1], "--out", str(out)]) == 0, capsys.readouterr().err
    text = out.read_text()
    assert (
        re.search(r"^Against .* \(GPU\) training", text, re.M)
        and "gpu-box/2026-11/latest" in text
        and "cpu-box/latest" in text
    )
    assert report.main([*given, "--baseline", str(tmp_path / "latest"), "--out", str(out)]) == 2
    assert "is not one of the runs in the report" in capsys.readouterr().err


def test_an_out_that_cannot_be_written_is_one_line_and_no_temporary(crafted_data_dir: Path, capsys) -> None:
    taken = crafted_data_dir / "report.md"
    taken.mkdir()  # a directory where the report should go
    assert report.main(["ref-cpu", "--data-dir", str(crafted_data_dir), "--out", str(taken)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"--out: cannot write '{taken}' (Is a directory)")
    assert not list(crafted_data_dir.glob(".report.md.*.tmp"))
    assert report.main(["ref-cpu", "--data-dir", str(crafted_data_dir), "--out", "/proc/report.md"]) == 2
    assert "--out: cannot write in '/proc'" in capsys.readouterr().err
