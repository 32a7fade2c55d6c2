"""run.json `system.cpu_max_mhz` and `cpu_simd` from fake /proc and /sys trees (what a CPU peak needs)."""

from __future__ import annotations

from pathlib import Path

from collectfakes import fake_psutil, write_tree

from collect.sysinfo import cpu_max_mhz, cpu_simd, system_info

X86 = (
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n"
    "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 hypervisor\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\nflags\t\t: fpu\n"
)


def test_cpufreq_max_wins_over_the_model_name_clock(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"cpuinfo": X86, "self/cgroup": "0::/\n"})
    sys_root = write_tree(
        tmp_path / "sys",
        {
            "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": "3900000\n",
            "devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq": "4000000\n",
            "devices/system/cpu/cpu2/cpufreq/cpuinfo_max_freq": "garbage\n",
        },
    )
    info = system_info(proc, sys_root, psutil_module=fake_psutil())
    assert info["cpu_max_mhz"] == 4000.0 and info["cpu_max_mhz_source"] == "cpufreq cpuinfo_max_freq"
    assert info["cpu_simd"] == ["avx512f", "avx512_bf16", "avx2", "fma"]  # the first CPU's flags, in order


def test_without_cpufreq_the_model_names_clock_then_unknown(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"cpuinfo": X86})
    assert cpu_max_mhz(tmp_path / "sys", "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz") == (2500.0, "model name")
    assert cpu_max_mhz(tmp_path / "sys", "Intel(R) Xeon(R) Processor") == (None, None)
    assert cpu_max_mhz(tmp_path / "sys", None) == (None, None)
    assert cpu_simd(proc) == ["avx512f", "avx512_bf16", "avx2", "fma"]


def test_arm_features_and_a_cpuinfo_without_flags(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"cpuinfo": "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"})
    assert cpu_simd(proc) == ["asimd"]
    (proc / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    assert cpu_simd(proc) == []  # known: none of them
    (proc / "cpuinfo").write_text("processor\t: 0\nHardware\t: board\n")
    assert cpu_simd(proc) is None  # unknown, not none
    assert cpu_simd(tmp_path / "missing") is None


def test_a_vm_without_cpufreq_or_a_clock_in_its_name_gives_cpuinfos_cpu_mhz(tmp_path: Path) -> None:
    vm = (
        "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2445.424\nflags\t\t: avx2 fma\n"
        "processor\t: 1\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2450.000\nflags\t\t: avx2 fma\n"
    )
    proc = write_tree(tmp_path / "proc", {"cpuinfo": vm, "self/cgroup": "0::/\n"})
    info = system_info(proc, tmp_path / "sys", psutil_module=fake_psutil())
    assert (info["cpu_max_mhz"], info["cpu_max_mhz_source"]) == (2450.0, "cpuinfo cpu MHz")
    named = write_tree(tmp_path / "named", {"cpuinfo": X86 + "cpu MHz\t\t: 1200.0\n"})
    gold = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"
    assert cpu_max_mhz(tmp_path / "sys", gold, named) == (2500.0, "model name")  # a name's clock first
    broken = write_tree(tmp_path / "broken", {"cpuinfo": "cpu MHz\t: fast\ncpu MHz\t: -1\n"})
    assert cpu_max_mhz(tmp_path / "sys", None, broken) == (None, None)
