"""Garbage collection paced by files, for batch reviews.

A review allocates a few hundred thousand objects per file (the tree, the model's scopes and
bindings). Left to its allocation-count thresholds, the collector runs full passes over everything the
batch still holds many times per file: on the vendored benchmark code that was about a third of
the review's CPU time. Here the collector runs between files, on the young generation every
`YOUNG_EVERY` files. The reviewer itself leaves no cycles behind (the model's `release`, no
recursive closures; test_collector checks a review's garbage): reference counting frees a file's
objects as soon as its review ends (a memo cycle that outlived `release` once kept every tree
until the next pass), so what survives a young pass between files is what the batch keeps on
purpose (the tree's imported modules, their facts and models). Those survivors are frozen, as the
imports are at the start: a later pass never traces them again. Full passes every hundred files
had cost an eighth of a one-job review of the vendored code (0.76 s of 5.9 s) and found almost
nothing (588 objects in 8 passes); whatever cycle a frozen object joins is collected once the
batch ends and the collector is restored.
"""
from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

YOUNG_EVERY = 10


def settle() -> None:
    """A pool worker's start: what it inherited (imports, rules) is frozen once, and its collector
    stays off for its life, as for one batch. Its batches then run `per_file(settled=True)`, which
    leaves both as they are: a full pass at each batch's start traced the worker's imports and
    caches again each time: 3% of a two-worker review's CPU time, for little to collect."""
    gc.collect()
    gc.freeze()
    gc.disable()


@contextmanager
def per_file(settled: bool = False) -> Iterator[Callable[[], None]]:
    """`with per_file() as done:` call `done()` after each file. Restores the collector after,
    unless `settled` (a pool worker's batch, after `settle()`)."""
    was_enabled = gc.isenabled()
    if not settled:
        gc.collect()
        gc.freeze()  # what existed before the batch (imports, rules) is never traced again
        gc.disable()
    count = 0

    def done() -> None:
        nonlocal count
        count += 1
        if count % YOUNG_EVERY == 0:
            gc.collect(0)
            gc.freeze()  # the survivors are the batch's own caches: never traced again

    try:
        yield done
    finally:
        if not settled:
            gc.unfreeze()
            if was_enabled:
                gc.enable()
