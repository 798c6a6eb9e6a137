"""JM202 jnp-array-from-host-in-loop

What it does
    Flags `jnp.array(...)` / `jnp.asarray(...)` of host data (a NumPy array, a list, a Python
    scalar) inside an eagerly running Python loop (not a literal of a few Python numbers, not
    under `if step % N == 0:`), and `jax.device_put` of the items of a host
    list or NumPy array one at a time (`[jax.device_put(x) for x in examples]`).

Why is this bad
    Each conversion is a separate host->device transfer (and for lists, a host-side copy
    first). Small per-iteration transfers add latency that batching removes. A batch generator
    (a function that `yield`s) converting each batch once is the feed itself and is not flagged.

Example
    for row in rows:
        x = jnp.asarray(row)
        acc = acc + x

Use instead
    xs = jnp.asarray(np.stack(rows))      # one transfer
    acc = xs.sum(axis=0)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import TRANSFER_WORDS, describe
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard
from jaxmem.evaluators.review.semantic.loops import loop_targets, not_per_step
from jaxmem.evaluators.review.semantic.roles import per_step_transfer

CONVERTERS = frozenset({"jax.numpy.array", "jax.numpy.asarray"})
PUT = "jax.device_put"


class JnpArrayFromHostInLoop(Rule):
    code = "JM202"
    name = "jnp-array-from-host-in-loop"
    topic = "batch-transfers"
    severity = "warning"
    message = "`{func}({arg})` converts host data to a device array every iteration: one host->device transfer each"
    fix = "Convert all the data once before the loop (stack it, then one `jnp.asarray`/`jax.device_put`) and index it on device."
    node_types = (ast.Call,)
    call_names = CONVERTERS | {PUT}
    requires = ('array', 'device_put')
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop or not node.args:
            return
        q = ctx.qualname(node.func)
        arg = node.args[0]
        if q in CONVERTERS:
            k = ctx.kind(arg)
            # A list of unknown contents may hold device arrays (stacking them is no transfer);
            # a literal list written here is host data.
            if _all_constants(arg) or _small_literal_of_scalars(arg, ctx):
                return  # `jnp.array([[dx, dy, dz]])`: a few Python numbers; the cost is noise next to the call
            if k in ("np", "hostlist", "scalar", "scalars") or (k == "list" and isinstance(arg, (ast.List, ast.ListComp))):
                if not self._skip(ctx):
                    ctx.report(self, node, func=q.replace("jax.numpy.", "jnp."), arg=describe(arg),
                               sure=per_step_transfer(ctx, arg))
        elif q == PUT and isinstance(arg, ast.Name) and arg.id in loop_targets(ctx.loops[-1]) and ctx.kind(arg) == "np":
            # Items of a host collection, one per iteration (a prefetch loop puts whole batches
            # from an iterator, whose items are of unknown kind, and is not flagged).
            if not self._skip(ctx):
                ctx.report(self, node, func="jax.device_put", arg=arg.id, sure=per_step_transfer(ctx, arg))

    @staticmethod
    def _skip(ctx: Ctx) -> bool:
        return under_periodic_guard(ctx) or not_per_step(ctx, TRANSFER_WORDS, sync=False) or _feeds_batches(ctx)


def _feeds_batches(ctx: Ctx) -> bool:
    """A batch generator (`yield` in the function) or host-side work under a CPU device: each
    conversion is the one transfer a batch needs, not a repeated one to hoist."""
    fn = ctx.scope.node
    memo = ctx.memo.setdefault("generator", {})
    if fn not in memo:
        memo[fn] = not isinstance(fn, ast.Module) and any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(fn))
    if memo[fn]:
        return True
    return any(isinstance(n, ast.With) and loops.cpu_device_block(n) for n in ctx.stack)


def _own_nodes(fn: ast.AST):
    stack = list(getattr(fn, "body", []))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(astutil.children(n))


SMALL_LITERAL = 16  # Python numbers in one literal


def _small_literal_of_scalars(node: ast.AST, ctx: Ctx) -> bool:
    """A literal list/tuple of at most SMALL_LITERAL Python numbers: constants or names holding
    numbers (`[[dx, dy, dz]]` with loop counters)."""
    leaves: list[ast.AST] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.List, ast.Tuple)):
            stack.extend(n.elts)
        else:
            leaves.append(n)
        if len(leaves) > SMALL_LITERAL:
            return False
    return isinstance(node, (ast.List, ast.Tuple)) and bool(leaves) and all(
        _all_constants(x) or ctx.kind(x) == "scalar" for x in leaves)


def _all_constants(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _all_constants(node.operand)
    return isinstance(node, (ast.List, ast.Tuple)) and all(_all_constants(e) for e in node.elts)


RULE = JnpArrayFromHostInLoop()
