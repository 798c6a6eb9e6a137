"""JM902 float64-dtype

What it does
    Flags JAX arrays requested as float64: `dtype=jnp.float64` (or `"float64"`,
    `np.float64`) in a `jnp`/`jax.random` call, `.astype(jnp.float64)` on a JAX array, and
    `jnp.float64(x)`.

Why is this bad
    With x64 enabled a float64 array takes twice the memory and transfer bytes of float32.
    Without it, JAX silently truncates to float32 with a UserWarning (checked on jax 0.10.2),
    so the code does not do what it says either way.

Example
    x = jnp.zeros((4096, 4096), dtype=jnp.float64)

Use instead
    x = jnp.zeros((4096, 4096), dtype=jnp.float32)     # or bfloat16 for storage
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule

F64 = frozenset({"jax.numpy.float64", "numpy.float64", "jax.numpy.double", "numpy.double",
                 "jax.numpy.complex128", "numpy.complex128"})
F64_STR = frozenset({"float64", "f8", "complex128", "double"})


def is_f64(node: ast.AST, ctx: Ctx) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in F64_STR
    return ctx.qualname(node) in F64


class Float64Dtype(Rule):
    code = "JM902"
    name = "float64-dtype"
    topic = "mixed-precision"
    severity = "info"
    message = "`{expr}` asks JAX for a 64-bit array: twice the memory and transfer size (or silently float32 without x64)"
    fix = "Use float32 (or bfloat16 for storage); keep float64 on the host or in an explicitly enabled x64 region."
    node_types = (ast.Call,)
    requires = ('float64', 'double', 'complex128', 'f8')

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func) or ""
        if q in F64 and q.startswith("jax."):
            ctx.report(self, node, expr=q.replace("jax.numpy.", "jnp."))
            return
        if q.startswith(("jax.numpy.", "jax.random.", "jax.device_put")):
            for kw in node.keywords:
                if kw.arg == "dtype" and is_f64(kw.value, ctx):
                    ctx.report(self, kw.value, expr=f"dtype={ast.unparse(kw.value)}")
                    return
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "astype" and node.args
                and is_f64(node.args[0], ctx) and ctx.kind(func.value) == "jax"):
            ctx.report(self, node, expr=f".astype({ast.unparse(node.args[0])})")


RULE = Float64Dtype()
