"""JM108 growing-list-read-repeatedly

What it does
    Flags `history.append(loss)` of a device value in a loop when the list is never emptied and
    the whole of it is handed to a host consumer on every iteration of that loop or of a loop
    around it: NumPy or matplotlib (`np.mean(history)`, `ax.plot(history)`), or a function of the
    same file that hands it (or an item of a dict of such lists) to one, such as a `plot(...)`
    helper called once per epoch. Not flagged: a list emptied or made anew in the loop that reads
    it (each value is then copied a bounded number of times), one read only after the loops or in
    the block that ends the loop (`if token == eos: ...; break`).

    A new rule (its findings are possible until unseen readings judge it).

Why is this bad
    NumPy converts a list of JAX arrays element by element: one device->host copy, and one wait,
    per element. Handing the whole growing list over once per epoch copies every value again
    each time, so the copies grow with the square of the run's length. Measured on jax 0.10.2,
    CPU (benchmarks/claims/jm108_growing_list_of_device_values.py): `np.asarray` of a list of
    1,000 device scalars took 9.1 ms and of 10,000 took 128 ms, against 0.05 and 0.37 ms for the
    same numbers kept as host floats. Stacking them on the device first (`jnp.stack`) was not much
    faster (8.2 and 83 ms): each element is still a separate array.

Example
    history = []
    for epoch in range(epochs):
        for batch in batches:
            state, loss = train_step(state, batch)
            history.append(loss)
        plot(history)                     # copies every loss again, every epoch

Use instead
    history = []
    for epoch in range(epochs):
        epoch_losses = []
        for batch in batches:
            state, loss = train_step(state, batch)
            epoch_losses.append(loss)
        history += np.asarray(jnp.stack(epoch_losses)).tolist()   # each value copied once
        plot(history)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.loops import loop_bound
from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS, pos

# Host libraries that convert what they are handed with NumPy.
HOST_LIBRARIES = ("numpy.", "matplotlib.", "statistics.", "pandas.", "seaborn.")
# How a helper converts one element (`float(history[-1])`), not the whole list.
_SCALAR = frozenset({"float()", "int()", "bool()", "complex()", ".item()"})
# Calls that read a list without converting its elements.
_NO_COPY = frozenset({"len", "isinstance", "id", "type", "bool", "enumerate", "zip", "reversed", "iter"})


class GrowingListReadRepeatedly(Rule):
    code = "JM108"
    name = "growing-list-read-repeatedly"
    topic = "implicit-host-sync"
    severity = "warning"
    message = ("`{target}` gets a device value every iteration and is never emptied, and the whole list is handed to "
               "`{consumer}` (line {line}) on every iteration of the loop around it: NumPy copies each element to "
               "the host on its own, every time, so the copies grow with the square of the run")
    fix = ("Copy each value to the host once: convert each epoch's new values together and extend a host list "
           "(`history += np.asarray(jnp.stack(epoch_losses)).tolist()`), or append host numbers at a logging interval.")
    node_types = (ast.Call,)
    requires = (".append(",)
    only_in_host_loops = True
    earns_sure = True  # possible until unseen readings judge it

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append" and len(node.args) == 1):
            return
        if ctx.scope.traced or ctx.kind(node.args[0]) != "jax":
            return
        root = func.value.value if isinstance(func.value, ast.Subscript) else func.value
        if not isinstance(root, ast.Name):
            return
        loops = [lp for lp in ctx.loops if not isinstance(lp, COMPREHENSIONS)]
        b = ctx.analysis.resolve(root.id, ctx.scope, pos(root))
        if not loops or b is None or b.how not in ("assign", "param"):
            return
        for loop in reversed(loops):  # innermost first
            if root.id in loop_bound(ctx, loop) or pos(b.node) > pos(loop) or _emptied(loop, root.id):
                return  # made anew, or emptied, in this loop: each value is read a bounded number of times
            found = _consumer(loop, root.id, ctx)
            if found is not None:
                call, name = found
                ctx.report(self, node, target=ast.unparse(func.value), consumer=name, line=call.lineno, sure=False)
                return


def _emptied(loop: ast.AST, name: str) -> bool:
    """`history.clear()`, `del history[:]`, `history[:] = []` in the loop."""
    for n in astutil.walk(loop):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "clear" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
            return True
        if isinstance(n, (ast.Delete, ast.Assign)):
            targets = n.targets
            if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                   and isinstance(t.slice, ast.Slice) for t in targets):
                return True
    return False


def _consumer(loop: ast.AST, name: str, ctx: Ctx) -> tuple[ast.Call, str] | None:
    """A call in the loop's own body (not a nested def) that hands the whole list `name` to a host
    converter, directly or through a function of this file or another file of the tree that does."""
    a = ctx.analysis
    ending = None
    for stmt in loop.body:
        for n in astutil.walk(stmt):
            if not isinstance(n, ast.Call) or isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend"):
                continue
            given = [x for x in [*n.args, *(k.value for k in n.keywords)] if isinstance(x, ast.Name) and x.id == name]
            if not given:
                continue
            if ending is None:
                ending = _loop_ending_calls(loop)
            if id(n) in ending:
                continue  # `if token == eos: decode(np.array(res)); break` runs once
            if _host_call(n, ctx):
                return n, ast.unparse(n.func)[:40]
            converted, sig, _fn = helpers.callee_conversions(a, n.func, ctx.scope)
            if converted and any(arg is given[0] and how not in _SCALAR
                                 for arg, how in helpers.argument_converted(a, n, sig, converted)):
                return n, ast.unparse(n.func)[:40]
    return None


def _loop_ending_calls(loop: ast.AST) -> set[int]:
    """Ids of the nodes in a block that ends the loop (its `if` branch breaks, returns or raises)."""
    return {id(n) for x in astutil.walk(loop) if isinstance(x, ast.If)
            for block in (x.body, x.orelse) if any(isinstance(st, (ast.Break, ast.Return, ast.Raise)) for st in block)
            for st in block for n in astutil.walk(st)}


def _host_call(call: ast.Call, ctx: Ctx) -> bool:
    if isinstance(call.func, ast.Name) and call.func.id in _NO_COPY:
        return False
    q = ctx.qualname(call.func)
    if q is not None:
        return q.startswith(HOST_LIBRARIES)
    return isinstance(call.func, ast.Attribute) and call.func.attr in helpers.PLOT_METHODS


RULE = GrowingListReadRepeatedly()
