"""JM303 changing-static-arg-in-loop

What it does
    Flags a call of a jitted function, inside a loop, whose static argument
    (`static_argnums`/`static_argnames`) is the loop variable or is re-bound in the loop.

Why is this bad
    Static arguments are part of the compilation cache key: every new value compiles the
    function again. Measured on jax 0.10.2 (CPU): 3 iterations with a changing static
    argument compiled 3 times.

Example
    @partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    for n in range(10):
        y = power(x, n)

Use instead
    @jax.jit
    def power(x, n):          # n traced: one compilation
        return x ** n
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules._util import enclosing_loop_of


class ChangingStaticArgInLoop(Rule):
    code = "JM303"
    name = "changing-static-arg-in-loop"
    topic = "jit-compilation"
    severity = "warning"
    message = "static argument `{arg}` of jitted `{func}` changes every iteration: one compilation per distinct value"
    fix = "Make the argument traced (drop it from static_argnums/static_argnames) or keep it constant across the loop."
    node_types = (ast.Call,)
    requires = ('static_arg',)
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop:
            return
        info = ctx.jit_info(node.func)
        if info is None:
            return
        positions = info.static_positions()
        names = info.static_names()
        if not positions and not names:
            return
        candidates = [a for i, a in enumerate(node.args) if i in positions]
        candidates += [kw.value for kw in node.keywords if kw.arg in names]
        for arg in candidates:
            if isinstance(arg, ast.Name) and enclosing_loop_of(ctx, arg.id) is not None:
                func = ast.unparse(node.func)
                ctx.report(self, arg, arg=arg.id, func=func)
                return


RULE = ChangingStaticArgInLoop()
