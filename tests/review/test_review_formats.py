"""Output formats: SARIF valid against the 2.1.0 schema, stable fingerprints, JSON, Markdown.

`sarif-schema-2.1.0.json` is the OASIS SARIF 2.1.0 (errata01) schema, vendored from
oasis-tcs/sarif-spec (sarif-2.1/schema/sarif-schema-2.1.0.json) because tests run offline.
"""
from __future__ import annotations

import json

import jsonschema
import pytest

from jaxmem.evaluators.review import registry
from jaxmem.evaluators.review.api import (
    card_help_factory,
    card_url_factory,
    format_json,
    format_markdown,
    format_sarif,
    format_text,
    review_source,
)
from jaxmem.evaluators.review.finding import Note
from jaxmem.evaluators.review.formats import fingerprints
from tests.review.helpers import FIXTURES, HERE, check_golden

SAMPLE = FIXTURES / "JM101" / "bad_training_loop.py"


@pytest.fixture(scope="module")
def schema():
    return json.loads((HERE / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def _sample():
    return review_source(SAMPLE.read_text(encoding="utf-8"), "src/train loop.py", show_possible=True)


def test_sarif_is_valid_and_complete(schema, monkeypatch):
    monkeypatch.setenv("JAXMEM_PUBLIC_URL", "https://jaxmem.example.org/")
    findings = _sample()
    notes = [Note("data/blob.bin", "binary file (contains NUL bytes); skipped")]
    doc = json.loads(format_sarif(findings, notes, rules=registry.all_rules(), card_url=card_url_factory(),
                                  card_help=card_help_factory()))
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in registry.all_rules()], "one rule entry per code"
    # The web app's card page, under its public URL.
    assert all(r["helpUri"] == f"https://jaxmem.example.org/card?topic={r['properties']['topic']}&lang=en"
               for r in rules)
    jm201 = next(r for r in rules if r["id"] == "JM201")
    assert jm201["fullDescription"]["text"].startswith("Flags a NumPy array or Python list that is built")
    assert "Fix: Stack the host data" in jm201["help"]["text"]
    assert len(run["results"]) == len(findings)
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["partialFingerprints"]["jaxmemFingerprint/v1"]
        assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/train%20loop.py"
    assert run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"].startswith("binary file")


def test_sarif_without_a_public_web_app_carries_the_card_instead_of_a_link(schema, monkeypatch):
    """No made-up URL: without JAXMEM_PUBLIC_URL nothing links anywhere, and the help says what the
    card would have (its summary) beside the rule's fix."""
    monkeypatch.delenv("JAXMEM_PUBLIC_URL", raising=False)
    findings = _sample()
    doc = json.loads(format_sarif(findings, rules=registry.all_rules(), card_url=card_url_factory(),
                                  card_help=card_help_factory()))
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    text = json.dumps(doc)
    assert "helpUri" not in text and "github.com" not in text and "http" not in text.replace(
        "https://json.schemastore.org/sarif-2.1.0.json", "").replace("https://docs.oasis-open.org", "")
    jm201 = next(r for r in doc["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "JM201")
    assert "Card batch-transfers: " in jm201["help"]["text"] and "Fix: Stack the host data" in jm201["help"]["text"]
    assert all(not f.url for f in findings)


def test_sarif_with_a_parse_error_and_a_notebook_is_valid(schema):
    broken = review_source("def f(:\n", "bad.py", show_possible=True)
    nb = review_source("import jax\n", "nb.ipynb", show_possible=True)
    for f in nb:
        f.cell = 2
    doc = json.loads(format_sarif(broken + nb, rules=registry.select(["JM1"]), card_url=card_url_factory()))
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    assert doc["runs"][0]["results"][0]["ruleId"] == "JM001"


def test_fingerprints_survive_line_shifts_and_differ_per_occurrence():
    src = SAMPLE.read_text(encoding="utf-8")
    a = review_source(src, "t.py", show_possible=True)
    b = review_source("\n\n# a comment moves every line\n" + src, "t.py", show_possible=True)
    assert [f.line + 3 for f in a] == [f.line for f in b]
    assert fingerprints(a) == fingerprints(b)
    twice = review_source("import jax.numpy as jnp\nfor i in range(100):\n    float(jnp.ones(()))\n"
                          "for i in range(100):\n    float(jnp.ones(()))\n", "t.py", show_possible=True)
    assert len(set(fingerprints(twice))) == 2


def test_json_round_trips_every_field():
    findings = _sample()
    doc = json.loads(format_json(findings, [Note("x", "y")], files=1))
    assert doc["summary"]["findings"] == len(findings) and doc["summary"]["files"] == 1
    assert doc["findings"][0] == findings[0].to_dict()
    assert doc["notes"] == [{"path": "x", "message": "y"}]


def test_markdown_and_text_golden():
    findings = _sample()
    check_golden(HERE / "golden" / "sample.md", format_markdown(findings, files=1))
    check_golden(HERE / "golden" / "sample.txt", format_text(findings, files=1))


def test_empty_outputs_say_so():
    assert format_text([], files=3) == "No findings in 3 files.\n"
    assert "No findings" in format_markdown([])
