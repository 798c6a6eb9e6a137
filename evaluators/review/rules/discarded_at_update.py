"""JM502 discarded-at-update

What it does
    Flags `x.at[...].set(...)` (or `.add`, ...) used as a statement, its result thrown away.
    Not in Pallas kernels or on Refs (`x_ref.at[...]`, `jax.new_ref`), where `.at` is a view
    of mutable memory.

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

from jaxmem.evaluators.review.astutil import displayed
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.rules.at_set_in_python_loop import at_update_base


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
        if base is None or _is_ref(base, ctx) or displayed(node):
            return  # a notebook cell's last expression is shown: `arr.at[3].set(10)` as a demonstration
        ctx.report(self, node, expr=describe(node.value), name=describe(base))


def _in_kernel(ctx: Ctx) -> bool:
    scope = ctx.scope
    while scope is not None:
        if "pallas" in scope.reasons:
            return True
        scope = scope.parent
    return False


def _is_ref(base: ast.AST, ctx: Ctx) -> bool:
    """A Pallas or JAX Ref: `ref.at[...]` is a view of mutable memory, and writes through it are real."""
    if _in_kernel(ctx):
        return True
    root = base
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    if isinstance(root, ast.Name):
        if root.id.endswith("_ref") or root.id == "ref":
            return True
        b = ctx.analysis.resolve(root.id, ctx.scope)
        if b is not None and isinstance(b.value, ast.Call) and (ctx.qualname(b.value.func) or "").endswith(
                ("new_ref", "empty_ref", ".Ref")):
            return True
    return False


RULE = DiscardedAtUpdate()
