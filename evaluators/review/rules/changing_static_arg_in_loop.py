"""JM303 changing-static-arg-in-loop

What it does
    Flags a call of a jitted function, inside a loop, whose static argument
    (`static_argnums`/`static_argnames`) is the loop variable or is re-bound in the loop.

    Not flagged where each iteration needs its own compilation anyway: the static argument
    fixes a shape inside the function (`jnp.zeros(n)`, `range(n)`, `int(t // dt)` rows), so it
    cannot be made traced; or the loop walks the leaves of a pytree (`jax.tree.leaves`) and
    passes each leaf too, so every new leaf shape compiles regardless. Nor where the argument
    takes a few values again and again: bound by an inner loop of a few literal iterations
    (`for i in range(num_viz)` with `num_viz = 3`) inside another loop, it compiles once per
    value in the first outer iteration and hits the cache from then on, or walked from a list of
    one value repeated (`[CHUNK] * k`, a remainder appended: at most 3 values). Nor where the argument
    is bound by an outer loop and the call runs in an inner one (constant across the iterations
    that run it), nor in a timed sweep over configurations (the loop reads a clock and waits with
    `block_until_ready`: each value's compilation is warmed up or measured on purpose).

    Equinox's `filter_jit` (and `filter_pmap`) need no static_argnums: "All JAX and NumPy arrays
    are traced, and all other types are held static" (its API docs). A Python number that the
    loop changes (the loop variable, a `step += 1` counter) passed straight in is flagged the same.

Why is this bad
    Static arguments are part of the compilation cache key: every new value compiles the
    function again. Measured on jax 0.10.2 (CPU): 3 iterations with a changing static
    argument compiled 3 times.

Example
    @partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    for n in range(10):
        y = power(x, n)

Use instead
    @jax.jit
    def power(x, n):          # n traced: one compilation
        return x ** n
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.clocks import TIMERS
from jaxmem.evaluators.review.semantic.loops import enclosing_loop_of
from jaxmem.evaluators.review.semantic.sizes import distinct_values


class ChangingStaticArgInLoop(Rule):
    code = "JM303"
    name = "changing-static-arg-in-loop"
    topic = "jit-compilation"
    severity = "warning"
    message = "static argument `{arg}` of jitted `{func}` changes every iteration: one compilation per distinct value"
    fix = "Make the argument traced (drop it from static_argnums/static_argnames) or keep it constant across the loop."
    held_message = ("`{arg}` is a Python number, which `{maker}` holds static (it traces only arrays), and it "
                    "changes every iteration: one compilation of `{func}` per value")
    held_fix = "Pass it as an array (`jnp.asarray(step)`) so it is traced, or keep it constant across the loop."
    node_types = (ast.Call,)
    requires = ('static_arg', 'filter_jit', 'filter_pmap')
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop:
            return
        info = ctx.jit_info(node.func)
        if info is None:
            return
        positions = info.static_positions()
        names = info.static_names()
        params = info.params or ()
        # Equinox's filter_jit traces arrays and holds every other argument static: a Python
        # number passed straight in is part of the cache key like a static_argnums entry.
        numbers = [a for a in (*node.args, *(kw.value for kw in node.keywords)) if _python_number(a, ctx)] \
            if info.maker in HOLDS_NON_ARRAYS_STATIC else []
        if numbers:
            positions = set(positions) | {i for i, a in enumerate(node.args) if a in numbers}
            names = set(names) | {kw.arg for kw in node.keywords if kw.arg and kw.value in numbers}
        if not positions and not names:
            return
        candidates = [(a, params[i] if i < len(params) else None) for i, a in enumerate(node.args) if i in positions]
        candidates += [(kw.value, kw.arg) for kw in node.keywords if kw.arg in names]
        others = [a for i, a in enumerate(node.args) if i not in positions]
        others += [kw.value for kw in node.keywords if kw.arg not in names]
        for arg, param in candidates:
            loop = enclosing_loop_of(ctx, arg.id) if isinstance(arg, ast.Name) else None
            if loop is not None and _same_literal_each_time(arg.id, loop):
                continue  # `n_inference = 1` just before the call: re-bound, but to the same value
            if loop is not None and _few_values(arg.id, loop, ctx):
                continue  # `for n in [CHUNK] * k + a remainder`: one compilation per distinct value, a few
            if loop is not None:
                if ctx.loops.index(loop) > 0 and loops.small_loop(loop, ctx.analysis, ctx.scope):
                    continue  # a few values, repeated by the outer loop: compiled once each, then cached
                if loop is not ctx.loops[-1]:
                    continue  # constant across the inner loop that runs the call: compiled once per outer value
                if _measures(loop, ctx):
                    continue  # a timed sweep over configurations: one compilation per value is what it measures
                if param is not None and _sets_shape(info, param, ctx):
                    return  # `jnp.zeros(n_blocks)` with n_blocks from it: one compile per value is inherent
                if any(_leaf_per_iteration(o, ctx) for o in others):
                    return  # a new leaf (new shape, dtype) each iteration compiles anyway
                func = ast.unparse(node.func)
                if arg in numbers:
                    ctx.report(self, arg, message=self.held_message, fix=self.held_fix, arg=arg.id, func=func,
                               maker=info.maker.replace("equinox.", "eqx."))
                else:
                    ctx.report(self, arg, arg=arg.id, func=func)
                return


HOLDS_NON_ARRAYS_STATIC = frozenset({"equinox.filter_jit", "equinox.filter_pmap"})
FEW_VALUES = 3  # distinct values of a static argument: as many compilations, paid once each


def _same_literal_each_time(name: str, loop: ast.AST) -> bool:
    """Every binding of `name` in the loop (its target included) is a plain `name = <literal>` of
    one and the same literal: each iteration passes the same value."""
    nodes = list(astutil.walk(loop))
    stores = [n for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    plain = [n for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
    if not plain or len(plain) != len(stores) or not all(isinstance(a.value, ast.Constant) for a in plain):
        return False
    first = plain[0].value.value
    return all(a.value.value == first and type(a.value.value) is type(first) for a in plain)


def _few_values(name: str, loop: ast.AST, ctx: Ctx) -> bool:
    """The loop's own target walks a list of a few distinct values repeated (`chunk_sizes =
    [CHUNK_STEPS] * (T // CHUNK_STEPS)`, then the remainder appended): it compiles once per
    distinct value, not once per iteration."""
    if not (isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name) and loop.target.id == name):
        return False
    n = distinct_values(loop.iter, ctx.analysis, ctx.scope)
    return n is not None and n <= FEW_VALUES


def _python_number(arg: ast.AST, ctx: Ctx) -> bool:
    """A Python number: its kind says so, or it is a counter the loop steps by a literal (`step
    += 1`) and no binding of it makes an array."""
    if not isinstance(arg, ast.Name):
        return False
    kind = ctx.kind(arg)
    if kind == "scalar":
        return True
    if kind in ("jax", "np"):
        return False
    loop = enclosing_loop_of(ctx, arg.id)
    return loop is not None and any(
        isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == arg.id
        and isinstance(n.op, (ast.Add, ast.Sub)) and isinstance(n.value, ast.Constant) and type(n.value.value) is int
        for n in astutil.walk(loop))


def _measures(loop: ast.AST, ctx: Ctx) -> bool:
    """The loop's body times its work (reads a clock) and waits for it (`block_until_ready`): a
    benchmark sweep, where each configuration's compilation is warmed up or measured on purpose."""
    clock = wait = False
    for n in astutil.walk(loop):
        if isinstance(n, ast.Call):
            q = ctx.qualname(n.func) or ""
            clock |= q in TIMERS or q == "timeit.timeit"
            wait |= q == "jax.block_until_ready" or isinstance(n.func, ast.Attribute) and n.func.attr == "block_until_ready"
    return clock and wait


SHAPE_FUNCS = frozenset({
    "jax.numpy.zeros", "jax.numpy.ones", "jax.numpy.empty", "jax.numpy.full", "jax.numpy.arange",
    "jax.numpy.linspace", "jax.numpy.eye", "jax.numpy.identity", "jax.numpy.reshape", "jax.numpy.broadcast_to",
    "jax.numpy.tile", "jax.numpy.repeat", "jax.random.normal", "jax.random.uniform", "jax.random.split",
    "jax.lax.fori_loop",
})
LEAF_FUNCS = frozenset({"jax.tree.leaves", "jax.tree_util.tree_leaves", "jax.tree.flatten",
                        "jax.tree_util.tree_flatten"})


def _sets_shape(info, param: str, ctx: Ctx) -> bool:
    """In the jitted function, `param` (or a name computed from it) sizes an array or a loop:
    `n = int(t // dt)`, `jnp.zeros((n,))`, `range(n)`, `lax.fori_loop(0, n, ...)`."""
    a = ctx.analysis
    fn = info.wrapped if isinstance(info.wrapped, (ast.FunctionDef, ast.AsyncFunctionDef)) else (
        a.resolve_def(info.wrapped, ctx.scope) if isinstance(info.wrapped, (ast.Name, ast.Attribute)) else None)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    derived = {param}
    for n in astutil.walk(fn):  # source order is enough for straight-line setup code
        if isinstance(n, ast.Assign) and _mentions(n.value, derived):
            derived |= {t.id for tg in n.targets for t in astutil.walk(tg) if isinstance(t, ast.Name)}
    for n in astutil.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Name) and n.func.id in ("range", "int") and a.is_builtin(n.func, a.scopes.get(fn, ctx.scope)):
            if any(_mentions(x, derived) for x in n.args):
                return True
        elif a.qualname(n.func) in SHAPE_FUNCS:
            sized = n.args[:2] if a.qualname(n.func) == "jax.lax.fori_loop" else [
                *n.args, *(k.value for k in n.keywords if k.arg in ("shape", "num", "newshape"))]
            if any(_mentions(x, derived) for x in sized):
                return True
    return False


def _mentions(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in astutil.walk(expr))


def _leaf_per_iteration(arg: ast.AST, ctx: Ctx) -> bool:
    """`leaves[i]` or `leaf` in a loop over `jax.tree.leaves(...)` (or `jax.tree.flatten`)."""
    a = ctx.analysis
    base = arg.value if isinstance(arg, ast.Subscript) else arg
    if not isinstance(base, ast.Name):
        return False
    if isinstance(arg, ast.Subscript) and not any(
            isinstance(n, ast.Name) and enclosing_loop_of(ctx, n.id) is not None for n in astutil.walk(arg.slice)):
        return False
    b = a.resolve(base.id, ctx.scope, (arg.lineno, arg.col_offset))
    if b is None or b.value is None:
        return False
    value = b.value
    if b.how == "iter":  # zip/enumerate parts are bound to their own iterable already
        return b.element == "elem" and _is_leaves(value, ctx)
    return isinstance(arg, ast.Subscript) and b.how == "assign" and _is_leaves(value, ctx, b.index)


def _is_leaves(expr: ast.AST, ctx: Ctx, index: int | None = None) -> bool:
    a = ctx.analysis
    if isinstance(expr, ast.Name):
        b = a.resolve(expr.id, ctx.scope, (expr.lineno, expr.col_offset))
        return b is not None and b.how == "assign" and b.value is not None and b.value is not expr and \
            _is_leaves(b.value, ctx, b.index)
    if isinstance(expr, ast.Call):
        q = a.qualname(expr.func)
        if q in ("jax.tree.flatten", "jax.tree_util.tree_flatten"):
            return index == 0
        return q in LEAF_FUNCS
    return False


RULE = ChangingStaticArgInLoop()
