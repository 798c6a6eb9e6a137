"""Host reads and explicit waits: where Python stops and waits for the device.

Each predicate takes the walk's position (`ctx`: the analysis, the scope, the enclosing loops
and the stack of nodes down to the current one, and a per-file memo), never a rule.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.callbacks import returns_done
from jaxmem.evaluators.review.semantic.hostreads import HOST_CONVERSIONS, host_conversion
from jaxmem.evaluators.review.semantic.names import HOST_METHODS, IDENTITY_OPS, defers_to_array, object_literal
from jaxmem.evaluators.review.semantic.shapes import sized_by_values
from jaxmem.evaluators.review.semantic.walk import Walk, in_body

SYNC_BUILTINS = frozenset({"float", "int", "bool", "complex"})

SYNC_METHODS = frozenset({"item", "tolist", "block_until_ready", "__array__"})

# MJX's get_data / get_data_into build a host mujoco.MjData from device mjx.Data: a device->host copy.
SYNC_FUNCS = frozenset({"jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array",
                        "mujoco.mjx.get_data", "mujoco.mjx.get_data_into"})

FORMAT_BUILTINS = frozenset({"print", "str", "repr", "format"})

# Serialising a device array copies its values to the host first (pickle calls `__reduce__`, which
# reads the values; NumPy's save converts with `np.asarray`): the call waits for the device.
SERIALIZERS = frozenset({"pickle.dump", "pickle.dumps", "cloudpickle.dump", "cloudpickle.dumps", "joblib.dump",
                         "numpy.save", "numpy.savez", "numpy.savez_compressed"})

EXPLICIT_WAITS = frozenset({"jax.block_until_ready"})  # a host read (device_get) is itself the cost


def _serializes(ctx: Walk, q: str | None, call: ast.Call) -> bool:
    return q in SERIALIZERS and any(ctx.kind(x) == "jax" for x in [*call.args, *(k.value for k in call.keywords)])


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
        return compares_array(ctx, test)
    return isinstance(test, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) and ctx.kind(test) == "jax"

def compares_array(ctx: Walk, test: ast.Compare) -> bool:
    """A comparison whose truth Python reads from a device array (`loss < best`)."""
    if any(isinstance(op, IDENTITY_OPS) for op in test.ops):
        return False
    operands = [test.left, *test.comparators]
    if any(object_literal(v) for v in operands):
        # `new_batch_stats != {}`, `mode == "train"`: a dict or a string is no array operand;
        # Python compares the containers (or falls back to identity), no device value is read.
        return False
    return any(ctx.kind(v) == "jax" for v in operands)

def waits(ctx: Walk, node: ast.AST, depth: int = 0) -> bool:
    """The expression waits for the device: block_until_ready, device_get, or a host read of a
    device array (float/int/bool/.item()/.tolist()/NumPy on it, printing or formatting it, an
    `if` on it), or a call of a module function whose body does one of those; or compiled calls
    that all return with their work done (`eqx.filter_jit`, semantic/jit.py RETURNS_READY)."""
    ready = queued = False
    for n in astutil.walk(node):
        if isinstance(n, (ast.If, ast.While, ast.Assert)) and reads_condition(ctx, n.test):
            return True  # `assert jnp.isfinite(lp)` calls bool() on the device value too
        if isinstance(n, (ast.Assign, ast.AugAssign)) and writes_into_numpy(ctx, n):
            return True
        if isinstance(n, ast.Call):
            func = n.func
            if depth == 0 and (info := ctx.jit_info(func)) is not None:
                done = returns_done(ctx, info)
                ready, queued = ready or done, queued or not done
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
            if builtin_name(ctx, func) == "getattr" and len(n.args) > 1 and isinstance(n.args[1], ast.Constant) \
                    and n.args[1].value == "block_until_ready":
                return True  # `ready = getattr(leaf, "block_until_ready", None)`, fetched to be called
            if _serializes(ctx, q, n):
                return True  # `pickle.dump(out, f)` of a run's results
            if _library_reads(ctx, q, n):
                return True
            if _converts_leaves(ctx, q, n):
                return True
            if builtin_name(ctx, func) in SYNC_BUILTINS and n.args and ctx.kind(n.args[0]) == "jax":
                return True
        elif isinstance(n, ast.FormattedValue) and ctx.kind(n.value) == "jax":
            return True
        if isinstance(n, (ast.Call, ast.Subscript)) and sized_by_values(ctx, n) is not None:
            return True  # `jnp.unique(codes)`: sized on the host from the device values
    return ready and not queued

_LEAF_CONVERTERS = HOST_CONVERSIONS | {"numpy.asanyarray"}


def _converts_leaves(ctx: Walk, q: str | None, call: ast.Call) -> bool:
    """`runs = jax.tree.map(np.array, runs)`: a host converter (`np.array`, `np.asarray`,
    `jax.device_get`, `float`) mapped over a tree that is not known to be NumPy already: every
    leaf is copied to the host, as `np.array(leaf)` would be."""
    if q not in ("jax.tree.map", "jax.tree.map_with_path") or len(call.args) < 2:
        return False
    fn = call.args[0]
    return ((ctx.qualname(fn) in _LEAF_CONVERTERS
             or builtin_name(ctx, fn) in SYNC_BUILTINS) and any(ctx.kind(x) != "np" for x in call.args[1:]))


def writes_into_numpy(ctx: Walk, node: ast.Assign | ast.AugAssign) -> bool:
    """`u_states[:, i, :] = u_next` (also as one target of an unpacking, `losses[i], state =
    step(...)`): NumPy's __setitem__ converts the device value on the host, which blocks as
    `float()` does (measured on jax 0.10.2). Only into a proven NumPy array: a JAX array's item
    write raises, a list keeps the device value without reading it."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    v = node.value
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        # `p += grad` into a NumPy array: the in-place operator converts the device operand
        return ctx.kind(node.target, strict=True) == "np" and ctx.kind(v) == "jax"
    return (any(isinstance(t, ast.Subscript) and ctx.kind(t.value, strict=True) == "np" for t in flat)
            and (ctx.kind(v) == "jax" or (isinstance(v, ast.Call) and ctx.jit_info(v.func) is not None)))


def _jax_callable(ctx: Walk, expr: ast.AST) -> bool:
    """A lambda, or a function of this file, that queues device work: handed to a SciPy routine
    (an ODE solver, an optimizer), it is called there and its results are converted to NumPy
    before the routine returns."""
    if isinstance(expr, ast.Lambda):
        return _queues(ctx, expr.body)
    fn = ctx.analysis.resolve_def(expr, ctx.scope) if isinstance(expr, ast.Name) else None
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_queues(ctx, st) for st in fn.body)


def _calls_waiting_function(ctx: Walk, call: ast.Call) -> bool:
    """A module function (not traced) whose own statements wait for the device."""
    a = ctx.analysis
    if a.qualname(call.func) is not None or a.jit_info(call.func, ctx.scope) is not None:
        return False
    fn = a.resolve_def(call.func, ctx.scope)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return in_body(fn, ctx, "function_waits", False, lambda c: any(
        waits(c, st, 1) for st in fn.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))))

def hands_to_converter(ctx: Walk, call: ast.Call) -> bool:
    """`metric.add(loss, acc)` where the local `add` does `float(b)` on what it is handed, and
    a device array is handed to it: the call reads that array on the host."""
    a = ctx.analysis
    fn = helpers.called_def(a, call.func, ctx.scope)
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
    # `for k in history: history[k].append(float(metrics[k]))` right after a wait: an inner loop
    # that queues no device work of its own reads what the outer iteration already waited for.
    # Only loops that enclose this one: a sibling order would bounce between two loops forever.
    at = next((k for k, l in enumerate(ctx.loops) if l is loop), None)
    if at and _only_copies(ctx, loop):
        return waited_before(ctx, ctx.loops[at - 1])
    return False


# What an inner loop that only copies results may call besides host reads: container methods.
_CONTAINER_METHODS = frozenset({"append", "extend", "update", "setdefault", "add", "items", "keys", "values", "get"})
# Of those, the ones that only read a dict: a JAX array has none of them, so a value that has them
# is a container even when it holds device arrays (`for k, v in aux.items()` over a step's metrics).
_DICT_READS = frozenset({"items", "keys", "values", "get"})


def _only_copies(ctx: Walk, loop: ast.AST) -> bool:
    """An inner loop that does nothing with device values but read them into host containers:
    every call is a host read, a builtin or a container method, and no operator touches a
    device value (`(d < eps).any()`, `x[k] * 2` queue work of their own; `"val/" + k` does not)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    for n in astutil.walk(loop):
        if isinstance(n, ast.Call):
            func = n.func
            if is_sync(ctx, n) or builtin_name(ctx, func) is not None:
                continue
            if isinstance(func, ast.Attribute) and (func.attr in _DICT_READS or (
                    func.attr in _CONTAINER_METHODS and ctx.kind(func.value) != "jax")):
                continue
            return False
        if isinstance(n, (ast.If, ast.While)):
            return False
        if isinstance(n, (ast.BinOp, ast.UnaryOp)) and ctx.kind(n) == "jax":
            return False  # an operation on device values queues work (`x[k] * 2`); `"val/" + k` does not
        if isinstance(n, ast.Compare) and any(ctx.kind(x) == "jax" for x in (n.left, *n.comparators)):
            return False
    return True


def _read_earlier_in_statement(ctx: Walk, path: list[ast.AST]) -> bool:
    """`{"loss": float(loss), "acc": float(acc)}`: an earlier host read in the same statement
    (also through a helper of the file, `_as_float(metrics["loss"])`) already waited for the
    device; the reads after it copy values but stall nothing."""
    stmt = next((n for n in reversed(path) if isinstance(n, ast.stmt)), None)
    node = path[-1] if path else None
    if stmt is None or node is None or node is stmt or isinstance(stmt, (ast.For, ast.While, ast.If, ast.With, ast.Try)):
        return False
    here = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    ancestors = {id(n) for n in path}
    for n in astutil.walk(stmt):
        if (isinstance(n, ast.Call) and id(n) not in ancestors
                and (n.lineno, n.col_offset) < here and n.end_lineno is not None
                and (n.end_lineno, n.end_col_offset) <= here
                and (waits(ctx, n, 1) or _calls_waiting_function(ctx, n) or hands_to_converter(ctx, n))):
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
        if isinstance(stmt, ast.If) and not (reads_condition(ctx, stmt.test) or waits(ctx, stmt.test)):
            # A wait on one path only (`if callback is not None: callback(float(loss))`) covers
            # nothing after the `if`: the other path reaches it without having waited. Both paths
            # waiting is a wait; work queued on either path is what a later read waits for.
            body, other = _last_event(ctx, stmt.body), _last_event(ctx, stmt.orelse)
            if body == other == "wait":
                return "wait"
            if "queue" in (body, other):
                return "queue"
            continue
        if waits(ctx, stmt):
            return "wait"
        if _queues(ctx, stmt):
            return "queue"
    return None


def _queues(ctx: Walk, stmt: ast.stmt) -> bool:
    """The statement queues device work: a jitted call, a JAX operation, or an eager operation on
    a device array (`phi @ w.T`, `q.argmax(axis=-1)`): each of those is an execution of its own,
    and a read after it waits for it, however recently the iteration waited for earlier work."""
    for n in astutil.walk(stmt):
        if isinstance(n, ast.Call) and (ctx.jit_info(n.func) is not None
                                        or (ctx.qualname(n.func) or "").startswith("jax.")):
            return True
        if isinstance(n, ast.BinOp) and ctx.kind(n) == "jax":
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr not in HOST_METHODS \
                and n.func.attr not in SYNC_METHODS and ctx.qualname(n.func) is None and ctx.kind(n.func.value) == "jax":
            return True
    return False

def _library_reads(ctx: Walk, q: str | None, call: ast.Call) -> bool:
    """A library call that reads device values on the host: NumPy handed a device array converts
    it (unless it hands the call to the array's own method: `np.mean(x)` is `x.mean()`), SciPy
    handed a function that returns device arrays (`odeint(lambda s, t: f(s, u), ...)`) turns what
    it returns into NumPy."""
    if q is None:
        return False
    if q.startswith("numpy."):
        return any(ctx.kind(a) == "jax" for a in call.args) and not defers_to_array(q, call, ctx.kind)
    return q.startswith("scipy.") and any(_jax_callable(ctx, a) for a in call.args)


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
    if _serializes(ctx, q, node):
        return True  # `pickle.dump(out, f)`: the values are read on the host
    if _library_reads(ctx, q, node) or _converts_leaves(ctx, q, node):
        return True
    name = builtin_name(ctx, func)
    return name in SYNC_BUILTINS or name == "print"

def waits_every_iteration(ctx: Walk, loop: ast.AST) -> bool:
    """The loop body blocks on the device by design (`block_until_ready`, or a host environment
    stepped with values copied off the device), in its statements or a function of this file it
    calls: another host read adds no stall."""
    memo = ctx.memo.setdefault("waits_every_iteration", {})
    if loop not in memo:
        memo[loop] = _explicit_wait(ctx, list(getattr(loop, "body", None) or []), ctx.scope, 0)
    return memo[loop]


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

def _host_env_step(a, call: ast.Call) -> bool:
    """`envs.step(device_get(action))`: an environment stepped on the host with a value copied off
    the device for it. The copy is needed, so the iteration (a rollout) waits by design."""
    return (isinstance(call.func, ast.Attribute) and call.func.attr == "step"
            and any(host_conversion(a, arg) for arg in [*call.args, *(k.value for k in call.keywords)]))


def _explicit_wait(ctx: Walk, roots: list[ast.AST], scope, depth: int) -> bool:
    a = ctx.analysis
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(n, ast.If):
            # A wait in one arm only (`if micro_count == accum_steps: jax.block_until_ready(state)`)
            # runs on some iterations, not on every one: the others still stall on each read.
            if n.orelse and _explicit_wait(ctx, n.body, scope, depth) and _explicit_wait(ctx, n.orelse, scope, depth):
                return True
            stack.append(n.test)
            continue
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr == "block_until_ready":
                return True
            if a.qualname(n.func) in EXPLICIT_WAITS:
                return True
            if _host_env_step(a, n):
                return True
            if depth == 0 and a.qualname(n.func) is None:
                fn = a.resolve_def(n.func, scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.scopes.get(fn) is not None:
                    if _explicit_wait(ctx, list(fn.body), a.scopes[fn], 1):
                        return True
        stack.extend(astutil.children(n))
    return False
