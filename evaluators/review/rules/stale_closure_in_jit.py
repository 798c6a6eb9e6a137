"""JM306 stale-closure-in-jit

What it does
    Flags a jitted function that reads a variable of the code around it (a global, or a local of
    the enclosing function) which a loop there re-binds and then calls the jitted function with:
    `for batch in loader: loss = step(params)` where `step` is jitted and reads `batch`.

Why is this bad
    `jit` traces a function once per argument signature and keeps the compiled program; values
    it closes over are read at trace time and compiled in as constants. Re-binding the variable
    afterwards changes nothing the compiled program sees: every later call computes with the
    first value, silently (a wrong result, not an error), and that first value is held in device
    memory for as long as the function lives. Measured on jax 0.10.2: a jitted `(w * batch).sum()`
    called after binding `batch` to arrays of 1s, 2s and 3s returned 4.0, 4.0, 4.0.

Example
    @jax.jit
    def loss(params):
        return jnp.mean((model(params, batch["x"]) - batch["y"]) ** 2)

    for batch in loader:
        grads = jax.grad(loss)(params)

Use instead
    @jax.jit
    def loss(params, batch):
        return jnp.mean((model(params, batch["x"]) - batch["y"]) ** 2)

    for batch in loader:
        grads = jax.grad(loss)(params, batch)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.names import LOOP_TYPES, TRACING_NAMES


class StaleClosureInJit(Rule):
    code = "JM306"
    name = "stale-closure-in-jit"
    topic = "jit-compilation"
    severity = "error"
    message = ("jitted `{func}` reads `{name}`, which the loop on line {line} re-binds before calling it: the compiled "
               "function keeps the value it was first traced with, so later iterations compute with the old `{name}`")
    fix = "Pass `{name}` to the jitted function as an argument instead of reading it from the enclosing code."
    node_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    requires = ("jit",)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        a = ctx.analysis
        scope = a.scopes.get(node)
        # Jitted itself (a decorator or jax.jit(f)), not only called from compiled code.
        if scope is None or "jit" not in scope.reasons or (scope.parent is not None and scope.parent.jitted):
            return
        # Names some enclosing scope re-binds inside one of its loops: usually none, and then
        # nothing below is worth walking.
        rebound: set[str] = set()
        s = scope.parent
        while s is not None:
            rebound |= _rebound_in_loops(s, ctx)
            s = s.parent
        if not rebound:
            return
        names = _callable_names(node, ctx)
        if not names:
            return
        reported: set[str] = set()
        # Each name is looked up from the scope it is read in (a nested function's own locals
        # and parameters are its own), and counts only when bound outside the jitted function.
        stack = [(child, scope) for child in astutil.children(node)]
        while stack:
            n, here = stack.pop()
            inner = a.scopes.get(n)
            if inner is not None:
                here = inner
            if isinstance(n, ast.Name) and n.id in rebound and isinstance(n.ctx, ast.Load) and n.id not in reported:
                owner = _owner(n.id, here)
                if owner is not None and not _within(owner, scope):
                    found = _rebinding_loop(n.id, owner, node, names, ctx)
                    if found is not None:
                        loop, fresh = found
                        reported.add(n.id)
                        ctx.report(self, n, func=sorted(names)[0], name=n.id, line=loop.lineno,
                                   sure=fresh)
            stack.extend((child, here) for child in astutil.children(n))


def _rebound_in_loops(scope, ctx: Ctx) -> frozenset[str]:
    memo = ctx.analysis.memo.setdefault("rebound_in_loops", {})
    got = memo.get(scope.node)  # keyed by the node (a Scope is not hashable)
    if got is None:
        got = memo[scope.node] = frozenset(
            name for name, bs in scope.bindings.items()
            if any(b.how in ("assign", "iter") and b.until is None and scope.loop_at(b.at) is not None for b in bs))
    return got


def _within(s, outer) -> bool:
    while s is not None:
        if s is outer:
            return True
        s = s.parent
    return False


def _owner(name: str, scope):
    """The scope whose binding of `name` the function reads: itself (or a scope inside it, a
    comprehension's variable), or an enclosing one; None for builtins and unknown names."""
    s = scope
    while s is not None:
        if name in s.bindings or name in s.params:
            return s
        s = s.parent
    return None


def _callable_names(node: ast.AST, ctx: Ctx) -> set[str]:
    """The names the jitted function is called through: its own, and names bound in the same
    scope to a transform of it (`step = jax.jit(f)`, `grad_fn = jax.value_and_grad(step)`)."""
    a = ctx.analysis
    scope = a.scopes[node].parent
    names: set[str] = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names.add(node.name)
    if scope is None:
        return names
    for _ in range(3):  # a transform of a transform of it
        before = len(names)
        for bindings in scope.bindings.values():
            for b in bindings:
                v = b.value
                if b.how != "assign" or b.index is not None or not isinstance(v, ast.Call) or not v.args:
                    continue
                first = v.args[0]
                if (first is node or isinstance(first, ast.Name) and first.id in names) and \
                        a.qualname(v.func) in TRACING_NAMES:
                    names.add(b.name)
        if len(names) == before:
            break
    return names


def _rebinding_loop(name: str, owner, fn: ast.AST, called: set[str], ctx: Ctx) -> tuple[ast.AST, bool] | None:
    """A statement loop of `owner` that re-binds `name` and, in the same body, calls the jitted
    function through one of `called` after the re-binding; the function is defined outside it
    (one defined inside would be a new function, traced again, every iteration). With it, whether
    each iteration's value is proven new: the loop's own target (`for batch in loader`), a
    container built afresh (`batch = {}`), an array; a call's result of unknown kind
    (`n, idx = init()`) may well be the same value every time."""
    for b in owner.bindings.get(name, ()):
        if b.how not in ("assign", "iter") or b.until is not None:
            continue
        found = owner.loop_at(b.at)
        if found is None:
            continue
        start, end, loop = found
        if not isinstance(loop, LOOP_TYPES) or start <= (fn.lineno, fn.col_offset) <= end:
            continue
        after = b.at if b.how == "assign" else start
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in called
               and (n.lineno, n.col_offset) > after and _may_call(n.func, fn, called, owner, ctx)
               for n in astutil.walk(loop)):
            fresh = b.how == "iter" or isinstance(b.value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp)) \
                or (b.index is None and ctx.analysis.binding_kind(b, owner, True) in ("jax", "np"))
            return loop, fresh
    return None


def _may_call(func: ast.Name, fn: ast.AST, called: set[str], owner, ctx: Ctx) -> bool:
    """The name, where it is called, may still hold the jitted function: a binding reaching the
    call is `fn` itself or a transform of one of the names it goes by (`_callable_names`). Not
    when the loop re-bound the name first (`jit_reset = jax.jit(env.reset)` before
    `jit_reset(rng)`, in a later cell than the one that jitted a closure under the same name)."""
    found = owner.reaching(func.id, (func.lineno, func.col_offset), True)
    if not found:
        return found is None  # bound elsewhere (an enclosing scope): as before, by name
    return any(b.node is fn or b.how == "assign" and b.index is None and isinstance(v := b.value, ast.Call)
               and v.args and ctx.analysis.qualname(v.func) in TRACING_NAMES
               and (v.args[0] is fn or isinstance(v.args[0], ast.Name) and v.args[0].id in called) for b in found)


RULE = StaleClosureInJit()
