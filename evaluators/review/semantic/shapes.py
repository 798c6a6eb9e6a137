"""Operations whose result's size depends on the values of their operand: outside jit, JAX reads
the operand on the host to size the result, so such a call waits for the work that computes it
(JM107; syncs.waits counts it as a wait)."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import elementwise_compare

# Operations whose result's size depends on the values of their operand (without `size=`): outside
# jit, JAX reads the operand on the host to size the result (setops: concrete_or_error on the
# mask; nonzero: concrete_dim_or_error of its count; measured, claims/jm107_data_dependent_shapes.py).
_SIZED_BY_VALUES = frozenset({
    "jax.numpy.unique", "jax.numpy.unique_values", "jax.numpy.unique_counts", "jax.numpy.unique_inverse",
    "jax.numpy.unique_all", "jax.numpy.nonzero", "jax.numpy.flatnonzero", "jax.numpy.argwhere",
    "jax.numpy.extract", "jax.numpy.union1d", "jax.numpy.intersect1d", "jax.numpy.setdiff1d",
    "jax.numpy.setxor1d", "jax.numpy.where",
})


def sized_by_values(ctx, node: ast.AST) -> ast.AST | None:
    """The device array whose values size `node`'s result, where `node` is such an operation run
    eagerly: `jnp.unique(x)` (no `size=`), `jnp.nonzero(m)`, `x.nonzero()`, one-argument
    `jnp.where(m)`, or `x[m]` with a boolean mask computed on the device (`x[x > 0]`). Else None."""
    if isinstance(node, ast.Subscript):
        mask = node.slice  # (read only: `x[m] = v` on a JAX array raises, so `x` is no JAX array there)
        if isinstance(node.ctx, ast.Load) and _boolean_mask(mask) and ctx.kind(mask) == "jax" and ctx.kind(node.value) == "jax":
            return mask
        return None
    if not isinstance(node, ast.Call) or any(k.arg == "size" for k in node.keywords):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "nonzero" and not node.args:
        return func.value if ctx.kind(func.value) == "jax" else None
    q = ctx.qualname(func)
    if q not in _SIZED_BY_VALUES or not node.args:
        return None
    if q == "jax.numpy.where" and (len(node.args) != 1 or node.keywords):
        return None  # `jnp.where(c, x, y)` keeps the shape
    first = node.args[0]
    return first if ctx.kind(first) == "jax" else None


def _boolean_mask(expr: ast.AST) -> bool:
    """An index that is a comparison, or comparisons combined with `&`, `|`, `^`, `~`: boolean."""
    if isinstance(expr, ast.Compare):
        return elementwise_compare(expr)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _boolean_mask(expr.left) and _boolean_mask(expr.right)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return _boolean_mask(expr.operand)
    return False
