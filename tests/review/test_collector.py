"""The batch's garbage collection: paced by files, restored after, and nothing kept frozen."""
from __future__ import annotations

import gc
import weakref

from jaxmem.evaluators.review import collector


class _Node:
    def __init__(self) -> None:
        self.other = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # garbage only a collection frees
    return weakref.ref(a)


def test_young_pass_frees_a_files_cycles_and_the_collector_is_restored():
    was = gc.isenabled()
    gc.enable()
    try:
        with collector.per_file() as done:
            assert not gc.isenabled()  # paced by files, not by allocations
            refs = [_cycle() for _ in range(collector.YOUNG_EVERY)]
            for _ in range(collector.YOUNG_EVERY):
                done()
            assert all(r() is None for r in refs)  # the pass after the tenth file collected them
            assert gc.get_freeze_count() > 0  # survivors (here: the test's own objects) frozen
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0  # everything is the collector's again after the batch
    finally:
        if not was:
            gc.disable()


def test_a_cycle_that_joins_frozen_objects_is_collected_after_the_batch():
    keep = []
    with collector.per_file() as done:
        node = _Node()
        keep.append(node)  # alive at the pass: a batch cache
        for _ in range(collector.YOUNG_EVERY):
            done()
        node.other = _Node()
        node.other.other = node  # a cycle through a frozen object
        ref = weakref.ref(node)
        keep.clear()
        del node
    gc.collect()
    assert ref() is None


_BRANCHY = '''
import jax
import jax.numpy as jnp


@jax.jit
def step(params, batch):
    return params - 0.1 * batch.mean(), jnp.sum(batch)


def train(params, batches, distributed):
    for batch in batches:
        if distributed:
            params, loss = step(params, batch)
        else:
            params, loss = step(params, batch * 2)
        print(float(loss))
    return params
'''


def test_a_files_review_leaves_no_cycles_for_the_collector():
    """The batch leans on reference counting to free each file's tree and model as its review ends
    (collector.py): a cycle anywhere in them (a memo pointing back at its owner, a recursive
    closure) keeps the whole tree alive until a collector pass, which then traces all of it."""
    from jaxmem.evaluators.review import engine, registry

    rules = registry.select([], [])
    was = gc.isenabled()
    gc.disable()
    gc.collect()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        findings = engine.check_source(_BRANCHY, "train.py", rules, lambda topic: "")
        assert any(f.code == "JM101" for f in findings)  # the model ran: reaching bindings, rules
        del findings
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
        assert left == [], left[:20]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
