"""The Review page through AppTest: paste, upload (several files, notebooks), bad input, downloads."""
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


def press_review(at):
    next(b for b in at.button if b.label == "Review").click().run(timeout=300)
    assert not at.exception, at.exception
    return at


def notebook(cells: list[str]) -> bytes:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training"]},
        *({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c} for c in cells),
    ]}).encode()


def findings(at) -> list[dict]:
    return at.session_state["review"]["findings"]


def test_pasted_code_gets_findings_with_lines_rules_and_card_links(review):
    review.text_area(key="paste").input(TRAIN)
    press_review(review)
    got = {(f["line"], f["code"]) for f in findings(review)}
    assert (13, "JM101") in got  # float(...) of a device array inside the loop
    table = review.dataframe[0].value
    assert list(table["line"]) == sorted(f["line"] for f in findings(review))
    assert any("implicit-host-sync" in str(u) for u in table["card"])
    # The offending lines are drawn highlighted, with their text.
    html = "\n".join(h.proto.body for h in review.get("html"))
    assert html.count('class="jm-hit"') == len(got) and "print(float(w.sum()))" in html
    assert {d.label for d in review.get("download_button")} == {"Download JSON", "Download SARIF"}


def test_downloads_are_the_reviewers_json_and_sarif(review):
    review.text_area(key="paste").input(TRAIN)
    press_review(review)
    from jaxmem.evaluators.review import api, registry

    objects = review.session_state["review"]["objects"]
    doc = json.loads(api.format_json(objects, files=1))
    assert doc["summary"]["findings"] == len(findings(review))
    sarif = json.loads(api.format_sarif(objects, rules=registry.select([], [])))
    assert sarif["runs"][0]["results"]


def test_several_uploads_including_a_notebook(review):
    review.file_uploader(key="uploads").set_value([
        ("train_loop.py", TRAIN.encode(), "text/x-python"),
        ("clean.py", b"import jax.numpy as jnp\nx = jnp.ones(3) * 2\n", "text/x-python"),
        ("exp.ipynb", notebook(["import jax\nimport jax.numpy as jnp\nw = jnp.zeros(3)",
                                "for i in range(1000):\n    w = w + 1\n    print(float(w.sum()))"]), "application/json"),
    ]).run()
    press_review(review)
    by_file = {(f["path"], f["code"], f.get("cell"), f["line"]) for f in findings(review)}
    assert ("train_loop.py", "JM101", None, 13) in by_file
    assert ("exp.ipynb", "JM101", 3, 3) in by_file  # cell 3 as Jupyter counts (the markdown is cell 1)
    assert not any(p == "clean.py" for p, *_ in by_file)
    assert "in 3 file(s)" in texts(review)
    assert "cell 3" in texts(review)


def test_a_megabyte_paste_is_refused_with_a_message(review):
    review.text_area(key="paste").input(TRAIN + "# padding\n" * 110_000)
    press_review(review)
    (error,) = review.main.error
    assert "1.1 MB" in error.value and "1.0 MB" in error.value
    review.text_area(key="paste").input(TRAIN)
    press_review(review)
    assert findings(review) and not review.main.error  # and the page keeps working


def test_binary_upload_and_broken_notebook_are_named_and_the_rest_is_reviewed(review):
    review.file_uploader(key="uploads").set_value([
        ("model.py", b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "text/x-python"),
        ("broken.ipynb", b'{"cells": [{"cell_type": "code", "source": "x = 1"', "application/json"),
        ("train_loop.py", TRAIN.encode(), "text/x-python"),
    ]).run()
    press_review(review)
    errors = [e.value for e in review.main.error]
    assert any("model.py is not a text file" in e for e in errors), errors
    assert any("broken.ipynb is not a valid notebook: broken JSON at line 1" in e for e in errors), errors
    assert {f["path"] for f in findings(review)} == {"train_loop.py"}


def test_unparsable_code_is_reported_not_crashed(review):
    review.text_area(key="paste").input("for x in range(3)\n    print(x)\n")
    press_review(review)
    assert [f["code"] for f in findings(review)] == ["JM001"]
    assert "cannot parse" in review.dataframe[0].value["message"][0]


def test_nothing_to_review_says_so(review):
    press_review(review)
    assert any("Nothing to review" in w.value for w in review.main.warning)


def test_running_user_code_is_off_by_default(review):
    assert not [c for c in review.checkbox if c.key == "run"]
    assert "Running your code is switched off" in texts(review)


@pytest.fixture
def user_code_on(monkeypatch):
    """The operator's switch (JAXMEM_USER_CODE=true), on the process's one service layer."""
    from jaxmem.app.webui import shared

    monkeypatch.setattr(shared.services().settings, "user_code", True)


@pytest.mark.slow
def test_run_counts_transfers_and_syncs_by_line(review, user_code_on):
    review.run()
    review.text_area(key="paste").input(TRAIN)
    review.checkbox(key="run").check()
    press_review(review)
    run = review.session_state["review"]["runs"]["<pasted>"]
    assert run["ok"], run.get("error")
    assert run["isolation"] == "bwrap"
    assert run["host_syncs"] >= 20 and any(s["line"] == 13 and s["count"] >= 20 for s in run["host_sync_lines"])
    sync = next(f for f in findings(review) if f["code"] == "JM101")
    assert sync["measured"]["host_syncs_at_line"] >= 20
    # The same attribution as `jaxmem review --run`: confirmed at its line, one sync per steady step.
    assert sync["runtime"]["status"] == "confirmed" and sync["runtime"]["per_step"]["host_syncs"] == 1.0
    assert sync["runtime"]["first_step"]["host_syncs"] == 1 and sync["runtime"]["loop"] == "script.py:11"
    page = texts(review)
    assert "Run of <pasted>" in page and "line 13: 20x" in page
    assert "Per line (the first, compiling step apart from the steady ones)" in page
    assert "device->host transfers" in str(review.dataframe[1].value["metric"].tolist())
