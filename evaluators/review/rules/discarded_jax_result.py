"""JM506 discarded-jax-result

What it does
    Flags a call of a JAX array function (`jax.numpy.*`, `jax.random.*`, `jax.lax.*`,
    `jax.nn.*`, `jax.scipy.*`, `jax.image.*`) written as a statement of its own, its result
    thrown away, on every iteration of a Python loop that runs eagerly (or in a function such a
    loop calls every step): `jnp.clip(x, 0, 1)`, `jax.random.permutation(key, walkers)`,
    `jnp.sort(scores)`. Not flagged: calls whose arguments are all constants, functions that
    return metadata (`jnp.broadcast_shapes`, used to check shapes: it raises when they do not
    broadcast), the functions of `jax.numpy` with an effect outside their result (`save`,
    `savez`, `load`, `fromfile`, `set_printoptions`, `printoptions`), `jax.lax`'s control flow,
    callbacks and collectives (they run Python functions, or synchronise devices), and code
    inside jit (the compiler drops an unused result, so it costs nothing there), a call in a
    `try` block with handlers (`try: jnp.asarray(leaf) except Exception: raise TypeError(...)`: a
    check that the value converts or broadcasts, run for the exception it may raise), or a loop
    whose body is nothing but such statements (`while state: lax.add(a, b)`: a benchmark of the
    call's dispatch, or a warm-up). A dropped
    result outside a loop is dead code run once: not this rule's business.

Why is this bad
    These functions are pure: they return a new array and never change their arguments (JAX
    arrays are immutable; the jax.numpy docs say so for the NumPy functions that modify their
    argument in place, such as `jnp.put`, which returns a modified copy). Run eagerly, the
    statement still dispatches the work and allocates the result, which is freed at once: a
    device computation, and an allocation the size of the result, for nothing, every time the
    line runs. And the change the code meant to make never happens: the array it names keeps
    its old value.

Example
    for step in range(n_steps):
        key, sub = jax.random.split(key)
        jax.random.permutation(sub, walkers)      # walkers are never shuffled
        walkers = move(walkers, sub)

Use instead
    for step in range(n_steps):
        key, sub = jax.random.split(key)
        walkers = jax.random.permutation(sub, walkers)
        walkers = move(walkers, sub)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic.names import JAX_ARRAY_PREFIXES, JAX_NON_ARRAY, TRY_TYPES

# jax.numpy functions that do something besides returning a value (files, global print options).
EFFECTS = frozenset({
    "jax.numpy.save", "jax.numpy.savez", "jax.numpy.load", "jax.numpy.fromfile",
    "jax.numpy.set_printoptions", "jax.numpy.printoptions",
})
# jax.lax primitives that run Python functions (which may print, log or call back).
RUNS_FUNCTIONS = frozenset({
    "jax.lax.cond", "jax.lax.switch", "jax.lax.while_loop", "jax.lax.fori_loop", "jax.lax.scan",
    "jax.lax.map", "jax.lax.associative_scan", "jax.lax.custom_root", "jax.lax.custom_linear_solve",
})
# Collectives: a dropped `lax.psum(ones, axis_name)` is how code writes a barrier across devices.
COLLECTIVES = frozenset({"psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "psum_scatter",
                         "pshuffle", "pbroadcast", "pswapaxes"})
# The modules whose functions these are (not attributes of a function: `expit.def_inverse_unary`).
MODULES = frozenset({
    "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.random", "jax.lax", "jax.lax.linalg", "jax.nn",
    "jax.image", "jax.scipy.special", "jax.scipy.linalg", "jax.scipy.signal", "jax.scipy.fft",
    "jax.scipy.ndimage", "jax.scipy.integrate", "jax.scipy.spatial.transform", "jax.scipy.cluster.vq",
})


class DiscardedJaxResult(Rule):
    code = "JM506"
    name = "discarded-jax-result"
    topic = "in-place-updates"
    severity = "warning"
    message = ("the result of `{expr}` is thrown away: JAX functions return a new array and never change their "
               "arguments, so this computes and allocates a result nobody reads{names}")
    fix = "Assign the result (`x = {func}(x, ...)`) or delete the line; JAX arrays are never changed in place."
    node_types = (ast.Expr,)
    requires = ("jax",)
    earns_sure = True  # possible until unseen readings judge it

    def check(self, node: ast.Expr, ctx: Ctx) -> None:
        call = node.value
        if call.__class__ is not ast.Call or not (ctx.host_loop or ctx.per_step_body):
            return
        q = ctx.qualname(call.func)
        if q is None or not q.startswith(JAX_ARRAY_PREFIXES) or q in EFFECTS or q in RUNS_FUNCTIONS:
            return
        module, _, leaf = q.rpartition(".")
        if q in JAX_NON_ARRAY or leaf in COLLECTIVES or "callback" in leaf or not (
                module in MODULES or module.startswith("jax.scipy.stats.")):
            return
        parent = ctx.parent
        if isinstance(parent, TRY_TYPES) and parent.handlers and any(st is node for st in parent.body):
            return  # `try: jnp.asarray(leaf) except ...: raise TypeError(...)`: a check that may raise
        if ctx.loops and all(_jax_work(st, ctx) for st in ctx.loops[-1].body):
            return  # a loop that only runs JAX calls and drops them: a benchmark or a warm-up
        operands = [*call.args, *(kw.value for kw in call.keywords)]
        variables = [a for a in operands if not _constant(a)]
        if not variables:
            return  # `jnp.zeros(1)`, `jax.random.key(0)`: a warm-up or a backend start
        named = operands[1:] if q.startswith("jax.random.") else operands  # not the key: the array
        names = [describe(a) for a in named if isinstance(a, (ast.Name, ast.Attribute, ast.Subscript))]
        what = f" (`{names[0]}` keeps its old value)" if names else ""
        ctx.report(self, node, expr=describe(call), names=what, func=q.replace("jax.numpy.", "jnp.", 1))


def _jax_work(stmt: ast.stmt, ctx: Ctx) -> bool:
    """`lax.add(a, b)` or `f(x).block_until_ready()` as a statement: work run only to be run."""
    if stmt.__class__ is not ast.Expr or stmt.value.__class__ is not ast.Call:
        return False
    func = stmt.value.func
    if isinstance(func, ast.Attribute) and func.attr == "block_until_ready":
        return True
    return (ctx.qualname(func) or "").startswith(JAX_ARRAY_PREFIXES)


def _constant(node: ast.AST) -> bool:
    """A literal, or a tuple/list of literals (`jnp.zeros((2, 3))`)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_constant(e) for e in node.elts)
    return False


RULE = DiscardedJaxResult()
