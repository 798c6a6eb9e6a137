"""The corpus's own before/after pairs against the rules of their topic.

Every after.py (the advice applied) must raise no finding of a rule whose topic is the
snippet's topic; every before.py whose anti-pattern can be seen in the source must raise one.
Runs over whatever snippet folders exist, so new pairs are checked without new test code.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jaxmem.evaluators.review.api import review_source

SNIPPETS = Path(__file__).resolve().parents[2] / "corpus" / "snippets"

# before.py files whose anti-pattern is the *absence* of something, which no static rule can
# point at a line for. Each entry says why; remove it when a rule learns to see it.
NOT_STATICALLY_VISIBLE = {
    "gpu-preallocation": "the default 75% preallocation: the before side sets nothing",
    "gpu-memory-fraction": "the default fraction: the before side sets nothing",
    "multi-process-gpu": "several processes with default settings: nothing in one file shows it",
    "gradient-checkpointing": "no checkpoint at all: storing every activation is the default",
    "host-offloading": "a remat policy that keeps residuals on the device is valid code; offloading is an option",
    "sharding-memory": "replicated parameters (P()) are correct code; whether they fit is a size question",
    "transfer-guard": "the missing guard; the implicit transfers themselves are reported as batch-transfers (JM201)",
    "memory-profiling": "the absence of a profile",
    "oom-debugging": "the absence of diagnostics",
    "memory-fragmentation": "allocation patterns over time, not a line of code",
    # The pairs of the topics added with the real-question set; no rule has these topics yet.
    "vmap-memory": "a vmap whose intermediates are large is valid code; whether they fit is a size question",
    "collective-memory": "all-gathering a whole layer stack is valid code; whether it fits is a size question",
    "checkpoint-restore-memory": "assembling a checkpoint on the host before device_put is valid; its cost is its size",
    "multi-host-arrays": "device_put of one whole host array is valid in one process; its cost is its size",
    "host-value-caching": "one np.asarray per long-lived array is valid; the cost is host memory held, a size question",
    "dlpack-interop": "a copy through NumPy (t.numpy()) is valid code; no rule knows torch tensors yet",
    "host-callbacks": "a callback inside a jitted step is valid; its cost depends on how often the step runs (no rule yet)",
    "pinned-host-memory": "state kept as NumPy between steps is valid code; the memory kind is an option",
    "mutable-refs": "the before side is ordinary functional code; refs are an option, not a fix for a bug",
    # The pairs added with the answer cards of issue 23.
    "gradient-accumulation": "one step on the whole batch is valid code; whether its activations fit is a size question",
    "attention-memory": "the default (xla) attention path is valid code; its T x T scores are a size question",
    "embedding-gradients": "a dense table gradient is what jax.grad returns; its cost is the table's size",
}


def _pairs() -> list[tuple[str, str]]:
    out = []
    for folder in sorted(p for p in SNIPPETS.glob("*") if p.is_dir()):
        manifest = folder / "manifest.yaml"
        topic = folder.name
        if manifest.is_file():
            topic = (yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}).get("topic", topic)
        out.append((folder.name, topic))
    return out


PAIRS = _pairs()


def test_there_are_snippets_to_check():
    assert PAIRS, f"no snippet folders under {SNIPPETS}"


@pytest.mark.parametrize(("folder", "topic"), PAIRS, ids=[p[0] for p in PAIRS])
def test_after_raises_nothing_for_its_own_topic(folder, topic):
    path = SNIPPETS / folder / "after.py"
    if not path.is_file():
        pytest.skip(f"{folder} has no after.py yet")
    own = [f for f in review_source(path.read_text(encoding="utf-8"), f"{folder}/after.py", select=["ALL"], show_possible=True) if f.topic == topic]
    assert not own, "\n".join(f"{f.location}: {f.code} {f.message}" for f in own)


@pytest.mark.parametrize(("folder", "topic"), PAIRS, ids=[p[0] for p in PAIRS])
def test_before_raises_its_own_topic_when_visible(folder, topic):
    path = SNIPPETS / folder / "before.py"
    if not path.is_file():
        pytest.skip(f"{folder} has no before.py yet")
    own = [f for f in review_source(path.read_text(encoding="utf-8"), f"{folder}/before.py", select=["ALL"], show_possible=True) if f.topic == topic]
    if topic in NOT_STATICALLY_VISIBLE:
        # Keep the exemption honest: if a rule starts catching it, the entry must go.
        assert not own, f"{folder}: now detected ({[f.code for f in own]}); remove it from NOT_STATICALLY_VISIBLE"
    else:
        assert own, f"{folder}/before.py raises no finding of topic {topic!r}"
