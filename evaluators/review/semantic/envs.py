"""Host environments: simulators stepped on the host (Gym, Gymnasium, EnvPool, dm_control).

`env.step(action)` of such an environment takes a host value: the action is copied off the device
there, on every step, because the simulator needs it. A read of that action elsewhere in the same
iteration (`a = a.item()` before the call, `np.array(a)` into a replay buffer after it) is either
that same needed read or one after it that waits for nothing. The readings' protocol does not
count per-step host values a host environment needs (benchmarks/review/unseen-2026-12g/README.md).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import LOOP_TYPES
from jaxmem.evaluators.review.semantic.walk import Walk

HOST_ENV_MAKERS = ("gym.", "gymnasium.", "envpool.", "dm_control.", "procgen.")


def fed_to_host_env(ctx: Walk, values: list[ast.AST]) -> bool:
    """A name in `values` is handed to a host environment's `step` in the innermost loop."""
    loop = next((l for l in reversed(ctx.loops) if isinstance(l, LOOP_TYPES)), None)
    if loop is None:
        return False
    fed = _env_step_args(loop, ctx)
    return bool(fed) and any(isinstance(n, ast.Name) and n.id in fed for v in values for n in ast.walk(v))


def _env_step_args(loop: ast.AST, ctx: Walk) -> frozenset[str]:
    memo = ctx.analysis.memo.setdefault("env_step_args", {})
    if loop not in memo:
        names: set[str] = set()
        for n in ast.walk(loop):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
                    and _host_env(n.func.value, ctx)):
                names.update(a.id for arg in [*n.args, *(k.value for k in n.keywords)]
                             for a in ast.walk(arg) if isinstance(a, ast.Name))
        memo[loop] = frozenset(names)
    return memo[loop]


def _host_env(expr: ast.AST, ctx: Walk) -> bool:
    """`env` bound to `gym.make(...)` (or a wrapper from those packages), here or as `self.env`."""
    return ctx.analysis.made_by(expr, ctx.scope, HOST_ENV_MAKERS)
