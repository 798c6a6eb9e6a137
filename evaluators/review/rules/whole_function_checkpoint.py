"""JM801 whole-function-checkpoint

What it does
    Flags `jax.grad(jax.checkpoint(loss))` (also `value_and_grad`, `vjp`, the `nnx`/Equinox
    versions, and a function decorated with or wrapped by `jax.checkpoint` / `jax.remat` that
    is then differentiated as a whole). The name is resolved by scope and definition order:
    another function of the same name elsewhere does not count. Not flagged: a checkpoint with
    a `policy=` (it saves what the policy names and can cut memory), and code inside a
    scanned or `custom_vjp` body, where the checkpointed function is one block of a larger
    differentiated program.

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

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.names import pos

DIFF = frozenset({"jax.grad", "jax.value_and_grad", "jax.vjp", "jax.jacrev", "flax.nnx.grad",
                  "flax.nnx.value_and_grad", "equinox.filter_grad", "equinox.filter_value_and_grad"})
CKPT = frozenset({"jax.checkpoint", "flax.nnx.remat", "flax.nnx.checkpoint", "equinox.filter_checkpoint"})


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
        if q not in DIFF or not node.args or self._inside_block(ctx):
            return
        if self._checkpointed(node.args[0], ctx):
            ctx.report(self, node, func=q.replace("flax.nnx.", "nnx.").replace("equinox.", "eqx."))

    @staticmethod
    def _inside_block(ctx: Ctx) -> bool:
        scope = ctx.scope
        while scope is not None:
            if scope.reasons & {"control", "custom"}:
                return True
            scope = scope.parent
        return False

    def _checkpointed(self, fn: ast.AST, ctx: Ctx) -> bool:
        if isinstance(fn, ast.Call):
            return self._checkpoint_call(fn, ctx)
        if isinstance(fn, ast.Name):
            b = ctx.analysis.resolve(fn.id, ctx.scope, pos(fn))
            if b is None:
                return False
            if b.how == "def":
                return any(self._checkpoint_decorator(d, ctx) for d in b.node.decorator_list)
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Call):
                return self._checkpoint_call(b.value, ctx)
        return False

    def _checkpoint_call(self, call: ast.Call, ctx: Ctx) -> bool:
        """`jax.checkpoint(f)` without a policy (`partial(jax.checkpoint, ...)` alone only makes a decorator)."""
        return ctx.qualname(call.func) in CKPT and bool(call.args) and not _has_policy(call)

    def _checkpoint_decorator(self, dec: ast.AST, ctx: Ctx) -> bool:
        if isinstance(dec, ast.Call):
            q = ctx.qualname(dec.func)
            if q == "functools.partial" and dec.args:
                return ctx.qualname(dec.args[0]) in CKPT and not _has_policy(dec)
            return q in CKPT and not _has_policy(dec)
        return ctx.qualname(dec) in CKPT


def _has_policy(call: ast.Call) -> bool:
    return any(k.arg == "policy" for k in call.keywords)


RULE = WholeFunctionCheckpoint()
