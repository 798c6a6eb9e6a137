"""The committed CPU evidence matches today's snippets and confirms every CPU-measurable claim."""
from __future__ import annotations

import json

import pytest

from evaluators.verify.manifest import load_pairs

from .conftest import ROOT

EVIDENCE = ROOT / "corpus" / "evidence" / "cpu.json"


@pytest.fixture(scope="module")
def evidence():
    assert EVIDENCE.is_file(), "record it: jaxmem verify --all --fresh --record"
    return json.loads(EVIDENCE.read_text())


def test_every_pair_has_current_evidence(evidence):
    stale = [pid for pid, pair in load_pairs(ROOT / "corpus").items()
             if evidence["records"].get(pair.topic, {}).get("snippet_hash") != pair.snippet_hash()]
    assert not stale, f"snippets changed since the evidence was recorded: {stale}"


def test_cpu_measurable_claims_are_confirmed_and_the_rest_labelled(evidence):
    for pid, pair in load_pairs(ROOT / "corpus").items():
        record = evidence["records"][pair.topic]
        assert record["backend"] == "cpu" and record["jax"] and record["jaxlib"] and record["date"]
        for spec, m in zip(pair.metrics, record["metrics"], strict=True):
            assert m["metric"] == spec.metric
            if "cpu" in spec.backends:
                assert m["verdict"] == "confirmed", (pid, m)
                assert m["before"] is not None and m["after"] is not None
            else:
                assert m["verdict"] == "not measurable here", (pid, m)
                assert m["before"] is None and m["after"] is None   # never estimated
