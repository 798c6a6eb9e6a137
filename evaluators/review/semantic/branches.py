"""Branches that run once per N steps: `if step % N == 0:` and what sits under one.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS
from jaxmem.evaluators.review.semantic.sizes import SMALL_LOOP, trip_count
from jaxmem.evaluators.review.semantic.walk import Walk


def periodic_guard(node: ast.AST, child: ast.AST | None = None) -> bool:
    """`if step % N == 0:` (any `%` in the test): its body runs every N-th iteration. With
    `child` (the next node down the stack), only when the child is in the body, not the `else:`."""
    return (isinstance(node, ast.If) and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                                             for n in ast.walk(node.test))
            and (child is None or child in node.body))

def under_periodic_guard(ctx: Walk) -> bool:
    """Inside the body of `if step % N == 0:` within the innermost loop."""
    loop = ctx.loops[-1] if ctx.loops else None
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        if stack[i] is loop:
            return False
        if periodic_guard(stack[i], stack[i + 1]):
            return True
    return False

def short_under_guard(ctx: Walk) -> bool:
    """`if step % N == 0:` around a short inner loop: `for split, ds in eval_sets.items()` over
    two splits, `{k: float(v) for k, v in metrics.items()}`. The reads run a handful of times
    every N steps. An inner loop of unknown length under the guard (an evaluation over a whole
    data set) still counts: its reads happen once per batch."""
    loops = ctx.loops
    guard_at = None
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        if periodic_guard(node, stack[i + 1]) and any(l in stack[:i] for l in loops):
            guard_at = i  # the innermost such guard wins
    if guard_at is None:
        return False
    inner = [l for l in loops if l in ctx.stack[guard_at:]]
    if not inner:
        return False
    total = 1
    for loop in inner:
        if isinstance(loop, COMPREHENSIONS):
            continue  # one expression over the items of a value: a handful of reads
        it = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        n = trip_count(it, ctx.analysis, ctx.scope) if it is not None else None
        if n is None:
            return False
        total *= n
    return total <= SMALL_LOOP
