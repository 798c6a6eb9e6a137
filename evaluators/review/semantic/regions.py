"""What a region of statements does to the device: whether it queues JAX work, and whether
anything in it waits for that work before the region ends (a timed region, between two clock
reads). Read statement by statement, in order: work queued after the last wait is still running
when the region ends.

Each predicate takes the walk's position (`ctx`, semantic/walk.py), never a rule.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.callbacks import returns_done, runs_host_callbacks
from jaxmem.evaluators.review.semantic.clocks import prints_only_time
from jaxmem.evaluators.review.semantic.eager import dispatches_ops
from jaxmem.evaluators.review.semantic.flow import replaced_state_calls
from jaxmem.evaluators.review.semantic.helpers import own_calls, signature
from jaxmem.evaluators.review.semantic.jax_config import DEBUG_CHECKS
from jaxmem.evaluators.review.semantic.names import EAGER_LOOPS, JAX_LIBRARIES, KNOWN_BY_NAME, LOOP_TYPES, dotted, pos
from jaxmem.evaluators.review.semantic.sizes import trip_count
from jaxmem.evaluators.review.semantic.syncs import (
    FORMAT_BUILTINS,
    SYNC_BUILTINS,
    builtin_name,
    hands_to_converter,
    is_sync,
    reads_condition,
    waits,
    writes_into_numpy,
)
from jaxmem.evaluators.review.semantic.unseen import handed_device_values, may_wait
from jaxmem.evaluators.review.semantic.walk import Walk, in_body

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
# Packages whose functions the model knows to read nothing back by themselves (array transforms,
# optimizers, layers); any other package's function may well fetch what it is handed.
_MODELLED = KNOWN_BY_NAME | JAX_LIBRARIES


def or_else(test: ast.AST, ctx: Walk) -> bool:
    """`step % N == 0 or is_last_step` (also through a name bound to it, or inside an `and`:
    `t >= warmup and (step % N == 0 or step == n - 1)`): the branch also runs on another
    condition, which may be the last step, so its wait may come after all the work."""
    if isinstance(test, ast.Name):
        b = ctx.analysis.resolve(test.id, ctx.scope, pos(test))
        test = b.value if b is not None and b.how == "assign" and b.value is not None else test
    return any(isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or) and not all(
        any(isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) for m in astutil.walk(v)) for v in n.values)
        for n in astutil.walk(test))


def proven_work(stmts: list[ast.stmt], ctx: Walk) -> bool:
    """The region dispatches compiled work the model can name: a jitted callable resolved
    exactly, or a compiled loop run eagerly (`jax.lax.scan(...)` outside jit compiles the
    whole loop and returns before it has run, like a jitted call)."""
    for stmt in stmts:
        for n in astutil.walk_running(stmt):
            if isinstance(n, ast.Call):
                info = ctx.jit_info(n.func)
                if (info is not None and info.exact) or ctx.qualname(n.func) in EAGER_LOOPS:
                    return True
                if info is None and any(exact for _name, exact in local_jitted(n, ctx)):
                    return True  # a module function whose body calls the exactly resolved step
    return False


def timed_function_body(fn: ast.AST, ctx: Walk) -> list[ast.AST] | None:
    """What `timeit.timeit(fn)` runs each time: a lambda's expression, or the body of the def of
    this module that `fn` names and that takes no argument (`def test(): X = jit(cov)(X_train)`)."""
    if isinstance(fn, ast.Lambda):
        return [fn.body]
    found = ctx.analysis.resolve_def(fn, ctx.scope) if isinstance(fn, ast.Name) else None
    if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (found.args.args or found.args.posonlyargs):
        return found.body
    return None


def callback_programs(stmts: list[ast.stmt], ctx: Walk) -> bool:
    """A jitted call in these statements runs a program with host callbacks (callbacks.returns_done)."""
    return any(isinstance(n, ast.Call) and (info := ctx.jit_info(n.func)) is not None
               and runs_host_callbacks(ctx.analysis, info, ctx.scope)
               for s in stmts for n in astutil.walk_running(s))


def scan(stmts: list[ast.AST], ctx: Walk, guesses: bool = True) -> tuple[bool, bool, list[str], bool]:
    """One pass: does JAX work run, does anything wait for it, which jitted functions are called,
    and was work read back on the way (a host read after it, before what is left queued).
    `guesses`: code the reviewer cannot see counts as waiting when it is handed device values
    or its result is kept (the safe side). Without, such code still waits where it is a sink (a
    call whose result is dropped: `writer.write_scalars(step, metrics)` reads what it is given),
    but a producer (`logits, cache = model(tokens, cache)`) is taken to queue work like any
    other call on device values."""
    runs = pending = settled = False
    jitted: list[str] = []
    # A wait that runs every N steps of a loop in the region (`if step % 100 == 0: log(loss)`)
    # leaves the steps after the last one it saw queued when the clock stops.
    sometimes = periodic_parts(stmts, ctx)
    checked = debug_checks(ctx)  # jax_debug_nans: every JAX call returns only after its work
    produced: set[str] = set()  # names bound to what code the reviewer cannot see returned
    # Without guesses, a call the reviewer cannot see that replaces the state its loop carries
    # (`train_state, loss = statics.train_step(train_state, ...)`) is taken for the loop's step.
    steps = set() if guesses else {c for loop in ctx.loops if isinstance(loop, LOOP_TYPES)
                                   for c, _names in replaced_state_calls(ctx.analysis, loop, ctx.scope)}
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # defining a function runs none of its body
        # Statement by statement: work queued after the last wait is still running when the
        # clock stops (`reset = env.reset(...)`, a wait, then `buffer = collect(...)`, jitted).
        st_runs = st_jitted = st_waits = st_reads = False  # reads: a wait that is no guess
        # Compiled calls that return with their work done (`eqx.filter_jit`), and ones that do not:
        # a statement waits through the first only when none of the second runs in it.
        st_ready = st_queued = False
        sinks = {e.value for e in astutil.walk_running(stmt) if isinstance(e, ast.Expr)} if not guesses else ()
        for n in astutil.walk_running(stmt):
            if isinstance(n, ast.FormattedValue) and ctx.kind(n.value) == "jax" and n not in sometimes:
                st_waits = st_reads = True
            if isinstance(n, (ast.If, ast.While, ast.Assert, ast.IfExp)) and n not in sometimes \
                    and reads_condition(ctx, n.test):
                st_waits = st_reads = True  # `assert size >= n`, `if done:` on a device value: bool() waits
            if isinstance(n, (ast.Assign, ast.AugAssign)) and n not in sometimes and writes_into_numpy(ctx, n):
                st_waits = st_reads = True  # `losses[i] = loss` into a NumPy array converts it on the host
            if produced and _reads_produced(n, produced, ctx):
                st_waits = st_reads = True  # `print(parameters)` of what `warmup.run(...)` returned
            if isinstance(n, ast.BinOp) and not st_runs and ctx.kind(n) == "jax":
                st_runs = True  # `C = A @ B` on device arrays: one operation, dispatched and not waited for
            if not isinstance(n, ast.Call):
                continue
            if (info := ctx.jit_info(n.func)) is not None:
                jitted.append(dotted(n.func) or "function")
                st_runs = st_jitted = True
                # Without guesses, a program with host callbacks is taken to return queued: it
                # waits on the CPU, and on a GPU or TPU that is not measurable here (possible).
                ready = returns_done(ctx, info, callbacks=guesses)
                st_ready, st_queued = st_ready or ready, st_queued or not ready
            elif local_jitted(n, ctx):
                # A module function calling jitted ones queues compiled work. Its first call is not
                # reported as a compile: such a function is mostly a whole run (a wall-clock total,
                # compile included on purpose), and which call compiles is not seen here.
                st_runs = st_jitted = st_queued = True
            elif n in steps:
                st_runs = st_jitted = st_queued = True
            elif not st_runs and ctx.kind(n) == "jax":
                st_runs = True
            if not st_reads and n not in sometimes and (
                    is_sync(ctx, n) and not prints_only_time(n, ctx) or local_waits(n, ctx)
                    or hands_to_converter(ctx, n)):
                st_waits = st_reads = True
            if not st_waits and n not in sometimes and (guesses or n in sinks) and may_wait(n, ctx):
                st_waits = True
        if st_ready and not st_queued:
            st_waits = st_reads = True  # `props = fluid.get_state(h, p)`, filter_jit: returned when done
        if guesses and isinstance(stmt, ast.Assign) and _unmodelled_conversion(stmt, ctx):
            st_waits = True  # a guess: found without it, the region is reported as possible
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Call) \
                and opaque(stmt.value, ctx):
            # A result from code the reviewer cannot see (`result = service.generate(reqs)`)
            # may well be host data it waited for; not flagging is the safe side. Without
            # guesses, a host read of it later in the region is the wait.
            if guesses:
                st_waits = True
            elif handed_device_values(stmt.value, ctx):
                # Handed device values (a key, arrays) and its result kept: a producer, taken
                # to queue work as a call on device values does (`final, _ = engine.run(key=k)`).
                st_runs = True
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            produced.update(x.id for t in targets for x in astutil.walk(t) if isinstance(x, ast.Name))
        elif not guesses and not st_runs and hasattr(stmt, "body"):
            # The same producer inside a loop or branch of the region (`for _ in range(n): P =
            # ps.power_spectrum(k)` on a device `k`): taken to queue work, as at the top level.
            st_runs = any(isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call)
                          and opaque(n.value, ctx) and handed_device_values(n.value, ctx)
                          for n in astutil.walk_running(stmt))
        if checked and st_runs:
            st_waits = True
        # A statement that both runs and waits (`print(float(step(x)))`, a loop that reads its
        # results) ends having waited. After a wait, only a compiled call counts as work left
        # running: a few eager operations on its results (`x[0]` of each metric) cost nothing.
        pending = False if st_waits else (pending or st_jitted or (st_runs and not runs))
        # Work read back on the way (`print(res.error)`), not only guessed to be waited for (an
        # opaque `env.reset(key)` after a key split, then the jitted rollout).
        settled = settled or st_reads and (runs or st_runs)
        runs = runs or st_runs
    return runs, not pending, jitted, settled


def debug_checks(ctx: Walk) -> bool:
    """The module turns on `jax_debug_nans` / `jax_debug_infs` (`jax.config.update(..., True)`):
    JAX then checks every output for NaNs on the host before a call returns, so each call waits
    for its own work (measured on jax 0.10.2, CPU: a jitted call that returned after 0.1 ms
    returned after 691 ms with the flag on, the same as its `block_until_ready`)."""
    memo = ctx.memo
    if "debug_checks" not in memo:
        a = ctx.analysis
        values = set()
        if any("jax_debug_" in line for line in a.lines):
            values = {bool(n.args[1].value) if isinstance(n.args[1], ast.Constant) else None
                      for n in astutil.walk(a.tree)
                      if isinstance(n, ast.Call) and a.qualname(n.func) == "jax.config.update" and len(n.args) == 2
                      and isinstance(n.args[0], ast.Constant) and n.args[0].value in DEBUG_CHECKS}
        # Only a module that turns the checks on and never off (or to a value not written out):
        # a notebook that switches them on for one cell and off again times the rest unchecked.
        memo["debug_checks"] = values == {True}
    return memo["debug_checks"]


def _reads_produced(n: ast.AST, produced: set[str], ctx: Walk) -> bool:
    """A host read of a name bound to an unseen call's result: printed, formatted, converted."""
    if isinstance(n, ast.FormattedValue):
        args = [n.value]
    elif isinstance(n, ast.Call) and (builtin_name(ctx, n.func) in (*SYNC_BUILTINS, *FORMAT_BUILTINS)
                                      or ctx.qualname(n.func) in ("numpy.asarray", "numpy.array", "jax.device_get")):
        args = [*n.args, *(k.value for k in n.keywords)]
    else:
        return False
    return any(isinstance(x, ast.Name) and x.id in produced for a in args for x in astutil.walk(a))


def periodic_parts(stmts: list[ast.AST], ctx: Walk) -> set[ast.AST]:
    """Nodes under `if <step> % N ...:` inside a loop of these statements."""
    out: set[ast.AST] = set()
    for stmt in stmts:
        for loop in astutil.walk(stmt):
            if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
                continue
            for n in astutil.walk(loop):
                if isinstance(n, ast.If) and periodic_guard(n, None, ctx.analysis, ctx.scope) \
                        and not or_else(n.test, ctx):
                    out.update(x for part in n.body for x in astutil.walk(part))
    return out


def loop_calls(stmts: list[ast.AST], ctx: Walk, names: frozenset[str] = frozenset()) -> int | None:
    """How many times these statements' loops of compiled work or eager operations (eager.py) run it in
    all (the product of the trip counts, as the source fixes them); 0 where a count is not fixed; None
    where no loop holds such work. JAX queues 32 executions ahead (_util.QUEUED_AHEAD): an unwaited
    timer over many leaves out only those."""
    found = None
    for stmt in stmts:
        for n in astutil.walk_running(stmt):
            if not isinstance(n, LOOP_TYPES) or not (proven_work(n.body, ctx) or dispatches_ops(n.body, ctx, names)):
                continue
            count = trip_count(n.iter, ctx.analysis, ctx.scope) if not isinstance(n, ast.While) else None
            inner = loop_calls(n.body, ctx, names)
            total = 0 if count is None or inner == 0 else count * (inner or 1)
            found = total if found is None else min(found, total)
            break  # the outermost loop of this statement
    return found


def waits_sometimes(stmts: list[ast.AST], ctx: Walk) -> bool:
    """A loop of these statements waits for the device under a periodic guard."""
    for n in periodic_parts(stmts, ctx):
        if isinstance(n, ast.FormattedValue) and ctx.kind(n.value) == "jax":
            return True
        if isinstance(n, ast.Call) and (is_sync(ctx, n) or hands_to_converter(ctx, n)):
            return True
    return False


def _unmodelled_conversion(stmt: ast.Assign, ctx: Walk) -> bool:
    """`results = acme_utils.get_from_first_device(results)`: a package the model does not know
    replaces the device values a name holds with what it makes of them, a conversion that as often
    as not copies them to the host."""
    call = stmt.value
    q = ctx.qualname(call.func) if isinstance(call, ast.Call) else None
    project = ctx.analysis.project
    if q is None or q.split(".", 1)[0] in _MODELLED or project is not None and project.function(q) is not None:
        return False  # known, or a function of the reviewed tree (what it does is modelled there)
    names = {n.id for t in stmt.targets for n in astutil.walk(t) if isinstance(n, ast.Name)}
    return any(isinstance(a, ast.Name) and a.id in names and ctx.kind(a) == "jax" for a in call.args)


def opaque(call: ast.Call, ctx: Walk) -> bool:
    """A call into code the reviewer cannot see (not JAX/NumPy/stdlib, not jitted, not local)."""
    if ctx.qualname(call.func) is not None or ctx.jit_info(call.func) is not None:
        return False
    if ctx.kind(call) == "jax":
        return False  # `forward = jax.vmap(self.forward_pass)`: a transformed function, arrays out
    if isinstance(call.func, ast.Name) and ctx.analysis.is_builtin(call.func, ctx.scope):
        return False
    return ctx.analysis.resolve_def(call.func, ctx.scope) is None and not local_jitted(call, ctx)


def local_jitted(call: ast.Call, ctx: Walk) -> list[tuple[str, bool]]:
    """The jitted functions (name, resolved exactly) a call runs through code of this module, one
    level: a module function whose own statements call them (`run_training_step(step)`, whose
    body calls the jitted step), or a callable parameter (`output = fn(*args)` in a timing
    helper) where the module's calls of its function hand it jitted work."""
    fn = ctx.analysis.resolve_def(call.func, ctx.scope)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _def_jitted(fn, ctx)
    if fn is None and isinstance(call.func, ast.Name):
        b = ctx.analysis.resolve(call.func.id, ctx.scope, pos(call.func))
        if b is not None and b.how == "param" and isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _passed_jitted(b.node, b.name, ctx)
    return []


def _def_jitted(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Walk) -> list[tuple[str, bool]]:
    return in_body(fn, ctx, "local_jitted", [], lambda c: [
        (dotted(call.func) or "function", info.exact) for call in own_calls(fn, c.analysis)
        if (info := c.jit_info(call.func)) is not None])


def _callable_work(arg: ast.AST, ctx: Walk) -> list[tuple[str, bool]]:
    """The jitted work a callable argument stands for: a jitted function, `partial` of one, or a
    module function that calls jitted ones."""
    if isinstance(arg, ast.Call) and ctx.qualname(arg.func) == "functools.partial" and arg.args:
        return _callable_work(arg.args[0], ctx)
    info = ctx.jit_info(arg)
    if info is not None:
        return [(dotted(arg) or "function", info.exact)]
    fn = ctx.analysis.resolve_def(arg, ctx.scope)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or _def_waits(fn, ctx):
        return []  # a function that waits for its own work (`c.block_until_ready()` at its end)
    return _def_jitted(fn, ctx)


def _passed_jitted(owner: ast.FunctionDef | ast.AsyncFunctionDef, param: str, ctx: Walk) -> list[tuple[str, bool]]:
    """What the module hands parameter `param` of `owner`: `record_time(evaluate)(key)`,
    `benchmark(train_step, data)`, or `@measure_time` over a function (the first parameter)."""
    memo = ctx.memo.setdefault("passed_jitted", {})
    key = (owner, param)
    if key in memo:
        return memo[key]
    memo[key] = []
    positional, _vararg = signature(owner)
    at = positional.index(param) if param in positional else None
    found: list[tuple[str, bool]] = []
    a, saved = ctx.analysis, ctx.scope
    try:
        for scope in list(a.scopes.values()):
            ctx.scope = scope
            for c in [*scope.calls, *scope.header_calls]:
                if a.resolve_def(c.func, scope) is not owner:
                    continue
                arg = c.args[at] if at is not None and at < len(c.args) and not any(
                    isinstance(x, ast.Starred) for x in c.args[:at + 1]) else next(
                    (k.value for k in c.keywords if k.arg == param), None)
                if arg is not None:
                    found += _callable_work(arg, ctx)
            if at == 0:
                for inner in scope.inner:
                    if any(isinstance(d, (ast.Name, ast.Attribute)) and a.resolve_def(d, scope) is owner
                           for d in getattr(inner.node, "decorator_list", ())):
                        found += _def_jitted(inner.node, ctx)
    finally:
        ctx.scope = saved
    memo[key] = found
    return found


def local_waits(call: ast.Call, ctx: Walk) -> bool:
    """A module function whose body waits (a host read, block_until_ready): one level."""
    fn = ctx.analysis.resolve_def(call.func, ctx.scope)
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _def_waits(fn, ctx)


def _def_waits(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Walk) -> bool:
    return in_body(fn, ctx, "local_waits", False,
                    lambda c: any(waits(c, s) for s in fn.body if not isinstance(s, _DEFS)))


def queued_before(body: list[ast.stmt], start: int, ctx: Walk) -> tuple[int, list[str]] | None:
    """The statement before `body[start]` (a timer's start) whose compiled work is still running
    when the clock is read, with the jitted functions it calls: the last one that dispatches a
    jitted call, when nothing after it up to the start waits (a warm-up whose result is dropped,
    `f(x)` and then `t0 = time()`). None when there is none, or its wait is in doubt (read with
    the cautious guesses)."""
    for k in range(start - 1, -1, -1):
        stmt = body[k]
        if astutil.cell_of(stmt) != astutil.cell_of(body[start]):
            return None  # an earlier notebook cell: run by hand, its work is most likely done
        if isinstance(stmt, _DEFS) or not proven_work([stmt], ctx) or any(
                isinstance(n, (ast.Return, ast.Raise)) for n in astutil.walk_running(stmt)):
            continue  # (`if not timing: return f(x)`: that call never reaches the timer)
        runs, waited, _jitted, _settled = scan(body[k:start], ctx)
        return (k, scan([stmt], ctx)[2]) if runs and not waited else None
    return None
