"""JM503 long-python-loop-in-jit

What it does
    Flags a Python `for ... in range(N)` inside a jitted (or scanned) function when N is a
    literal or module constant of at least 32, or comes from an array shape.

Why is this bad
    Tracing runs the Python loop and records every iteration: the compiled program holds N
    copies of the body. Compile time and program size grow with N (measured here: 5.4 s ->
    0.8 s and 781k -> 50k characters of HLO after switching to `lax.scan`), and with
    rematerialisation only a scanned body gets the memory saving.

Example
    @jax.jit
    def run(x):
        for _ in range(1000):
            x = layer(x)
        return x

Use instead
    @jax.jit
    def run(x):
        return lax.fori_loop(0, 1000, lambda i, x: layer(x), x)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule

LONG = 32


class LongPythonLoopInJit(Rule):
    code = "JM503"
    name = "long-python-loop-in-jit"
    topic = "scan-over-loops"
    severity = "warning"
    message = "Python loop of {n} iterations inside a jitted function is unrolled: {n} copies of the body are compiled"
    fix = "Use `lax.fori_loop` or `lax.scan` so the body is compiled once (carry the loop state explicitly)."
    node_types = (ast.For,)
    requires = ('jit', 'pmap', 'lax')

    def check(self, node: ast.For, ctx: Ctx) -> None:
        if not ctx.scope.jitted:
            return
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args):
            return
        stop = it.args[0] if len(it.args) == 1 else it.args[1]
        n = self._trip_count(stop, ctx)
        if n is not None:
            # `range(x.shape[0])` is long only if the data is: a guess (3 spatial axes are common).
            ctx.report(self, node, n=n, sure=n[0].isdigit())

    @staticmethod
    def _trip_count(stop: ast.AST, ctx: Ctx) -> str | None:
        if isinstance(stop, ast.Constant) and isinstance(stop.value, int):
            return f"{stop.value:,}" if stop.value >= LONG else None
        if isinstance(stop, ast.Name):
            value = module_int(stop.id, ctx)
            return f"{value:,}" if value is not None and value >= LONG else None
        # range(x.shape[0]): as many iterations as the data is long
        if isinstance(stop, ast.Subscript) and isinstance(stop.value, ast.Attribute) and stop.value.attr == "shape":
            return ast.unparse(stop)
        return None


def module_int(name: str, ctx: Ctx) -> int | None:
    """`N = 120` or `STEPS, BATCH = 120, 32` at module level."""
    for stmt in ctx.analysis.tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            pairs = [(target, stmt.value)]
            if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(target.elts) == len(stmt.value.elts):
                pairs = list(zip(target.elts, stmt.value.elts))
            for t, v in pairs:
                if isinstance(t, ast.Name) and t.id == name and isinstance(v, ast.Constant) and type(v.value) is int:
                    return v.value
    return None


RULE = LongPythonLoopInJit()
