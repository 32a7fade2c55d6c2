"""End to end in headless Chromium: open the app, select two runs, switch every tab, see data in each.

Needs Debian's `chromium` and `chromium-driver`; skipped without them unless $CI is set (then it fails).
One Chromium serves every browser test of the session (browserfixtures.py); each test serves its own
data dir. test_dash_screenshots.py walks the same tabs to regenerate docs/screenshots.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from browserfixtures import browser_errors, open_tab, save_screenshot, select_runs, serve, wait_for
from dashfixtures import make_run
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from sparsefixtures import make_sparse_run
from tuningfixtures import make_sweep

from dashboard.tabs.sizing import RESULT_ID

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning"),
]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = REPO / "docs" / "screenshots"

# Each tab: its label, and a script returning true once the tab shows what it should.
PLOTS_WITH_DATA = """
const plots = Array.from(document.querySelectorAll(arguments[0] + ' .js-plotly-plot'));
const points = gd => (gd._fullData || []).some(t => ((t.x || []).length || (t.z || []).length) > 0);
return plots.length > 0 && plots.some(points) && plots.every(gd => gd._fullData);
"""
TRACE_NAMES = """
const gd = document.querySelector(arguments[0] + ' .js-plotly-plot');
return gd && gd._fullData ? gd._fullData.filter(t => (t.x || []).length > 0).map(t => t.name) : [];
"""
PLOTS_RENDERED = """
const plots = Array.from(document.querySelectorAll(arguments[0] + ' .js-plotly-plot'));
if (!plots.length) return document.querySelector(arguments[0] + ' .hint') !== null;
return plots.every(gd => gd._fullData);
"""
IMAGES_LOADED = """
const images = Array.from(document.querySelectorAll('#tab-detections img'));
return images.length >= arguments[1] && images.every(i => i.complete && i.naturalWidth > 0);
"""
DETAILS_SHOWN = "return document.querySelectorAll('#tab-details .card').length >= arguments[1];"
SIZING_SHOWN = "return document.querySelector('#sizing-result table, #sizing-result ul') !== null;"
# Each tab: file name, label, content selector, and a script that is true once the tab shows its data.
TABS = [
    ("timeseries", "Time series", "#timeseries-graph", PLOTS_WITH_DATA),
    ("processor", "Processor", "#tab-processor", PLOTS_WITH_DATA),
    ("memory", "Memory", "#tab-memory", PLOTS_WITH_DATA),
    ("disk", "Disk & network", "#tab-disk", PLOTS_WITH_DATA),
    ("cpu-temp", "CPU temperature", "#tab-cpu-temp", PLOTS_WITH_DATA),
    ("gpu", "GPU", "#tab-gpu", PLOTS_WITH_DATA),
    ("summary", "Mean & peak", "#tab-summary", PLOTS_WITH_DATA),
    ("training", "Training", "#tab-training", PLOTS_WITH_DATA),
    ("detections", "Detections", "#tab-detections", IMAGES_LOADED),
    ("inference", "Inference", "#tab-inference", PLOTS_WITH_DATA),
    ("details", "Run details", "#tab-details", DETAILS_SHOWN),
    ("sizing", "Sizing", "#sizing-result", SIZING_SHOWN),
]


def walk_tabs(
    driver: Any, runs_shown: int, screenshots: Path | None = None, skip: Sequence[str] = ()
) -> None:
    """Open every tab; wait for its data (or, for screenshots of runs without a GPU, for its graphs)."""
    for name, label, selector, ready_script in TABS:
        if name in skip:
            continue
        open_tab(driver, label)
        if screenshots is not None and ready_script == PLOTS_WITH_DATA:
            ready_script = PLOTS_RENDERED
        wait_for(
            driver,
            lambda s=ready_script, sel=selector: driver.execute_script(s, sel, runs_shown),
            f"tab {label} to show data",
        )
        if screenshots is not None:
            time.sleep(1.0)  # let the graphs finish drawing
            save_screenshot(driver, screenshots / f"{name}.png")


def test_select_two_runs_and_every_tab_shows_data(
    browser: Any, with_inference: Path, run_ids: dict[str, str]
) -> None:
    data_dir = with_inference
    for url in serve(data_dir):
        browser.get(url)
        select_runs(browser, [run_ids["cpu"], run_ids["gpu"]])
        wait_for(
            browser,
            lambda: (
                sorted(browser.execute_script(TRACE_NAMES, "#timeseries-graph"))
                == ["cpu baseline", "gpu h100"]
            ),
            "one time-series trace per selected run",
        )
        walk_tabs(browser, runs_shown=2)
        check_inference_tab(browser)
        check_live_refresh(browser, data_dir, run_ids["gpu"])
        check_tuning_tab(browser, data_dir)
        assert browser_errors(browser) == []


def check_inference_tab(driver: Any) -> None:
    """Each run's runtimes are traces, CPU and GPU apart; a runtime that cannot take the model says why."""
    open_tab(driver, "Inference")
    wait_for(driver, lambda: driver.execute_script(PLOTS_WITH_DATA, "#tab-inference"), "the Inference plots")
    names = driver.execute_script(TRACE_NAMES, "#tab-inference")
    assert "gpu h100 (gpu) · tf-savedmodel" in names and "cpu baseline (cpu) · onnxruntime" in names
    text = wait_for(driver, lambda: driver.find_element(By.ID, "tab-inference").text, "the tab's text shown")
    assert "cannot take this model" in text


def check_tuning_tab(driver: Any, data_dir: Path) -> None:
    """No sweep: one line saying how to make one; a sweep appears without a reload, and a trial's run id
    adds that run to the picker."""
    open_tab(driver, "Tuning")
    wait_for(driver, lambda: "--tune" in driver.find_element(By.ID, "tab-tuning").text, "the no-sweep line")
    sweep = ("20261201T000000Z-cpu-tunebox", "20261201T000100Z-cpu-tunebox", "20261201T000200Z-cpu-tunebox")
    make_sweep(data_dir, "tune-20261201T000000Z-cpu-tunebox", sweep, 1796083200.0)
    wait_for(driver, lambda: driver.execute_script(PLOTS_WITH_DATA, "#tab-tuning"), "the sweep's chart")
    driver.find_element(By.XPATH, f"//div[@id='tab-tuning']//button[text()='{sweep[1]}']").click()

    def picked() -> bool:  # the picker's whole text: a long selection is clipped on screen
        return f"{sweep[1]} · cpu" in driver.find_element(By.ID, "run-picker").get_attribute("textContent")

    wait_for(driver, picked, "the trial added to the picker")


TRACE_LENGTH = """
const gd = document.querySelector('#timeseries-graph .js-plotly-plot');
const trace = gd && gd._fullData ? gd._fullData.find(t => t.name === arguments[0]) : null;
return trace ? trace.x.length : 0;
"""


def check_live_refresh(driver: Any, data_dir: Path, run_id: str) -> None:
    """Rows appended to a selected run's telemetry, and a new run directory, show up without a reload."""
    open_tab(driver, "Time series")
    before = wait_for(driver, lambda: driver.execute_script(TRACE_LENGTH, "gpu h100"), "the gpu run's trace")
    path = data_dir / "runs" / run_id / "telemetry.csv"
    last = path.read_text().splitlines()[-1].split(",")
    with open(path, "a") as handle:
        for step in range(1, 6):
            handle.write(
                ",".join([f"{float(last[0]) + step:.6f}", f"{float(last[1]) + step:.6f}", *last[2:]]) + "\n"
            )
    wait_for(
        driver, lambda: driver.execute_script(TRACE_LENGTH, "gpu h100") == before + 5, "the appended rows"
    )
    make_run(data_dir, device="cpu", host="latecomer", start_unix=1795200000.0, duration_s=10)
    driver.find_element(By.ID, "run-picker").click()
    wait_for(
        driver,
        lambda: "latecomer" in driver.find_element(By.CSS_SELECTOR, ".dash-dropdown-options").text,
        "the new run in the picker",
    )
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)


SADC_PLACES = ("/usr/lib/sysstat/sadc", "/usr/lib64/sa/sadc", "/usr/libexec/sysstat/sadc")
# A tab has loaded once its content area holds graphs that are drawn, or a hint saying why there are none.
TAB_LOADED = """
const root = document.querySelector(arguments[0]);
if (!root) return false;
const plots = Array.from(root.querySelectorAll('.js-plotly-plot'));
const said = root.querySelector('.hint, .card, .warnings') !== null;
return (plots.length > 0 || said) && plots.every(gd => gd._fullData);
"""
# What a user would call an empty panel, a None or a blank bar: returns the problems found.
PROBLEMS = """
const root = document.querySelector(arguments[0]);
const problems = [];
for (const gd of root.querySelectorAll('.js-plotly-plot')) {
  const title = (gd.layout && gd.layout.title && gd.layout.title.text) || '(untitled)';
  const withData = (gd._fullData || []).filter(t => ((t.x || []).length || (t.z || []).length) > 0);
  if (!withData.length) problems.push('empty axis: ' + title);
  const multiRun = new Set(withData.map(t => t.legendgroup).filter(g => g)).size > 1;
  if (multiRun && !gd._fullLayout.showlegend) problems.push('no legend: ' + title);
  for (const t of gd._fullData || []) {
    if (t.type !== 'bar') continue;
    (t.x || []).forEach((x, i) => {
      const label = Array.isArray(t.text) ? t.text[i] : '';
      if (label !== 'n/a' && !(Number.isFinite(t.y[i]))) problems.push('blank bar: ' + t.name + ' ' + x);
    });
  }
  const categories = {};
  for (const t of (gd._fullData || []).filter(t => t.type === 'bar')) {
    (t.x || []).forEach((x, i) => {
      const key = (t.xaxis || 'x') + ':' + x;
      categories[key] = (categories[key] || false) || (Array.isArray(t.text) ? t.text[i] : '') !== 'n/a';
    });
  }
  for (const [key, measured] of Object.entries(categories)) {
    if (!measured) problems.push('category of n/a only: ' + key);
  }
}
if (/\\bNone\\b/.test(root.innerText)) problems.push('None in the text');
return problems;
"""


def assert_no_problems(driver: Any, selector: str, label: str) -> None:
    """The tab, once its graphs are drawn, shows no empty panel, None or blank bar (polled: plots settle)."""
    problems: list[str] = []
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        problems = driver.execute_script(PROBLEMS, selector)
        if not problems:
            return
        time.sleep(0.2)
    raise AssertionError(f"{label}: {problems}")


def _sysstat_run(data_dir: Path, tmp_path: Path) -> str:
    sadc = shutil.which("sadc") or next((p for p in SADC_PLACES if os.access(p, os.X_OK)), None)
    if sadc is None or shutil.which("sadf") is None:
        message = "needs Debian's sysstat (sadc, sadf): apt-get install sysstat, as root"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    recording = tmp_path / "sa-browser"
    subprocess.run([sadc, "-S", "XALL", "1", "4", str(recording)], check=True, timeout=30)
    done = subprocess.run(
        [sys.executable, "-m", "collect", "import-sysstat", str(recording), "--data-dir", str(data_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stderr.strip().rsplit(" into ", 1)[1]).name


def test_data_the_workbench_did_not_write(browser: Any, tmp_path: Path) -> None:
    """A converted recording with only a few columns and an import-sysstat run: every tab, nothing empty."""
    data_dir = tmp_path / "data"
    sparse = make_sparse_run(data_dir, start_unix=1795300000.0).name
    imported = _sysstat_run(data_dir, tmp_path)
    for url in serve(data_dir):
        browser.get(url)
        select_runs(browser, [sparse, imported])
        for _, label, selector, _ in TABS:
            if label == "Sizing":  # the sizing report refuses runs without training steps, in words
                continue
            open_tab(browser, label)
            wait_for(browser, lambda sel=selector: browser.execute_script(TAB_LOADED, sel), f"tab {label}")
            assert_no_problems(browser, selector, label)
        open_tab(browser, "Processor")
        wait_for(
            browser,
            lambda: (
                "Per-core utilization: not recorded in converted recording"
                in browser.find_element(By.ID, "tab-processor").text
            ),
            "the processor tab to say why a run has no heatmap",
        )
        open_tab(browser, "Disk & network")
        wait_for(
            browser, lambda: "Network throughput" in browser.find_element(By.ID, "tab-disk").text, "disk"
        )
        assert "Not recorded in the selected runs" not in browser.find_element(By.ID, "tab-disk").text
        assert (
            "Network throughput: not recorded in converted recording"
            in browser.find_element(By.ID, "tab-disk").text
        )
        check_zoom_refines(browser, "Memory", "#tab-memory", "converted recording")
        open_tab(browser, "Run details")
        directory = str(data_dir.absolute() / "runs" / imported)
        wait_for(browser, lambda d=directory: d in browser.find_element(By.ID, "tab-details").text, "details")
        details = browser.find_element(By.ID, "tab-details").text
        assert "sysstat" in details
        assert "converted from the lab's thermal logger" in details
        assert browser_errors(browser) == []


ZOOM = """
const gd = document.querySelector(arguments[0] + ' .js-plotly-plot');
Plotly.relayout(gd, {'xaxis.range': [arguments[1], 130]});
"""
X_SPAN = """
const gd = document.querySelector(arguments[0] + ' .js-plotly-plot');
const traces = (gd._fullData || []).filter(t => (t.name || '').startsWith(arguments[1]));
const xs = traces.flatMap(t => Array.from(t.x || []));
return xs.length ? [Math.min(...xs), Math.max(...xs)] : null;
"""


def check_zoom_refines(driver: Any, label: str, selector: str, run_label: str) -> None:
    """A zoom on a component graph comes back from the server cut to the zoomed range (its full detail)."""
    open_tab(driver, label)
    wait_for(driver, lambda: driver.execute_script(X_SPAN, selector, run_label), f"{label} graph")
    low, high = driver.execute_script(X_SPAN, selector, run_label)
    assert low < 50 and high > 200

    def refined() -> bool:
        span = driver.execute_script(X_SPAN, selector, run_label)
        return bool(span) and span[0] >= 98 and span[1] <= 132

    for attempt in range(3):  # a zoom made before dcc.Graph has bound its plotly_relayout handler is lost
        time.sleep(1.0)
        driver.execute_script(ZOOM, selector, 100 + attempt / 2)
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline and not refined():
            time.sleep(0.2)
        if refined():
            return
    raise AssertionError(f"the {label} graph was not redrawn for the zoomed range")


PLOT_TITLES = """
const found = {};
for (const gd of document.querySelectorAll(arguments[0] + ' .js-plotly-plot')) {
  const title = (gd.layout && gd.layout.title && gd.layout.title.text) || '(untitled)';
  found[title] = (gd._fullData || []).filter(t => (t.x || []).length > 0).map(t => t.name);
}
return found;
"""


def test_imported_gpu_logs_alone_and_merged_into_a_sysstat_run(browser: Any, tmp_path: Path) -> None:
    """An nvidia-smi log alone (four GPUs, one a straggler) and one merged into a real sadc recording of the
    same seconds: every tab, Sizing included, shows data or says what was not recorded; nothing empty."""
    sys.path.insert(0, str(REPO / "tests" / "collect"))
    from nvsmifixtures import BASIC_FIELDS, collect, four_gpus, query_gpu_log, sysstat_run_with_gpu_log

    data_dir = tmp_path / "data"
    merged, _ = sysstat_run_with_gpu_log(data_dir, tmp_path / "scratch")
    log = tmp_path / "scratch" / "four.csv"
    log.write_text(query_gpu_log(four_gpus(straggler=2), BASIC_FIELDS, samples=40), encoding="utf-8")
    done = collect(
        "import-nvidia-smi", str(log), "--gpus", "4", "--data-dir", str(data_dir), "--label", "4-GPU log"
    )
    assert done.returncode == 0, done.stderr
    alone = Path(done.stderr.strip().rsplit(" into ", 1)[1]).name
    for url in serve(data_dir):
        browser.get(url)
        select_runs(browser, [merged.name, alone])
        for _, label, selector, _ in TABS:
            open_tab(browser, label)
            wait_for(browser, lambda sel=selector: browser.execute_script(TAB_LOADED, sel), f"tab {label}")
            if label == "Sizing":
                wait_for(browser, lambda: browser.execute_script(SIZING_SHOWN), "the sizing report")
            assert_no_problems(browser, selector, label)
        open_tab(browser, "GPU")
        wait_for(browser, lambda: browser.execute_script(PLOTS_WITH_DATA, "#tab-gpu"), "GPU graphs")
        titles = browser.execute_script(PLOT_TITLES, "#tab-gpu")
        assert "GPU power: average, instant and limit" in titles, titles
        power = titles["GPU power: average, instant and limit"]
        assert {"4-GPU log · gpu2_power_w", "web01 sysstat · gpu1_power_instant_w"} <= set(power), power
        assert "web01 sysstat · gpu1_power_limit_w" in power
        open_tab(browser, "Processor")
        wait_for(
            browser,
            lambda: "not in an nvidia-smi log" in browser.find_element(By.ID, "tab-processor").text,
            "the processor tab to say the GPU log has no CPU side",
        )
        open_tab(browser, "Mean & peak")
        wait_for(browser, lambda: "GPU (W)" in browser.find_element(By.ID, "tab-summary").text, "mean & peak")
        open_tab(browser, "Run details")
        wait_for(browser, lambda: "merged from" in browser.find_element(By.ID, "tab-details").text, "details")
        details = browser.find_element(By.ID, "tab-details").text
        assert "read as UTC+02:00 (--utc-offset)" in details and "training GPUs:" in details
        open_tab(browser, "Sizing")
        sizing = wait_for(  # shown: a revisit recomputes it; dcc.Loading hides the last one meanwhile
            browser,
            lambda: browser.execute_script(SIZING_SHOWN) and browser.find_element(By.ID, RESULT_ID).text,
            "the sizing report",
        )
        assert "straggler: gpu2" in sizing and "at its power limit" in sizing
        assert browser_errors(browser) == []
