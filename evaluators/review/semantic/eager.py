"""Code proven to run eagerly: what no trace could run.

A function the model sees no `jit` around may still be traced: a caller in another file, a user
of the library, an optimizer's `update` that the training step compiles. What settles it is what
the code does itself. A tracer cannot be read on the host: `float(loss)`, `loss.item()`,
`np.asarray(x)`, `jax.device_get(x)` and `x.block_until_ready()` raise under `jit` (a
ConcretizationTypeError or TracerArrayConversionError), so a function whose own statements do that
to a device value always runs outside any trace. A module's own statements (a script, a
notebook's cells) run eagerly too.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.helpers import own_nodes
from jaxmem.evaluators.review.semantic.hostreads import HOST_CONVERSIONS
from jaxmem.evaluators.review.semantic.syncs import SYNC_BUILTINS, builtin_name
from jaxmem.evaluators.review.semantic.walk import At

_READ_METHODS = frozenset({"item", "tolist", "block_until_ready"})


def runs_eagerly(analysis, scope) -> bool:
    """`scope` is the module's, or its own statements read a proven device value on the host."""
    if scope is analysis.module_scope:
        return True
    memo = analysis.memo.setdefault("runs_eagerly", {})
    if scope.node not in memo:  # keyed by the scope's node: scopes are not hashable
        memo[scope.node] = _reads_on_host(At(analysis, scope), scope.node)
    return memo[scope.node]


def _reads_on_host(at: At, fn: ast.AST) -> bool:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for n in own_nodes(fn):
        if n.__class__ is not ast.Call:
            continue
        func = n.func
        if isinstance(func, ast.Attribute) and func.attr in _READ_METHODS and not n.args:
            if func.attr == "block_until_ready" or at.kind(func.value, True) == "jax":
                return True
            continue
        if not n.args:
            continue
        if (at.qualname(func) in HOST_CONVERSIONS or builtin_name(at, func) in SYNC_BUILTINS) \
                and at.kind(n.args[0], True) == "jax":
            return True
    return False


def dispatches_ops(stmts: list[ast.stmt], ctx, names: frozenset[str] = frozenset()) -> bool:
    """These statements run JAX operations eagerly on device values (`x_t += a[i]`, `x @ w`):
    each one is an execution of its own, queued as a jitted call's is. Measured on jax 0.10.2
    (CPU): an eager loop of 2,000 such operations returned after 99% of its work had run (200
    operations: 91-94%; benchmarks/claims/jm701_eager_operations_queue.py), so JAX's 32-execution
    queue bounds eager loops as it bounds jitted calls.
    `names`: parameters known to hold device arrays here (what one call hands them)."""
    return any(isinstance(n, (ast.BinOp, ast.Subscript, ast.Call)) and (ctx.kind(n) == "jax" or any(
        isinstance(x, ast.Name) and x.id in names for x in ast.iter_child_nodes(n)))
        for s in stmts for n in astutil.walk_running(s))
