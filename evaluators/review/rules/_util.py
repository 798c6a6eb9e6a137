"""Predicates several rules share: syncs, periodic guards, loop-bound names, env writes."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import intent
from jaxmem.evaluators.review.context import HOST_METHODS, JAX_ARRAY_FUNCS, JAX_ARRAY_PREFIXES, JAX_NON_ARRAY
from jaxmem.evaluators.review.rule import COMPREHENSIONS, Ctx

SYNC_BUILTINS = frozenset({"float", "int", "bool", "complex"})
# A benchmark named for one of these measures the host->device copy itself.
TRANSFER_WORDS = ("transfer", "device_put", "h2d", "host_to_device", "numpy_arg", "from_host")
SYNC_METHODS = frozenset({"item", "tolist", "block_until_ready", "__array__"})
SYNC_FUNCS = frozenset({"jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array"})
TIMERS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time",
                    "time.perf_counter_ns", "time.time_ns", "time.monotonic_ns", "timeit.default_timer"})


def builtin_name(ctx: Ctx, func: ast.AST) -> str | None:
    """`float` when it is the builtin (not shadowed by an import or a binding in scope)."""
    if isinstance(func, ast.Name) and ctx.analysis.is_builtin(func, ctx.scope):
        return func.id
    return None


def periodic(ctx: Ctx) -> bool:
    """A sync that is not a per-step cost to fix: inside `if step % N == 0:` within the innermost
    loop, in an outer (epoch) loop whose body runs the steps in a nested loop, part of an
    assertion (`assert ...`, `self.assertEqual(...)`, which must read the value) or of a `raise`,
    or after the iteration already waited (`block_until_ready`, an earlier host read)."""
    loop = ctx.loops[-1] if ctx.loops else None
    if loop is not None and _runs_steps_inside(ctx, loop):
        return True
    for node in reversed(ctx.stack):
        if node is loop:
            break
        if isinstance(node, (ast.Assert, ast.Raise)) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith(("assert", "fail"))):
            return True
    if under_periodic_guard(ctx):
        return True
    return _waited_before(ctx, loop)


def not_per_step(ctx: Ctx, words: tuple[str, ...] = (), sync: bool = True) -> bool:
    """The loop around a per-iteration cost is not a hot loop: it runs a handful of times (all
    enclosing loops together at most intent.SMALL_LOOP), once per epoch, dispatches no device
    work for the cost to stall, already waits for the device on every iteration on purpose
    (`block_until_ready` in its body or in a module function it calls; only for host reads,
    `sync`: a wait does not make a transfer or a copy free), draws a plot on every iteration
    (only for host reads: matplotlib needs the values on the host and takes far longer than the
    read), or belongs to a benchmark whose name says it measures this cost (`words`)."""
    if ctx.per_step_body:
        if sync and _draws(ctx, list(ctx.scope.node.body)):
            return True
        return bool(words) and _benchmark_named(ctx, words)
    if not ctx.loops:
        return True
    memo = ctx.memo.setdefault("not_per_step", {})
    key = (id(ctx.loops[-1]), len(ctx.loops), words, sync)
    if key not in memo:
        memo[key] = _not_per_step(ctx, words, sync)
    return memo[key]


def _not_per_step(ctx: Ctx, words: tuple[str, ...], sync: bool) -> bool:
    a, scope = ctx.analysis, ctx.scope
    inner = ctx.loops[-1]
    if intent.epoch_loop(inner):
        return True
    if _short_under_guard(ctx):
        return True
    if _report_loop(ctx, inner):
        return True
    if sync and _draws(ctx, list(inner.body) if isinstance(inner, (ast.For, ast.AsyncFor, ast.While)) else []):
        return True
    total = 1
    for loop in ctx.loops:
        n = intent.trip_count(loop.iter, a, scope) if isinstance(loop, (ast.For, ast.AsyncFor)) else (
            intent.trip_count(loop.generators[0].iter, a, scope) if isinstance(loop, COMPREHENSIONS) else None)
        if n is None:
            total = None
            break
        total *= n
    if total is not None and total <= intent.SMALL_LOOP:
        return True
    if not any(dispatches(ctx, loop) for loop in ctx.loops):
        return True
    if sync and _waits_every_iteration(ctx, inner):
        return True
    return bool(words) and _benchmark_named(ctx, words)


def periodic_guard(node: ast.AST, child: ast.AST | None = None) -> bool:
    """`if step % N == 0:` (any `%` in the test): its body runs every N-th iteration. With
    `child` (the next node down the stack), only when the child is in the body, not the `else:`."""
    return (isinstance(node, ast.If) and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                                             for n in ast.walk(node.test))
            and (child is None or child in node.body))


def under_periodic_guard(ctx: Ctx) -> bool:
    """Inside the body of `if step % N == 0:` within the innermost loop."""
    loop = ctx.loops[-1] if ctx.loops else None
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        if stack[i] is loop:
            return False
        if periodic_guard(stack[i], stack[i + 1]):
            return True
    return False


def _short_under_guard(ctx: Ctx) -> bool:
    """`if step % N == 0:` around a short inner loop: `for split, ds in eval_sets.items()` over
    two splits, `{k: float(v) for k, v in metrics.items()}`. The reads run a handful of times
    every N steps. An inner loop of unknown length under the guard (an evaluation over a whole
    data set) still counts: its reads happen once per batch."""
    loops = ctx.loops
    guard_at = None
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        if periodic_guard(node, stack[i + 1]) and any(l in stack[:i] for l in loops):
            guard_at = i  # the innermost such guard wins
    if guard_at is None:
        return False
    inner = [l for l in loops if l in ctx.stack[guard_at:]]
    if not inner:
        return False
    total = 1
    for loop in inner:
        if isinstance(loop, COMPREHENSIONS):
            continue  # one expression over the items of a value: a handful of reads
        it = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        n = intent.trip_count(it, ctx.analysis, ctx.scope) if it is not None else None
        if n is None:
            return False
        total *= n
    return total <= intent.SMALL_LOOP


# Axes and figure methods that draw: a call of one of these on every iteration is a plotting loop.
PLOT_METHODS = frozenset({"imshow", "plot", "scatter", "contour", "contourf", "pcolormesh", "hist", "bar",
                          "set_title", "cla", "clf", "pause", "draw", "savefig", "matshow", "quiver"})


def _draws(ctx: Ctx, roots: list[ast.AST]) -> bool:
    """A call into matplotlib (`plt.imshow`, `ax.set_title(...)`) in these statements, outside
    nested functions: the iteration renders, a host-side cost far above one device read."""
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call):
            q = ctx.analysis.qualname(n.func) or ""
            if q.startswith("matplotlib.") or (isinstance(n.func, ast.Attribute) and n.func.attr in PLOT_METHODS
                                               and not q.startswith(("jax.", "numpy."))):
                return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _report_loop(ctx: Ctx, loop: ast.AST) -> bool:
    """`for mean, std in zip(means, stds): print(...)`: a loop over the elements of device
    arrays that queues no work beyond indexing and arithmetic on them. The computation ran
    before the loop; each read waits only for its own element."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    if not any(ctx.kind(it) == "jax" for it in _iterated(loop.iter)):
        return False
    memo = ctx.memo.setdefault("report_loop", {})
    if id(loop) not in memo:
        memo[id(loop)] = not _heavy_work(ctx, list(loop.body))
    return memo[id(loop)]


def _heavy_work(ctx: Ctx, roots: list[ast.AST]) -> bool:
    """Calls that queue device computation: jitted or transformed functions, JAX operations,
    methods of device arrays, module functions that do one of those."""
    a, scope = ctx.analysis, ctx.scope
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call):
            func = n.func
            if a.jit_info(func, scope) is not None:
                return True
            q = a.qualname(func)
            if q is not None:
                if q.startswith("jax."):
                    return True
            elif isinstance(func, ast.Attribute) and func.attr not in HOST_METHODS and func.attr not in SYNC_METHODS:
                if a.kind(func.value, scope) == "jax":
                    return True
            elif isinstance(func, ast.Call):
                return True  # jax.grad(f)(x), a factory's product
            if q is None and not (isinstance(func, ast.Name) and a.is_builtin(func, scope)):
                fn = a.resolve_def(func, scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.scopes.get(fn) is not None:
                    if _device_work(ctx, list(fn.body), 1, a.scopes[fn]):
                        return True
        stack.extend(ast.iter_child_nodes(n))
    return False


EXPLICIT_WAITS = frozenset({"jax.block_until_ready"})  # a host read (device_get) is itself the cost


def _waits_every_iteration(ctx: Ctx, loop: ast.AST) -> bool:
    """The loop body blocks on the device by design: another host read adds no stall."""
    memo = ctx.memo.setdefault("waits_every_iteration", {})
    if id(loop) not in memo:
        memo[id(loop)] = _explicit_wait(ctx, list(getattr(loop, "body", None) or []), ctx.scope, 0)
    return memo[id(loop)]


def _explicit_wait(ctx: Ctx, roots: list[ast.AST], scope, depth: int) -> bool:
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
        stack.extend(ast.iter_child_nodes(n))
    return False


def _benchmark_named(ctx: Ctx, words: tuple[str, ...]) -> bool:
    name = intent.benchmark_function(ctx.scope, ctx.analysis)
    return name is not None and any(w in name.lower() for w in words)


def dispatches(ctx: Ctx, loop: ast.AST) -> bool:
    """The loop queues device work each iteration: a jitted call, a JAX operation, an operation on
    (or indexing of) a device array, a module function that does one of those, or iterating a
    device array."""
    memo = ctx.memo.setdefault("dispatches", {})
    key = id(loop)
    if key not in memo:
        memo[key] = False
        if isinstance(loop, (ast.For, ast.AsyncFor)) and any(ctx.kind(it) == "jax" for it in _iterated(loop.iter)):
            memo[key] = True  # each element of a device array is an indexing operation
        else:
            roots = list(getattr(loop, "body", None) or [])
            if isinstance(loop, ast.While):
                roots.append(loop.test)
            if isinstance(loop, COMPREHENSIONS):
                roots = [loop.elt] if not isinstance(loop, ast.DictComp) else [loop.key, loop.value]
            memo[key] = _device_work(ctx, roots, depth=0)
    return memo[key]


def _iterated(it: ast.AST) -> list[ast.AST]:
    """What a `for` walks over, through `zip(...)` and `enumerate(...)`."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate"):
        return [x for a in it.args for x in _iterated(a)]
    return [it]


def _device_work(ctx: Ctx, roots: list[ast.AST], depth: int, scope=None) -> bool:
    a = ctx.analysis
    scope = scope or ctx.scope
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call):
            func = n.func
            if a.jit_info(func, scope) is not None:
                return True
            q = a.qualname(func)
            if q is not None:
                if q in JAX_ARRAY_FUNCS or (q.startswith(JAX_ARRAY_PREFIXES) and q not in JAX_NON_ARRAY):
                    return True
            elif isinstance(func, ast.Attribute) and func.attr not in HOST_METHODS and func.attr not in SYNC_METHODS:
                if a.kind(func.value, scope) == "jax":
                    return True  # `x.sum()`, `x.reshape(...)`: an operation on a device array
            elif isinstance(func, ast.Call) and a.qualname(func.func) is not None and (
                    a.qualname(func.func).startswith("jax.")):
                return True  # jax.grad(f)(x), jax.vmap(f)(x)
            if depth == 0 and q is None:
                fn = a.resolve_def(func, scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.scopes.get(fn) is not None:
                    if _device_work(ctx, list(fn.body), 1, a.scopes[fn]):
                        return True
        elif isinstance(n, ast.BinOp) and a.kind(n, scope) == "jax":
            return True  # `total + loss` on device arrays
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and a.kind(n.value, scope) == "jax":
            return True  # `x[i]`: indexing a device array is an operation per iteration
        stack.extend(ast.iter_child_nodes(n))
    return False


def reads_condition(ctx: Ctx, test: ast.AST) -> bool:
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


FORMAT_BUILTINS = frozenset({"print", "str", "repr", "format"})


def waits(ctx: Ctx, node: ast.AST, depth: int = 0) -> bool:
    """The expression waits for the device: block_until_ready, device_get, or a host read of a
    device array (float/int/bool/.item()/.tolist()/NumPy on it, printing or formatting it, an
    `if` on it), or a call of a module function whose body does one of those."""
    for n in ast.walk(node):
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
            if depth == 0 and _calls_waiting_function(ctx, n):
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


def _calls_waiting_function(ctx: Ctx, call: ast.Call) -> bool:
    """A module function (not traced) whose own statements wait for the device."""
    a = ctx.analysis
    if a.qualname(call.func) is not None or a.jit_info(call.func, ctx.scope) is not None:
        return False
    fn = a.resolve_def(call.func, ctx.scope)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    memo = ctx.memo.setdefault("function_waits", {})
    if id(fn) not in memo:
        memo[id(fn)] = False
        scope = a.scopes.get(fn)
        if scope is not None and not scope.traced:
            saved, ctx.scope = ctx.scope, scope
            try:
                memo[id(fn)] = any(waits(ctx, st, 1) for st in fn.body
                                   if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
            finally:
                ctx.scope = saved
    return memo[id(fn)]


def _waited_before(ctx: Ctx, loop: ast.AST | None) -> bool:
    """An earlier statement of this iteration (same block, inside the loop) already waited:
    reading more values now copies them but stalls nothing."""
    if loop is None:
        return False
    stack = ctx.stack
    try:
        i = max(k for k, n in enumerate(stack) if n is loop)
    except ValueError:
        return False
    for parent, child in zip(stack[i:], stack[i + 1:]):
        if isinstance(parent, ast.If) and child is not parent.test and reads_condition(ctx, parent.test):
            return True  # in a branch of `if nbrs.did_buffer_overflow:` - the test already waited
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and child in block:
                earlier = block[:block.index(child)]
                if isinstance(parent, ast.Try) and name != "body":
                    earlier = [*parent.body, *earlier]  # `else:` runs after the whole `try:` body
                for stmt in earlier:
                    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and waits(ctx, stmt):
                        return True
    return False


def _runs_steps_inside(ctx: Ctx, loop: ast.AST) -> bool:
    """The loop's body holds another loop that calls jitted functions or jnp (the steps)."""
    memo = ctx.memo.setdefault("epoch_loops", {})
    key = id(loop)
    if key not in memo:
        found = False
        for stmt in getattr(loop, "body", None) or []:
            for n in ast.walk(stmt):
                if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and any(
                    isinstance(c, ast.Call) and (ctx.jit_info(c.func) is not None
                                                 or (ctx.qualname(c.func) or "").startswith("jax."))
                    for c in ast.walk(n)
                ):
                    found = True
                    break
            if found:
                break
        memo[key] = found
    return memo[key]


def is_sync(ctx: Ctx, node: ast.AST) -> bool:
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


def loop_bound(ctx: Ctx, loop: ast.AST) -> frozenset[str]:
    """Names (re)bound inside a loop, including its target; cached per loop node."""
    memo = ctx.memo.setdefault("loop_bound", {})
    key = id(loop)
    if key not in memo:
        names = set()
        roots = [loop.target] if isinstance(loop, (ast.For, ast.AsyncFor)) else []
        if isinstance(loop, COMPREHENSIONS):
            roots = [g.target for g in loop.generators]
        stack = [*roots, *(getattr(loop, "body", None) or [])]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.extend(ast.iter_child_nodes(n))
        memo[key] = frozenset(names)
    return memo[key]


def loop_targets(loop: ast.AST) -> frozenset[str]:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return frozenset(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
    if isinstance(loop, COMPREHENSIONS):
        return frozenset(n.id for g in loop.generators for n in ast.walk(g.target) if isinstance(n, ast.Name))
    return frozenset()


def enclosing_loop_of(ctx: Ctx, name: str) -> ast.AST | None:
    for loop in reversed(ctx.loops):
        if name in loop_bound(ctx, loop):
            return loop
    return None


def describe(node: ast.AST) -> str:
    """Short source text for messages, cut so a message stays one line."""
    try:
        text = ast.unparse(node)
    except Exception:  # unparse has failed on odd trees before; a message must still print
        return "expression"
    return text if len(text) <= 40 else text[:37] + "..."


ENV_CALLS = frozenset({"os.environ.setdefault", "os.environ.update", "os.putenv"})


def env_writes(ctx: Ctx, node: ast.AST) -> list[tuple[str, ast.AST | None]]:
    """`os.environ[K] = v`, `os.environ.setdefault(K, v)`, `.update({K: v})`, `os.putenv(K, v)`.

    Returns (key, value expression or None when not visible) for literal keys.
    """
    out: list[tuple[str, ast.AST | None]] = []
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Subscript) and ctx.qualname(t.value) == "os.environ":
                key = t.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out.append((key.value, node.value))
    elif isinstance(node, ast.Call):
        q = ctx.qualname(node.func)
        if q in ("os.environ.setdefault", "os.putenv") and node.args:
            key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                out.append((key.value, node.args[1] if len(node.args) > 1 else None))
        elif q == "os.environ.update":
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    for k, v in zip(arg.keys, arg.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            out.append((k.value, v))
            out.extend((kw.arg, kw.value) for kw in node.keywords if kw.arg)
    return out


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
        return str(node.value)
    return None


def in_module_code(ctx: Ctx) -> bool:
    return ctx.scope is ctx.analysis.module_scope


def jitted_call_args_in_host_loop(node: ast.Call, ctx: Ctx) -> list[ast.AST]:
    """Arguments of a call to a jitted function made from a host loop (each call transfers its
    host arguments again); empty when the call is not one."""
    if not ctx.host_loop or ctx.jit_info(node.func) is None:
        return []
    return [*node.args, *(kw.value for kw in node.keywords)]

