"""Host reads and explicit waits: where Python stops and waits for the device.

Each predicate takes the walk's position (`ctx`: the analysis, the scope, the enclosing loops
and the stack of nodes down to the current one, and a per-file memo), never a rule.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.walk import Walk

SYNC_BUILTINS = frozenset({"float", "int", "bool", "complex"})

SYNC_METHODS = frozenset({"item", "tolist", "block_until_ready", "__array__"})

# MJX's get_data / get_data_into build a host mujoco.MjData from device mjx.Data: a device->host copy.
SYNC_FUNCS = frozenset({"jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array",
                        "mujoco.mjx.get_data", "mujoco.mjx.get_data_into"})

FORMAT_BUILTINS = frozenset({"print", "str", "repr", "format"})

EXPLICIT_WAITS = frozenset({"jax.block_until_ready"})  # a host read (device_get) is itself the cost

def builtin_name(ctx: Walk, func: ast.AST) -> str | None:
    """`float` when it is the builtin (not shadowed by an import or a binding in scope)."""
    if isinstance(func, ast.Name) and ctx.analysis.is_builtin(func, ctx.scope):
        return func.id
    return None

def reads_condition(ctx: Walk, test: ast.AST) -> bool:
    """An `if`/`while` test whose value is a device array: Python calls bool() on it."""
    if isinstance(test, ast.BoolOp):
        return any(reads_condition(ctx, v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return reads_condition(ctx, test.operand)
    if isinstance(test, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in test.ops):
            return False
        return any(ctx.kind(v) == "jax" for v in [test.left, *test.comparators])
    return isinstance(test, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) and ctx.kind(test) == "jax"

def waits(ctx: Walk, node: ast.AST, depth: int = 0) -> bool:
    """The expression waits for the device: block_until_ready, device_get, or a host read of a
    device array (float/int/bool/.item()/.tolist()/NumPy on it, printing or formatting it, an
    `if` on it), or a call of a module function whose body does one of those."""
    for n in astutil.walk(node):
        if isinstance(n, (ast.If, ast.While)) and reads_condition(ctx, n.test):
            return True
        if isinstance(n, ast.Call):
            func = n.func
            if builtin_name(ctx, func) in FORMAT_BUILTINS and any(
                    ctx.kind(x) == "jax" for x in [*n.args, *(k.value for k in n.keywords)]):
                return True
            if (isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Constant)
                    and any(ctx.kind(x) == "jax" for x in n.args)):
                return True  # "{}".format(loss)
            if depth == 0 and (_calls_waiting_function(ctx, n) or hands_to_converter(ctx, n)):
                return True
            if isinstance(func, ast.Attribute) and func.attr in ("block_until_ready", "item", "tolist"):
                if func.attr == "block_until_ready" or ctx.kind(func.value) == "jax":
                    return True
            q = ctx.qualname(func)
            if q in ("jax.block_until_ready", "jax.device_get"):
                return True
            if q is not None and q.startswith("numpy.") and any(ctx.kind(x) == "jax" for x in n.args):
                return True
            if builtin_name(ctx, func) in SYNC_BUILTINS and n.args and ctx.kind(n.args[0]) == "jax":
                return True
        elif isinstance(n, ast.FormattedValue) and ctx.kind(n.value) == "jax":
            return True
    return False

def _calls_waiting_function(ctx: Walk, call: ast.Call) -> bool:
    """A module function (not traced) whose own statements wait for the device."""
    a = ctx.analysis
    if a.qualname(call.func) is not None or a.jit_info(call.func, ctx.scope) is not None:
        return False
    fn = a.resolve_def(call.func, ctx.scope)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    memo = ctx.memo.setdefault("function_waits", {})
    if fn not in memo:
        memo[fn] = False
        scope = a.scopes.get(fn)
        if scope is not None and not scope.traced:
            saved, ctx.scope = ctx.scope, scope
            try:
                memo[fn] = any(waits(ctx, st, 1) for st in fn.body
                                   if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
            finally:
                ctx.scope = saved
    return memo[fn]

def hands_to_converter(ctx: Walk, call: ast.Call) -> bool:
    """`metric.add(loss, acc)` where the local `add` does `float(b)` on what it is handed, and
    a device array is handed to it: the call reads that array on the host."""
    a = ctx.analysis
    fn = a.resolve_def(call.func, ctx.scope)
    converted = helpers.converted_params(a, fn)
    return bool(converted) and any(ctx.kind(arg) == "jax" for arg, _ in helpers.argument_converted(a, call, fn, converted))


def waited_before(ctx: Walk, loop: ast.AST | None) -> bool:
    """An earlier statement of this iteration (same block, inside the loop) already waited:
    reading more values now copies them but stalls nothing. In the body of a function that runs
    once per step (ctx.per_step), the body is the iteration."""
    if loop is None:
        if ctx.per_step is None or ctx.loops:
            return False
        loop = ctx.scope.node
    stack = ctx.stack
    try:
        i = max(k for k, n in enumerate(stack) if n is loop)
    except ValueError:
        return False
    if _read_earlier_in_statement(ctx, stack[i + 1:]):
        return True
    # From the innermost block outwards: the nearest earlier event decides. A wait after which
    # nothing was queued covers this read; work queued after the last wait (a jitted update in
    # the same branch, after the loop's earlier host reads) is what this read waits for.
    for parent, child in reversed(list(zip(stack[i:], stack[i + 1:]))):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and child in block:
                earlier = block[:block.index(child)]
                if isinstance(parent, ast.Try) and name != "body":
                    earlier = [*parent.body, *earlier]  # `else:` runs after the whole `try:` body
                last = _last_event(ctx, earlier)
                if last is not None:
                    return last == "wait"
        if isinstance(parent, ast.If) and child is not parent.test and reads_condition(ctx, parent.test):
            return True  # in a branch of `if nbrs.did_buffer_overflow:`: the test already waited
    return False


def _read_earlier_in_statement(ctx: Walk, path: list[ast.AST]) -> bool:
    """`{"loss": float(loss), "acc": float(acc)}`: an earlier host read in the same statement
    already waited for the device; the reads after it copy values but stall nothing."""
    stmt = next((n for n in reversed(path) if isinstance(n, ast.stmt)), None)
    node = path[-1] if path else None
    if stmt is None or node is None or node is stmt or isinstance(stmt, (ast.For, ast.While, ast.If, ast.With, ast.Try)):
        return False
    here = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    ancestors = {id(n) for n in path}
    for n in astutil.walk(stmt):
        if (isinstance(n, ast.Call) and id(n) not in ancestors
                and (n.lineno, n.col_offset) < here and n.end_lineno is not None
                and (n.end_lineno, n.end_col_offset) <= here and waits(ctx, n, 1)):
            return True
    return False


def _last_event(ctx: Walk, stmts: list[ast.stmt]) -> str | None:
    """"wait" or "queue": what the last of these statements that waits for the device or queues
    device work does (a statement that does both ends having waited); None when none does."""
    for stmt in reversed(stmts):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If) and periodic_guard(stmt, None, ctx.analysis, ctx.scope):
            continue
        if waits(ctx, stmt):
            return "wait"
        if _queues(ctx, stmt):
            return "queue"
    return None


def _queues(ctx: Walk, stmt: ast.stmt) -> bool:
    """The statement queues device work: a jitted call or a JAX operation."""
    for n in astutil.walk(stmt):
        if isinstance(n, ast.Call) and (ctx.jit_info(n.func) is not None
                                        or (ctx.qualname(n.func) or "").startswith("jax.")):
            return True
    return False

def is_sync(ctx: Walk, node: ast.AST) -> bool:
    """A call that waits for device results: block_until_ready, a host read, print of an array,
    a NumPy function applied to a device array."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in SYNC_METHODS:
        return True
    q = ctx.qualname(func)
    if q in SYNC_FUNCS:
        return True
    if q is not None and q.startswith("numpy.") and any(ctx.kind(a) == "jax" for a in node.args):
        return True
    name = builtin_name(ctx, func)
    return name in SYNC_BUILTINS or name == "print"

def waits_every_iteration(ctx: Walk, loop: ast.AST) -> bool:
    """The loop body blocks on the device by design: another host read adds no stall."""
    memo = ctx.memo.setdefault("waits_every_iteration", {})
    if loop not in memo:
        memo[loop] = _explicit_wait(ctx, list(getattr(loop, "body", None) or []), ctx.scope, 0)
    return memo[loop]


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
    out: dict[str, list[ast.AST]] = {}

    def read_by(expr: ast.AST) -> list[ast.AST] | None:
        if waits(ctx, expr, 1):
            return []
        fed = [stmt for n in astutil.walk(expr) if isinstance(n, ast.Name) and n.id in out for stmt in out[n.id]]
        return fed or None

    for n in _calls_and_assigns(stmts):
        if isinstance(n, ast.Assign):
            fed = read_by(n.value)
            if fed is not None:
                for target in n.targets:
                    for t in astutil.walk(target):
                        if isinstance(t, ast.Name):
                            out.setdefault(t.id, []).extend([*fed, n])
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
              and isinstance(n.func.value, ast.Name) and n.args and waits(ctx, n.args[0], 1)):
            # Only a read appended as it is: a record built of several names (`hist.append({...})`)
            # holds fields the test may never look at.
            out.setdefault(n.func.value.id, []).append(n)
    return out


def _calls_and_assigns(stmts: list[ast.stmt]):
    """Assignments and expression-statement calls of one iteration."""
    for stmt in iteration(stmts):
        if isinstance(stmt, ast.Assign):
            yield stmt
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield stmt.value


def iteration(stmts: list[ast.stmt], skip=None):
    """The statements of one iteration in source order, through if/with/try blocks (not nested
    loops or defs, not `except` handlers); an `if` that `skip` accepts is left out with its body."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            if skip is not None and skip(stmt):
                continue
            yield stmt
            yield from iteration([*stmt.body, *stmt.orelse], skip)
        else:
            yield stmt
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                yield from iteration(stmt.body, skip)
            elif isinstance(stmt, ast.Try):
                yield from iteration([*stmt.body, *stmt.orelse, *stmt.finalbody], skip)

def _explicit_wait(ctx: Walk, roots: list[ast.AST], scope, depth: int) -> bool:
    a = ctx.analysis
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr == "block_until_ready":
                return True
            if a.qualname(n.func) in EXPLICIT_WAITS:
                return True
            if depth == 0 and a.qualname(n.func) is None:
                fn = a.resolve_def(n.func, scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.scopes.get(fn) is not None:
                    if _explicit_wait(ctx, list(fn.body), a.scopes[fn], 1):
                        return True
        stack.extend(astutil.children(n))
    return False
