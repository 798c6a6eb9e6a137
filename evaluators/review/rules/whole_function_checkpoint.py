"""JM801 whole-function-checkpoint

What it does
    Flags `jax.grad(jax.checkpoint(loss))` (also `value_and_grad`, `vjp`, and a function
    decorated with or wrapped by `jax.checkpoint` / `jax.remat` that is then differentiated
    as a whole).

Why is this bad
    Checkpointing saves memory by dropping residuals inside a region and recomputing them
    when the backward pass reaches it. When the region is the entire differentiated function,
    the backward pass starts by recomputing all of it and holds every residual again: the peak
    is the same, and the forward pass runs twice.

Example
    grads = jax.grad(jax.checkpoint(loss_fn))(params, batch)

Use instead
    def loss_fn(params, batch):
        x = batch
        for layer in params:
            x = jax.checkpoint(block)(layer, x)    # checkpoint each block
        return jnp.mean(x ** 2)

    grads = jax.grad(loss_fn)(params, batch)
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule

DIFF = frozenset({"jax.grad", "jax.value_and_grad", "jax.vjp", "jax.jacrev"})
CKPT = "jax.checkpoint"


class WholeFunctionCheckpoint(Rule):
    code = "JM801"
    name = "whole-function-checkpoint"
    topic = "gradient-checkpointing"
    severity = "warning"
    message = "`{func}` differentiates a function that is checkpointed as a whole: this saves no memory and recomputes the forward pass"
    fix = "Checkpoint the inner blocks (each layer, or the `lax.scan` body) instead of the whole differentiated function."
    node_types = (ast.Call,)
    call_names = DIFF
    requires = ('checkpoint', 'remat')

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func)
        if q not in DIFF or not node.args:
            return
        fn = node.args[0]
        if self._checkpointed(fn, ctx):
            ctx.report(self, node, func=q)

    def _checkpointed(self, fn: ast.AST, ctx: Ctx) -> bool:
        if isinstance(fn, ast.Call):
            q = ctx.qualname(fn.func)
            if q == CKPT:
                return True
            if q == "functools.partial" and fn.args and ctx.qualname(fn.args[0]) == CKPT:
                return False  # partial(checkpoint, ...) alone is a decorator maker, not an application
            return False
        if isinstance(fn, ast.Name):
            names = ctx.memo.get("checkpointed")
            if names is None:
                names = ctx.memo["checkpointed"] = self._checkpointed_names(ctx)
            return fn.id in names
        return False

    @staticmethod
    def _checkpointed_names(ctx: Ctx) -> set[str]:
        out = set()
        for name, fn in ctx.analysis.functions.items():
            for dec in fn.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                q = ctx.qualname(target)
                if q == "functools.partial" and isinstance(dec, ast.Call) and dec.args:
                    q = ctx.qualname(dec.args[0])
                if q == CKPT:
                    out.add(name)
        for scope in ctx.analysis.scopes.values():
            for target, value, is_iter in scope.assigns:
                if (not is_iter and isinstance(target, ast.Name) and isinstance(value, ast.Call)
                        and ctx.qualname(value.func) == CKPT):
                    out.add(target.id)
        return out


RULE = WholeFunctionCheckpoint()
