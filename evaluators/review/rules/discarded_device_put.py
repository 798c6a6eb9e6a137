"""JM207 discarded-device-put

What it does
    Flags `jax.device_put(...)` (also `device_put_replicated`, `device_put_sharded`) written as a
    statement of its own, its result thrown away: the typical prefetcher that calls
    `jax.device_put(batch)` on the next batch and then yields the host batch. Not flagged: an
    argument that is already a device array (nothing is left on the host).

Why is this bad
    `device_put` does not move its argument: it returns a new device array and leaves the input
    where it was. A dropped result is a host->device copy made for nothing: the code that follows
    still holds the host array, so nothing is prefetched or placed, and the transfer it meant to
    overlap happens again, synchronously, when the host array reaches a jitted call.

Example
    def prefetch(batches):
        for batch in batches:
            jax.device_put(batch)
            yield batch

Use instead
    def prefetch(batches):
        for batch in batches:
            yield jax.device_put(batch)      # or keep a queue of two device batches
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule

PUTS = frozenset({"jax.device_put", "jax.device_put_replicated", "jax.device_put_sharded"})


class DiscardedDevicePut(Rule):
    code = "JM207"
    name = "discarded-device-put"
    topic = "prefetch-to-device"
    severity = "warning"
    message = "the result of `{func}` is thrown away: the copy is made for nothing and the data stays on the host"
    fix = "Use the returned array (`x = jax.device_put(x)`, `yield jax.device_put(batch)`); device_put never moves its argument in place."
    node_types = (ast.Expr,)
    requires = ("device_put",)

    def check(self, node: ast.Expr, ctx: Ctx) -> None:
        call = node.value
        if isinstance(call, ast.Call) and ctx.qualname(call.func) in PUTS and not ctx.scope.traced:
            if call.args and ctx.kind(call.args[0]) == "jax":
                # `jax.device_put(jnp.zeros(1))`: already on a device, so nothing stays on the
                # host; at most a useless device->device copy (12zzj's judges).
                return
            ctx.report(self, call, func=ctx.qualname(call.func).replace("jax.", "jax.", 1))


RULE = DiscardedDevicePut()
