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

    Not flagged: a read inside `try:` whose handler catches the TypeError, or under an `if` that
    tests the platform (`if dev.platform == "gpu":`).

Use instead
    stats = jax.devices()[0].memory_stats() or {}
    used = stats.get("bytes_in_use")
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
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
                and value.func.attr == "memory_stats") and not _guarded(node, ctx):
            ctx.report(self, node)


# What a handler must catch for the TypeError to be handled.
_CATCHES = frozenset({"TypeError", "Exception", "BaseException"})
# Words of a test that picks the platform: `if dev.platform == "gpu":`, `if backend != "cpu":`.
_PLATFORM = ("platform", "device_kind", "backend", "gpu", "tpu", "cuda")


def _guarded(node: ast.AST, ctx: Ctx) -> bool:
    """The read sits in a `try:` whose handler catches the TypeError (`except Exception:`, a bare
    `except:`), or in the body of an `if` that tests the platform: the CPU backend never reaches
    it or its failure is handled."""
    stack = ctx.stack
    for parent, child in zip(stack, stack[1:]):
        if isinstance(parent, ast.Try) and child in parent.body and any(
                h.type is None or _names(h.type) & _CATCHES for h in parent.handlers):
            return True
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and _platform_test(parent.test):
            return True
    return False


def _platform_test(test: ast.AST) -> bool:
    strings = {n.value for n in astutil.walk(test) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return any(w.lower().startswith(_PLATFORM) for w in _names(test) | strings)


def _names(expr: ast.AST) -> set[str]:
    """The names and attribute names an expression mentions (`jax.errors.X` -> jax, errors, X)."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in astutil.walk(expr)
            if isinstance(n, (ast.Name, ast.Attribute))}


RULE = MemoryStatsUnguarded()
