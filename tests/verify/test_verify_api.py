"""The library surface: cache reuse, evidence lookup, summaries, scripts, carrying on after errors."""
from __future__ import annotations

import json

import pytest

from jaxmem.evaluators.verify import api
from jaxmem.evaluators.verify.report import summary
from jaxmem.evaluators.verify.store import save_cached, write_evidence

from .conftest import write_pair

LOOP = """import numpy as np
import jax

f = jax.jit(lambda x: x + 1)
x = {x}
for _ in range(5):
    y = f(x)
y.block_until_ready()
"""
MANIFEST = """id: {id}
topic: {id}
title: test pair
metrics:
  - {{metric: h2d_transfers, expect: decrease, backends: [cpu, gpu, tpu]}}
  - {{metric: d2h_transfers, expect: decrease, backends: [gpu, tpu]}}
"""


def record(topic="buffer-donation", date="2026-11-30T10:00:00+00:00", backend="cpu", **extra):
    return {"topic": topic, "pair": topic, "key": f"k-{backend}-{date}", "verdict": "confirmed",
            "backend": backend, "device_kind": "cpu" if backend == "cpu" else "NVIDIA H100",
            "jax": "0.10.2", "date": date,
            "metrics": [{"metric": "h2d_transfers", "label": "host->device transfers", "expect": "decrease",
                         "backends": ["cpu"], "before": 101, "after": 1, "verdict": "confirmed"}], **extra}


def test_summary_line_reads_like_the_issue_example():
    assert summary(record()) == "verified on cpu, jax 0.10.2: host->device transfers 101 -> 1"
    assert summary(record(backend="gpu")).startswith("verified on gpu (NVIDIA H100), jax 0.10.2:")


def test_latest_evidence_prefers_a_local_run_over_committed_evidence(pair_settings):
    assert api.latest_evidence("buffer-donation", pair_settings) is None
    write_evidence([record(backend="gpu", date="2026-12-01T00:00:00+00:00")], pair_settings)
    found = api.latest_evidence("buffer-donation", pair_settings)
    assert found["backend"] == "gpu" and found["origin"].startswith("recorded evidence (gpu-nvidia-h100.json)")
    save_cached(record(), pair_settings)
    assert api.latest_evidence("buffer-donation", pair_settings)["origin"] == "measured run"


def test_evidence_summaries_show_each_machine_kind_labelled(pair_settings):
    write_evidence([record(backend="gpu", date="2026-12-01T00:00:00+00:00")], pair_settings)
    save_cached(record(), pair_settings)
    save_cached(record(date="2026-11-29T00:00:00+00:00"), pair_settings)    # older local run
    lines = api.evidence_summaries("buffer-donation", pair_settings)
    assert lines == [
        "verified on cpu, jax 0.10.2: host->device transfers 101 -> 1 [measured run, 2026-11-30]",
        "verified on gpu (NVIDIA H100), jax 0.10.2: host->device transfers 101 -> 1 "
        "[recorded evidence (gpu-nvidia-h100.json), 2026-12-01]",
    ]


def test_unknown_topic_lists_the_valid_ones(pair_corpus, pair_settings):
    write_pair(pair_corpus, "transfer-guard", "", "", MANIFEST.format(id="transfer-guard"))
    with pytest.raises(api.UnknownTopicError, match="'nope'; valid: transfer-guard"):
        api.verify_topic("nope", settings=pair_settings)


@pytest.mark.slow
def test_verify_topics_records_caches_and_carries_on_after_an_error(pair_corpus, pair_settings):
    write_pair(pair_corpus, "explicit-device-put", LOOP.format(x="np.ones(3)"),
               LOOP.format(x="jax.device_put(np.ones(3))"), MANIFEST.format(id="explicit-device-put"))
    write_pair(pair_corpus, "batch-transfers", LOOP.format(x="np.ones(3)"),
               "raise RuntimeError('broken after')\n", MANIFEST.format(id="batch-transfers"))
    seen = []
    records = api.verify_topics(["batch-transfers", "explicit-device-put"], repeats=3, jobs=2,
                                settings=pair_settings, on_record=lambda r: seen.append(r["topic"]))
    assert sorted(seen) == ["batch-transfers", "explicit-device-put"]   # in order of completion
    assert [r["topic"] for r in records] == ["batch-transfers", "explicit-device-put"]   # as asked
    broken, good = records
    assert broken["verdict"] == "error"
    assert "RuntimeError: broken after" in broken["metrics"][0]["reason"]
    assert good["verdict"] == "confirmed" and good["repeats"] == 1   # exact metrics: one run decides
    h2d = good["metrics"][0]
    assert (h2d["before"], h2d["after"]) == (5, 1)
    assert good["metrics"][1]["verdict"] == "not measurable here"
    for field in ("jax", "jaxlib", "backend", "device_kind", "date", "snippet_hash"):
        assert good[field], field
    again = api.verify_topic("explicit-device-put", settings=pair_settings)
    assert again["origin"] == "cache" and again["date"] == good["date"]


@pytest.mark.slow
def test_verify_script_reports_transfers_syncs_and_lines(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LOOP.format(x="np.ones(3)") + "print(float(y[0]))\n")
    result = api.verify_script(script)
    assert result["ok"] and result["backend"] == "cpu"
    assert result["h2d_transfers"] >= 5
    assert result["host_syncs"] == 1
    assert result["host_sync_lines"] == [{"line": 9, "source": "print(float(y[0]))", "count": 1}]
    assert result["stdout"].strip() == "2.0"
    json.dumps(result)   # the CLI's --json prints it as is
