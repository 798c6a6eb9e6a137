"""Fuzzing (hypothesis, derandomized so CI sees the same cases): the review parser on mutated
Python, the notebook reader on mutated notebook JSON, card front matter on malformed YAML. No
crash and no traceback: a finding, a note, or a CorpusError that names the file and the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxmem.evaluators.review import registry
from jaxmem.evaluators.review.api import card_url_factory, review_notebook, review_source
from jaxmem.ingest.cards import CorpusError, CorpusLayout, check_corpus, load_card

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests/review/fixtures").glob("*/bad_*.py"))[:40]]
SEEDS += [(ROOT / "corpus/snippets" / name / "before.py").read_text() for name in ("implicit-host-sync", "buffer-donation")]
CARD = (ROOT / "tests/fixtures/mini_corpus/cards/buffer-donation/en.md").read_text(encoding="utf-8")
FUZZ = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
RULES = registry.select([], [])
URL = card_url_factory()


@st.composite
def mutated(draw, seeds: list[str]) -> str:
    """A seed text with a few edits: spliced random text, deleted spans, swapped lines, cut tails."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "swap", "truncate", "indent"]))
        at = draw(st.integers(0, len(text)))
        if op == "insert":
            junk = draw(st.one_of(st.text(max_size=12), st.sampled_from(
                ["\x00", "\ufeff", "):", "(((", "'''", '"""', "\t", "lambda", "@jax.jit\n", "%timeit ", "!ls\n",
                 "for", "yield", "await ", "match x:\n", "\\\n", "\r\n", "\u200b", "é", "🙂"])))
            text = text[:at] + junk + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
        elif op == "swap":
            lines = text.split("\n")
            if len(lines) > 2:
                i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == "truncate":
            text = text[:at]
        else:
            text = "\n".join(("    " if draw(st.booleans()) else "") + line for line in text.split("\n"))
    return text


@FUZZ
@given(mutated(SEEDS))
def test_review_parser_survives_mutated_source(source):
    findings = review_source(source, "<fuzz>")  # ReviewError would fail the test: it means a rule crashed
    for f in findings:
        assert f.code.startswith("JM") and f.line >= 0


def notebook_values():
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30), mutated(SEEDS))
    cell = st.fixed_dictionaries({}, optional={
        "cell_type": st.sampled_from(["code", "markdown", "raw", 3, None]),
        "source": st.one_of(mutated(SEEDS), st.lists(st.one_of(st.text(max_size=40), st.integers()), max_size=5), leaf),
        "outputs": st.lists(leaf, max_size=2),
        "metadata": st.dictionaries(st.text(max_size=5), leaf, max_size=2)})
    return st.one_of(
        st.fixed_dictionaries({"cells": st.lists(cell, max_size=6)}, optional={"nbformat": st.integers(), "metadata": leaf}),
        st.lists(cell, max_size=3), leaf)


@FUZZ
@given(notebook_values(), st.booleans())
def test_notebook_reader_survives_mutated_notebooks(value, break_json):
    text = json.dumps(value)
    if break_json and len(text) > 2:
        text = text[: len(text) // 2]
    notes: list = []
    findings = review_notebook(text, "fuzz.ipynb", RULES, URL, notes)
    for f in findings:
        assert f.code.startswith("JM")


@pytest.fixture(scope="module")
def layout():
    return CorpusLayout(ROOT / "tests/fixtures/mini_corpus")


@st.composite
def broken_front_matter(draw) -> str:
    head, sep, body = CARD[4:].partition("\n---\n")
    lines = head.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "garble", "dup", "tab", "type"]))
        if op == "drop":
            lines.pop(i)
        elif op == "garble":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))] + draw(st.sampled_from(
                [":", ": [", "{", "- -", "&a *a", "!!python/object:os.system", "\x00", "'", '"', "? x", "|"]))
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "tab":
            lines[i] = "\t" + lines[i]
        else:
            lines[i] = lines[i].split(":")[0] + ": " + draw(st.sampled_from(["123", "[]", "{}", "null", "true", "- a"]))
        if not lines:
            lines = [""]
    prefix = draw(st.sampled_from(["---\n", "---\n", "--\n", ""]))
    return prefix + "\n".join(lines) + (sep if draw(st.booleans()) else "\n") + body


@FUZZ
@given(broken_front_matter())
def test_card_front_matter_on_malformed_yaml(tmp_path_factory, layout, text):
    folder = tmp_path_factory.mktemp("card") / "buffer-donation"
    folder.mkdir()
    path = folder / "en.md"
    path.write_text(text, encoding="utf-8")
    try:
        load_card(path, layout)
    except CorpusError as exc:
        assert exc.path == str(path) and exc.field and exc.problem


def test_corpus_check_reports_a_broken_card_and_goes_on(mini_corpus):
    (mini_corpus / "cards/buffer-donation/sv.md").write_text("---\nid: [unclosed\n---\n## x\n", encoding="utf-8")
    problems = check_corpus(mini_corpus)
    assert any("buffer-donation/sv.md" in str(p) and "front matter" in str(p) for p in problems), problems
