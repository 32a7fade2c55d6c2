"""Regenerates docs/screenshots in headless Chromium: DASHBOARD_SCREENSHOTS=1 pytest THIS_FILE.

Every tab's <tab>.png shows two shipped runs in data/examples: DASHBOARD_SCREENSHOTS_RUNS (two run ids,
comma-separated; default the H100's batch-2 run and the same machine's 16-core CPU run, else the two
newest), DASHBOARD_SCREENSHOTS_DATA overriding the data dir (the fixture runs if there are none); and
sizing-headline.png the top of their HTML sizing report (`python -m sizing`). inference.png shows the
shipped runs with an inference.json, or those under DASHBOARD_SCREENSHOTS_INFERENCE_DATA (a data dir).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from browserfixtures import open_tab, save_region_screenshot, save_screenshot, select_runs, serve, wait_for
from selenium.webdriver.common.by import By
from test_dash_browser import PLOTS_WITH_DATA, REPO, SCREENSHOT_DIR, walk_tabs

from dashboard import runs
from dashboard.tabs.tuning import SWEEP_PICKER_ID

H100_SWEEP = "tune-20261127T085415Z-gpu"  # the H100 sweep of data/examples
H100_OPTION = f"//*[contains(text(), '{H100_SWEEP} ·')]"  # its entry in the open sweep picker

H100_PAIR = ("20261124T110829Z-gpu-vm", "20261124T111406Z-cpu-vm")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning"),
]


@pytest.mark.skipif(
    not os.environ.get("DASHBOARD_SCREENSHOTS"), reason="set DASHBOARD_SCREENSHOTS=1 to regenerate"
)
def test_regenerate_screenshots(browser: Any, data_dir: Path, tmp_path: Path, monkeypatch) -> None:
    inference_data = os.environ.get("DASHBOARD_SCREENSHOTS_INFERENCE_DATA")
    inference_runs = Path(inference_data).absolute() / "runs" if inference_data else None
    shipped = tmp_path / "shipped"
    (shipped / "data").mkdir(parents=True)
    (shipped / "data" / "examples").symlink_to(REPO / "data" / "examples")  # the shipped runs only
    monkeypatch.chdir(shipped)  # so the page names the data dir as a user types it: data
    source = Path(os.environ.get("DASHBOARD_SCREENSHOTS_DATA") or "data")
    if not runs.discover_runs(source):
        source = data_dir
    clean = [run.run_id for run in runs.discover_runs(source) if not runs.run_warnings(run)]
    wanted = os.environ.get("DASHBOARD_SCREENSHOTS_RUNS", ",".join(H100_PAIR)).split(",")
    selection = wanted if set(wanted) <= set(clean) else clean[:2]
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    for url in serve(source):
        browser.get(url)
        select_runs(browser, selection)
        walk_tabs(browser, len(selection), SCREENSHOT_DIR, skip=("inference",))
    report = shipped / "report.html"  # the HTML report's top, made as the README shows it
    done = subprocess.run(
        [sys.executable, "-m", "sizing", *selection, "--data-dir", str(source), "--out", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    browser.get(report.absolute().as_uri())
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "ol.caveats"), "the report's Decision")
    save_region_screenshot(browser, "h1", "ol.caveats", SCREENSHOT_DIR / "sizing-headline.png")
    if inference_runs is not None:
        (shipped / "data" / "runs").symlink_to(inference_runs)  # the page says data/runs, as for a user
    found = runs.discover_runs(Path("data"))
    with_inference = [run.run_id for run in found if (run.path / "inference.json").is_file()]
    if not with_inference:
        warnings.warn("inference.png left as it is: no run with an inference.json", stacklevel=1)
        return
    for url in serve(Path("data")):
        browser.get(url)
        select_runs(browser, with_inference[:2])
        open_tab(browser, "Inference")
        plots = "the Inference plots"
        wait_for(browser, lambda: browser.execute_script(PLOTS_WITH_DATA, "#tab-inference"), plots)
        time.sleep(1.0)  # let the graphs finish drawing
        save_screenshot(browser, SCREENSHOT_DIR / "inference.png")


@pytest.mark.skipif(
    not os.environ.get("DASHBOARD_SCREENSHOTS"), reason="set DASHBOARD_SCREENSHOTS=1 to regenerate"
)
def test_regenerate_the_tuning_screenshot(browser: Any, tmp_path: Path, monkeypatch) -> None:
    """tuning.png: the shipped H100 `--tune` sweep in the Tuning tab, picked by typing its id."""
    shipped = tmp_path / "shipped"
    (shipped / "data").mkdir(parents=True)
    (shipped / "data" / "examples").symlink_to(REPO / "data" / "examples")
    monkeypatch.chdir(shipped)
    assert any(run.tuning for run in runs.discover_runs(Path("data"))), "no sweep in data/examples"
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    for url in serve(Path("data")):
        browser.get(url)
        open_tab(browser, "Tuning")
        wait_for(browser, lambda: browser.execute_script(PLOTS_WITH_DATA, "#tab-tuning"), "the sweep's chart")
        browser.find_element(By.ID, SWEEP_PICKER_ID).click()
        wait_for(browser, lambda: browser.find_elements(By.XPATH, H100_OPTION), "the H100 sweep's option")
        browser.find_elements(By.XPATH, H100_OPTION)[-1].click()
        wait_for(
            browser, lambda: H100_SWEEP in browser.find_element(By.ID, SWEEP_PICKER_ID).text, "the H100 sweep"
        )
        wait_for(browser, lambda: browser.execute_script(PLOTS_WITH_DATA, "#tab-tuning"), "the sweep's chart")
        time.sleep(1.5)  # let the chart finish drawing
        save_screenshot(browser, SCREENSHOT_DIR / "tuning.png")
