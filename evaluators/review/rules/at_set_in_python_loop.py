"""JM501 at-set-in-python-loop

What it does
    Flags `x = x.at[...].set(...)` (and `.add`, `.mul`, ... and `lax.dynamic_update_slice`)
    re-binding the same array inside a Python loop that runs outside jit (not in loops of a few
    literal iterations or ones that queue no other device work). Only where the file shows the
    loop running eagerly: at module level, or in a function this file calls from code it does
    not compile. Not in methods, nor in library functions nobody here calls: an indexed update is
    valid traced code too, and such functions (an environment's `step` and its helpers, a model's
    layers) are usually called from jitted code elsewhere, where the loop unrolls at trace time
    into one scatter each.

    Whether the copies matter depends on sizes the source rarely shows. Opt-in until the fourteenth
    stop (on the real-code benchmark its 9 findings were setup and post-processing over small
    arrays); on by default since the unseen readings showed hand-found cases of this kind that
    no rule reported (whole trajectory buffers rewritten every solver step), and it must earn
    "sure" (Rule.earns_sure): its findings are possible until its record on unseen code reaches
    the floor.

Why is this bad
    Outside jit every indexed update is its own operation that returns a new array: the whole
    array is copied on every iteration, so n updates of an array of size m cost O(n*m) time
    and a second buffer. Only inside a jitted function, with the input not used again, can
    XLA update in place.

Example
    for i in range(n):
        x = x.at[i].set(i * 2.0)

Use instead
    x = x.at[jnp.arange(n)].set(jnp.arange(n) * 2.0)   # one vectorised update
    # or run the loop under jit with lax.fori_loop, donating x
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.loops import not_per_step

AT_METHODS = frozenset({"set", "add", "multiply", "mul", "divide", "power", "min", "max", "apply"})
UPDATE_FUNCS = frozenset({"jax.lax.dynamic_update_slice", "jax.lax.dynamic_update_index_in_dim",
                          "jax.lax.dynamic_update_slice_in_dim"})


def at_update_base(call: ast.AST) -> ast.AST | None:
    """`x.at[i].set(v)` -> `x`; None for anything else."""
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in AT_METHODS
            and isinstance(call.func.value, ast.Subscript)
            and isinstance(call.func.value.value, ast.Attribute) and call.func.value.value.attr == "at"):
        return call.func.value.value.value
    return None


class AtSetInPythonLoop(Rule):
    code = "JM501"
    name = "at-set-in-python-loop"
    topic = "in-place-updates"
    severity = "warning"
    earns_sure = True  # possible until unseen readings judge it (its cost depends on sizes)
    message = "`{name}` is updated with `{how}` in a Python loop outside jit: the whole array is copied every iteration"
    fix = "Vectorise the updates into one `.at[indices].set(values)`, or run the loop under jit (`lax.fori_loop`) and donate the array."
    node_types = (ast.Assign,)
    requires = ('.at[', 'dynamic_update')
    only_in_host_loops = True

    def check(self, node: ast.Assign, ctx: Ctx) -> None:
        if not ctx.host_loop or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        if _in_method(ctx):
            return
        name = node.targets[0].id
        value = node.value
        base = at_update_base(value)
        how = None
        if base is not None:
            how = f".at[].{value.func.attr}"
        elif isinstance(value, ast.Call) and ctx.qualname(value.func) in UPDATE_FUNCS and value.args:
            base = value.args[0]
            how = ctx.qualname(value.func).replace("jax.lax.", "lax.")
        if isinstance(base, ast.Name) and base.id == name and not not_per_step(ctx, sync=False) and _shown_eager(ctx):
            ctx.report(self, node, name=name, how=how)


def _in_method(ctx: Ctx) -> bool:
    """The loop is in a method (or a function nested in one), whose callers this file may not show."""
    s = ctx.scope
    while s is not None and s is not ctx.analysis.module_scope:
        if s.cls is not None:
            return True
        s = s.parent
    return False


def _shown_eager(ctx: Ctx) -> bool:
    """The file shows the loop running outside jit: at module level, or in a function (nested
    ones through their outermost) that this file calls from code it does not trace. A library
    function nobody here calls may be called from jitted code elsewhere, where the loop unrolls
    into one scatter per update."""
    s = ctx.scope
    while s.parent is not None and s.parent is not ctx.analysis.module_scope:
        s = s.parent
    if s is ctx.analysis.module_scope:
        return True
    if not isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or s.jitted:
        return False
    return any(not caller.jitted for _call, caller in ctx.analysis.call_sites(s.node))


RULE = AtSetInPythonLoop()
