"""End to end: the real app (`streamlit run app/web.py`) on a free local port, driven by Debian's
Chromium in headless mode (scripts/install-system-packages.sh; no tool downloads its own browser).

Asks a Swedish question and expects a Swedish answer with citations, pastes code on the Review
page and expects findings, and leaves a screenshot of each page under artifacts/. Prints the time
from question submitted to answer rendered, warm (the issue's target is <= 1 s on this machine;
reported, not asserted: a timing assertion on a shared 2-core machine would be flaky).
"""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import background, free_port, launch_chromium, open_page, require_chromium, wait_http
from tests.web.helpers import SWEDISH_QUESTION

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
TRAIN = (Path(__file__).parent / "fixtures" / "review" / "train_loop.py").read_text()
START_TIMEOUT_S = 60
FIRST_LOAD_TIMEOUT_MS = 180_000  # builds the advisor: index check, embedder, language models


@pytest.fixture(scope="module")
def server(web_env, tmp_path_factory):
    """`jaxmem web` as a user starts it; stopped with SIGTERM, as a service manager stops it."""
    require_chromium()
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    url = f"http://127.0.0.1:{port}"
    with background([sys.executable, "-m", "jaxmem.app.cli", "web", "--port", str(port)], env={**os.environ, **web_env},
                    log=log) as proc:
        wait_http(f"{url}/_stcore/health", proc, timeout=START_TIMEOUT_S, expect=b"ok", log=log)
        yield url
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        b = launch_chromium(pw)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser, server):
    pg = open_page(browser)
    pg.goto(server)
    # The sidebar's index line appears once the advisor is built: from then on, warm.
    pg.get_by_text("cards on 2 topics").wait_for(timeout=FIRST_LOAD_TIMEOUT_MS)
    yield pg
    pg.close()


def ask(page, question: str, n_before: int) -> tuple[float, float]:
    """Submit a question; seconds until its answer (the feedback thumbs close it) is on screen,
    and the advisor's own share of that, from the answer's "Answered in N ms" line."""
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    t0 = time.perf_counter()
    box.press("Enter")
    answers = page.get_by_test_id("stChatMessage")
    # user + assistant per exchange; the assistant's feedback widget is its last element.
    answer = answers.nth(n_before + 1)
    answer.get_by_test_id("stFeedback").wait_for(timeout=60_000)
    elapsed = time.perf_counter() - t0
    advisor_ms = re.search(r"Answered in (\d+) ms", answer.inner_text())
    return elapsed, float(advisor_ms.group(1)) / 1000 if advisor_ms else float("nan")


def test_swedish_question_gets_swedish_answer_with_citations(page, capsys):
    ask(page, "How do I stop JAX from taking most of the GPU memory?", 0)  # this session's first answer
    runs = [ask(page, SWEDISH_QUESTION, 2 + 2 * i) for i in range(3)]
    timings = [t for t, _ in runs]
    answer = page.get_by_test_id("stChatMessage").last
    assert "Varför JAX tar 75 % av GPU-minnet vid start" in answer.inner_text()
    # The opening answers; the rest of the card, with its sources, is folded under "Hela kortet".
    whole = answer.get_by_test_id("stExpander").filter(has=page.locator("summary", has_text="Hela kortet"))
    assert "Källor" not in answer.inner_text()
    whole.locator("summary").click()
    whole.get_by_text("Källor").first.wait_for()  # the Swedish "Sources" heading
    cited = answer.get_by_test_id("stExpander").filter(has=page.locator("summary", has_text="Svenska (sv)"))
    assert cited.count() >= 1
    cited.first.locator("summary").click()
    cited.first.get_by_text("Card language: Svenska (sv)").wait_for()
    # The donation card has recorded evidence: drawn as before/after bars without a run.
    donation = cited.filter(has_text="buffer-donation")
    donation.locator("summary").click()
    donation.locator(".jm-bar").first.wait_for()
    assert donation.locator(".jm-bar").count() == 2
    assert "not measurable on cpu" in donation.inner_text()
    page.wait_for_timeout(500)  # let the expander's opening animation finish before the screenshot
    page.screenshot(path=str(ARTIFACTS / "web-chat.png"), full_page=True)
    median_ms = statistics.median(timings) * 1000
    # The load average says how much of the time other work on the machine took.
    load = [round(x, 1) for x in os.getloadavg()]
    (ARTIFACTS / "web-timing.json").write_text(json.dumps(
        {"question_to_answer_ms": [round(t * 1000) for t in timings], "median_ms": round(median_ms),
         "advisor_ms": [round(a * 1000) for _, a in runs],
         "loadavg_1_5_15": load, "cpus": os.cpu_count()}))
    with capsys.disabled():
        print(f"\n[web e2e] question submitted -> answer rendered (warm), 3 runs: "
              f"{', '.join(f'{t * 1000:.0f} ms' for t in timings)}; median {median_ms:.0f} ms; advisor's share "
              f"{', '.join(f'{a * 1000:.0f} ms' for _, a in runs)} "
              f"(target <= 1000 ms; load average {load[0]} on {os.cpu_count()} CPUs)")


def test_pasted_code_gets_findings(page):
    page.get_by_role("link", name="Review code").click()
    area = page.get_by_label("Python code")
    area.fill(TRAIN)
    area.press("Control+Enter")  # commits the text area before the button reruns the page
    page.get_by_role("button", name="Review").click()
    page.get_by_text("finding(s) in 1 file(s)").wait_for(timeout=60_000)
    hits = page.locator(".jm-hit")
    hits.first.wait_for()
    assert hits.count() >= 1
    assert "print(float(w.sum()))" in hits.all_inner_texts()[-1]
    page.get_by_role("button", name="Download SARIF").wait_for()
    page.screenshot(path=str(ARTIFACTS / "web-review.png"), full_page=True)


def test_status_page(page):
    page.get_by_role("link", name="Feedback and status").click()
    page.get_by_text("JAX on this server").wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "web-status.png"), full_page=True)


@pytest.mark.parametrize("path", ["", "review", "status", "card?topic=buffer-donation&lang=sv", "web", "chat",
                                  "shared", "evidence", "answer_view", "review_view"])
def test_every_url_opens_inside_the_apps_navigation(browser, server, path):
    """A deep link, opened in a new page as a user opens a bookmark, shows the app's own navigation,
    not Streamlit's listing of source files (web, chat, review, status)."""
    pg = open_page(browser)
    try:
        pg.goto(f"{server}/{path}")
        pg.get_by_text("Knowledge base").wait_for(timeout=60_000)
        pg.wait_for_timeout(2_000)  # what Streamlit lists after the first script run settles
        nav = pg.get_by_test_id("stSidebarNav")
        nav.wait_for()
        links = sorted(t.strip().splitlines()[-1] for t in nav.get_by_role("link").all_inner_texts())  # after the icon
        assert links == ["Chat", "Feedback and status", "Review code"], links
    finally:
        pg.close()


def test_every_card_link_in_the_answers_is_a_page_the_app_serves(page, browser, server):
    """Follows each link the answers on the chat page hold: a card link opens that card in the app;
    no link points at a made-up repository. (Sources are the JAX documentation's own pages, which
    this offline machine cannot open: only checked to be https.)"""
    from urllib.parse import urljoin

    page.goto(server)
    page.get_by_text("cards on 2 topics").wait_for(timeout=60_000)
    ask(page, SWEDISH_QUESTION, 0)
    ask(page, "How do I reuse the input buffer with donate_argnums so parameters are not held twice?", 2)
    hrefs = page.get_by_test_id("stChatMessage").locator("a[href]").evaluate_all(
        "els => els.map(e => e.getAttribute('href'))")
    assert not [h for h in hrefs if "github.com/jaxmem" in h]
    hrefs = [h for h in hrefs if not h.startswith("#")]  # Streamlit's own heading anchors, on the same page
    internal = sorted({h for h in hrefs if not h.startswith(("http://", "https://", "mailto:")) or h.startswith(server)})
    assert any(h.startswith("card?topic=") for h in internal), hrefs
    external = {h for h in hrefs if h not in internal}
    assert all(h.startswith("https://") for h in external), external
    assert all(h.startswith("card?topic=") for h in internal), internal
    for href in internal:
        pg = browser.new_page()
        try:
            pg.goto(urljoin(server + "/", href))
            topic = href.split("topic=")[1].split("&")[0]
            pg.get_by_text(f"{topic} · applies to").wait_for(timeout=60_000)  # the card page's caption
            # The page draws top to bottom: its last part, the sources, says it is all there.
            pg.wait_for_function("document.body.innerText.includes('Sources')", timeout=60_000)
            assert "Page not found" not in pg.inner_text("body"), href
        finally:
            pg.close()
