"""Host environments: simulators stepped on the host (Gym, Gymnasium, EnvPool, dm_control).

`env.step(action)` of such an environment takes a host value: the action is copied off the device
there, on every step, because the simulator needs it. A read of that action elsewhere in the same
iteration (`a = a.item()` before the call, `np.array(a)` into a replay buffer after it) is either
that same needed read or one after it that waits for nothing. The readings' protocol does not
count per-step host values a host environment needs (benchmarks/review/unseen-2026-12g/README.md).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.hostreads import host_conversion
from jaxmem.evaluators.review.semantic.names import pos
from jaxmem.evaluators.review.semantic.walk import At, Walk, statement_loop

HOST_ENV_MAKERS = ("gym.", "gymnasium.", "envpool.", "dm_control.", "procgen.")


def fed_to_host_env(ctx: Walk, values: list[ast.AST]) -> bool:
    """A name in `values` is handed to a host environment's `step` in the innermost loop; or, in a
    function a loop calls every step (`a = agent.act(obs)` then `env.step(a)`), the value is what
    the function returns and the loop hands that result to the environment; or, in the `step` of an
    environment class on a host API (Gym, dm_env: per_step.py), what it returns, which that API
    promises as host values."""
    loop = statement_loop(ctx)
    if loop is None:
        return _returned_to_host_env(ctx) or (ctx.scope.node in ctx.analysis.memo.get("host_api_steps", ())
                                              and _returned(ctx))
    fed = _env_step_args(loop, ctx)
    if not fed:
        return False
    if any(isinstance(n, ast.Name) and n.id in fed for v in values for n in astutil.walk(v)):
        return True
    # `action: int = jnp.argmax(q).item()` then `env.step(action)`: the name the read is bound to.
    stmt = next((n for n in reversed(ctx.stack) if isinstance(n, ast.stmt)), None)
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return any(isinstance(n, ast.Name) and n.id in fed for t in targets for n in astutil.walk(t))


def _returned_to_host_env(ctx: Walk) -> bool:
    scope, call = ctx.scope, ctx.per_step
    caller_loop, caller = scope.per_step_loop, scope.per_step_scope
    if call is None or caller_loop is None or caller is None or not _returned(ctx):
        return False
    results = {n.id for stmt in astutil.walk(caller_loop) if isinstance(stmt, ast.Assign) and stmt.value is call
               for t in stmt.targets for n in astutil.walk(t) if isinstance(n, ast.Name)}
    return bool(results & _env_step_args(caller_loop, At(ctx.analysis, caller)))


def _returned(ctx: Walk) -> bool:
    """The node being read is part of what its function returns: inside a `return`, or bound to
    a name that a `return` of the function hands back (alone or as one item of a tuple)."""
    for node in reversed(ctx.stack):
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, ast.Assign):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            fn = ctx.scope.node
            return bool(names) and any(isinstance(r, ast.Return) and r.value is not None and any(
                isinstance(v, ast.Name) and v.id in names
                for v in (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value])) for r in astutil.walk(fn))
        if isinstance(node, ast.stmt):
            return False
    return False


def _env_step_args(loop: ast.AST, ctx: Walk) -> frozenset[str]:
    memo = ctx.analysis.memo.setdefault("env_step_args", {})
    if loop not in memo:
        names: set[str] = set()
        for n in astutil.walk(loop):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
                    and (_host_env(n.func.value, ctx) or _hands_host_values(n, ctx))):
                names.update(a.id for arg in [*n.args, *(k.value for k in n.keywords)]
                             for a in astutil.walk(arg) if isinstance(a, ast.Name))
        memo[loop] = frozenset(names)
    return memo[loop]


def _host_env(expr: ast.AST, ctx: Walk) -> bool:
    """`env` bound to `gym.make(...)` (or a wrapper from those packages), here or as `self.env`,
    or to what a function of this file declared to return one gives back (`def make_env(...) ->
    gym.Env`)."""
    a = ctx.analysis
    if a.made_by(expr, ctx.scope, HOST_ENV_MAKERS):
        return True
    if not isinstance(expr, ast.Name):
        return False
    b = a.resolve(expr.id, ctx.scope, pos(expr))
    value = b.value if b is not None and b.how == "assign" else None
    fn = a.resolve_def(value.func, ctx.scope) if isinstance(value, ast.Call) else None
    returns = getattr(fn, "returns", None)
    return returns is not None and (a.qualname(returns) or "").startswith(HOST_ENV_MAKERS)


def _hands_host_values(call: ast.Call, ctx: Walk) -> bool:
    """`env.step(np.asarray(actions))`: the code converts the argument to the host at the call
    (or binds the conversion to the name it hands over), so whatever `env` is, its step takes
    host values (a NumPy simulator of the project)."""
    a = ctx.analysis
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Name):
            # `action_np = np.array(out.action)` then `env.step(state, action_np)`
            b = a.resolve(arg.id, ctx.scope, pos(arg))
            arg = b.value if b is not None and b.how == "assign" and b.index is None else arg
        if host_conversion(a, arg):
            return True
    return False
