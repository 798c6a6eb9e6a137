"""JM802 checkpoint-in-scan-without-prevent-cse

What it does
    Flags `lax.scan(jax.checkpoint(body), ...)` (or a scan body decorated with
    `jax.checkpoint`) that keeps the default `prevent_cse=True`.

Why is this bad
    `prevent_cse=True` inserts optimisation barriers so XLA cannot merge the recomputation
    back into the forward pass. Inside `scan` that protection is unnecessary (the loop
    structure already prevents it) and the barriers can cost performance. JAX's docs suggest
    `prevent_cse=False` for checkpointed scan bodies. Information only.

Example
    carry, ys = lax.scan(jax.checkpoint(body), carry, xs)

Use instead
    carry, ys = lax.scan(jax.checkpoint(body, prevent_cse=False), carry, xs)
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule

CKPT = "jax.checkpoint"


def _prevents_cse(keywords: list[ast.keyword]) -> bool:
    for kw in keywords:
        if kw.arg == "prevent_cse":
            return not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
    return True


class CheckpointInScanWithoutPreventCse(Rule):
    code = "JM802"
    name = "checkpoint-in-scan-without-prevent-cse"
    topic = "gradient-checkpointing"
    severity = "info"
    message = "checkpointed `lax.scan` body keeps prevent_cse=True: unneeded optimisation barriers inside scan"
    fix = "Pass `prevent_cse=False` to `jax.checkpoint` for scan bodies."
    node_types = (ast.Call,)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if ctx.qualname(node.func) != "jax.lax.scan" or not node.args:
            return
        body = node.args[0]
        if isinstance(body, ast.Call) and ctx.qualname(body.func) == CKPT and _prevents_cse(body.keywords):
            ctx.report(self, body)
        elif isinstance(body, ast.Name):
            fn = ctx.analysis.functions.get(body.id)
            for dec in getattr(fn, "decorator_list", ()):
                if ctx.qualname(dec) == CKPT:
                    ctx.report(self, node)
                elif isinstance(dec, ast.Call):
                    q = ctx.qualname(dec.func)
                    if q == CKPT and not dec.args and _prevents_cse(dec.keywords):
                        ctx.report(self, node)
                    elif q == "functools.partial" and dec.args and ctx.qualname(dec.args[0]) == CKPT and _prevents_cse(dec.keywords):
                        ctx.report(self, node)


RULE = CheckpointInScanWithoutPreventCse()
