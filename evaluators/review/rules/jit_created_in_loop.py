"""JM301 jit-created-in-loop

What it does
    Flags `jax.jit(...)` (including `partial(jax.jit, ...)(f)` and a `@jax.jit` decorated def)
    evaluated inside a Python loop.

Why is this bad
    Each evaluation makes a new jitted callable with an empty cache, so the function is traced
    and compiled again on every iteration. Measured on jax 0.10.2 (CPU): `jax.jit(f)(x)` in a
    3-iteration loop compiled 3 times, with a plain function, a lambda and a partial alike.

Example
    for x in xs:
        y = jax.jit(lambda v: v * scale)(x)

Use instead
    scaled = jax.jit(lambda v, s: v * s)      # created once
    for x in xs:
        y = scaled(x, scale)
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule


class JitCreatedInLoop(Rule):
    code = "JM301"
    name = "jit-created-in-loop"
    topic = "jit-compilation"
    severity = "warning"
    message = "`jax.jit` is applied inside a loop: a new jitted function is traced and compiled every iteration"
    fix = "Create the jitted function once, outside the loop; pass changing values as arguments (static ones via static_argnums)."
    node_types = (ast.Call, ast.FunctionDef)
    requires = ('jit',)
    only_in_host_loops = True

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if not ctx.host_loop:
            return
        if isinstance(node, ast.Call):
            if ctx.analysis.jit_from_call(node) is not None:
                ctx.report(self, node)
        elif node in ctx.analysis.jitted_defs:
            ctx.report(self, node)


RULE = JitCreatedInLoop()
