"""State that a loop passes back into a jitted function which returns it lengthened
(`idx = generate_step(params, idx)` returning `jnp.concatenate([idx, token], axis=1)`): each call
sees a new shape, so jit traces and compiles it again on every iteration (JM308), and no
`lax.scan` can carry it as it is (JM507 leaves such a loop alone)."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.flow import replaced_state_calls
from jaxmem.evaluators.review.semantic.names import passed_argument
from jaxmem.evaluators.review.semantic.training import jitted_def

# Calls that return their first array argument lengthened by the others.
_GROWERS = frozenset({"jax.numpy.concatenate", "jax.numpy.append", "jax.numpy.hstack", "jax.numpy.vstack",
                      "jax.numpy.column_stack", "jax.numpy.row_stack", "jax.numpy.stack"})


def grown_argument(call: ast.Call, info, loop: ast.AST, ctx) -> str | None:
    """`idx = generate_step(params, idx, ...)` where the jitted def returns `jnp.concatenate([idx,
    new], axis=1)` (every return, at the position the loop takes back): the name passed in, which
    is one element longer after each call. Only where this module defines the jitted function."""
    fn = jitted_def(info, ctx)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns = astutil.own_returns(fn)
    if not returns:
        return None
    for replaced_call, names in replaced_state_calls(ctx.analysis, loop, ctx.scope):
        if replaced_call is not call:
            continue
        target = _result_targets(call, loop) or {}
        for arg_name in sorted(names & set(target)):
            param = next((p.arg for p in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
                          if _names(passed_argument(call, fn, p.arg), arg_name)), None)
            if param is not None and all(_grows(r.value, param, target[arg_name], ctx) for r in returns):
                return arg_name
    return None


def _result_targets(call: ast.Call, loop: ast.AST) -> dict[str, int | None] | None:
    """Where the statement that makes the call puts its result: {name: None} for `x = f(...)`,
    {name: position} for `a, x = f(...)`."""
    for stmt in astutil.walk(loop):
        if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Name):
                return {t.id: None}
            if isinstance(t, ast.Tuple):
                return {e.id: i for i, e in enumerate(t.elts) if isinstance(e, ast.Name)}
    return None


def _grows(value: ast.AST | None, param: str, at: int | None, ctx) -> bool:
    """The returned value (its position `at` of a returned tuple) is `param` lengthened."""
    if at is not None:
        if not (isinstance(value, ast.Tuple) and at < len(value.elts)):
            return False
        value = value.elts[at]
    if not (isinstance(value, ast.Call) and value.args and ctx.qualname(value.func) in _GROWERS):
        return False
    first = value.args[0]
    parts = first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]
    return bool(parts) and isinstance(parts[0], ast.Name) and parts[0].id == param and (
        len(parts) > 1 or len(value.args) > 1)


def _names(expr: ast.AST | None, name: str) -> bool:
    return isinstance(expr, ast.Name) and expr.id == name
