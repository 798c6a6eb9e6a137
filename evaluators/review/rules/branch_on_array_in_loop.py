"""JM104 branch-on-array-in-loop

What it does
    Flags `if`/`while` conditions, `assert` tests and `and`/`or`/`not` tests that evaluate a JAX
    array inside an eagerly running Python loop, such as `if loss < best:`, `while err > tol:` or
    `assert jnp.isfinite(g).all()`. A test that decides whether to go on (`while`,
    `if ...: break`, an `if` whose body only raises, an `assert`) must read the value somewhere:
    it is reported as possible, never sure. Loops that are not hot (a few
    literal iterations, per epoch, no device work queued) are not flagged.

Why is this bad
    A Python condition calls `bool()` on the array (an `assert` too, unless Python runs with `-O`): the host waits for the device and copies
    the value back before it can choose a branch, once per iteration. The device idles while
    Python decides.

Example
    for batch in batches:
        state, loss = train_step(state, batch)
        if loss < best:
            best = loss

Use instead
    for batch in batches:
        state, loss = train_step(state, batch)
        best = jnp.minimum(best, loss)        # no host decision needed
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic.branches import periodic_operand
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.roles import enclosing_role, per_step_read
from jaxmem.evaluators.review.semantic.syncs import compares_array


class BranchOnArrayInLoop(Rule):
    code = "JM104"
    name = "branch-on-array-in-loop"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "condition `{what}` reads a JAX array on the host: a device->host sync every iteration"
    fix = "Compute the decision on device (`jnp.where`, `jnp.minimum`, `lax.cond`) or test it every N steps."
    assert_fix = ("Assert every N steps or once after the loop, or check on the device "
                  "(`jax.experimental.checkify`) and read the error every N steps.")
    node_types = (ast.If, ast.While, ast.IfExp, ast.Assert)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        # A `while` test runs every iteration of its own loop, so it counts even at top level.
        in_loop = ctx.host_loop or ctx.per_step_body or (isinstance(node, ast.While) and not ctx.scope.traced)
        if not in_loop:
            return
        # A check that raises on failure (`if jnp.isnan(loss): raise ...`) reads because it must:
        # a stop check, reported but never proven (checking every N steps, or on the device with
        # checkify, removes the per-step wait).
        # An `assert` is that check written in one line.
        raises = isinstance(node, ast.Assert) or (
            isinstance(node, ast.If) and bool(node.body) and all(isinstance(s, ast.Raise) for s in node.body))
        if isinstance(node, ast.Assert) and not enclosing_role(ctx).steps:
            return  # outside a loop that steps, an assertion's read is the check it exists for (tests, data checks)
        test = node.test
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance"
               for n in astutil.walk(test)):
            return  # type dispatch (`isinstance(g, int) and g == 1`): the value may be a Python int
        if self._reads_array(test, ctx) and not periodic(ctx) and not (ctx.loops and not_per_step(ctx)):
            # A test that decides whether to go on (a `while` condition, `if ...: break`) is a stop
            # check: some read is needed unless the whole loop moves into lax.while_loop.
            stop = raises or isinstance(node, ast.While) or (isinstance(node, ast.If) and _exits(node.body))
            how = per_step_read(ctx, self._values(test, ctx), stop_check=stop)
            if how is not None:
                fix = self.assert_fix if isinstance(node, ast.Assert) else None
                ctx.report(self, test, what=describe(test), sure=how == "sure", fix=fix)

    def _values(self, test: ast.AST, ctx: Ctx) -> list[ast.AST]:
        return [n for n in astutil.walk(_every_step_part(test, ctx)) if isinstance(n, (ast.Name, ast.Subscript, ast.Call, ast.Attribute))
                and ctx.kind(n) == "jax"]

    def _reads_array(self, test: ast.AST, ctx: Ctx) -> bool:
        if isinstance(test, ast.BoolOp):
            return any(self._reads_array(v, ctx) for v in _every_step_part(test, ctx).values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._reads_array(test.operand, ctx)
        if isinstance(test, ast.Compare):
            return compares_array(ctx, test)
        if isinstance(test, (ast.Name, ast.Subscript, ast.Call, ast.BinOp, ast.Attribute)):
            # `if nbrs.did_buffer_overflow:` reads a field of a jitted step's result pytree
            return ctx.kind(test) == "jax"
        return False


def _every_step_part(test: ast.AST, ctx: Ctx) -> ast.AST:
    """The operands of `and` that run every iteration: those up to the first periodic test
    (`step % save_every == 0 and loss < best` evaluates the comparison on save steps only)."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return test
    for k, v in enumerate(test.values[1:], 1):
        if periodic_operand(test, v, ctx.analysis, ctx.scope):
            return ast.BoolOp(op=test.op, values=test.values[:k])
    return test


def _exits(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, (ast.Break, ast.Return)) for stmt in body for n in astutil.walk(stmt))


RULE = BranchOnArrayInLoop()
