"""JM803 arrays-accumulated-across-steps

What it does
    Flags `history.append(x)` in a loop when `x` is a device array that the loop threads
    from step to step (`x = step(x)`), or the direct, non-scalar result of a jitted or
    `jnp` call (`outs.append(predict(params, batch))`).

Why is this bad
    The list holds a reference to every step's buffer, so none of them can be freed: device
    memory grows linearly with the number of steps until it runs out. Keeping every version
    of a model state is the usual way long runs OOM late.

Example
    for batch in batches:
        params = update(params, batch)
        history.append(params)

Use instead
    for i, batch in enumerate(batches):
        params = update(params, batch)
        if i % 1000 == 0:
            history.append(jax.device_get(params))   # host copy, device buffer can be freed
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules._util import describe

REDUCTIONS = frozenset({"sum", "mean", "max", "min", "norm", "prod", "std", "var", "argmax", "argmin", "all", "any"})


class ArraysAccumulatedAcrossSteps(Rule):
    code = "JM803"
    name = "arrays-accumulated-across-steps"
    topic = "live-arrays-cleanup"
    severity = "warning"
    message = "`{what}` appended every iteration keeps each step's device buffer alive: memory grows with the step count"
    fix = "Keep only what you need: append a host copy (`jax.device_get`) every N steps, a reduced scalar, or overwrite one slot."
    node_types = (ast.Call,)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop or len(node.args) != 1:
            return
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append"):
            return
        arg = node.args[0]
        if isinstance(arg, ast.Name) and ctx.kind(arg) == "jax" and self._threaded(arg.id, ctx):
            ctx.report(self, node, what=arg.id)
        elif isinstance(arg, ast.Call) and ctx.kind(arg) == "jax" and not self._reduced(arg, ctx):
            ctx.report(self, node, what=describe(arg))

    @staticmethod
    def _threaded(name: str, ctx: Ctx) -> bool:
        """`name = f(name, ...)` somewhere in the innermost loop: a carried state."""
        loop = ctx.loops[-1]
        for stmt in ast.walk(loop):
            if isinstance(stmt, ast.Assign) and any(
                isinstance(n, ast.Name) and n.id == name for t in stmt.targets for n in ast.walk(t)
            ) and any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(stmt.value)):
                return True
        return False

    @staticmethod
    def _reduced(call: ast.Call, ctx: Ctx) -> bool:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else None
        q = ctx.qualname(func) or ""
        if (name in REDUCTIONS or q.rsplit(".", 1)[-1] in REDUCTIONS) and not any(k.arg == "axis" for k in call.keywords):
            return True
        return name in ("item", "tolist")


RULE = ArraysAccumulatedAcrossSteps()
