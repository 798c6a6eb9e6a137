"""JM201 host-array-to-jit-in-loop

What it does
    Flags a NumPy array or Python list that is built inside a loop (or iterated out of a host
    container) and passed to a jitted function in that loop.

Why is this bad
    Every call copies each host argument to the device before it can run: one synchronous
    host->device transfer per argument per iteration (`JAX_TRANSFER_GUARD=log` shows them).
    Many small transfers cost far more than one large one.

Example
    for i in range(n):
        x = np.random.rand(128, 128)
        out = step(params, x)

Use instead
    xs = jax.device_put(np.random.rand(n, 128, 128))   # one transfer
    for i in range(n):
        out = step(params, xs[i])
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import TRANSFER_WORDS, describe, jitted_call_args_in_host_loop
from jaxmem.evaluators.review.semantic.loops import enclosing_loop_of, not_per_step
from jaxmem.evaluators.review.semantic.names import end_pos, pos
from jaxmem.evaluators.review.semantic.roles import per_step_transfer


class HostArrayToJitInLoop(Rule):
    code = "JM201"
    name = "host-array-to-jit-in-loop"
    topic = "batch-transfers"
    severity = "warning"
    message = "host data `{arg}` is copied host->device on every call of jitted `{func}` in this loop"
    fix = "Stack the host data and transfer it once before the loop (`jax.device_put(np.stack(...))`), then index on device."
    node_types = (ast.Call,)
    requires = ('jit', 'pmap')
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        for arg in jitted_call_args_in_host_loop(node, ctx):
            if self._host_per_iteration(arg, ctx):
                if not_per_step(ctx, TRANSFER_WORDS, sync=False):
                    return
                ctx.report(self, arg, arg=describe(arg), func=describe(node.func), sure=per_step_transfer(ctx, arg))
                return

    @staticmethod
    def _host_per_iteration(arg: ast.AST, ctx: Ctx) -> bool:
        if isinstance(arg, ast.Starred):
            arg = arg.value
        if isinstance(arg, (ast.Call, ast.List, ast.ListComp)):
            k = ctx.kind(arg)
            # A list of unknown items may hold device arrays: only host contents count.
            return k == "np" or (k in ("hostlist", "scalars") and not isinstance(arg, ast.Call))
        base = arg
        while isinstance(base, ast.Subscript):
            base = base.value
        if not isinstance(base, ast.Name):
            return False
        loop = enclosing_loop_of(ctx, base.id)
        if loop is None:
            return False
        # Built in the loop, or a loop target taken from a NumPy array or a host list; not data
        # that only exists once the loop gets there (the next item of a stream, or host values
        # computed from this loop's device results): there is nothing to transfer ahead.
        return ctx.kind(arg) == "np" and not _made_during_loop(base, loop, ctx, 0)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _made_during_loop(name: ast.Name, loop: ast.AST, ctx: Ctx, depth: int) -> bool:
    """`name` holds the next item of an iterator (`next(it)`) or comes, through assignments in
    the loop, from the result of a jitted call in the loop (`state = env.step(action)` after
    `action = agent.step(...)`)."""
    if depth > 4:
        return False
    a = ctx.analysis
    start, end = pos(loop), end_pos(loop)
    b = a.resolve(name.id, ctx.scope, pos(name))
    if b is None or b.how != "assign" or b.value is None or not (start <= b.at <= end):
        return False
    for n in astutil.walk(b.value):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name) and n.func.id == "next" and a.is_builtin(n.func, ctx.scope):
                return True
            if ctx.jit_info(n.func) is not None:
                return True
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and _made_during_loop(n, loop, ctx, depth + 1):
            return True
    return False


RULE = HostArrayToJitInLoop()
