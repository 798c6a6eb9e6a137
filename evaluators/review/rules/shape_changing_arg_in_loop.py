"""JM308 shape-changing-arg-in-loop

What it does
    Flags a call of a jitted function in a Python loop where an argument is a slice whose one end
    is the loop's counter and whose other end is fixed (`data[:, 0:i]`, `mask[:, :i, :i]`,
    `x[i:]`), directly or through a name the loop binds to such a slice: the argument's shape
    changes on every iteration. Also a value the loop passes back into the jitted function that
    returns it lengthened (`idx = generate_step(params, idx)` where the function returns
    `jnp.concatenate([idx, next_token], axis=1)`: an autoregressive decode that grows its input).
    A window of fixed length (`x[i:i + batch]`) is left alone, as are loops of a few literal
    iterations and calls under `if step % N == 0:`.

Why is this bad
    `jax.jit` compiles one program per input shape: each new length is a new trace and a new
    compilation, and every compiled program stays in the cache. A loop over prefix lengths (an
    autoregressive evaluation that feeds `data[:, :i]` for every `i`) compiles the whole model once
    per iteration, which costs far more than running it. Measured with jax 0.10.2 on CPU: 50 eager
    growth steps of a (4, 8) block compiled 50 times (JM505's measurement; the same per-shape cache).

Example
    for i in range(2, seq_len):
        pred = forward(params, tokens[:, :i])        # jitted; a new length every iteration

Use instead
    padded = jnp.pad(tokens, ((0, 0), (0, max_len - seq_len)))
    for i in range(2, seq_len):
        pred = forward(params, padded, i)            # one shape; mask positions >= i inside
    # or run all prefixes at once with a causal mask (one call), or bucket lengths to a few sizes
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard_in
from jaxmem.evaluators.review.semantic.growth import grown_argument

# Wrappers that hand the wrapped iterable's items through unchanged (`tqdm(range(n))`).
_PASS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "iter", "list", "enumerate"})
_RANGES = frozenset({"range", "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange"})


def _name(func: ast.AST, ctx: Ctx) -> str | None:
    """A call's resolved name; builtins (`range`, `enumerate`) by their own name."""
    return ctx.builtin(func) or ctx.qualname(func)


class ShapeChangingArgInLoop(Rule):
    code = "JM308"
    name = "shape-changing-arg-in-loop"
    topic = "jit-compilation"
    severity = "warning"
    message = ("`{arg}` has a new shape on every iteration (its slice runs to or from loop counter `{counter}`): jitted "
               "`{func}` is traced and compiled again each time")
    fix = ("Keep the shape fixed: pad to the maximum length and pass the length as a traced value (mask the rest), "
           "run all prefixes in one call with a causal mask, or bucket lengths to a few sizes.")
    grow_message = ("`{arg}` grows on every iteration: jitted `{func}` returns it with new values concatenated and "
                    "the loop passes the result back, so each call has a new shape and is traced and compiled again")
    grow_fix = ("Preallocate the full length once and write each step into it with `lax.dynamic_update_slice` "
                "(the position as a traced value), or run the whole loop in one `lax.scan`/`lax.fori_loop`.")
    node_types = (ast.Call,)
    only_in_host_loops = True
    requires = ("jit", "pmap")

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop:
            return
        info = ctx.jit_info(node.func)
        if info is None:
            return
        loop = ctx.loops[-1]
        if loops.small_loop(loop, ctx.analysis, ctx.scope) or under_periodic_guard_in(node, loop, ctx.analysis, ctx.scope):
            return
        grown = grown_argument(node, info, loop, ctx)
        if grown is not None:
            ctx.report(self, node, message=self.grow_message, fix=self.grow_fix, arg=grown,
                       func=ast.unparse(node.func), sure=info.exact)
            return
        counters = _counters(loop, ctx)
        if not counters:
            return
        bound = _slices_bound_in(loop)
        varying = counters | loops.loop_bound(ctx, loop)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            sliced = bound.get(arg.id) if isinstance(arg, ast.Name) else arg
            counter = _changing_slice(sliced, counters, varying) if sliced is not None else None
            if counter is not None:
                ctx.report(self, node, arg=ast.unparse(arg), counter=counter, func=ast.unparse(node.func),
                           sure=info.exact)
                return


def _counters(loop: ast.AST, ctx: Ctx) -> set[str]:
    """The names a `for` loop counts with: `i` of `for i in range(...)` (through tqdm) or of
    `for i, x in enumerate(...)`."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return set()
    it, target = loop.iter, loop.target
    while isinstance(it, ast.Call) and it.args and _name(it.func, ctx) in _PASS:
        if _name(it.func, ctx) == "enumerate":
            return {target.elts[0].id} if isinstance(target, ast.Tuple) and target.elts \
                and isinstance(target.elts[0], ast.Name) else set()
        it = it.args[0]
    if isinstance(it, ast.Call) and _name(it.func, ctx) in _RANGES and isinstance(target, ast.Name):
        return {target.id}
    return set()


def _slices_bound_in(loop: ast.AST) -> dict[str, ast.AST]:
    """Names the loop body binds (once) to a subscript: `x_i = data[:, :i]`."""
    out: dict[str, ast.AST] = {}
    seen: set[str] = set()
    for stmt in loop.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name in seen:
                out.pop(name, None)
            elif isinstance(stmt.value, ast.Subscript):
                out[name] = stmt.value
            seen.add(name)
    return out


def _changing_slice(expr: ast.AST, counters: set[str], varying: set[str]) -> str | None:
    """The counter when `expr` is `x[..., a:b, ...]` with one end using it and the other fixed
    across the loop (absent, or naming nothing the loop binds: `x[i:i_end]` with `i_end = min(i +
    bs, n)` is a window, not a prefix)."""
    if not isinstance(expr, ast.Subscript):
        return None
    parts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
    for part in parts:
        if not isinstance(part, ast.Slice) or part.step is not None:
            continue
        for end, other in ((part.lower, part.upper), (part.upper, part.lower)):
            counter = _uses(end, counters)
            if counter is not None and _uses(other, varying) is None:
                return counter
    return None


def _uses(expr: ast.AST | None, counters: set[str]) -> str | None:
    if expr is None:
        return None
    return next((n.id for n in astutil.walk(expr) if isinstance(n, ast.Name) and n.id in counters), None)


RULE = ShapeChangingArgInLoop()
