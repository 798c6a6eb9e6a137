"""JM704 timeit-without-block

What it does
    Flags an IPython `%timeit` line (in a notebook, or a script written as notebook cells) that
    times a call returning a JAX array without waiting for it: `%timeit f(x)` where `f` is
    jitted, or returns JAX arrays; also `f(x)[0]` (one more queued operation), an operator on
    proven JAX arrays (`%timeit A @ x`: dispatched like a call, returned before it is computed),
    and a `%%timeit` cell whose last statement is such a call (`C = f(x)`): the timer stops after
    it. The same for `%time` (`%time y = f(x)`: one run, timed the same way) and for a `%%time`
    cell of one statement, which is `%time` of it (a `%%time` cell of several statements is not
    read: what its earlier statements waited for is most of what it times). Not a call that
    waits by the model's reading (a host read, a NumPy conversion or save, a function of the file
    whose body reads device values on the host), nor a constructor (`Solver(x)`: whether its
    `__init__` leaves device work queued is not seen).

    A `%timeit` that chooses its own loop count, or runs more than 320 calls, is not flagged:
    JAX's runtime lets at most 32 calls queue ahead of the device, so after those each call waits
    for an earlier one, and the figure is the work's to within a tenth (see QUEUED_AHEAD). The
    same for one call of a function of the file whose loop runs over 320 jitted calls or eager
    operations; a loop whose count the source does not fix makes the finding possible.

Why is this bad
    JAX dispatches work asynchronously: a jitted call returns as soon as the work is queued.
    `%time` then measures dispatch, often microseconds for work that takes milliseconds; a
    `%timeit -n 1 -r 5` times five calls that all fit in the queue, dispatch again. JAX's
    benchmarking guide times `f(x).block_until_ready()`.

Example
    %timeit -n 1 -r 5 attention(q, k, v)

Use instead
    %timeit -n 1 -r 5 attention(q, k, v).block_until_ready()
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.notebook import TIMING_MAGICS
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import FEW_CALLS, QUEUED_AHEAD, timing_tier
from jaxmem.evaluators.review.semantic import regions
from jaxmem.evaluators.review.semantic.callbacks import returns_done
from jaxmem.evaluators.review.semantic.jax_config import checks_outputs
from jaxmem.evaluators.review.semantic.names import last_name, pos
from jaxmem.evaluators.review.semantic.regions import local_waits
from jaxmem.evaluators.review.semantic.syncs import is_sync
from jaxmem.evaluators.review.semantic.walk import in_scope

WAITS = frozenset({"jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array"})


class TimeitWithoutBlock(Rule):
    code = "JM704"
    name = "timeit-without-block"
    topic = "async-dispatch"
    severity = "warning"
    message = "`{magic} {what}` times a call that returns before its JAX work is done: it measures dispatch only"
    fix = "Time `{what}.block_until_ready()` (or `jax.block_until_ready(...)` around it)."
    node_types = (ast.Call,)
    requires = tuple(TIMING_MAGICS)  # the marker calls notebook.py writes for timing magics
    calls_message = ("`{magic} {what}` times {calls} calls that return before their JAX work is done: JAX lets up "
                     "to 32 queue ahead of the device, so the figure leaves out the work of {left}")
    operator_message = ("`{magic} {what}` times a JAX operation that returns before it is computed: it measures "
                        "dispatch only")
    operator_fix = "Time `({what}).block_until_ready()` (or `jax.block_until_ready({what})`)."

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not (isinstance(node.func, ast.Name) and node.func.id in TIMING_MAGICS and len(node.args) == 1):
            return
        if checks_outputs(ctx.analysis):
            return  # every call waits for its outputs' NaN check (semantic/jax_config.py)
        magic = TIMING_MAGICS[node.func.id]
        calls = next((k.value.value for k in node.keywords if k.arg == "calls" and isinstance(k.value, ast.Constant)), None)
        if magic.endswith("timeit") and (calls is None or calls > FEW_CALLS):
            # %timeit's own loop count (or a large fixed one): the calls JAX lets run ahead fill its
            # queue and the rest wait, so the figure is the work's, within a tenth (see above).
            return
        shown = timed = _assigned(node.args[0], ctx)
        if timed is None:
            return
        at = node if timed is node.args[0] else timed  # `y = f(x)`: at the call, not the marker
        while isinstance(timed, (ast.Subscript, ast.Attribute)) and not (
                isinstance(timed, ast.Attribute) and timed.attr in ("block_until_ready", "item", "tolist")):
            timed = timed.value  # `f(x)[0]`, `f(x).T`: one more queued operation on its result
        if isinstance(timed, (ast.BinOp, ast.UnaryOp)) and ctx.kind(timed) == "jax":
            ctx.report(self, at, what=_shown(shown), fix=self.operator_fix,
                       magic=magic, **timing_tier(self.operator_message, ctx, ctx.proven(timed)))
            return
        if not isinstance(timed, ast.Call) or _waits(timed, ctx):
            return
        ops = _loop_ops(timed, ctx)
        if ops is not None and ops > FEW_CALLS:
            return  # a function of the file whose loop runs over 320 calls or eager operations: queued 32 at most
        proven = ops != 0 and (ctx.jit_info(timed.func) is not None or ctx.proven(timed))
        # A call of unknown kind that is handed JAX arrays most likely returns one; not a class
        # (`Solver(mesh=m)`): it returns an object, and whether its `__init__` leaves device work
        # queued is not seen here.
        handed = not _constructor(timed, ctx) and any(
            ctx.proven(a) for a in [*timed.args, *(k.value for k in timed.keywords)])
        if proven or handed:
            # The fix template is filled in once, by report(): `what` may hold braces (a dict literal).
            message = self.message if calls is None else self.calls_message
            left = "all of them" if calls is None or calls <= QUEUED_AHEAD else f"up to {QUEUED_AHEAD} of them"
            ctx.report(self, at, what=_shown(shown), magic=magic, calls=calls, left=left,
                       **timing_tier(message, ctx, proven))


def _constructor(call: ast.Call, ctx: Ctx) -> bool:
    """`Solver(...)`, `mod.Solver(...)`: a class of this file, or a name written as classes are
    (CapWords, not ALL_CAPS)."""
    if isinstance(ctx.analysis.resolve_def(call.func, ctx.scope), ast.ClassDef):
        return True
    name = last_name(call.func)
    return name[:1].isupper() and not name.isupper()


def _assigned(expr: ast.AST, ctx: Ctx) -> ast.AST | None:
    """What a timed assignment (`%time y = f(x)`, marked as `y = f(x); _time_magic_((y))`)
    computed: the value bound on the marker's line. Anything but names is the timed expression."""
    names = expr.elts if isinstance(expr, ast.Tuple) else [expr]
    if not all(isinstance(n, ast.Name) for n in names):
        return expr
    b = ctx.analysis.resolve(names[0].id, ctx.scope, pos(names[0]))
    if b is None or b.value is None or getattr(b.value, "lineno", None) != expr.lineno:
        return None
    return b.value


def _shown(expr: ast.AST) -> str:
    """The timed expression as the message quotes it: at most 60 characters."""
    what = ast.unparse(expr)
    return what if len(what) <= 60 else what[:57] + "..."


def _loop_ops(call: ast.Call, ctx: Ctx) -> int | None:
    """For a call of a function of this file: how many jitted calls or eager operations its loops
    run (regions.loop_calls, asked in its scope; 0 where a count is not fixed), else None. Each is
    an execution of its own, and JAX queues 32 at most: past 320 the figure is the work's within
    a tenth (`%timeit -n 1 cumsum_manual(a)` of a 1,000-step eager loop)."""
    fn = ctx.analysis.resolve_def(call.func, ctx.scope)
    scope = ctx.analysis.scopes.get(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if scope is None or ctx.jit_info(call.func) is not None:
        return None  # (a def also wrapped by `jax.jit` elsewhere still runs eagerly when called by name)
    # Its parameters handed device arrays by this call hold device arrays in its body.
    params = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)]
    handed = [*zip(params, call.args), *((k.arg, k.value) for k in call.keywords if k.arg)]
    names = frozenset(p for p, arg in handed if not isinstance(arg, ast.Starred) and ctx.kind(arg) == "jax")
    return in_scope(ctx, scope, lambda c: regions.loop_calls(fn.body, c, names))


def _waits(call: ast.Call, ctx: Ctx) -> bool:
    """The timed call itself waits: `.block_until_ready()`, a host copy, `float(...)`, NumPy that
    converts device values (`np.save(path, f(x))`), or a function of the file whose body reads
    device values on the host. Not a wait on its inputs (`f(x.block_until_ready())`)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("block_until_ready", "item", "tolist"):
        return True
    if isinstance(call.func, ast.Name) and call.func.id in ("float", "int", "print"):
        return True
    if (info := ctx.jit_info(call.func)) is not None and returns_done(ctx, info):
        return True  # `eqx.filter_jit` (equinox >= 0.11.8), or host callbacks in its program: returns when done
    return ctx.qualname(call.func) in WAITS or is_sync(ctx, call) or local_waits(call, ctx)


RULE = TimeitWithoutBlock()
