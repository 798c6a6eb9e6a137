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
