"""JM107 data-dependent-shape-in-loop

What it does
    Flags, on every iteration of an eagerly running Python loop (or in a function such a loop calls
    every step), a JAX operation whose result's shape depends on the values of a device array:
    `jnp.unique` (and `unique_values`, `unique_counts`, `unique_inverse`, `unique_all`),
    `jnp.nonzero` / `x.nonzero()`, `jnp.flatnonzero`, `jnp.argwhere`, one-argument `jnp.where`,
    `jnp.extract`, the set operations (`union1d`, `intersect1d`, `setdiff1d`, `setxor1d`), all
    without `size=`, and indexing with a boolean mask computed on the device (`x[x > 0]`).
    A new rule: its findings are possible until unseen readings judge it (Rule.earns_sure).

Why is this bad
    Outside jit, JAX must know how many elements the result has before it can allocate it, so it
    reads the values on the host first (jax/_src/numpy/setops.py: `core.concrete_or_error` on the
    mask without `size`; lax_numpy.nonzero: `concrete_dim_or_error(mask.sum())`): the call waits
    for every queued computation that produces its input, once per iteration. Measured on jax
    0.10.2 (CPU, `benchmarks/claims/jm107_data_dependent_shapes.py`), after queueing a step of
    ~97 ms: `jnp.unique(y)` returned after 87 ms, `jnp.nonzero(y > 0)` after 111 ms, `y[y > 0]`
    after 101 ms; `jnp.sort(y)` after 0.5 ms, `jnp.unique(y, size=10)` after 5 ms and
    `jnp.where(y > 0, y, 0)` after 0.8 ms.

Example
    for batch in batches:
        state, codes = train_step(state, batch)
        used = jnp.unique(codes).size         # waits for train_step every step

Use instead
    for batch in batches:
        state, codes = train_step(state, batch)
        used = jnp.unique(codes, size=K, fill_value=-1)   # a static shape: no wait
    # or compute the statistic inside the jitted step, or every N steps
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.roles import per_step_read
from jaxmem.evaluators.review.semantic.shapes import sized_by_values

# A benchmark named for one of these measures the operation itself.
_WORDS = ("unique", "nonzero", "argwhere", "mask")


class DataDependentShapeInLoop(Rule):
    code = "JM107"
    name = "data-dependent-shape-in-loop"
    topic = "implicit-host-sync"
    severity = "warning"
    message = ("`{what}` sizes its result from the values of a JAX array: outside jit it reads them on the host, "
               "a device->host sync every iteration")
    fix = ("Give the size statically (`size=` and `fill_value=`), keep the shape with `jnp.where(mask, x, fill)`, or "
           "compute it inside the jitted step or every N steps.")
    node_types = (ast.Call, ast.Subscript)
    only_in_host_loops = True
    earns_sure = True  # possible until unseen readings judge it

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body):  # (both outside traced code)
            return
        value = sized_by_values(ctx, node)
        if value is None or periodic(ctx) or not_per_step(ctx, _WORDS):
            return
        how = per_step_read(ctx, [value])
        if how is not None:
            ctx.report(self, node, what=describe(node), sure=how == "sure")


RULE = DataDependentShapeInLoop()
