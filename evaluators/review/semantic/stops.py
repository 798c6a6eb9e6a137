"""Stop checks: what decides, on every iteration, whether a loop goes on from a device value.

A loop whose stop test reads the device (`if float(val) < tol: break`, `while err > tol:`) cannot
queue its next step before the device answers, so its other host reads stall nothing more; a
test that reads the device only when an option is on (`if cfg.kl_threshold and kl > ...`) is no
such wait. Split from syncs.py, whose waits these tests are built from.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.syncs import iteration, reads_condition, waits
from jaxmem.evaluators.review.semantic.walk import Walk


def stop_checks(ctx: Walk, loop: ast.AST) -> frozenset[ast.AST]:
    """What decides, on every iteration, whether the loop goes on from a device value read on
    the host: the tests (`if float(val) < tol: break`, `while err > tol:`) and the statements
    that read the values they test (`gnorm = float(state.error)`, `history.append(float(v))`
    before `if converged(history[-1], gnorm): break`). Empty when there is none. Such a loop
    cannot dispatch its next step before the device answers; tests under a periodic guard
    (`if step % 100 == 0`) stop only every N steps, a `raise` guard is a check rather than what
    the loop computes, and a step counter (`state.step > n`) the host could count itself."""
    memo = ctx.memo.setdefault("stop_checks", {})
    if loop not in memo:
        memo[loop] = _stop_checks(ctx, loop, list(getattr(loop, "body", None) or []))
    return memo[loop]


def in_stop_check(ctx: Walk, loop: ast.AST | None) -> bool:
    """The current node is (part of) one of the loop's stop checks."""
    checks = stop_checks(ctx, loop) if loop is not None else frozenset()
    if not checks:
        return False
    here = ctx.stack[-1] if ctx.stack else None
    return getattr(here, "test", None) in checks or any(n in checks for n in ctx.stack)


def stopped_elsewhere(ctx: Walk, loop: ast.AST | None) -> bool:
    """The iteration waits for the device in its stop check anyway: a host read elsewhere in it
    copies a value but stalls nothing more. Not when every stop check is optional."""
    return (loop is not None and bool(stop_checks(ctx, loop)) and not in_stop_check(ctx, loop)
            and not optional_stop(ctx, loop))


def optional_stop(ctx: Walk, loop: ast.AST | None) -> bool:
    """Every stop check of the loop reads the device only when an option is on: `if
    self.cfg.kl_threshold and kl > self.cfg.kl_threshold: break` waits on no iteration when the
    threshold is unset, so whether the loop's other reads stall anything depends on a setting
    the source does not fix."""
    if loop is None:
        return False
    tests = [t for t in stop_checks(ctx, loop) if _is_test_of(loop, t)]
    return bool(tests) and all(_option_first(ctx, t) for t in tests)


def _is_test_of(loop: ast.AST, test: ast.AST) -> bool:
    if isinstance(loop, ast.While) and test is loop.test:
        return True
    return any(isinstance(n, ast.If) and n.test is test for n in astutil.walk(loop))


def _option_first(ctx: Walk, test: ast.AST) -> bool:
    """`A and B` whose first operand reads no device value and is no name the loop rebinds: an
    attribute of a config or of the object, a flag."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return False
    first = test.values[0]
    return (isinstance(first, (ast.Attribute, ast.Name)) and ctx.kind(first) != "jax"
            and not waits(ctx, first, 1) and not reads_condition(ctx, first))


def _stop_checks(ctx: Walk, loop: ast.AST, body: list[ast.stmt]) -> frozenset[ast.AST]:
    tests = [loop.test] if isinstance(loop, ast.While) else []
    tests += [stmt.test for stmt in _exit_ifs(ctx, body)]
    if not tests:
        return frozenset()
    feeders = _host_reads_by_name(ctx, body)
    out: set[ast.AST] = set()
    for test in tests:
        if _counter_test(ctx, test):
            continue  # `if state.step > max_steps: return`: the host could count the steps itself
        fed = [feeders[n.id] for n in astutil.walk(test) if isinstance(n, ast.Name) and n.id in feeders]
        if fed or reads_condition(ctx, test) or waits(ctx, test, 1):
            out.add(test)
            out.update(stmt for stmts in fed for stmt in stmts)
    return frozenset(out)


# The step count a train state carries (Flax's TrainState.step), or a step number a jitted step
# returns: a stop test on it reads the device for a number the host loop could count itself, a
# cost to remove rather than a need.
STEP_COUNTERS = frozenset({"step", "global_step"})


def _counter_test(ctx: Walk, test: ast.AST) -> bool:
    """A test whose only device values are step counters (`state.step > n`, `state.step[0] > n`,
    `while step < steps` with `step` returned by the jitted step)."""
    counters = [n for n in astutil.walk(test) if (isinstance(n, ast.Attribute) and n.attr in STEP_COUNTERS)
                or (isinstance(n, ast.Name) and n.id in STEP_COUNTERS)]
    if not counters:
        return False
    inside = {id(n) for c in counters for n in astutil.walk(c)}
    for n in astutil.walk(test):
        if id(n) in inside or not isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            continue
        if ctx.kind(n) == "jax" and not any(id(c) in inside for c in astutil.walk(n)):
            return False
    return True


def _exit_ifs(ctx: Walk, stmts: list[ast.stmt]) -> list[ast.If]:
    """The `if` statements of one iteration (not periodic guards, nor what they hold) whose
    branch leaves the loop with its result: break or return."""
    def periodic(stmt: ast.If) -> bool:
        return periodic_guard(stmt, None, ctx.analysis, ctx.scope)

    return [stmt for stmt in iteration(stmts, skip=periodic)
            if isinstance(stmt, ast.If) and (_leaves(stmt.body) or _leaves(stmt.orelse))]


def _leaves(stmts: list[ast.stmt]) -> bool:
    for stmt in stmts:
        if isinstance(stmt, (ast.Break, ast.Return)):
            return True  # not `raise`: a guard against NaNs is a check, not what the loop computes
        if isinstance(stmt, ast.If) and (_leaves(stmt.body) or _leaves(stmt.orelse)):
            return True
        if isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)) and _leaves(stmt.body):
            return True
    return False


def _host_reads_by_name(ctx: Walk, stmts: list[ast.stmt]) -> dict[str, list[ast.AST]]:
    """Names this iteration binds to a host read (`gnorm = float(state.error)`) or to a value
    computed from such names (`d = jax.device_get(diag(state))`, then `ok, why = stable(d)`), or
    appends a host read to (`history.append(float(state.value))`), outside nested loops and
    defs, with the statements (or calls) that read the device for them."""
    # Each name's reads, once each (by id, in order): a value re-bound from itself every
    # iteration (`x = f(x, y)`, `y = g(x, y)`) would otherwise copy its list into itself, doubling
    # it per statement (a 300 KB Monte Carlo driver of 12zzk took 8 GB).
    out: dict[str, dict[int, ast.AST]] = {}

    def read_by(expr: ast.AST) -> list[ast.AST] | None:
        if waits(ctx, expr, 1):
            return []
        fed = {k: stmt for n in astutil.walk(expr) if isinstance(n, ast.Name) and n.id in out
               for k, stmt in out[n.id].items()}
        return list(fed.values()) or None

    for n in _calls_and_assigns(stmts):
        if isinstance(n, ast.Assign):
            fed = read_by(n.value)
            if fed is not None:
                for target in n.targets:
                    for t in astutil.walk(target):
                        if isinstance(t, ast.Name):
                            reads = out.setdefault(t.id, {})
                            for stmt in (*fed, n):
                                reads.setdefault(id(stmt), stmt)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
              and isinstance(n.func.value, ast.Name) and n.args and waits(ctx, n.args[0], 1)):
            # Only a read appended as it is: a record built of several names (`hist.append({...})`)
            # holds fields the test may never look at.
            out.setdefault(n.func.value.id, {}).setdefault(id(n), n)
    return {name: list(reads.values()) for name, reads in out.items()}


def _calls_and_assigns(stmts: list[ast.stmt]):
    """Assignments and expression-statement calls of one iteration."""
    for stmt in iteration(stmts):
        if isinstance(stmt, ast.Assign):
            yield stmt
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield stmt.value
