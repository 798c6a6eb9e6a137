"""JM202 jnp-array-from-host-in-loop

What it does
    Flags `jnp.array(...)` / `jnp.asarray(...)` of host data (a NumPy array, a list, a Python
    scalar) inside an eagerly running Python loop.

Why is this bad
    Each conversion is a separate host->device transfer (and for lists, a host-side copy
    first). Small per-iteration transfers add latency that batching removes.

Example
    for row in rows:
        x = jnp.asarray(row)
        acc = acc + x

Use instead
    xs = jnp.asarray(np.stack(rows))      # one transfer
    acc = xs.sum(axis=0)
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules._util import describe

CONVERTERS = frozenset({"jax.numpy.array", "jax.numpy.asarray"})


class JnpArrayFromHostInLoop(Rule):
    code = "JM202"
    name = "jnp-array-from-host-in-loop"
    topic = "batch-transfers"
    severity = "warning"
    message = "`{func}({arg})` converts host data to a device array every iteration: one host->device transfer each"
    fix = "Convert all the data once before the loop (stack it, then one `jnp.asarray`/`jax.device_put`) and index it on device."
    node_types = (ast.Call,)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop or not node.args:
            return
        q = ctx.qualname(node.func)
        if q not in CONVERTERS:
            return
        arg = node.args[0]
        if ctx.kind(arg) in ("np", "list", "scalar"):
            ctx.report(self, node, func=q.replace("jax.numpy.", "jnp."), arg=describe(arg))


RULE = JnpArrayFromHostInLoop()
