"""JM202 jnp-array-from-host-in-loop

What it does
    Flags `jnp.array(...)` / `jnp.asarray(...)` of the same host data (a NumPy array, a list, a
    Python scalar that the loop does not change) inside an eagerly running Python loop (not a
    literal of a few Python numbers, not under `if step % N == 0:`), and `jax.device_put` of the
    items of a host list or NumPy array one at a time (`[jax.device_put(x) for x in examples]`).
    Data that changes every iteration is left alone (a fresh batch from a loader, a sweep value:
    the feed), unless the loop walks a host array or list already in memory element by element.

Why is this bad
    Each conversion is a separate host->device transfer (and for lists, a host-side copy
    first). Small per-iteration transfers add latency that batching removes. A batch generator
    (a function that `yield`s) converting each batch once is the feed itself and is not flagged.

Example
    for step in range(steps):
        w = jnp.asarray(class_weights)       # the same NumPy array, copied again every step
        state = train_step(state, w, next(batches))

Use instead
    w = jnp.asarray(class_weights)           # once, before the loop
    for step in range(steps):
        state = train_step(state, w, next(batches))
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import TRANSFER_WORDS, describe
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard
from jaxmem.evaluators.review.semantic.loops import loop_bound, loop_targets, not_per_step
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
                # Data that changes every iteration (a fresh batch, a sweep value, a restored leaf)
                # has to cross once per iteration: that is the feed, not a cost to hoist. Only the
                # same host data converted again and again is (judged on unseen code: 0 of 18
                # loop-dependent conversions were worth changing).
                if _changes_per_iteration(arg, ctx.loops[-1], ctx) and not _walks_host_collection(ctx.loops[-1], arg, ctx):
                    return
                if not self._skip(ctx):
                    ctx.report(self, node, func=q.replace("jax.numpy.", "jnp."), arg=describe(arg),
                               sure=per_step_transfer(ctx, arg))
        elif q == PUT and isinstance(arg, ast.Name) and arg.id in loop_targets(ctx.loops[-1]) and ctx.kind(arg) == "np":
            # Items of a host collection, one per iteration (a prefetch loop puts whole batches
            # from an iterator, whose items are of unknown kind, and is not flagged).
            if not self._skip(ctx):
                ctx.report(self, node, func="jax.device_put", arg=arg.id, sure=per_step_transfer(ctx, arg))
        elif q == PUT and isinstance(arg, (ast.Name, ast.Attribute)) and ctx.kind(arg) not in ("scalar", "scalars") \
                and not any(_changes_per_iteration(a, ctx.loops[-1], ctx) for a in [*node.args, *(k.value for k in node.keywords)]):
            # (Not where the destination changes: `[jax.device_put(x, d) for d in devices]` places
            # one copy on each device, which each needs.)
            # The same data placed again on every iteration (`imgs = device_put(self.imgs, device=GPU)`
            # per batch): a whole transfer each time for a value that never changes in the loop.
            if not self._skip(ctx):
                ctx.report(self, node, func="jax.device_put", arg=ast.unparse(arg), sure=False)

    @staticmethod
    def _skip(ctx: Ctx) -> bool:
        return under_periodic_guard(ctx) or not_per_step(ctx, TRANSFER_WORDS, sync=False) or _feeds_batches(ctx)


def _changes_per_iteration(arg: ast.AST, loop: ast.AST, ctx: Ctx) -> bool:
    """`arg` reads a name the loop binds (its target, an assignment in its body) or calls
    something (`next(it)`, `load(i)`): a new value each iteration."""
    bound = loop_bound(ctx, loop)
    for n in astutil.walk(arg):
        if isinstance(n, ast.Name) and n.id in bound:
            return True
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in ("list", "tuple", "len")):
            return True
    return False


def _walks_host_collection(loop: ast.AST, arg: ast.AST, ctx: Ctx) -> bool:
    """`for row in rows: jnp.asarray(row)` where `rows` is a NumPy array or a list already in host
    memory: the whole collection could cross in one transfer instead of one per element."""
    if isinstance(loop, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        # `jnp.stack([jnp.array(data[i:i + n]) for i in ix])`: one upload per row of a batch that is
        # joined on the device at once; not a sweep that calls something on each value.
        if not _joined_on_device(loop, ctx):
            return False
        it = loop.generators[0].iter
    elif isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
    else:
        return False
    targets = loop_targets(loop)
    if not any(isinstance(n, ast.Name) and n.id in targets for n in astutil.walk(arg)):
        return False
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") and it.args:
        it = it.args[0]
    return ctx.kind(it) in ("np", "hostlist") or isinstance(it, (ast.List, ast.ListComp))


_JOINS = frozenset({"jax.numpy.stack", "jax.numpy.array", "jax.numpy.asarray", "jax.numpy.concatenate",
                    "jax.numpy.vstack", "jax.numpy.hstack"})


def _joined_on_device(comp: ast.AST, ctx: Ctx) -> bool:
    """The comprehension is the argument of `jnp.stack(...)` (or `concatenate`, `array`)."""
    stack = ctx.stack
    i = next((j for j in range(len(stack) - 1, -1, -1) if stack[j] is comp), None)
    parent = stack[i - 1] if i else None
    return isinstance(parent, ast.Call) and ctx.qualname(parent.func) in _JOINS and comp in parent.args


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
    body = getattr(fn, "body", [])
    stack = list(body) if isinstance(body, list) else [body]  # a lambda's body is one expression
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
