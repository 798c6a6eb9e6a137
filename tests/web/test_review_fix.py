"""The Review page's "Fix and measure" through AppTest: the diff always, the measured table where
running users' code is on, safe-only, notebooks, and bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.web.helpers import texts

TRAIN = (Path(__file__).parent / "fixtures" / "review" / "train_loop.py").read_text()


@pytest.fixture
def review(app):
    app.switch_page("webui/pages/review.py").run()
    assert not app.exception
    return app


@pytest.fixture
def user_code_on(monkeypatch):
    from jaxmem.app.webui import shared

    monkeypatch.setattr(shared.services().settings, "user_code", True)


def press(at, label: str):
    next(b for b in at.button if b.label == label).click().run(timeout=300)
    assert not at.exception, at.exception
    return at


def fixes(at) -> list[dict]:
    return at.session_state["review"]["fix"]["fixes"]


def test_fix_shows_the_diff_and_says_it_did_not_run(review):
    review.text_area(key="paste").input(TRAIN)
    press(review, "Fix and measure")
    (fix,) = fixes(review)
    assert fix["changed"] and fix["run"] is None
    assert "+    if i % 100 == 0:" in fix["diff"] and "-    print(float(w.sum()))" in fix["diff"]
    assert any("if i % 100 == 0" in c.value for c in review.code)
    assert "JM101 [unsafe] log every 100 steps" in texts(review)
    assert "switched off on this server" in texts(review)
    assert "Download fixed pasted" in {d.label for d in review.get("download_button")}
    # The review itself is shown too (the same button reviews).
    assert any(f["code"] == "JM101" for f in review.session_state["review"]["findings"])


def test_interval_and_safe_only(review):
    review.text_area(key="paste").input(TRAIN)
    review.number_input(key="fix_interval").set_value(5)
    press(review, "Fix and measure")
    assert "if i % 5 == 0:" in fixes(review)[0]["after"]
    review.checkbox(key="fix_unsafe").uncheck()
    press(review, "Fix and measure")
    (fix,) = fixes(review)
    assert not fix["changed"] and fix["unsafe_available"] == 1
    assert any("no fix applies" in i.value and "unsafe fix" in i.value for i in review.info)


def test_notebook_fixes_are_per_cell_and_not_run(review, user_code_on):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "import jax\nimport jax.numpy as jnp\nw = jnp.zeros(3)"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "for i in range(1000):\n    w = w + 1\n    print(float(w.sum()))"}]}
    review.file_uploader(key="uploads").set_value([("exp.ipynb", json.dumps(nb).encode(), "application/json")]).run()
    press(review, "Fix and measure")
    (fix,) = fixes(review)
    assert fix["changed"] and fix["run"] is None and "exp.ipynb:cell 2" in fix["diff"]
    assert json.loads(fix["after"])["cells"][1]["source"].count("if i % 100 == 0:") == 1


def test_unparsable_code_gets_no_fix_and_no_crash(review):
    review.text_area(key="paste").input("for x in range(3)\n    print(x)\n")
    press(review, "Fix and measure")
    (fix,) = fixes(review)
    assert not fix["changed"] and not review.main.error


@pytest.mark.slow
def test_fix_and_measure_runs_before_and_after(review, user_code_on):
    review.text_area(key="paste").input(TRAIN)
    press(review, "Fix and measure")
    (fix,) = fixes(review)
    run = fix["run"]
    assert run and run["runs_before"] and run["runs_after"], run
    rows = {r["metric"]: r for r in run["rows"]}
    assert rows["host_syncs"]["before"] == 20 and rows["host_syncs"]["after"] == 1
    assert rows["host_syncs"]["verdict"] == "confirmed" and run["verdict"] == "confirmed"
    table = review.dataframe[-1].value
    assert list(table.columns) == ["metric", "before", "after", "per step", "verdict"]
    assert "host sync points" in table["metric"].tolist()
    assert "Verdict: **confirmed**" in texts(review)
