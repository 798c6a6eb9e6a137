"""JM803 arrays-accumulated-across-steps

What it does
    Flags `history.append(x)` in a loop when `x` is a device array produced by the loop's
    state update: the carried state itself (`x = step(x)`) or another output of that update
    (`w, grad = step(w, batch)`). Names that read as scalars (loss, accuracy, norm, ...) are
    not flagged: collecting device scalars and reading them once is the fix for per-step syncs.

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
from evaluators.review.rules._util import loop_targets

# Conventional names of per-step scalars: holding a few hundred of them costs nothing.
SCALAR_HINTS = ("loss", "acc", "metric", "norm", "err", "score", "reward", "perplex", "lr", "value")


class ArraysAccumulatedAcrossSteps(Rule):
    code = "JM803"
    name = "arrays-accumulated-across-steps"
    topic = "live-arrays-cleanup"
    severity = "warning"
    message = "`{what}` appended every iteration keeps each step's device buffer alive: memory grows with the step count"
    fix = "Keep only what you need: append a host copy (`jax.device_get`) every N steps, a reduced scalar, or overwrite one slot."
    node_types = (ast.Call,)
    requires = ('.append(',)
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop or len(node.args) != 1:
            return
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append"):
            return
        arg = node.args[0]
        if (isinstance(arg, ast.Name) and ctx.kind(arg) == "jax"
                and not any(h in arg.id.lower() for h in SCALAR_HINTS) and self._from_state_update(arg.id, ctx)):
            ctx.report(self, node, what=arg.id)

    @staticmethod
    def _from_state_update(name: str, ctx: Ctx) -> bool:
        """Bound in the innermost loop by `a, ... = f(a, ...)`: an update of a carried state.

        The loop's own targets are re-bound from the iterable every iteration, so updating
        them (`x = transform(x)`) carries nothing across steps.
        """
        loop = ctx.loops[-1]
        if name in loop_targets(loop):
            return False
        for stmt in ast.walk(loop):
            if not isinstance(stmt, ast.Assign):
                continue
            stored = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if name not in stored:
                continue
            loaded = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if (stored & loaded) - loop_targets(loop):
                return True
        return False


RULE = ArraysAccumulatedAcrossSteps()
