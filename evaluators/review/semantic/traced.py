"""Which code is traced or compiled, and the assembly of the model from the pass's results."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import (
    AXIS_COLLECTIVES,
    CONTROL_FLOW,
    CUSTOM_RULES,
    JIT_NAMES,
    PALLAS,
    TRACING_NAMES,
)
from jaxmem.evaluators.review.semantic.scopes import Scope


def mark_traced(a: Analysis) -> None:
    """Functions given to jit, grad, lax control flow, custom rules or pallas_call are traced."""
    for expr, q, scope in a.transform_args:
        reason = ("custom" if q in CUSTOM_RULES else "pallas" if q == PALLAS else "control" if q in CONTROL_FLOW
                  else "jit" if q in JIT_NAMES or q in ("jax.shard_map", "flax.nnx.shard_map") else "transform")
        for fn in functions_in(a, expr, scope):
            s = a.scopes.get(fn)
            if s is not None:
                s.reasons.add(reason)
    for call, scope in a.defvjp:
        for arg in call.args:
            for fn in functions_in(a, arg, scope):
                s = a.scopes.get(fn)
                if s is not None:
                    s.reasons.add("custom")
    for node, scope in a.scopes.items():
        if node is not a.tree and any(a.qualname(c.func) in AXIS_COLLECTIVES for c in scope.calls):
            _mapped_axis_user(a, scope)
    for _node, scope in a.scopes.items():
        if scope.reasons:
            scope.traced = True
            scope.jitted = bool(scope.reasons & {"jit", "control", "pallas"})
    _inherit(a)
    # A module function that is only ever called from compiled code (`fold(state)` inside a
    # `lax.fori_loop` body) is compiled with it, and so on down its helpers. Rounds run until
    # nothing changes (each marks a function for good, so they end): a fixed number of rounds
    # made the result depend on the order a round met the functions in, a set's order, which
    # changes from one process to the next.
    while _called_only_when_traced(a):
        _inherit(a)


def _mapped_axis_user(a: Analysis, scope: Scope) -> None:
    """`lax.pmean(x, "batch")` runs only under a transform that maps that axis (pmap, shard_map, a
    vmap naming it): the function that calls it is traced, wherever it is transformed, another
    file included. So is the function that defines and runs it (`def step_fn(...): def mean_all(x):
    return lax.pmean(...)`), up to the first one handed to a transform here, whose caller runs it on
    the host (`p_step = jax.pmap(step)`)."""
    s = scope
    while s is not None and s.node is not a.tree and not s.is_class and not s.reasons:
        s.reasons.add("transform")
        s = s.parent


def _inherit(a: Analysis) -> None:
    """Nested functions inherit from their (now possibly compiled) parents."""
    for _node, scope in a.scopes.items():
        p = scope.parent
        while p is not None:
            scope.jitted |= p.jitted
            scope.traced |= p.traced
            p = p.parent


def _called_only_when_traced(a: Analysis) -> bool:
    names = {c.func.id for calls in a.calls_by_name.values() for c, s in calls if s.jitted}
    if not names:
        return False
    sites: dict[ast.AST, list[Scope]] = {}
    for name in names:
        for call, s in a.calls_by_name.get(name, ()):
            fn = a.resolve_def(call.func, s)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sites.setdefault(fn, []).append(s)
    changed = False
    for fn, callers in sites.items():
        scope = a.scopes.get(fn)
        # Compiled callers only: under grad or vmap alone a Python loop still runs on the host.
        if scope is None or scope.traced or not all(c.jitted for c in callers):
            continue
        scope.traced = scope.jitted = True
        scope.reasons.add("callee")
        changed = True
    return changed


def functions_in(a: Analysis, expr: ast.AST, scope: Scope, depth: int = 0) -> list[ast.AST]:
    """The local functions an argument refers to: a name, a lambda, `partial(f, ...)`, a list."""
    if depth > 3:
        return []
    if isinstance(expr, (ast.List, ast.Tuple)):
        return [f for e in expr.elts for f in functions_in(a, e, scope, depth + 1)]
    if isinstance(expr, ast.Call) and a.qualname(expr.func) == "functools.partial" and expr.args:
        return functions_in(a, expr.args[0], scope, depth + 1)
    if isinstance(expr, ast.Call) and a.qualname(expr.func) in TRACING_NAMES and expr.args:
        return functions_in(a, expr.args[0], scope, depth + 1)  # jit(vmap(f))
    fn = a.resolve_def(expr, scope)
    if fn is None and isinstance(expr, ast.Attribute):
        # `jax.pmap(Trainer.train_step)`: a method named through its class (in `__init__`, to
        # put the compiled version on the instance under the method's own name).
        cls = a.local_class(expr.value)
        fn = cls.methods.get(expr.attr) if cls is not None else None
    return [fn] if fn is not None else []
