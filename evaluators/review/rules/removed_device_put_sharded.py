"""JM204 removed-device-put-sharded

What it does
    Flags `jax.device_put_sharded` and `jax.device_put_replicated`.

Why is this bad
    Both were deprecated in the 0.8 series; on jax 0.10.2 calling either raises
    `AttributeError: jax.device_put_sharded is deprecated; use jax.device_put instead`
    (checked here). Code using them no longer places any data.

Example
    xs = jax.device_put_sharded(list(shards), jax.devices())

Use instead
    mesh = jax.make_mesh((len(jax.devices()),), ("d",))
    xs = jax.device_put(np.stack(shards), NamedSharding(mesh, P("d")))
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule

REMOVED = frozenset({"jax.device_put_sharded", "jax.device_put_replicated"})


class RemovedDevicePutSharded(Rule):
    code = "JM204"
    name = "removed-device-put-sharded"
    topic = "explicit-device-put"
    severity = "error"
    message = "`{func}` is deprecated and raises AttributeError on jax 0.10: no data is placed"
    fix = "Use `jax.device_put(x, sharding)` with a `NamedSharding` (stack the shards first for the sharded case)."
    node_types = (ast.Call,)
    call_names = REMOVED
    requires = ('device_put_sharded', 'device_put_replicated')

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func)
        if q in REMOVED:
            ctx.report(self, node, func=q)


RULE = RemovedDevicePutSharded()
