"""Prices (issue 18, item 2): a cost only when every price it sums was given, prices per GPU model and
host, the price difference between two GPUs, and break-even bounded by the hardware's life."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from energyfixtures import gpu_run
from sizingfixtures import CPU_MODEL, reference_cpu, reference_gpu, write_run

from sizing import Prices, ReportSettings, build_report, to_json
from sizing.analysis import money
from sizing.cli import main as sizing_main
from sizing.output.render import render_markdown

H100, A100 = "Crafted H100", "Crafted A100"


def test_a_price_for_one_part_only_is_not_a_hardware_cost() -> None:
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings(Prices(gpu_price=2000.0)))
    gpu = to_json(report)["runs"][1]
    assert gpu["hardware_price_usd"] is None and gpu["hardware_usd_per_1k_examples"] is None
    assert gpu["total_usd_per_1k_examples"] is None and gpu["hardware_not_priced"] == ["host craftbox"]
    assert "$0.00073, energy only (host not priced) per 1,000 examples" in report.headline[1]
    energy_table = next(s for s in report.sections if s.key == "energy").tables[0]
    assert energy_table.rows[1][-1] == "host not priced"
    # the host alone priced: a CPU run's hardware is whole, the GPU run's is not
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings(Prices(cpu_price=1000.0)))
    cpu, gpu = to_json(report)["runs"]
    assert cpu["hardware_price_usd"] == 1000.0 and cpu["total_usd_per_1k_examples"] is not None
    assert gpu["hardware_price_usd"] is None and gpu["hardware_not_priced"] == [f"GPU {H100}"]
    assert f"energy only (GPU not priced ({H100}))" in report.headline[1]


def _two_gpu_dirs(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", gpu_run("h100", H100, step_s=0.1, watts=300.0))
    write_run(tmp_path / "runs", gpu_run("a100", A100, step_s=0.2, watts=250.0))


def test_a_gpu_against_a_gpu_pays_back_the_price_difference_per_model(tmp_path: Path) -> None:
    _two_gpu_dirs(tmp_path)
    out = tmp_path / "r.json"
    args = ["h100", "a100", "--data-dir", str(tmp_path), "--baseline", "a100", "--cpu-price", "1000",
            "--gpu-price", f"{H100}=25000", "--gpu-price", f"{A100}=10000",
            "--value-per-hour", "100"]  # fmt: skip
    assert sizing_main([*args, "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    runs = {r["run_id"]: r for r in data["runs"]}
    assert runs["h100"]["hardware_price_usd"] == 26_000.0 and runs["a100"]["hardware_price_usd"] == 11_000.0
    (comparison,) = data["comparisons"]
    assert comparison["speedup"] == pytest.approx(2.0)
    assert comparison["break_even_investment_usd"] == pytest.approx(15_000.0)
    # one GPU hour saves an A100 hour ($100) plus the A100's extra energy for those examples
    saving = 100.0 + 72.0 * 0.15 / 3.6e6 * ((250 + 50) * 100 - (300 + 50) * 50)
    assert comparison["break_even_hours"] == pytest.approx(15_000.0 / saving)
    headline = data["headline"][1]
    assert "pays back the hardware price difference $15,000.00 ($26,000.00 − $11,000.00)" in headline
    settings = data["sections"]["settings"]
    assert settings["gpu_price_usd_by_model"] == {H100: 25_000.0, A100: 10_000.0}


def test_a_gpu_baseline_without_its_price_gives_no_break_even(tmp_path: Path) -> None:
    _two_gpu_dirs(tmp_path)
    out = tmp_path / "r.md"
    args = ["h100", "a100", "--data-dir", str(tmp_path), "--baseline", "a100", "--gpu-price", f"{H100}=25000",
            "--value-per-hour", "100", "--out", str(out)]  # fmt: skip
    assert sizing_main(args) == 0
    text = out.read_text(encoding="utf-8")
    assert f"break-even: not computed: the baseline's GPU not priced ({A100}) (--gpu-price)" in text
    assert "pays back" not in text.split("## Settings")[0]


def test_a_cheaper_gpu_pays_back_at_once_and_no_dollar_is_negative(tmp_path: Path) -> None:
    _two_gpu_dirs(tmp_path)
    out = tmp_path / "r.json"
    args = ["h100", "a100", "--data-dir", str(tmp_path), "--baseline", "a100", "--gpu-price", f"{H100}=5000",
            "--gpu-price", f"{A100}=10000", "--value-per-hour", "100", "--out", str(out)]  # fmt: skip
    assert sizing_main(args) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    (comparison,) = data["comparisons"]
    assert comparison["break_even_hours"] == 0.0 and comparison["break_even_investment_usd"] == 0.0
    assert "break-even at once: the GPU side costs no more than the baseline" in data["headline"][1]


def test_utilisation_spreads_the_price_and_bounds_the_break_even(
    crafted_data_dir: Path, tmp_path: Path
) -> None:
    common = ["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--gpu-price", "2000",
              "--cpu-price", "1000"]  # fmt: skip
    full, half = tmp_path / "full.json", tmp_path / "half.json"
    assert sizing_main([*common, "--out", str(full)]) == 0
    assert sizing_main([*common, "--utilisation", "0.5", "--out", str(half)]) == 0
    full_data, half_data = (json.loads(p.read_text(encoding="utf-8")) for p in (full, half))
    assert half_data["runs"][1]["hardware_usd_per_1k_examples"] == pytest.approx(
        2 * full_data["runs"][1]["hardware_usd_per_1k_examples"]
    )
    assert half_data["sections"]["settings"]["utilisation"] == 0.5
    assert half_data["sections"]["settings"]["life_hours"] == pytest.approx(3 * 8760 * 0.5)
    # energy alone pays the $2,000 back after 29,630 GPU hours: beyond 13,140 hours of a half-busy life
    (comparison,) = half_data["comparisons"]
    assert comparison["break_even_hours"] is None
    assert comparison["break_even_hours_beyond_life"] == pytest.approx(2000 / 0.0675, rel=1e-3)
    beyond = "the energy alone pays back after 29,630 h, beyond the 13,140 h of the life"
    assert beyond in half_data["headline"][1]
    assert "time saved not valued: cannot tell" in comparison["break_even_reason"]
    assert "3-year life at 50% use" in half_data["headline"][0]  # the assumption beside the cost


def test_the_report_states_the_utilisation_and_its_default(crafted_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    assert sizing_main(["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| Utilisation | 100% of the time busy (default 100%; --utilisation) |" in text
    shares = ["--utilisation", "50%", "--idle-fraction", "25%"]  # percentages, as the table prints them
    assert sizing_main(["ref-cpu", "--data-dir", str(crafted_data_dir), *shares, "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| Utilisation | 50% of the time busy" in text
    assert "| Idle floor of the estimate | 25% of TDP |" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--utilisation", "0"], "must be greater than 0"),
        (["--utilisation", "1.5"], "must be a fraction > 0 and ≤ 1"),
        (["--utilisation", "150%"], "must be a fraction > 0 and ≤ 1 (or a percentage), got '150%'"),
        (["--idle-fraction", "100%"], "must be below 1 (or 100%)"),
        (["--gpu-price", "=5"], "expected USD or MODEL=USD"),
        (["--gpu-price", "H100=-5"], "must be a number ≥ 0"),
        (["--host-price", "5000"], "expected HOST=USD"),
        (["--gpu-price", "100", "--gpu-price", "200"], "given more than once"),
    ],
)
def test_bad_prices_are_one_line_and_exit_2(
    crafted_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    out = tmp_path / "r.md"
    assert sizing_main(["ref-cpu", "--data-dir", str(crafted_data_dir), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


def test_host_price_on_the_command_line(crafted_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir), "--host-price", "craftbox=6000",
            "--gpu-price", "2000", "--out", str(out)]  # fmt: skip
    assert sizing_main(args) == 0
    cpu, gpu = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert cpu["hardware_price_usd"] == 6000.0 and gpu["hardware_price_usd"] == 8000.0


def test_host_prices_by_name_or_cpu_model() -> None:
    cpu = reference_cpu()
    by_host = build_report([cpu], ReportSettings(Prices(host_price_by_host=(("craftbox", 800.0),))))
    by_cpu_model = (("crafted xeon 8-core", 900.0),)
    by_model = build_report([cpu], ReportSettings(Prices(cpu_price=5.0, host_price_by_host=by_cpu_model)))
    assert to_json(by_host)["runs"][0]["hardware_price_usd"] == 800.0
    assert to_json(by_model)["runs"][0]["hardware_price_usd"] == 900.0  # its own price wins
    assert "$800.00" in render_markdown(by_host)


def _priced(runs: list, model: str, usd: float, **more: float):
    return build_report(runs, ReportSettings(Prices(gpu_price_by_model=((model, usd),), **more)))


def test_a_model_price_named_by_part_of_its_name_prices_that_gpu_and_says_so() -> None:
    """`--gpu-price H100=30000` priced nothing (the runs' GPU is "Crafted H100"): "break-even: needs
    --gpu-price", after one was given, and nothing said why."""
    runs = [reference_cpu(), reference_gpu()]
    whole, part = (_priced(runs, model, 30000.0, cpu_price=1000.0) for model in (H100, "h100"))
    priced = [to_json(report)["runs"][1]["hardware_price_usd"] for report in (whole, part)]
    assert priced == [31000.0, 31000.0]
    assert f"--gpu-price h100=30000 read as GPU {H100}" in part.warnings
    none = _priced(runs, "A100", 9000.0)
    assert to_json(none)["runs"][1]["hardware_price_usd"] is None
    said = f"--gpu-price A100=9000 applies to no GPU of these runs: theirs are {H100}, and it names none"
    assert any(said in w for w in none.warnings), none.warnings


def test_a_host_price_and_tdp_named_by_part_of_a_cpu_model_apply_to_that_host() -> None:
    """`--cpu-tdp Xeon=200` matched no host or CPU model exactly: no estimate, nothing said."""
    runs = [reference_cpu(), reference_gpu()]
    cpu_part = CPU_MODEL.split()[1]  # one word of the crafted CPU model
    settings = Prices(cpu_tdp_by_host=((cpu_part, 200.0),), host_price_by_host=((cpu_part.upper(), 900.0),))
    report = build_report(runs, ReportSettings(settings))
    assert to_json(report)["runs"][0]["hardware_price_usd"] == 900.0
    assert f"--cpu-tdp {cpu_part}=200 read as host or CPU {CPU_MODEL}" in report.warnings
    named, _ = money.named_prices(settings, [], ["craftbox", CPU_MODEL])
    assert named.tdp_for("another host", CPU_MODEL) == 200.0  # exact, as the estimate looks it up
