"""JM309 clear-caches-in-loop

What it does
    Flags `jax.clear_caches()` called inside a Python loop that trains, steps state, evaluates
    or runs epochs (or in a function such a loop calls every step) when that loop also calls
    jitted functions: after every clear they are traced and compiled again. Not in a benchmark
    (a function registered with a benchmark harness or named as one), where clearing the caches
    is how compile time is measured, nor in a sweep over configurations, which compile anyway.

Why is this bad
    `jax.clear_caches()` drops every compiled program and trace cache of the process. It frees
    no arrays (the live arrays keep their memory), so as a memory fix it does nothing, and the
    next call of each jitted function pays for tracing and compilation again. Measured on jax
    0.10.2 (CPU, `benchmarks/claims/jm309_clear_caches_in_loop.py`): the same jitted function
    on arrays of one shape compiled once in 5 iterations, 5 times with `jax.clear_caches()` in
    every iteration, 3 times with it every second iteration.

Example
    for i, batch in enumerate(batches):
        samples = sample(params, batch)      # jitted
        if i % 10 == 0:
            jax.clear_caches()

Use instead
    for batch in batches:
        samples = sample(params, batch)      # compiled once, reused
    # to free device memory, drop the references to arrays you no longer need (`del x`,
    # `x.delete()`); to bound the number of programs, keep input shapes to a few sizes
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.helpers import calls_in
from jaxmem.evaluators.review.semantic.loops import benchmark_function
from jaxmem.evaluators.review.semantic.names import dotted, end_pos, pos
from jaxmem.evaluators.review.semantic.roles import role
from jaxmem.evaluators.review.semantic.walk import statement_loop

# Loops that run the same compiled work again and again (semantic/roles.py).
_HOT = frozenset({"train", "step", "eval", "epoch"})


class ClearCachesInLoop(Rule):
    code = "JM309"
    name = "clear-caches-in-loop"
    topic = "live-arrays-cleanup"
    severity = "warning"
    message = ("`jax.clear_caches()` in this loop drops every compiled program and frees no arrays: jitted `{func}` "
               "is traced and compiled again after each clear")
    unnamed_message = ("`jax.clear_caches()` in this loop drops every compiled program and frees no arrays: the "
                       "compiled work the loop runs is traced and compiled again after each clear")
    fix = ("Remove the call (or clear once, after the loop); free memory by dropping references to arrays "
           "(`del x`, `x.delete()`), and keep input shapes to a few sizes.")
    node_types = (ast.Call,)
    call_names = frozenset({"jax.clear_caches"})
    requires = ("clear_caches",)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if ctx.qualname(node.func) != "jax.clear_caches" or ctx.scope.traced:
            return
        if benchmark_function(ctx.scope, ctx.analysis):
            return  # clearing the caches is how a benchmark times compilation
        loop = statement_loop(ctx)
        if loop is not None:
            if role(ctx.analysis, loop, ctx.scope).role not in _HOT:
                return  # a sweep over configurations or models compiles each one anyway
            body = loop.body
        elif ctx.per_step_body:
            body = getattr(ctx.scope.node, "body", [])  # a function run every step is the iteration
        else:
            return
        jitted = [(c, info) for c in calls_in(body) if (info := ctx.jit_info(c.func)) is not None]
        if loop is not None and any(_made_in(c.func, loop, ctx) for c, _info in jitted):
            return  # it makes its jitted function anew each iteration: that compiles anyway
        if jitted:
            call, info = next(((c, i) for c, i in jitted if i.exact), jitted[0])
            # Sure where the recompiled function is resolved exactly (a jit the model can name).
            ctx.report(self, node, func=dotted(call.func) or "function", sure=info.exact)
        elif loop is not None:
            # The loop's role says it runs compiled or JAX work every iteration, through code the
            # model does not resolve to a jit (a method, a library's sampler): possible.
            ctx.report(self, node, message=self.unnamed_message, sure=False)


def _made_in(func: ast.AST, loop: ast.AST, ctx: Ctx) -> bool:
    """The jitted callable is made inside the loop (`run = jax.jit(...)` per configuration): it
    compiles in every iteration whether the caches are cleared or not."""
    if not isinstance(func, ast.Name):
        return False
    b = ctx.analysis.resolve(func.id, ctx.scope, pos(func))
    return b is not None and pos(loop) <= b.at <= end_pos(loop)


RULE = ClearCachesInLoop()
