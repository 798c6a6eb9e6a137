"""JM703 memory-stats-unguarded

What it does
    Flags indexing the result of `device.memory_stats()` directly, as in
    `jax.devices()[0].memory_stats()["bytes_in_use"]`.

Why is this bad
    `memory_stats()` returns a dict on GPU and TPU but `None` on the CPU backend (checked on
    jax 0.10.2). The same script then fails with `TypeError: 'NoneType' object is not
    subscriptable` on a laptop or in CPU-only CI.

Example
    used = jax.devices()[0].memory_stats()["bytes_in_use"]

Use instead
    stats = jax.devices()[0].memory_stats() or {}
    used = stats.get("bytes_in_use")
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule


class MemoryStatsUnguarded(Rule):
    code = "JM703"
    name = "memory-stats-unguarded"
    topic = "memory-profiling"
    severity = "info"
    message = "`memory_stats()` returns None on the CPU backend: indexing it directly raises TypeError there"
    fix = "Guard it: `stats = device.memory_stats() or {}` and read keys with `.get`."
    node_types = (ast.Subscript,)
    requires = ('memory_stats',)

    def check(self, node: ast.Subscript, ctx: Ctx) -> None:
        value = node.value
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr == "memory_stats"):
            ctx.report(self, node)


RULE = MemoryStatsUnguarded()
