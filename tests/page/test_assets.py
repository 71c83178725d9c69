"""The pages in a real browser (headless Chromium through WebDriver): every shipped page opens
offline with zero console errors and no fetches, shows every section with what its script draws
(a heatmap per head, the histogram, the graph's boxes), shows a cell's value on hover, and
redraws for another example. One browser for the whole module; a screenshot of each page goes
under the test's tmp_path. Without Chromium, chromedriver or selenium the tests fail with that
reason (``.ci/run`` installs them: ``apt-get install chromium chromium-driver``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from compiled import CANONICAL_EFFICIENT
from pages import page_data
from programs import EXAMPLES_DIR

from infoflow_dsl.page.html import ANALYSIS_SECTIONS, SECTIONS

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver", "/usr/lib/chromium/chromedriver", "/usr/lib/chromium-browser/chromedriver")
#: Flags for a closed network: no background connections, no first-run or sync traffic.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")


def _found(names: tuple[str, ...]) -> str | None:
    return next((path for path in (shutil.which(n) or (n if Path(n).is_file() else None) for n in names) if path),
                None)


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the browser test needs selenium (the dev extra: pip install -e '.[dev]')")
    binary, driver_path = _found(BROWSERS), _found(DRIVERS)
    if binary is None or driver_path is None:
        pytest.fail(f"the browser test needs Chromium and chromedriver (found {binary} and {driver_path}); "
                    "install them with apt-get install chromium chromium-driver, as .ci/run does")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="ifl-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        driver.set_page_load_timeout(60)
        try:
            yield driver
        finally:
            driver.quit()


def _open(browser, path: Path) -> list[dict]:
    """Load a page, wait for its script to finish; the console entries of the load."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # drain what an earlier page left
    browser.get(path.resolve().as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    return browser.get_log("browser")


def _count(browser, selector: str) -> int:
    return browser.execute_script(f"return document.querySelectorAll({selector!r}).length")


def _check_offline_and_clean(browser, path: Path, sections: tuple[tuple[str, str], ...]) -> None:
    entries = _open(browser, path)
    errors = [e for e in entries if e["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0  # no fetches
    for key, title in sections:  # read in the page (a WebElement's .text walks every heatmap cell)
        shown = browser.execute_script("var s = document.getElementById(arguments[0]); return s && "
                                       "s.offsetHeight > 0 ? s.querySelector('h2').textContent : null", key)
        assert shown == title, key


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_page_opens_offline_with_every_section_and_hover_values(browser, tmp_path, name):
    path = EXAMPLES_DIR / f"{name}.html"
    data = page_data(path.read_text(encoding="utf-8"))
    _check_offline_and_clean(browser, path, SECTIONS)
    attention = data["attention"]
    assert _count(browser, ".heatmap") == len(data["heads"]) > 0
    assert _count(browser, ".heatmap .cell") == len(data["heads"]) * attention["rows"] * attention["columns"]
    assert _count(browser, "#example-select option") == len(attention["examples"]) >= 8
    assert _count(browser, "#tree g.node") == len(data["graph"])
    assert _count(browser, "#histogram rect.bar") == 40 and _count(browser, "#histogram line.eps") == 1
    assert _count(browser, "#residual tr") == len(data["residual"]) + 1
    assert browser.execute_script("return document.getElementById('worst-input').textContent").startswith("input")
    _check_hover(browser, attention)
    shot = tmp_path / f"{name}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def _hover_value(browser, head: int, cell: int) -> str:
    from selenium.webdriver.common.action_chains import ActionChains

    target = browser.execute_script("var c = document.querySelectorAll('.heatmap')[arguments[0]].children"
                                    "[arguments[1]]; c.scrollIntoView({block: 'center'}); return c;", head, cell)
    away = browser.find_element("css selector", "#attention h2")
    ActionChains(browser, duration=0).move_to_element(away).move_to_element(target).perform()
    tooltip = browser.find_element("id", "tooltip")
    assert tooltip.is_displayed()
    return tooltip.text


def _check_hover(browser, attention: dict) -> None:
    """Hovering the largest weight of the last head on example 1 shows it; on example 2 (the
    selector) the same cell shows example 2's weight."""
    from selenium.webdriver.support.ui import Select

    head = len(attention["patterns"][0]) - 1
    pattern = attention["patterns"][0][head]
    cell = max(range(len(pattern)), key=pattern.__getitem__)
    row, column = divmod(cell, attention["columns"])
    text = _hover_value(browser, head, cell)
    assert f"→ key {column + 1}: {pattern[cell] / attention['scale']:.4f}" in text, text
    assert ("readout" if row == attention["columns"] else f"token {row + 1}") in text
    Select(browser.find_element("id", "example-select")).select_by_value("1")
    other = attention["patterns"][1][head][cell] / attention["scale"]
    assert f": {other:.4f}" in _hover_value(browser, head, cell)
    assert browser.execute_script("return document.getElementById('example-input').textContent").startswith("input x")


def test_analysis_page_opens_offline_with_its_sections(browser, tmp_path):
    """``analyze --html`` of an inefficient target (no model): its four sections, no script errors."""
    out = tmp_path / "triangle_center.html"
    assert run_cli(["analyze", str(EXAMPLES_DIR / "triangle_center.iflow"), "--html", str(out)])[0] == 0
    _check_offline_and_clean(browser, out, ANALYSIS_SECTIONS)
    assert _count(browser, "#attention") == 0 and _count(browser, "#tree g.node") > 0
    browser.save_screenshot(str(tmp_path / "triangle_center.png"))
