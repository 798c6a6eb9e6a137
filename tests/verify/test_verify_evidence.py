"""The committed CPU evidence matches today's snippets and confirms every CPU-measurable claim."""
from __future__ import annotations

import json

import pytest

from jaxmem.evaluators.verify.manifest import load_pairs

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


@pytest.mark.slow
def test_gpu_only_pairs_still_run_on_cpu(baseline):
    """The verifier skips them here (nothing to measure), but users run them anywhere."""
    from jaxmem.evaluators.verify.runner import run_snippet

    gpu_only = [p for p in load_pairs(ROOT / "corpus").values()
                if not any("cpu" in m.backends for m in p.metrics)]
    assert gpu_only
    for pair in gpu_only:
        for path in (pair.before, pair.after):
            run = run_snippet(path, entry=pair.entry, env=pair.env, baseline=baseline)
            assert run.ok, (path, run.error, run.traceback)
            assert run.entry_error is None, run.entry_error
