"""End to end, "Fix and measure": the real app (`jaxmem web`, running users' code switched on) in
headless Chromium. Pastes a loop that reads the loss every step, presses "Fix and measure", and
expects the diff and the measured table (host syncs 20 -> 1, confirmed); leaves a screenshot under
artifacts/web-review-fix.png."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.helpers import background, free_port, launch_chromium, open_page, require_chromium, wait_http

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
TRAIN = (Path(__file__).parent / "fixtures" / "review" / "train_loop.py").read_text()
START_TIMEOUT_S = 60
FIRST_LOAD_TIMEOUT_MS = 180_000


@pytest.fixture(scope="module")
def server(web_env, tmp_path_factory):
    require_chromium()
    port = free_port()
    log = tmp_path_factory.mktemp("server-fix") / "streamlit.log"
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **web_env, "JAXMEM_USER_CODE": "true"}
    with background([sys.executable, "-m", "jaxmem.app.cli", "web", "--port", str(port)], env=env, log=log) as proc:
        wait_http(f"{url}/_stcore/health", proc, timeout=START_TIMEOUT_S, expect=b"ok", log=log)
        yield url
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        pg = open_page(browser)
        pg.goto(server)
        pg.get_by_text("cards on 2 topics").wait_for(timeout=FIRST_LOAD_TIMEOUT_MS)
        yield pg
        pg.close()
        browser.close()


def test_fix_and_measure_shows_the_diff_and_the_measured_table(page):
    page.get_by_role("link", name="Review code").click()
    area = page.get_by_label("Python code")
    area.fill(TRAIN)
    area.press("Control+Enter")  # commits the text area before the button reruns the page
    page.get_by_role("button", name="Fix and measure").click()
    # The diff of the fix ...
    page.get_by_text("Fixes for <pasted>").wait_for(timeout=120_000)
    code = page.locator("[data-testid='stCode']").filter(has_text="if i % 100 == 0:")
    code.first.wait_for()
    assert "print(float(w.sum()))" in code.first.inner_text()
    # ... and the table of the code run before and after it, in the sandbox.
    page.get_by_text("Verdict: confirmed").wait_for(timeout=240_000)
    table = page.locator("[data-testid='stDataFrame']").last
    table.wait_for()
    text = page.inner_text("body")
    assert "Fix measured on cpu" in text and "one run per side" in text
    page.get_by_role("button", name="Download fixed pasted").wait_for()
    page.mouse.move(0, 0)  # no tooltip over the page
    page.get_by_role("button", name="Download fixed pasted").scroll_into_view_if_needed()
    page.wait_for_timeout(1000)  # let the data grid draw before the screenshot
    page.screenshot(path=str(ARTIFACTS / "web-review-fix.png"), full_page=True)
