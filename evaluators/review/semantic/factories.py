"""What a factory called inside a loop hands to `jax.jit`: a new function on every call (JM301).

`jax.jit(make_step(cfg))` or `init, step = make_solver(fns, dt)` then `jax.jit(step)` in a loop:
unless the factory caches what it returns (which the source may not show), each call makes a new
closure, and each one is traced and compiled again. A guess, never proven.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import flow, loops
from jaxmem.evaluators.review.semantic.loops import loop_bound
from jaxmem.evaluators.review.semantic.names import end_pos, last_name, pos
from jaxmem.evaluators.review.semantic.syncs import builtin_name
from jaxmem.evaluators.review.semantic.walk import Walk


def factory_result(wrapped: ast.AST | None, ctx: Walk) -> str | None:
    """`jax.jit(cfd.funcutils.trajectory(step_fn, n))`: what a factory returns, made by the call
    in the loop, is a new function each time (a closure) unless the factory caches it, which
    the source may not show: a guess. Not a builtin (`getattr` returns what is stored), not a
    library of array functions, not a local def that returns a function defined once."""
    named = None
    if isinstance(wrapped, ast.Name) and ctx.loops:
        # `init, step, _ = make_solver(fns, dt)` earlier in the same loop body, then `jax.jit(step)`
        b = ctx.analysis.resolve(wrapped.id, ctx.scope, pos(wrapped))
        loop = ctx.loops[-1]
        if b is not None and b.how == "assign" and isinstance(b.value, ast.Call) \
                and pos(loop) < pos(b.node) <= end_pos(loop):
            named, wrapped = wrapped.id, b.value
    if not isinstance(wrapped, ast.Call) or builtin_name(ctx, wrapped.func) is not None:
        return None
    if last_name(wrapped.func)[:1].isupper():
        return None  # a callable object (`ConjugateMLL(...)`): equal instances may share the cache
    loop = ctx.loops[-1] if ctx.loops else None
    bound = loop_bound(ctx, loop) if loop is not None else frozenset()
    if any(isinstance(n, ast.Name) and n.id in bound for a in [*wrapped.args, *(k.value for k in wrapped.keywords)]
           for n in astutil.walk(a)) and not _steps_carried_state(ctx, loop, wrapped):
        # `make_train(cfg)` per configuration: each one compiles anyway. Not so in a loop that
        # steps carried state (`state = step(state)`), rebuilding the function from values it
        # computed (bonds broken so far): those values belong in the arguments, compiled once.
        return None
    q = ctx.analysis.qualname(wrapped.func)
    if q is not None and q.startswith(("jax.", "numpy.", "functools.", "operator.")):
        return None
    fn = ctx.analysis.resolve_def(wrapped.func, ctx.scope)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        inner = ctx.analysis.returned_def(fn)  # a def it returns by name
        if not (inner is not None and pos(fn) < pos(inner) <= end_pos(fn)) and not any(
                isinstance(r.value, ast.Lambda) for r in astutil.own_returns(fn)):
            return None  # a local factory that hands back a function defined once (or no function)
    if named is not None:
        return f"`{named}`, which `{ast.unparse(wrapped.func)}(...)` returns in this loop"
    return f"the function `{ast.unparse(wrapped.func)}(...)` returns"


def _steps_carried_state(ctx: Walk, loop: ast.AST | None, call: ast.Call) -> bool:
    """The loop replaces carried state through a call every iteration (`state = step(state)`), and
    what the factory is handed depends on nothing the loop's own target gives (not a sweep over
    configurations): values the stepping computed."""
    if loop is None or not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        return False
    targets = loops.loop_targets(loop)
    if any(isinstance(n, ast.Name) and n.id in targets for a in [*call.args, *(k.value for k in call.keywords)]
           for n in astutil.walk(a)):
        return False
    return next(flow.replaced_state_calls(ctx.analysis, loop, ctx.scope), None) is not None
