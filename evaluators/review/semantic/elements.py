"""A device array walked element by element by a Python loop.

`for i in perm: int(i)` or `[x.item() for x in tokens]`: iterating a JAX array slices it on the
device, one small array per element, and each host read of an element copies that element on its
own. One copy of the whole array before the loop (`np.asarray(perm)`, `perm.tolist()`) does the
same work in one transfer. The loop's role does not change that: walking the results of an
evaluation element by element costs as many transfers as it has elements, where gathering them
whole is one. What makes it a cost worth a finding is repetition: the walk runs on every
iteration of an outer loop that queues device work, or in a function such a loop calls every
step. Loops the source shows to be short are left alone.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.loops import dispatches, loop_bound, loop_targets, small_loop
from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS, pos
from jaxmem.evaluators.review.semantic.walk import Walk

ELEMENT_WISE = "element by element"  # in such a finding's message: what a fixer must not treat as a logged read


def walked_array(ctx: Walk, value: ast.AST) -> ast.AST | None:
    """The device array an enclosing Python loop walks, where `value` is its element (the loop's
    own target, not an index or a dict value) and the loop is not known to be short."""
    if isinstance(value, ast.Subscript) and not ctx.scope.traced:
        return _indexed_array(ctx, value)
    if not isinstance(value, ast.Name) or ctx.scope.traced:
        return None
    b = ctx.analysis.resolve(value.id, ctx.scope, pos(value))
    if b is None or b.how != "iter" or b.element != "elem" or b.value is None:
        return None
    loop = next((lp for lp in ctx.loops if lp is b.node), None)
    array = ctx.analysis.unwrapped(b.value, ctx.scope)
    if loop is None or ctx.kind(array) != "jax" or small_loop(loop, ctx.analysis, ctx.scope):
        return None
    return array if _repeated(ctx, loop) else None


def _indexed_array(ctx: Walk, value: ast.Subscript) -> ast.AST | None:
    """`float(V[node_idx])` in `for name, node_idx in nodes.items():`: a device array the loop does
    not change, indexed by the loop's own variable: one slice and one copy per element, the same
    walk written with an index."""
    array = value.value
    if not isinstance(array, ast.Name) or ctx.kind(array) != "jax":
        return None
    used = {n.id for n in astutil.walk(value.slice) if isinstance(n, ast.Name)}
    loop = next((lp for lp in reversed(ctx.loops) if loop_targets(lp) & used), None)
    if loop is None or array.id in loop_bound(ctx, loop) or small_loop(loop, ctx.analysis, ctx.scope):
        return None
    return array if _repeated(ctx, loop) else None


def _repeated(ctx: Walk, loop: ast.AST) -> bool:
    """Repeated: inside an outer host loop that queues device work (a batch built per training
    step, a permutation walked per epoch), or in a function such a loop calls every step. A walk
    run once (labels for a plot, a summary at the end of a script) costs its copies once."""
    outer = ctx.loops[:ctx.loops.index(loop)]
    return ctx.per_step is not None or any(not isinstance(lp, COMPREHENSIONS) and dispatches(ctx, lp) for lp in outer)
