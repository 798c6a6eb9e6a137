"""The walk's position, as the model's predicates see it.

The engine walks a module once; at each node the rule context knows the analysis, the scope, the
loops of the current function and the stack of nodes down to this one. Predicates about "where
are we" (inside a periodic branch, in a hot loop, after a wait) read that position. This Protocol
names what they read, so the model never imports the rule layer above it.
"""
from __future__ import annotations

import ast
from typing import Protocol

from jaxmem.evaluators.review.semantic.jit import JitInfo
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import LOOP_TYPES
from jaxmem.evaluators.review.semantic.scopes import Scope


class Walk(Protocol):
    analysis: Analysis
    scope: Scope
    loops: list[ast.AST]  # loops (and comprehensions) of the current function, outermost first
    stack: list[ast.AST]  # nodes from the module down to the current one
    memo: dict  # per-file results, keyed by the predicate's name
    per_step: ast.Call | None  # in a function a host loop calls every step: that call

    @property
    def per_step_body(self) -> bool: ...

    def kind(self, expr: ast.AST, strict: bool = False) -> str | None: ...

    def qualname(self, expr: ast.AST) -> str | None: ...

    def jit_info(self, func: ast.AST) -> JitInfo | None: ...


class At:
    """A position outside the walk (a scope and nothing enclosing): for facts the model works
    out ahead of time, such as a loop's role, with the same predicates the walk uses."""

    def __init__(self, analysis: Analysis, scope: Scope):
        self.analysis, self.scope = analysis, scope
        self.loops: list[ast.AST] = []
        self.stack: list[ast.AST] = []
        self.memo = analysis.memo
        self.per_step = None

    @property
    def per_step_body(self) -> bool:
        return False

    def kind(self, expr: ast.AST, strict: bool = False) -> str | None:
        return self.analysis.kind(expr, self.scope, strict)

    def qualname(self, expr: ast.AST) -> str | None:
        return self.analysis.qualname(expr)

    def jit_info(self, func: ast.AST) -> JitInfo | None:
        return self.analysis.jit_info(func, self.scope)


def statement_loop(ctx: Walk) -> ast.AST | None:
    """The innermost statement loop (not a comprehension) of this function around the node."""
    return next((loop for loop in reversed(ctx.loops) if isinstance(loop, LOOP_TYPES)), None)


def in_scope(ctx, scope, read):
    """`read(ctx)` asked with `ctx` moved into `scope` (a function's own), and moved back after."""
    saved, ctx.scope = ctx.scope, scope
    try:
        return read(ctx)
    finally:
        ctx.scope = saved


def in_body(fn: ast.AST, ctx, key: str, empty, read):
    """`read(ctx)` asked in `fn`'s own scope, once per function (`empty` for a traced body, whose
    values are tracers, or one without a scope, and while the answer is being read: a recursion
    reads `empty`)."""
    memo = ctx.memo.setdefault(key, {})
    if fn not in memo:
        memo[fn] = empty
        scope = ctx.analysis.scopes.get(fn)
        if scope is not None and not scope.traced:
            memo[fn] = in_scope(ctx, scope, read)
    return memo[fn]
