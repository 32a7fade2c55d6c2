"""One headless Chromium for every browser test of the session, handed to each test on a blank page;
and screenshots of what it shows.

Needs Debian's `chromium` and `chromium-driver`; a test asking for it is skipped without them unless $CI
is set (then it fails). conftest.py makes the fixtures visible to every dashboard test.
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from werkzeug.serving import make_server

from dashboard.app import create_app

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
WAIT_S = 30.0


def _browser_or_skip() -> Any:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        message = (
            f"headless browser test needs {', '.join(missing)} (apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    return webdriver, Service


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for every browser test of the session (starting one costs seconds)."""
    webdriver, service = _browser_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in HEADLESS_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        with warnings.catch_warnings():  # selenium's urllib3 use, in whichever test ends the session
            warnings.simplefilter("ignore", DeprecationWarning)
            driver.quit()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The shared Chromium on a blank page, with the previous test's console errors read and dropped."""
    chromium.get("about:blank")
    chromium.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    browser_errors(chromium)
    yield chromium
    chromium.get("about:blank")  # stop the page's refresh timer before its server goes away


def browser_errors(driver: Any) -> list[str]:
    entries = driver.get_log("browser") if hasattr(driver, "get_log") else []
    return [e["message"] for e in entries if e.get("level") == "SEVERE" and "favicon" not in e["message"]]


def save_screenshot(driver: Any, path: Path) -> None:
    """The whole page at 1400 px wide, palette-compressed to stay under 300 KB."""
    viewport = {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", viewport)
    bottom = (
        "return Math.ceil(document.querySelector('.page').getBoundingClientRect().bottom + window.scrollY)"
    )
    viewport["height"] = min(max(driver.execute_script(bottom) + 24, 800), 3200)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", viewport)
    time.sleep(1.0)  # responsive graphs re-layout to the new viewport
    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    assert path.stat().st_size < 300_000, f"{path.name}: {path.stat().st_size} bytes"


def save_region_screenshot(driver: Any, first: str, last: str, path: Path, width: int = 1100) -> None:
    """From the top of `first` to the bottom of `last`, at `width` px wide, palette-compressed."""
    viewport = {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", viewport)
    time.sleep(0.5)
    edges = "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return [r.y, r.bottom];"
    top = driver.execute_script(edges, first)[0]
    bottom = driver.execute_script(edges, last)[1]
    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    margin = 12
    cropped = image.crop((0, max(int(top) - margin, 0), image.width, min(int(bottom) + margin, image.height)))
    cropped.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    assert path.stat().st_size < 300_000, f"{path.name}: {path.stat().st_size} bytes"


def serve(data_dir: Path) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, create_app(data_dir, refresh_ms=2000).server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def wait_for(driver: Any, condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {WAIT_S:.0f} s waiting for {what}")


def select_runs(driver: Any, run_ids: list[str]) -> None:
    """Clear the picker, then tick each run in its option list, as a user does."""
    wait_for(driver, lambda: driver.find_elements(By.ID, "run-picker"), "the run picker")
    clear = driver.find_elements(By.CSS_SELECTOR, "#run-picker .dash-dropdown-clear")
    if clear:
        clear[0].click()
    for run_id in run_ids:
        if not driver.find_elements(By.CSS_SELECTOR, ".dash-dropdown-options"):
            driver.find_element(By.ID, "run-picker").click()
        option = wait_for(
            driver,
            lambda run_id=run_id: driver.find_elements(
                By.CSS_SELECTOR, f".dash-dropdown-options input[value='{run_id}']"
            ),
            f"option {run_id}",
        )[0]
        option.find_element(By.XPATH, "./ancestor::label").click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)


def open_tab(driver: Any, label: str) -> None:
    xpath = f"//div[contains(@class, 'tab')]/span[normalize-space(text())='{label}']"
    wait_for(driver, lambda: driver.find_elements(By.XPATH, xpath), f"tab {label}")[0].click()
