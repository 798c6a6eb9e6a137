"""JM301 jit-created-in-loop

What it does
    Flags `jax.jit(...)` (also `partial(jax.jit, ...)(f)`, `nnx.jit`, `eqx.filter_jit`, and a
    `@jax.jit` def) inside a Python loop when the callable it wraps is made anew on every
    iteration: a lambda, a `functools.partial`, a function transformed again (`jax.grad(f)`), a
    bound method (`self.step`, `obj.method`, also of an instance of an imported class made by
    calling a CapWords name: `strategy = OpenES(...)`, `jax.jit(strategy.ask)`), or a function
    defined inside the loop.
    Also inside a function that runs again and again (a method, a function a loop calls, or one
    whose name says it runs once per epoch or step, `train_epoch`, `eval_step`, when its caller is
    not in sight: possible) and builds its jitted function anew on each call.
    Also a call in a loop of a factory of the module that returns a jitted lambda or a jitted
    function it defines (`policy = make_policy(params)` on every training step): each call makes
    a new function object, compiled again with the loop's values baked in. And `jax.jit(factory(...))`
    in a loop where a factory out of sight (`cfd.funcutils.trajectory(step_fn, n)`) returns the
    function, with arguments the loop does not change: most factories build a new closure per call
    (possible; not a class's instance, which may compare equal, nor a sweep's `make_train(cfg)`).
    Re-wrapping the same function object (a module function, a staticmethod, a module
    attribute such as `jnp.linalg.svd`) is not flagged, nor is `jax.jit(f).lower(...)`, which
    compiles on purpose. Nor is a jit whose options change every iteration
    (`out_shardings=shardings[name]` for each layer group): each iteration needs its own
    compilation whatever function it wraps (measured on jax 0.10.2: the same function with 3
    distinct `out_shardings` compiled 3 times; `claims/jm301_options_per_iteration.py`), nor one
    made in a loop that sweeps input shapes or dtypes (`for size in sizes: a = random.normal(k,
    (size, size))`): the cache is keyed on shapes and dtypes too, so each iteration compiles anyway.
    Also `lax.scan`, `fori_loop`, `while_loop`, `cond`, `switch` or `map` given a new function
    on every iteration (or step) of code proven eager (a script, or a function that reads device
    values on the host), and JAX's iterative solvers and `jax.scipy.optimize.minimize` there.

Why is this bad
    The jit cache is keyed on the function object. A new lambda, partial or bound method is a
    new key, so the function is traced and compiled again every iteration. Measured on jax
    0.10.2 (CPU): 5 iterations compiled 5 times with a new lambda, a new `partial`, a bound
    method of the same object, or a def inside the loop, and once with the same module
    function, a staticmethod or `jnp.tanh`. Re-wrapping a stable function costs ~30 us per
    call (34 us against 3.6 us for a jitted function made once), not a compilation. Eager control
    flow is cached the same way: 5 calls of `lax.scan` (also fori_loop, while_loop, cond, switch,
    map) compiled 5 times with a new lambda or partial each call and not again with the same
    function; `cg`, `gmres`, `bicgstab` and `minimize` make their loop bodies inside each call and
    compiled 5 times in 5 eager calls with the same operator, none inside a function jitted once
    (`claims/jm301_eager_control_flow.py`).

Example
    for lr in learning_rates:
        step = jax.jit(lambda w, g: w - lr * g)
        w = step(w, g)

Use instead
    step = jax.jit(lambda w, g, lr: w - lr * g)      # created once; lr is an argument
    for lr in learning_rates:
        w = step(w, g, lr)
"""
from __future__ import annotations

import ast
import re

from jaxmem.evaluators.review import astutil, semantic
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard
from jaxmem.evaluators.review.semantic.callers import called_in_loop, method_called_in_loop
from jaxmem.evaluators.review.semantic.eager import runs_eagerly
from jaxmem.evaluators.review.semantic.factories import factory_result
from jaxmem.evaluators.review.semantic.loops import loop_bound
from jaxmem.evaluators.review.semantic.names import (
    COMPILED_BODIES,
    EAGER_SOLVERS,
    EAGER_TRACED,
    TRACING_NAMES,
    end_pos,
    pos,
)
from jaxmem.evaluators.review.semantic.sweeps import shapes_vary

AOT = frozenset({"lower", "trace", "eval_shape"})
# Names that say how often a function runs, whoever calls it (the caller may be in a file the review
# does not see): `train_epoch`, `evaluate_epoch` once per epoch; `valid_step`, `eval_step` once per
# step. Only ever a possible finding: sure needs a loop seen calling the function on every step.
_PER_EPOCH = re.compile(r"(^|_)epoch(_|$)", re.IGNORECASE)
_PER_STEP = re.compile(r"^(?!(make|create|build|get|init|setup)_).*(^|_)step$", re.IGNORECASE)  # not a factory


class JitCreatedInLoop(Rule):
    code = "JM301"
    name = "jit-created-in-loop"
    topic = "jit-compilation"
    severity = "warning"
    message = ("`{maker}` wraps {what}, a new function on every iteration: it is traced and compiled again each "
               "time (re-wrapping one function defined once would cost ~30 us per call instead)")
    fix = "Create the jitted function once, outside the loop, from a function defined once; pass changing values as arguments (static ones via static_argnums)."
    periodic_message = ("`{maker}` wraps {what}, a new function each time this periodic branch runs: it is traced and "
                        "compiled again each time (re-wrapping one function defined once would cost ~30 us per call "
                        "instead)")
    node_types = (ast.Call, ast.FunctionDef)
    # Eager control flow and solvers may appear in a file that never says jit: `lax.scan(...)`,
    # `from jax.lax import fori_loop`, `jax.scipy.sparse.linalg.cg`, `jax.scipy.optimize.minimize`.
    requires = ('jit', 'pmap', 'lax', 'scan', 'fori_loop', 'while_loop', 'sparse', 'optimize')

    eager_message = ("`{maker}` runs outside jit with {what}, a new function on every iteration: it is traced and "
                     "compiled again each time")
    eager_fix = ("Define the function once, outside the loop, and pass what changes as operands; or jit, once, "
                 "the function that makes this call.")
    solver_message = ("`{maker}` runs outside jit on every iteration: it builds its loop anew inside each call, so "
                      "it is traced and compiled again each time")
    solver_fix = "Call a function jitted once around the solve (`solve = jax.jit(lambda b: cg(matvec, b)[0])`)."

    call_message = ("`{maker}` wraps {what}, a new function on every call of `{fn}`: it is traced and compiled "
                    "again each time that function runs")
    call_fix = "Build the jitted function once (in `__init__`, at module level, or cached) and call it here."

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if ctx.scope.traced:
            return
        made = ctx.analysis.jit_from_call(node, ctx.scope) if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Call) and made is None:
            if ctx.host_loop and isinstance(node.func, ast.Name):
                self._factory_in_loop(node, ctx)
            if ctx.host_loop or ctx.per_step_body:
                self._eager_trace(node, ctx)
            return  # most calls make no jitted function: the cheap test first
        if loops.benchmark_function(ctx.scope, ctx.analysis):
            return  # a benchmark loop that makes a new function each time measures exactly that
        if isinstance(node, ast.Call):
            parent = ctx.parent
            if isinstance(parent, ast.Attribute) and parent.attr in AOT:
                return  # jax.jit(f).lower(...): ahead-of-time compilation, one per shape, on purpose
            if self._kept(ctx):
                return  # stored for later calls (`cache[key] = jax.jit(...)`, one per agent): built once each
            info, wrapped = made
            if ctx.host_loop:
                if self._options_change(node, ctx) or self._shapes_vary(ctx):
                    return  # `out_shardings=shardings[name]`, or new shapes, per iteration: each one compiles anyway
                what = self._fresh(wrapped, ctx)
                if what:
                    ctx.report(self, node, maker=_short(info.maker), what=what)
                elif (what := factory_result(wrapped, ctx)) is not None:
                    message = self.periodic_message if under_periodic_guard(ctx) else self.message
                    ctx.report(self, node, message=message, maker=_short(info.maker), what=what, sure=False)
            elif self._rebuilt_per_call(node, ctx):
                # A function that wraps a fresh callable and uses it there: every call of that
                # function compiles again. Sure when a host loop calls the function on every step.
                what = self._fresh(wrapped, ctx, anywhere=True)
                if what:
                    ctx.report(self, node, message=self.call_message, fix=self.call_fix, maker=_short(info.maker),
                               what=what, fn=getattr(ctx.scope.node, "name", "lambda"), sure=ctx.per_step_body)
        elif node in ctx.analysis.jitted_defs and ctx.host_loop:
            if shapes_vary(ctx, node.name, ctx.loops[-1]):
                return  # `for size in sizes:` hands it new shapes: each iteration compiles anyway
            ctx.report(self, node, maker="@" + _short(ctx.analysis.jitted_defs[node].maker),
                       what=f"`{node.name}`, defined inside the loop")
        elif node in ctx.analysis.jitted_defs and self._runs_again(node.name, ctx):
            # A `@jax.jit` def inside a method (or a per-step function) that uses it: every call of
            # the outer function defines, traces and compiles it again.
            ctx.report(self, node, message=self.call_message, fix=self.call_fix,
                       maker="@" + _short(ctx.analysis.jitted_defs[node].maker), what=f"`{node.name}`, defined here",
                       fn=getattr(ctx.scope.node, "name", "lambda"), sure=ctx.per_step_body)

    def _factory_in_loop(self, node: ast.Call, ctx: Ctx) -> None:
        """`step = make_step(lr)` or `fn = action_fn(actor=state.actor)` in a loop, where the module's
        factory returns a jitted lambda or a jitted function it defines: each call makes a new
        function object, so each iteration traces and compiles it again (the loop's values are
        baked in as constants). Not when the result is stored for later (`fns[k] = make(k)`)."""
        fn = ctx.analysis.resolve_def(node.func, ctx.scope)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or self._kept(ctx):
            return
        if loops.benchmark_function(ctx.scope, ctx.analysis):
            return  # a benchmark's loop over variants builds each one on purpose
        info = semantic.returned_jit(ctx.analysis, fn, None)
        wrapped = info.wrapped if info is not None else None
        if isinstance(wrapped, ast.Lambda):
            what = f"a lambda `{fn.name}` makes"
        elif isinstance(wrapped, (ast.FunctionDef, ast.AsyncFunctionDef)) and wrapped is not fn \
                and pos(fn) < pos(wrapped) <= end_pos(fn):
            what = f"`{wrapped.name}`, which `{fn.name}` defines"
        else:
            return  # a function defined once (`return jax.jit(step)` of a module function): re-wrapped, not recompiled
        # (Its arguments may well change every iteration, `make_policy(state.params)`: that is the
        # cost, not an excuse; unlike a jit option, nothing forces a new compilation per value.)
        ctx.report(self, node, maker=f"{fn.name}(...)", what=what, sure=False)

    def _eager_trace(self, node: ast.Call, ctx: Ctx) -> None:
        """`lax.scan(lambda c, x: ..., ...)` on every iteration (or step) of code proven eager: a
        new function each time, traced and compiled each time; `cg(...)` or `minimize(...)` there
        compile each time whatever they are given. Unproven (a library function some caller may
        jit): not reported, since under jit the same call is compiled once with its caller."""
        q = ctx.analysis.qualname(node.func)
        if q not in EAGER_TRACED and q not in EAGER_SOLVERS:
            return
        if ctx.loops and loops.small_loop(ctx.loops[-1], ctx.analysis, ctx.scope):
            return  # a few iterations the source fixes: a few compilations
        a = ctx.analysis
        # In a body that runs per step: the function that runs it (a loop's, or a per-step body's
        # that calls it, semantic/per_step.py) shows whether this code runs eagerly.
        caller = ctx.scope.per_step_scope if not ctx.loops else None
        if not (runs_eagerly(a, ctx.scope) or (caller is not None and runs_eagerly(a, caller))):
            return
        if loops.benchmark_function(ctx.scope, a):
            return  # a benchmark that measures the eager call
        maker = q.removeprefix("jax.")
        if q in EAGER_SOLVERS:
            ctx.report(self, node, message=self.solver_message, fix=self.solver_fix, maker=maker)
            return
        args = [node.args[i] for i in COMPILED_BODIES[q] if i < len(node.args)]
        args += [kw.value for kw in node.keywords if kw.arg in EAGER_TRACED[q]]
        for arg in args:
            for fn in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]):  # switch's branches
                what = self._fresh(fn, ctx, anywhere=not ctx.loops)
                if what:
                    ctx.report(self, node, message=self.eager_message, fix=self.eager_fix, maker=maker, what=what)
                    return

    @staticmethod
    def _rebuilt_per_call(node: ast.Call, ctx: Ctx) -> bool:
        """The jitted function is made and used inside a function that runs again and again: a
        method, or a function a loop calls (every step: per_step). Not a factory (it returns what
        it built), not a driver (it has loops of its own: it builds once and runs the steps)."""
        scope = ctx.scope
        fn = scope.node
        # (A driver with loops of its own is judged in _runs_again, as the decorated form is: it
        # builds once, unless a loop calls the driver itself, an epoch or evaluation method.)
        if ctx.loops or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        parent = ctx.parent
        if isinstance(parent, ast.Call) and parent.func is node:
            return JitCreatedInLoop._runs_again(None, ctx)  # `jax.jit(f)(x)`
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            return JitCreatedInLoop._runs_again(parent.targets[0].id, ctx)
        return False

    @staticmethod
    def _runs_again(name: str | None, ctx: Ctx) -> bool:
        """The enclosing function uses the jitted function `name` (None: used where it is made),
        does not hand it back, has no loop of its own, and runs again and again (a method, a
        function a loop calls, one a host loop calls every step)."""
        scope = ctx.scope
        fn = scope.node
        if ctx.loops or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        # A function with loops of its own is a driver: it builds once and runs the steps, unless
        # a loop calls the driver itself (an evaluator's method, or an `evaluate_model(state,
        # val_iter)` run at every epoch, whose closure over the state is compiled anew each time).
        if scope.has_loops and not (method_called_in_loop(fn, scope, ctx)
                                    or called_in_loop(fn, ctx, roles=("train", "step", "epoch"))
                                    or _PER_EPOCH.search(fn.name)):
            return False
        if name is not None:
            used = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
                       for n in astutil.walk(fn))
            if not used or any(isinstance(n, ast.Return) and _hands_back(n.value, name) for n in astutil.walk(fn)):
                return False  # unused here, or a factory: the caller keeps what it returns
        if ctx.per_step_body:
            return True
        return (scope.cls is not None and not fn.name.startswith("__") or called_in_loop(fn, ctx)
                or bool(_PER_EPOCH.search(fn.name) or _PER_STEP.search(fn.name)))

    @staticmethod
    def _kept(ctx: Ctx) -> bool:
        """The jitted function is stored, not used once: assigned into a container or onto an
        object (`fns[k] = jax.jit(...)`, `self.step = jax.jit(...)`), or made as an element of a
        comprehension that builds a container of them."""
        stack = ctx.stack
        if any(isinstance(p, ast.If) and _cache_miss(p.test) for p in stack[:-1]):
            return True  # `if fn is None:` / `if key not in cache:`: built once per key
        for parent in reversed(stack[:-1]):
            if isinstance(parent, (ast.Assign, ast.AnnAssign)):
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                return any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in targets)
            if isinstance(parent, (ast.DictComp, ast.ListComp, ast.SetComp)):
                return True
            if isinstance(parent, ast.stmt):
                return False
        return False

    def _fresh(self, wrapped: ast.AST | None, ctx: Ctx, anywhere: bool = False) -> str | None:
        """How the wrapped callable is new each iteration (`anywhere`: each time this code runs),
        or None when it is the same object."""
        a = ctx.analysis
        if wrapped is None:
            return None
        if isinstance(wrapped, ast.Lambda):
            return "a lambda"
        if isinstance(wrapped, ast.Call):
            q = a.qualname(wrapped.func)
            if q == "functools.partial":
                return "a new `functools.partial`"
            if q in TRACING_NAMES:
                return f"a new `{q.replace('jax.', '', 1) if q.startswith('jax.') else q}(...)` transform"
            return None
        if isinstance(wrapped, ast.Attribute):
            if a.qualname(wrapped) is not None or not isinstance(wrapped.value, ast.Name):
                return None  # a module attribute (`jnp.linalg.svd`): the same object every time
            cls = a.class_of_receiver(wrapped.value, ctx.scope)
            if cls is None:
                if a.local_class(wrapped.value) is not None:
                    return None  # `Class.function`: a plain function
                if _instance_of_imported_class(wrapped, ctx):
                    return f"the bound method `{ast.unparse(wrapped)}`"
                return None  # unknown object: may be a stored function, which would be stable
            method = a._method(cls, wrapped.attr)
            if method is None or any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in method.decorator_list):
                return None
            return f"the bound method `{ast.unparse(wrapped)}`"
        if isinstance(wrapped, ast.Name):
            b = a.resolve(wrapped.id, ctx.scope, pos(wrapped))
            if b is None or not (self._in_loop(b.at, ctx) or (anywhere and b.how in ("def", "assign")
                                                               and ctx.scope.bindings.get(wrapped.id))):
                return None
            if b.how == "def":
                return f"`{wrapped.id}`, defined {'here' if anywhere else 'inside the loop'}"
            if b.how == "assign" and b.index is None:
                inner = self._fresh(b.value, ctx, anywhere) if isinstance(b.value, (ast.Lambda, ast.Call)) else None
                where = "here" if anywhere else "inside the loop"
                return f"`{wrapped.id}` ({inner} made {where})" if inner else None
        return None

    @staticmethod
    def _options_change(node: ast.Call, ctx: Ctx) -> bool:
        """A jit option (`out_shardings`, `static_argnums`, ...) takes a value bound in the loop:
        every iteration asks for a differently compiled program, whatever function it wraps."""
        bound = set()
        for loop in ctx.loops:
            bound |= loop_bound(ctx, loop)
        return any(isinstance(n, ast.Name) and n.id in bound for kw in node.keywords if kw.arg
                   for n in astutil.walk(kw.value))

    @staticmethod
    def _shapes_vary(ctx: Ctx) -> bool:
        """`f = jax.jit(lambda a, b: ...)` in a loop whose calls of `f` hand it new shapes, or one
        kept in a dict or list (`ops = {"add": jit(lambda a, b: a + b), ...}`) in a loop that builds
        its arrays with new shapes."""
        parent = ctx.parent
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            return shapes_vary(ctx, parent.targets[0].id, ctx.loops[-1])
        return isinstance(parent, (ast.Dict, ast.List, ast.Tuple)) and shapes_vary(ctx, None, ctx.loops[-1])

    @staticmethod
    def _in_loop(at: tuple[int, int], ctx: Ctx) -> bool:
        return any(pos(loop) <= at <= end_pos(loop) for loop in ctx.loops)


def _hands_back(value: ast.AST | None, name: str) -> bool:
    """`return fn` or `return fn, state`: the function itself is returned (not a call of it)."""
    if isinstance(value, ast.Name):
        return value.id == name
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_hands_back(e, name) for e in value.elts)
    return False


def _cache_miss(test: ast.AST) -> bool:
    """`fn is None`, `key not in cache`, `not cache.get(key)`: the branch builds what a cache lacks."""
    if isinstance(test, ast.BoolOp):
        return any(_cache_miss(v) for v in test.values)
    if isinstance(test, ast.Compare):
        return any(isinstance(op, ast.NotIn) for op in test.ops) or (
            any(isinstance(op, ast.Is) for op in test.ops)
            and any(isinstance(c, ast.Constant) and c.value is None for c in test.comparators))
    return False


def _instance_of_imported_class(attr: ast.Attribute, ctx: Ctx) -> bool:
    """`strategy = OpenES(...)` then `strategy.ask`: the receiver was made by calling a CapWords
    name (a class, by Python's naming convention) and the attribute is a lower-case name, so it is
    a method and each access makes a new bound method. A lower-case factory (`tx = optax.adam()`,
    whose `tx.update` is a stored function) does not count."""
    b = ctx.analysis.resolve(attr.value.id, ctx.scope, pos(attr))
    if b is None or b.how != "assign" or b.index is not None or not isinstance(b.value, ast.Call):
        return False
    func = b.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (name[:1].isupper() and any(c.islower() for c in name) and attr.attr[:1].islower()
            and not attr.attr.startswith("_"))


def _short(maker: str) -> str:
    return {"flax.nnx.jit": "nnx.jit", "equinox.filter_jit": "eqx.filter_jit", "flax.nnx.pmap": "nnx.pmap",
            "equinox.filter_pmap": "eqx.filter_pmap", "haliax.named_jit": "hax.named_jit",
            "jax.experimental.pjit.pjit": "pjit"}.get(maker, maker)


RULE = JitCreatedInLoop()

