"""JM105 host-array-indexed-by-device-array

What it does
    Flags a subscript inside an eagerly running Python loop whose index is a JAX array and whose
    indexed value is host data: `x_train[perm[i]]` with `perm` from `jax.random.permutation` and
    `x_train` a NumPy array. A value of unknown kind counts only when the loop does not compute it
    (a data set loaded before the loop): one the loop computes is, in JAX code, most often a
    device array, whose gather stays on the device.

Why is this bad
    NumPy converts the index with `__array__`: it waits for the device to finish the work queued
    before it and copies the index to the host, every iteration. The gathered batch then goes
    back to the device. The step loop cannot run ahead of the device any more, so the host and
    the device take turns instead of overlapping.

Example
    perm = jax.random.permutation(key, n).reshape(-1, batch_size)
    for i in range(perm.shape[0]):
        idx = perm[i]
        state, loss = train_step(state, x_train[idx], y_train[idx])

Use instead
    perm = np.random.default_rng(seed).permutation(n).reshape(-1, batch_size)   # host indices
    for i in range(perm.shape[0]):
        idx = perm[i]
        state, loss = train_step(state, x_train[idx], y_train[idx])
    # or keep the data on the device (`x_train = jax.device_put(x_train)`) and index it there
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules.numpy_conversion_in_loop import WORDS
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS, LOOP_TYPES
from jaxmem.evaluators.review.semantic.roles import per_step_read

# Kinds of indexed values that take a device index without a copy to the host: a JAX array
# gathers on the device; a Python scalar or string cannot be indexed by an array at all.
_ON_DEVICE = ("jax",)


class HostArrayIndexedByDeviceArray(Rule):
    code = "JM105"
    name = "host-array-indexed-by-device-array"
    topic = "implicit-host-sync"
    severity = "warning"
    message = ("`{value}` is indexed with JAX array `{index}` in a loop: NumPy copies the index to the host "
               "and waits for the device every iteration")
    fix = ("Make the indices on the host (`np.random.default_rng(seed).permutation(n)`), or put the data on the "
           "device once and index it there.")
    node_types = (ast.Subscript,)
    only_in_host_loops = True
    requires = ("[",)

    def check(self, node: ast.Subscript, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body) or not isinstance(node.ctx, ast.Load):
            return
        if ctx.loops and all(isinstance(loop, COMPREHENSIONS) for loop in ctx.loops) and not ctx.per_step_body:
            # A comprehension on its own builds data (setup, a gather); the steps run in statement
            # loops. Inside a step (`batch = {k: v[perm] for k, v in ds.items()}` in the loop), it
            # reads the index on every step like the loop's own statements.
            return
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = [p for p in parts if not isinstance(p, ast.Slice) and ctx.kind(p) == "jax"]
        if not index:
            return
        if isinstance(node.value, ast.Attribute) and node.value.attr == "at":
            return  # `x.at[idx].set(v)`: JAX's indexed update, a JAX array's own (NumPy has no `.at`)
        held = ctx.kind(node.value)
        if held in _ON_DEVICE:
            return
        if held not in ("np", None) or periodic(ctx) or not_per_step(ctx, WORDS):
            return
        if held is None and not _loop_invariant(node.value, ctx):
            # A value of unknown kind that the loop itself computes (`detF = update(detF, ...)`)
            # is, in JAX code, most often a device array: its gather stays on the device (most
            # unknown-kind findings of the first runs, 10 right of 189 judged, were such). What
            # a step loop gathers from a data set it did not compute is the host data this is about.
            return
        how = per_step_read(ctx, index, gather=True)
        if how is None:
            return
        # Sure only where the indexed value is proven host data and the index a device array.
        sure = how == "sure" and ctx.kind(node.value, strict=True) == "np"
        ctx.report(self, node, value=ast.unparse(node.value)[:40], index=ast.unparse(index[0])[:40], sure=sure)


def _loop_invariant(held: ast.AST, ctx: Ctx) -> bool:
    """The indexed value's name is not bound by the innermost statement loop's body: a data set
    loaded before the loop (`train_ds["images"][p]`), or a comprehension's variable that ranges
    over one (`{k: v[perm] for k, v in train_ds.items()}`)."""
    root = held
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    loops = [lp for lp in ctx.loops if isinstance(lp, LOOP_TYPES)]
    if not loops:
        return True
    name = root.id
    for comp in (lp for lp in reversed(ctx.loops) if isinstance(lp, COMPREHENSIONS)):
        for gen in comp.generators:
            if any(isinstance(t, ast.Name) and t.id == name for t in astutil.walk(gen.target)):
                base = gen.iter
                while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                    base = base.func if isinstance(base, ast.Call) else base.value
                if not isinstance(base, ast.Name):
                    return False
                name = base.id
    loop = loops[-1]
    stores = (n for stmt in loop.body for n in astutil.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return not any(n.id == name for n in stores)


RULE = HostArrayIndexedByDeviceArray()
