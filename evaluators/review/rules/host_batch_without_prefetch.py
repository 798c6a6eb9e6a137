"""JM203 host-batch-without-prefetch

What it does
    Flags a loop that takes batches from a host iterator (a loader call, or a name such as
    `loader`, `dataset`, `batches`) and passes them straight into a jitted step, with no
    `jax.device_put` or prefetching in the loop.

Why is this bad
    The step cannot start until its batch has crossed to the device, and the next batch is
    only transferred when Python gets to the next call: transfer and compute take turns
    instead of overlapping. Information only: on CPU there is nothing to overlap. Not flagged
    for loops of a few literal iterations, under a CPU default device (host-side batching), or
    over data already on the device (a `jnp` array, also through a progress-bar wrapper, or a
    generator of this module yielding slices of one).

Example
    for batch in loader:
        state, loss = train_step(state, batch)

Use instead
    for batch in prefetch_to_device(loader, size=2):   # device_put of the next batch is queued early
        state, loss = train_step(state, batch)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.names import dotted
from jaxmem.evaluators.review.semantic.roles import role

DATA_HINTS = ("loader", "dataset", "data", "iter", "stream", "batches", "ds")
PUT_NAMES = frozenset({"jax.device_put", "jax.make_array_from_process_local_data", "jax.make_array_from_callback"})


class HostBatchWithoutPrefetch(Rule):
    code = "JM203"
    name = "host-batch-without-prefetch"
    topic = "prefetch-to-device"
    severity = "info"
    message = "batches from `{source}` go straight into jitted `{func}`: each transfer waits for the previous step instead of overlapping it"
    fix = "Queue the next batches early: `jax.device_put` them a step ahead, or wrap the iterator in a prefetch-to-device generator (size 2)."
    node_types = (ast.For,)
    requires = ('jit', 'pmap')

    def check(self, node: ast.For, ctx: Ctx) -> None:
        if ctx.scope.traced or ctx.kind(node.iter) is not None or _device_source(node.iter, ctx, 0):
            return
        if loops.small_loop(node, ctx.analysis, ctx.scope) or any(
                isinstance(n, ast.With) and loops.cpu_device_block(n) for n in ctx.stack):
            return  # a few batches, or host-side batching under a CPU device on purpose
        it = node.iter
        lowered = (dotted(it.func if isinstance(it, ast.Call) else it) or "").lower()
        if "prefetch" in lowered or "device" in lowered:
            return
        # Only sources that read as data pipelines: a loader call or a data-like name. A plain
        # list parameter may already hold device arrays, and an info finding there is noise.
        if not (isinstance(node.iter, ast.Call) or any(h in lowered for h in DATA_HINTS)):
            return
        targets = {n.id for n in astutil.walk(node.target) if isinstance(n, ast.Name)}
        if not targets:
            return
        called = None
        for stmt in node.body:
            for n in astutil.walk(stmt):
                if not isinstance(n, ast.Call):
                    continue
                func_q = ctx.qualname(n.func)
                if func_q in PUT_NAMES or (isinstance(n.func, ast.Attribute) and "prefetch" in n.func.attr):
                    return
                if called is None and ctx.jit_info(n.func) is not None and any(
                    isinstance(a, ast.Name) and a.id in targets for a in [*n.args, *(k.value for k in n.keywords)]
                ):
                    called = n
        if called is not None:
            # Sure only where both premises are proven: the loop trains (its step replaces state and
            # takes gradients) and the batches are host NumPy arrays (a data pipeline the reviewer
            # cannot see may well prefetch already).
            r = role(ctx.analysis, node, ctx.scope)
            sure = r.role == "train" and r.proven and _host_source(node.iter, ctx)
            ctx.report(self, node, source=describe(node.iter), func=describe(called.func), sure=sure)


def _device_source(expr: ast.AST, ctx: Ctx, depth: int) -> bool:
    """The batches already live on the device: the iterable, or what a wrapper around it
    (`ProgressIter(enumerate(xs), n)`, `tqdm(...)`) is given, is a device array, or it is a
    generator of this module whose `yield`s are device arrays (slices of a `jnp` array)."""
    if depth > 4:
        return False
    if ctx.kind(expr) == "jax":
        return True
    if not isinstance(expr, ast.Call):
        return False
    fn = ctx.analysis.resolve_def(expr.func, ctx.scope)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _yields_device_arrays(fn, ctx):
        return True
    return any(_device_source(a, ctx, depth + 1) for a in expr.args)


def _host_source(expr: ast.AST, ctx: Ctx) -> bool:
    """The batches are proven host data: a NumPy array or list of them, or a local generator
    whose every `yield` is one."""
    if ctx.kind(expr, strict=True) in ("np", "hostlist"):
        return True
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip") and expr.args:
        return all(_host_source(a, ctx) for a in expr.args)
    fn = ctx.analysis.resolve_def(expr.func, ctx.scope) if isinstance(expr, ast.Call) else None
    scope = ctx.analysis.scopes.get(fn) if fn is not None else None
    if scope is None:
        return False
    yields = [n for n in astutil.walk(fn) if isinstance(n, ast.Yield) and n.value is not None]
    return bool(yields) and all(ctx.analysis.kind(y.value, scope, True) in ("np", "hostlist") for y in yields)


def _yields_device_arrays(fn: ast.AST, ctx: Ctx) -> bool:
    scope = ctx.analysis.scopes.get(fn)
    if scope is None:
        return False
    yields = [n for n in astutil.walk(fn) if isinstance(n, ast.Yield) and n.value is not None]
    return bool(yields) and all(ctx.analysis.kind(y.value, scope) == "jax" for y in yields)


RULE = HostBatchWithoutPrefetch()
