"""Host callbacks in compiled loops: which code runs once per iteration of a `lax.scan` (or
`fori_loop`, `while_loop`, `lax.map`), and what a callback's host function does with what it is sent.

A function given to a compiled loop is traced once but runs on every iteration of the loop; so
does everything nested in it, and a function of this file that only such bodies call. A branch of
`lax.cond`/`switch` inside the body runs only when taken: a callback there is not per iteration.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import pins
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import COMPILED_BODIES
from jaxmem.evaluators.review.semantic.scopes import Scope
from jaxmem.evaluators.review.semantic.traced import functions_in

# The compiled loops: their function arguments run once per iteration (a while_loop's condition too).
LOOP_BODIES = frozenset(q for q in COMPILED_BODIES
                        if q.rsplit(".", 1)[1] in ("scan", "fori_loop", "while_loop", "map", "fold"))
BRANCHES = frozenset(q for q in COMPILED_BODIES if q.rsplit(".", 1)[1] in ("cond", "switch"))
# Callbacks that send their operands to the host and run Python there. `pure_callback` is left
# out: its result is the computation the program needs, not a side channel.
EFFECT_CALLBACKS = frozenset({"jax.debug.callback", "jax.experimental.io_callback", "jax.debug.print"})


def _roles(a: Analysis) -> dict[ast.AST, str]:
    """Function node -> "loop" (a compiled loop's body) or "branch" (a cond/switch branch)."""
    memo = a.memo.get("callback_roles")
    if memo is None:
        memo = a.memo["callback_roles"] = {}
        for expr, q, scope in a.transform_args:
            role = "loop" if q in LOOP_BODIES else "branch" if q in BRANCHES else None
            if role is not None:
                for fn in functions_in(a, expr, scope):
                    memo.setdefault(fn, role)
    return memo


def loop_iteration(a: Analysis, scope: Scope, depth: int = 0) -> bool:
    """`scope` runs once per iteration of a compiled loop: it is the loop's body, nested in one
    (not through a cond branch), or a function of this file called only from such code."""
    roles = _roles(a)
    s = scope
    while s is not None and s.node is not a.tree:
        role = roles.get(s.node)
        if role == "loop":
            return True
        if role == "branch":
            return False
        s = s.parent
    name = getattr(scope.node, "name", None)
    if depth or name is None:
        return False
    sites = [s for _call, s in a.call_sites(scope.node)]
    return bool(sites) and all(loop_iteration(a, s, depth + 1) for s in sites)


def host_function(a: Analysis, call: ast.Call, scope: Scope) -> ast.FunctionDef | None:
    """The def a `jax.debug.callback(f, ...)` / `io_callback(f, ...)` runs on the host, when it is
    a function of this file (also through `functools.partial`)."""
    expr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "callback"), None)
    if expr is None:
        return None
    fns = functions_in(a, expr, scope)
    return fns[0] if fns and isinstance(fns[0], ast.FunctionDef) else None


def used_only_when(fn: ast.FunctionDef) -> tuple[str, ast.If] | None:
    """(parameter, the `if`) when the host function reads that parameter only inside the body of
    an `if` whose test is a cadence (`step % every == 0`, `t - last_ckpt >= ckpt_freq`): the
    operand is copied to the host on every call and used only on the calls where the test holds.
    A test such as `if len(done) > 0:` holds on most calls and is no reason."""
    args = fn.args
    params = [p.arg for p in [*args.posonlyargs, *args.args]]
    reads: dict[str, list[ast.Name]] = {p: [] for p in params}
    stored: set[str] = set()
    for n in astutil.walk(fn):
        if isinstance(n, ast.Name) and n.id in reads:
            if isinstance(n.ctx, ast.Load):
                reads[n.id].append(n)
            else:
                stored.add(n.id)
    ifs = [n for n in astutil.walk(fn) if isinstance(n, ast.If) and cadence(n.test)]  # outermost first
    inside = {id(node): {id(x) for s in [*node.body, *node.orelse] for x in astutil.walk(s)} for node in ifs}
    for p in params:
        if p in stored or not reads[p]:
            continue
        # The innermost `if` around every read: the test that decides whether the copy is used.
        found = [node for node in ifs if all(id(r) in inside[id(node)] for r in reads[p])]
        if found:
            return p, found[-1]
    return None


def cadence(test: ast.AST) -> bool:
    """A test that holds once in many calls: a remainder compared (`i % n == 0`) or the distance
    since the last time compared with an interval (`t - last >= every`)."""
    for n in astutil.walk(test):
        if not isinstance(n, ast.Compare):
            continue
        sides = [n.left, *n.comparators]
        if any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod) for x in sides):
            return True
        if isinstance(n.left, ast.BinOp) and isinstance(n.left.op, ast.Sub) and len(n.ops) == 1 \
                and isinstance(n.ops[0], (ast.Gt, ast.GtE)):
            return True
    return False


def runs_host_callbacks(a: Analysis, info, scope: Scope) -> bool:
    """The jitted callable `info` (its wrapped function, or the function a factory it wraps
    returns, with everything nested in either) sends values to a host callback: such a call
    returns only once its work is done. Measured on jax 0.10.2, CPU (a jitted 200-step scan of a
    400x400 matmul): 2 ms to return without a callback, 325 ms (all of it) with an `io_callback`,
    `jax.debug.callback` or ordered `io_callback` per step. On GPU/TPU not measurable here."""
    memo = a.memo.setdefault("runs_host_callbacks", {})
    key = id(info)
    if key not in memo:
        wrapped = info.wrapped
        # `jax.jit(make_train(config))`: the factory's own body; `jax.jit(step)`: step's; a def or
        # lambda jitted where it is written: itself.
        target = wrapped.func if isinstance(wrapped, ast.Call) else wrapped
        root = a.resolve_def(target, scope) if isinstance(wrapped, (ast.Call, ast.Name, ast.Attribute)) else target
        memo[key] = root is not None and any(isinstance(n, ast.Call) and a.qualname(n.func) in EFFECT_CALLBACKS
                                             for n in astutil.walk(root))
    return memo[key]


def returns_done(ctx, info, callbacks: bool = True) -> bool:
    """A call of the jitted callable `info` returns only once its work is done: an `eqx.filter_jit`
    callable (unless the project pins an equinox before 0.11.8), or, with `callbacks`, one whose
    program runs host callbacks. A timer stopped right after it measures the work.
    The second is measured on the CPU only; whether a GPU or TPU program with a callback in it
    returns before its work is done is not measurable here (judges of two sets of the same
    PureJaxRL shape disagreed), so a caller that must be sure asks without it."""
    return pins.returns_ready(info, getattr(ctx, "path", "")) or (
        callbacks and runs_host_callbacks(ctx.analysis, info, ctx.scope))
