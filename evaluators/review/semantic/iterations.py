"""Which statements of a loop's iteration run every time: not the body of `if step % N == 0:`, and
not a block that ends the loop (`if np.isnan(loss): ...; break`), which runs at most once."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic import syncs
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.helpers import calls_in
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.walk import Walk

# Axes and figure methods that draw: a call of one of these on every iteration is a plotting loop.
PLOT_METHODS = frozenset({"imshow", "plot", "scatter", "contour", "contourf", "pcolormesh", "hist", "bar",
                          "set_title", "cla", "clf", "pause", "draw", "savefig", "matshow", "quiver"})

def draws(ctx: Walk, roots: list[ast.AST]) -> bool:
    """A call into matplotlib (`plt.imshow`, `ax.set_title(...)`) in these statements, outside
    nested functions and outside `if step % N == 0:` blocks (a plot every N steps does not make
    every iteration a drawing one): the iteration renders, a host-side cost far above one device
    read."""
    for n in calls_in(_every_iteration(ctx, roots)):
        q = ctx.analysis.qualname(n.func) or ""
        if q.startswith("matplotlib.") or (isinstance(n.func, ast.Attribute) and n.func.attr in PLOT_METHODS
                                           and not q.startswith(("jax.", "numpy."))):
            return True
    return False


_EXITS = frozenset({"sys.exit", "os._exit"})


def ends_loop(stmt: ast.AST, a: Analysis) -> bool:
    """The statement always ends the loop (or the script): `break`, `return`, `raise`, `exit()` /
    `sys.exit()`. (With `continue`, it ends the block: engine.live.)"""
    if isinstance(stmt, (ast.Return, ast.Raise, ast.Break)):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and (
        a.qualname(stmt.value.func) in _EXITS
        or isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in ("exit", "quit"))


def in_leaving_block(ctx: Walk) -> bool:
    """The node sits in a block of an `if` inside the innermost loop that ends the loop (`if
    np.isnan(loss): print(loss); break`): that block runs at most once, not every iteration."""
    if not ctx.loops:
        return False
    loop = ctx.loops[-1]
    stack = ctx.stack
    try:
        start = next(i for i in range(len(stack) - 1, -1, -1) if stack[i] is loop)
    except StopIteration:
        return False
    for i in range(start + 1, len(stack) - 1):
        node, child = stack[i], stack[i + 1]
        if isinstance(node, ast.If) and child is not node.test:
            block = node.body if any(child is st for st in node.body) else node.orelse
            if any(ends_loop(st, ctx.analysis) for st in block):
                return True
    return False


def _every_iteration(ctx: Walk, stmts: list[ast.AST]) -> list[ast.AST]:
    """What runs on every iteration of these statements: periodic `if`s left out with their
    blocks (syncs.iteration walks the rest), and of a compound statement only its header (its
    blocks come as statements of their own)."""
    def periodic(st: ast.If) -> bool:
        return periodic_guard(st, None, ctx.analysis, ctx.scope)

    out: list[ast.AST] = []
    for st in syncs.iteration(stmts, skip=periodic):
        if isinstance(st, ast.If):
            out.append(st.test)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            out.extend(item.context_expr for item in st.items)
        elif not isinstance(st, ast.Try):
            out.append(st)
    return out


def matches_one_key(test: ast.AST, loop: ast.AST) -> bool:
    """`if name == "lr":` (or `name in ("a", "b")`, or several such joined by `or`) where `name` is
    the target of the `for` loop around it: the branch runs for the elements it names, once each in
    a walk over distinct keys (parameter names, config entries), not on every iteration."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(matches_one_key(v, loop) for v in test.values)
    if not (isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(left, ast.Constant):
        left, right = right, left
    if not (isinstance(left, ast.Name) and left.id in names):
        return False
    if isinstance(op, ast.Eq):
        return isinstance(right, ast.Constant)
    return isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and all(
        isinstance(e, ast.Constant) for e in right.elts)
