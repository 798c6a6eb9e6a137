"""The corpus's snippet pairs: all present, all valid; bad manifests fail with useful messages."""
from __future__ import annotations

import pytest

from jaxmem.evaluators.verify.manifest import ManifestError, load_pair, load_pairs
from jaxmem.evaluators.verify.metrics import METRICS

from .conftest import ROOT, write_pair

REQUIRED = {"transfer-guard", "explicit-device-put", "implicit-host-sync", "batch-transfers",
            "prefetch-to-device", "jit-compilation", "async-dispatch", "buffer-donation",
            "in-place-updates", "gpu-preallocation", "gpu-memory-fraction", "gradient-checkpointing",
            "live-arrays-cleanup", "scan-over-loops", "sharding-memory", "host-offloading",
            "mixed-precision"}


def test_every_required_pair_exists_and_loads():
    pairs = load_pairs(ROOT / "corpus")
    assert REQUIRED <= set(pairs)
    for pid, pair in pairs.items():
        assert pair.topic == pid   # cards reference snippet id == topic id


def test_enough_pairs_are_measurable_on_cpu():
    pairs = load_pairs(ROOT / "corpus")
    on_cpu = [p.id for p in pairs.values() if any("cpu" in m.backends for m in p.metrics)]
    assert len(on_cpu) >= 13, on_cpu


def test_cards_reference_existing_pairs():
    pairs = load_pairs(ROOT / "corpus")
    import yaml
    for card in (ROOT / "corpus" / "cards").glob("*/en.md"):
        front = yaml.safe_load(card.read_text().split("---")[1])
        for snippet in front.get("snippets") or []:
            assert snippet in pairs, f"{card} names snippet {snippet!r}"


BEFORE = "x = 1\n"


@pytest.mark.parametrize("manifest, message", [
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: transfers, expect: decrease, backends: [cpu]}\n",
     "unknown metric 'transfers'; valid: alias_bytes, argument_bytes"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: wall_time, expect: decrease, backends: [cpu]}\n",
     "wall_time is information only"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: d2h_transfers, expect: decrease, backends: [cpu]}\n",
     "d2h_transfers cannot be measured on cpu"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: temp_bytes, expect: decrease, backends: [cpu]}\n",
     "temp_bytes read(s) the compiled entry point"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: host_syncs, expect: lower, backends: [cpu]}\n",
     "metrics.0.expect: Input should be 'increase' or 'decrease' (got 'lower')"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: host_syncs, expect: decrease}\n",
     "metrics.0.backends: Field required"),
    ("id: p\ntopic: no-such-topic\nmetrics:\n  - {metric: host_syncs, expect: decrease, backends: [cpu]}\n",
     "unknown topic id 'no-such-topic'"),
    ("id: q\ntopic: transfer-guard\nmetrics:\n  - {metric: host_syncs, expect: decrease, backends: [cpu]}\n",
     "must equal the folder name 'p'"),
    ("id: p\ntopic: transfer-guard\nenv: {OPENAI_API_KEY: x}\nmetrics:\n  - {metric: host_syncs, expect: decrease, backends: [cpu]}\n",
     "'OPENAI_API_KEY' is never passed"),
    ("id: p\ntopic: transfer-guard\nmetrics:\n  - {metric: host_syncs, expect: same, backends: [cpu]}\n",
     "(got 'same')"),
])
def test_bad_manifest_names_the_value_and_the_choices(pair_corpus, manifest, message):
    """One schema: the verifier refuses it, and `jaxmem corpus check` reports the same problem."""
    from jaxmem.ingest.cards import CorpusLayout, check_snippets

    d = write_pair(pair_corpus, "p", BEFORE, BEFORE, manifest)
    with pytest.raises(ManifestError) as err:
        load_pair(d, {"transfer-guard"})
    assert message in str(err.value)
    layout = CorpusLayout(ROOT / "corpus")
    assert any(message in str(p) for p in check_snippets(pair_corpus / "snippets", layout)), message


def test_every_registered_metric_has_a_label_and_unit():
    for m in METRICS.values():
        assert m.label and m.unit in ("count", "bytes", "chars", "seconds")
