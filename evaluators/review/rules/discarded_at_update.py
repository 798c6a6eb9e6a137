"""JM502 discarded-at-update

What it does
    Flags `x.at[...].set(...)` (or `.add`, ...) used as a statement, its result thrown away.

Why is this bad
    JAX arrays are immutable: `.at[].set` returns a new array and leaves `x` unchanged. The
    statement computes (and, outside jit, allocates) a full copy for nothing, and the update
    the code meant to make never happens.

Example
    x.at[0].set(1.0)

Use instead
    x = x.at[0].set(1.0)
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules.at_set_in_python_loop import at_update_base
from evaluators.review.rules._util import describe


class DiscardedAtUpdate(Rule):
    code = "JM502"
    name = "discarded-at-update"
    topic = "in-place-updates"
    severity = "error"
    message = "the result of `{expr}` is discarded: JAX arrays are immutable, so `{name}` is not updated"
    fix = "Assign the result: `{name} = {name}.at[...]...(...)`."
    node_types = (ast.Expr,)
    requires = ('.at[',)

    def check(self, node: ast.Expr, ctx: Ctx) -> None:
        base = at_update_base(node.value)
        if base is not None:
            name = describe(base)
            ctx.report(self, node, expr=describe(node.value), name=name)


RULE = DiscardedAtUpdate()
