"""JM804 removed-clear-backends

What it does
    Flags `jax.clear_backends()` (and `jax.lib.xla_bridge._clear_backends()`), except where the
    code already copes with its absence (`if hasattr(jax, "clear_backends"):`, or a `try` with an
    `except AttributeError`): skipping a call that never freed live arrays loses nothing (unlike
    JM204's placement calls, whose fallback may leave data unplaced: those are still reported).

Why is this bad
    It was deprecated in jax 0.4.26 and has since been removed from the `jax` namespace: on
    jax 0.10.2 `jax.clear_backends` raises AttributeError (checked here;
    `jax.extend.backend.clear_backends` remains, for backend plugins, not for freeing memory). It never freed arrays that were still referenced anyway,
    and `jax.clear_caches()` only drops compilation caches. Memory is freed by dropping the
    last reference to an array or calling `Array.delete()`.

Example
    del model
    jax.clear_backends()

Use instead
    params = None                  # drop every reference
    for x in jax.live_arrays():    # or delete what must go now
        x.delete()
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import absence_handled

REMOVED = frozenset({"jax.clear_backends", "jax.lib.xla_bridge._clear_backends"})


class RemovedClearBackends(Rule):
    code = "JM804"
    name = "removed-clear-backends"
    topic = "live-arrays-cleanup"
    severity = "error"
    message = "`{func}` was deprecated in jax 0.4.26 and is gone (AttributeError on 0.10); it never freed live arrays"
    fix = "Drop the references to the arrays (or call `Array.delete()` on them); `jax.clear_caches()` only clears compilation caches."
    node_types = (ast.Call,)
    call_names = REMOVED
    requires = ('clear_backends',)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func)
        if q in REMOVED and not absence_handled(ctx, q.rpartition(".")[2]):
            ctx.report(self, node, func=q)


RULE = RemovedClearBackends()
