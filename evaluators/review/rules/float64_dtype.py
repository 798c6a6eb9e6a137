"""JM902 float64-dtype

What it does
    Flags JAX arrays requested as float64 (`dtype=jnp.float64`, `"float64"`, `np.float64` in
    a `jnp`/`jax.random` call, `.astype(jnp.float64)` on a JAX array, `jnp.float64(x)`) when the
    source fixes their size at a million elements or more. Small float64 arrays are left alone:
    in code that turns x64 on for accuracy (molecular dynamics, solvers) they are a deliberate
    choice whose extra bytes cannot matter.

Why is this bad
    Measured on jax 0.10.2 (CPU; `python -m evaluators.review.claims.jm902_float64`): with
    `jax_enable_x64` on, a float64 array takes 8 bytes per element, twice float32
    (`jnp.zeros((1024, 1024), dtype=jnp.float64)`: 8 MiB instead of 4 MiB), and its transfers
    are twice as large. With x64 off the request costs nothing: JAX returns float32 and emits a
    UserWarning ("Explicitly requested dtype float64 ... will be truncated to dtype float32").

Example
    jax.config.update("jax_enable_x64", True)
    x = jnp.zeros((4096, 4096), dtype=jnp.float64)    # 128 MiB; float32 would be 64 MiB

Use instead
    x = jnp.zeros((4096, 4096), dtype=jnp.float32)     # or bfloat16 for storage
    # keep float64 for the values whose accuracy needs it
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import sizes

F64 = frozenset({"jax.numpy.float64", "numpy.float64", "jax.numpy.double", "numpy.double",
                 "jax.numpy.complex128", "numpy.complex128"})
F64_STR = frozenset({"float64", "f8", "complex128", "double"})
LARGE_ELEMENTS = 1 << 20  # 8 MiB in float64 against 4 MiB in float32


def is_f64(node: ast.AST, ctx: Ctx) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in F64_STR
    return ctx.qualname(node) in F64


class Float64Dtype(Rule):
    code = "JM902"
    name = "float64-dtype"
    topic = "mixed-precision"
    severity = "info"
    message = ("`{expr}` asks for a float64 array of {n} elements: with jax_enable_x64 on it takes {mib64} MiB, "
               "twice float32 ({mib32} MiB); with x64 off JAX gives float32 and a UserWarning")
    fix = "Use float32 (or bfloat16 for storage) for large arrays; keep float64 for the values whose accuracy needs it."
    node_types = (ast.Call,)
    requires = ('float64', 'double', 'complex128', 'f8')

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func) or ""
        if q in F64 and q.startswith("jax."):
            if node.args:
                self._report(node, node.args[0], q.replace("jax.numpy.", "jnp."), ctx)
            return
        if q.startswith(("jax.numpy.", "jax.random.", "jax.device_put")):
            for kw in node.keywords:
                if kw.arg == "dtype" and is_f64(kw.value, ctx):
                    self._report(kw.value, node, f"dtype={ast.unparse(kw.value)}", ctx)
                    return
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "astype" and node.args
                and is_f64(node.args[0], ctx) and ctx.kind(func.value) == "jax"):
            self._report(node, func.value, f".astype({ast.unparse(node.args[0])})", ctx)

    def _report(self, where: ast.AST, sized: ast.AST, expr: str, ctx: Ctx) -> None:
        n = sizes.element_count(sized, ctx.analysis, ctx.scope)
        if n is None or n < LARGE_ELEMENTS:
            return  # size unknown or small: nothing the extra four bytes per element could cost
        ctx.report(self, where, expr=expr, n=f"{n:,}", mib64=_mib(8 * n), mib32=_mib(4 * n))


def _mib(nbytes: int) -> str:
    v = nbytes / (1 << 20)
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


RULE = Float64Dtype()
