"""JM302 large-constant-captured-by-jit

What it does
    Flags a large module-level array (a literal shape of at least 262,144 elements, or one
    loaded from a file) that a jitted function reads as a global instead of taking it as an
    argument.

Why is this bad
    Arrays closed over by a jitted function are embedded in the compiled program as
    constants: the program grows by the array's size, compilation slows down, and every
    distinct jitted function holds its own copy. `JAX_CAPTURED_CONSTANTS_WARN_BYTES` makes JAX
    log such captures.

Example
    TABLE = np.random.rand(2048, 2048)

    @jax.jit
    def lookup(idx):
        return TABLE[idx]

Use instead
    @jax.jit
    def lookup(table, idx):
        return table[idx]

    table = jax.device_put(TABLE)   # once
    lookup(table, idx)
"""
from __future__ import annotations

import ast
import math

from jaxmem.evaluators.review.rule import Ctx, Rule

LARGE_ELEMENTS = 262_144  # 1 MiB of float32
SHAPED = frozenset({"zeros", "ones", "empty", "full"})
FILE_LOADS = frozenset({"numpy.load", "numpy.loadtxt", "numpy.fromfile", "numpy.genfromtxt", "jax.numpy.load"})


def literal_size(call: ast.Call, q: str) -> int | None:
    """Element count of a creation call with literal sizes; None when not visible."""
    fn = q.rsplit(".", 1)[-1]
    shape = None
    for kw in call.keywords:
        if kw.arg in ("shape", "size"):
            shape = kw.value
    if shape is None:
        if fn in SHAPED and call.args:
            shape = call.args[0]
        elif fn in ("rand", "randn") and q.startswith("numpy.random"):
            shape = ast.Tuple(list(call.args))
        elif fn == "arange" and len(call.args) == 1:
            shape = call.args[0]
        elif fn == "eye" and call.args:
            shape = ast.Tuple([call.args[0], call.args[0]])
        elif q.startswith("jax.random.") and len(call.args) >= 2:
            shape = call.args[1]
    if shape is None:
        return None
    dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
    if not all(isinstance(d, ast.Constant) and isinstance(d.value, int) for d in dims):
        return None
    return math.prod(d.value for d in dims)


class LargeConstantCapturedByJit(Rule):
    code = "JM302"
    name = "large-constant-captured-by-jit"
    topic = "jit-compilation"
    severity = "warning"
    message = "module-level array `{name}` ({size}) is captured by a jitted function and compiled into it as a constant"
    fix = "Pass the array as an argument of the jitted function (device_put it once) instead of reading the global."
    node_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    requires = ('jit', 'pmap', 'lax')

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        scope = ctx.analysis.scopes[node]
        # Only the outermost compiled function reports; nested ones are inside its program.
        if not scope.jitted or (scope.parent is not None and scope.parent.jitted):
            return
        large = ctx.memo.get("large_globals")
        if large is None:
            large = ctx.memo["large_globals"] = self._large_globals(ctx)
        if not large:
            return
        seen: set[str] = set()
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        for stmt in body:
            for n in ast.walk(stmt):
                if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in large
                        and n.id not in seen and not self._bound_locally(n.id, scope, ctx)):
                    seen.add(n.id)  # once per function is enough to locate it
                    ctx.report(self, n, name=n.id, size=large[n.id])

    @staticmethod
    def _large_globals(ctx: Ctx) -> dict[str, str]:
        out: dict[str, str] = {}
        for stmt in ctx.analysis.tree.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue
            q = ctx.qualname(stmt.value.func)
            if q is None or not q.startswith(("numpy.", "jax.numpy.", "jax.random.")):
                continue
            if q in FILE_LOADS:
                desc = "loaded from a file"
            else:
                n = literal_size(stmt.value, q)
                if n is None or n < LARGE_ELEMENTS:
                    continue
                desc = f"{n:,} elements"
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = desc
        return out

    @staticmethod
    def _bound_locally(name: str, scope, ctx: Ctx) -> bool:
        while scope is not None and scope is not ctx.analysis.module_scope:
            if name in scope.bindings:
                return True
            scope = scope.parent
        return False


RULE = LargeConstantCapturedByJit()
