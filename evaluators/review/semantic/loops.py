"""Loops by what they are for: a handful of demo iterations, epochs, a benchmark, a hot loop.

A per-step cost matters in a loop that runs many steps and queues device work in each; these
predicates read that from the loop's shape, never from a path or a project's names.
"""
from __future__ import annotations

import ast
import re

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import iterations
from jaxmem.evaluators.review.semantic.branches import after_early_return, short_under_guard, under_periodic_guard
from jaxmem.evaluators.review.semantic.flow import inner_loops, own_calls, replaced_state_calls
from jaxmem.evaluators.review.semantic.guesses import step_out_of_sight
from jaxmem.evaluators.review.semantic.helpers import calls_in
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import (
    COMPREHENSIONS,
    EAGER_LOOPS,
    HOST_METHODS,
    JAX_ARRAY_FUNCS,
    JAX_ARRAY_PREFIXES,
    JAX_NON_ARRAY,
)
from jaxmem.evaluators.review.semantic.scopes import Scope
from jaxmem.evaluators.review.semantic.sizes import SMALL_LOOP, record_fields_loop, trip_count
from jaxmem.evaluators.review.semantic.stops import stopped_elsewhere
from jaxmem.evaluators.review.semantic.syncs import SYNC_METHODS, waited_before, waits_every_iteration
from jaxmem.evaluators.review.semantic.training import callee, steps_once, takes_gradients
from jaxmem.evaluators.review.semantic.walk import Walk

_BENCH_NAME = re.compile(r"(^|_)(bench|benchmark)(_|$)|^bench|^time_|^peakmem_")
RAISES = frozenset({"pytest.raises"})
RAISES_METHODS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})

def small_loop(loop: ast.AST, analysis: Analysis, scope: Scope) -> bool:
    """A loop whose source fixes at most SMALL_LOOP iterations (a demo, a few warm-up runs)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
    elif isinstance(loop, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        it = loop.generators[0].iter
    else:
        return False
    n = trip_count(it, analysis, scope)
    return n is not None and n <= SMALL_LOOP

def epoch_loop(loop: ast.AST, ctx: Walk | None = None) -> bool:
    """`for epoch in ...` or `for _ in range(num_epochs)`: each iteration is a whole pass over
    the data, not a step. With the model at hand (`ctx`), not a loop that takes one gradient step
    on the whole data per "epoch" (no inner loop; its own statements take the gradients): there an
    epoch is a step."""
    if not _named_for_epochs(loop):
        return False
    return ctx is None or not _full_batch(ctx, loop)


def _full_batch(ctx: Walk, loop: ast.AST) -> bool:
    """The "epoch" runs one training step itself: a call in its own statements (not in an inner
    loop) that takes gradients directly, or of a function that trains and has no loop of its own
    (`train_step(model, optimizer, x, y)` under `nnx.jit`; not a `lax.scan` over the batches, not
    one named for an epoch); and no inner loop trains (an inner loop over the metrics of that
    step is a report, not the steps of an epoch)."""
    own, inner = own_calls(loop.body)
    if any(_one_step(ctx, c) for c in inner):
        return False
    return any(_one_step(ctx, c) for c in own)


def _one_step(ctx: Walk, call: ast.Call) -> bool:
    if takes_gradients(call, ctx, directly=True):
        return True
    fn = callee(call, ctx)[1]
    if fn not in ctx.analysis.scopes and ctx.analysis.project is not None:
        # `from train import train_step`: the step is defined in another file of the tree (its
        # def may be at hand through the jitted callable's facts, but its scopes are not).
        facts = ctx.analysis.project.function(ctx.analysis.qualname(call.func) or "")
        return facts is not None and facts.one_step
    return steps_once(fn, ctx)


def _named_for_epochs(loop: ast.AST) -> bool:
    target = getattr(loop, "target", None)
    if target is None:
        return False
    if any(isinstance(n, ast.Name) and "epoch" in n.id.lower() for n in astutil.walk(target)):
        return True
    it = getattr(loop, "iter", None)
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("tqdm", "enumerate") and it.args:
        it = it.args[0]  # `tqdm(key_epochs)`, `enumerate(range(n_epochs))`: what it wraps
    if isinstance(it, ast.Name) and "epochs" in it.id.lower().split("_"):
        return True  # `for key in key_epochs`: one item per epoch
    # Else only a count of epochs (`range(num_epochs)`), never a count within one (`steps_per_epoch`)
    # and never an iterator (`for batch in epoch_batches(...)` walks the steps of one epoch).
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return False
    # A count read from a config by key names it as much as a variable does: `config["n_epochs"]`.
    names = [n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else n.value
             for a in it.args for n in astutil.walk(a)
             if isinstance(n, (ast.Name, ast.Attribute)) or isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return any(_EPOCH_COUNT.search(x.lower()) and not _WITHIN_EPOCH.search(x.lower()) for x in names)

_EPOCH_COUNT = re.compile(r"epoch")
_WITHIN_EPOCH = re.compile(r"per_epoch|step|batch|iter|sample|example")

def benchmark_function(scope: Scope, analysis: Analysis) -> str | None:
    """The name of the enclosing benchmark (registered with a benchmark harness or named as one)."""
    s: Scope | None = scope
    while s is not None and s is not analysis.module_scope:
        node = s.node
        name = getattr(node, "name", None)
        if name is not None:
            for dec in getattr(node, "decorator_list", ()):
                target = dec.func if isinstance(dec, ast.Call) else dec
                text = (analysis.qualname(target) or ast.unparse(target)).lower()
                if "benchmark" in text:
                    return name
            if _BENCH_NAME.search(name.lower()):
                return name
        s = s.parent
    return None

def raises_block(node: ast.With, analysis: Analysis) -> bool:
    """`with pytest.raises(...)` / `with self.assertRaises(...)`: the body is expected to fail."""
    for item in node.items:
        expr = item.context_expr
        if not isinstance(expr, ast.Call):
            continue
        if analysis.qualname(expr.func) in RAISES:
            return True
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in RAISES_METHODS:
            return True
    return False

def cpu_device_block(node: ast.With) -> bool:
    """`with jax.default_device(cpu)` / `with use_cpu_device():` - host-side work on purpose."""
    for item in node.items:
        text = ast.unparse(item.context_expr).lower()
        if "cpu" in text and ("device" in text or "default" in text):
            return True
    return False


def periodic(ctx: Walk, sync: bool = True) -> bool:
    """A sync that is not a per-step cost to fix: inside `if step % N == 0:` within the innermost
    loop, in an outer (epoch) loop whose body runs the steps in a nested loop, part of an
    assertion (`assert ...`, `self.assertEqual(...)`, which must read the value) or of a `raise`,
    or (only for a sync, `sync`) after the iteration already waited (`block_until_ready`, an
    earlier host read) or in a loop that waits in its stop check on every iteration (`if
    float(val) < tol: break`; the check itself is not covered): a wait makes a second wait free,
    not an eager forward pass."""
    loop = ctx.loops[-1] if ctx.loops else None
    if loop is not None and _runs_steps_inside(ctx, loop):
        return True
    if ctx.per_step_body and after_early_return(ctx):
        return True  # `if step % every != 0: return` at the top of a function a loop calls each step
    inner = None
    for node in reversed(ctx.stack):
        if node is loop:
            break
        if isinstance(node, ast.Raise) or (isinstance(node, ast.Assert) and node is not ctx.stack[-1]) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith(("assert", "fail"))):
            return True  # (an `assert` looked at itself is its own stop check: JM104, possible)
        if isinstance(node, ast.If) and inner in node.body and iterations.matches_one_key(node.test, loop):
            return True  # `for name in names: if name == "lr": ...`: runs for one element, not each step
        inner = node
    if under_periodic_guard(ctx):
        return True
    return sync and (waited_before(ctx, loop) or stopped_elsewhere(ctx, loop))

def not_per_step(ctx: Walk, words: tuple[str, ...] = (), sync: bool = True) -> bool:
    """The loop around a per-iteration cost is not a hot loop: it runs a handful of times (all
    enclosing loops together at most SMALL_LOOP), once per epoch, dispatches no device
    work for the cost to stall, already waits for the device on every iteration on purpose
    (`block_until_ready` in its body or in a module function it calls; only for host reads,
    `sync`: a wait does not make a transfer or a copy free), draws a plot on every iteration
    (only for host reads: matplotlib needs the values on the host and takes far longer than the
    read), or belongs to a benchmark whose name says it measures this cost (`words`)."""
    if iterations.in_leaving_block(ctx):
        return True
    if ctx.per_step_body:
        if sync and iterations.draws(ctx, astutil.statements(ctx.scope.node)):
            return True
        return bool(words) and _benchmark_named(ctx, words)
    if not ctx.loops:
        return True
    memo = ctx.memo.setdefault("not_per_step", {})
    key = (ctx.loops[-1], len(ctx.loops), words, sync)
    if key not in memo:
        memo[key] = _not_per_step(ctx, words, sync)
    return memo[key]

def _not_per_step(ctx: Walk, words: tuple[str, ...], sync: bool) -> bool:
    a, scope = ctx.analysis, ctx.scope
    inner = ctx.loops[-1]
    if epoch_loop(inner, ctx):
        return True
    if short_under_guard(ctx):
        return True
    if _report_loop(ctx, inner) or _chunked(ctx, inner):
        return True
    if sync and iterations.draws(ctx, list(inner.body) if isinstance(inner, (ast.For, ast.AsyncFor, ast.While)) else []):
        return True
    total = 1
    for loop in ctx.loops:
        n = trip_count(loop.iter, a, scope) if isinstance(loop, (ast.For, ast.AsyncFor)) else (
            trip_count(loop.generators[0].iter, a, scope) if isinstance(loop, COMPREHENSIONS) else None)
        if n is None and (scope is a.module_scope or loop is not ctx.loops[0]) and record_fields_loop(loop, a, scope):
            n = 1  # once per field: as hot as the loops around it (a function's own may run per step)
        if n is None:
            total = None
            break
        total *= n
    if total is not None and total <= SMALL_LOOP:
        return True
    if not any(dispatches(ctx, loop) for loop in ctx.loops):
        return True
    if sync and waits_every_iteration(ctx, inner):
        return True
    return bool(words) and _benchmark_named(ctx, words)

def _chunked(ctx: Walk, loop: ast.AST) -> bool:
    """Each iteration runs a compiled loop eagerly (`state, m = jax.lax.scan(update, state, None,
    length=log_period)`): the steps run on the device inside it, and the host loop goes chunk by
    chunk, so a read per iteration is a read per chunk of steps (a logging interval by design).
    Not when a jitted call beside it replaces the state the loop carries: then that call is the
    step, and the compiled loop is part of it (an MPC controller's planner scan beside `state =
    step_env(state, u)`); a jitted check or a rebuild on overflow is no step."""
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        return False
    memo = ctx.memo.setdefault("chunked", {})
    if loop not in memo:
        a = ctx.analysis
        memo[loop] = (any(a.qualname(n.func) in EAGER_LOOPS for n in calls_in(loop.body))
                      and not any(a.qualname(call.func) not in EAGER_LOOPS and ctx.jit_info(call.func) is not None
                                  for call, _ in replaced_state_calls(a, loop, ctx.scope)))
    return memo[loop]


def _report_loop(ctx: Walk, loop: ast.AST) -> bool:
    """`for mean, std in zip(means, stds): print(...)`: a loop over the elements of device
    arrays that queues no work beyond indexing and arithmetic on them. The computation ran
    before the loop; each read waits only for its own element."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    if not any(ctx.kind(it) == "jax" for it in _iterated(loop.iter)) or loop in ctx.analysis.key_loops:
        return False
    memo = ctx.memo.setdefault("report_loop", {})
    if loop not in memo:
        memo[loop] = not _heavy_work(ctx, list(loop.body))
    return memo[loop]

def _heavy_work(ctx: Walk, roots: list[ast.AST]) -> bool:
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
        stack.extend(astutil.children(n))
    return False

def _benchmark_named(ctx: Walk, words: tuple[str, ...]) -> bool:
    name = benchmark_function(ctx.scope, ctx.analysis)
    return name is not None and any(w in name.lower() for w in words)

def dispatches(ctx: Walk, loop: ast.AST) -> bool:
    """The loop queues device work each iteration: a jitted call, a JAX operation, an operation on
    (or indexing of) a device array, a module function that does one of those, or iterating a
    device array."""
    memo = ctx.memo.setdefault("dispatches", {})
    key = loop
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

def _device_work(ctx: Walk, roots: list[ast.AST], depth: int, scope=None) -> bool:
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
            if q is None and a.optimizer_part(func, scope) == 1:
                return True  # `opt_update(i, grads, opt_state)`: JAX operations over the whole state
            if q is None and isinstance(func, ast.Name) and a.kind(n, scope, True) == "jax":
                return True  # `step_fn(batch)`, a closure proven to return device arrays (a factory's)
            if depth == 0 and q is None:
                fn = a.resolve_def(func, scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.scopes.get(fn) is not None:
                    if _device_work(ctx, list(fn.body), 1, a.scopes[fn]):
                        return True
        elif isinstance(n, ast.Assign) and step_out_of_sight(a, n, scope):
            return True  # `params, state, loss = step_fn(params, state, batch)`
        elif isinstance(n, ast.BinOp) and a.kind(n, scope) == "jax":
            return True  # `total + loss` on device arrays
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and a.kind(n.value, scope) == "jax":
            return True  # `x[i]`: indexing a device array is an operation per iteration
        stack.extend(astutil.children(n))
    return False

def _runs_steps_inside(ctx: Walk, loop: ast.AST) -> bool:
    """An outer (epoch) loop: it carries no state of its own through a step call, and its body
    holds another loop that calls jitted functions or JAX operations (the steps). A loop that
    replaces state through a call is a step loop, whatever it nests (an evaluation every N steps)."""
    memo = ctx.memo.setdefault("epoch_loops", {})
    key = loop
    if key not in memo:
        memo[key] = False
        if next(replaced_state_calls(ctx.analysis, loop, ctx.scope), None) is None:
            memo[key] = any(
                any(isinstance(c, ast.Call) and (ctx.jit_info(c.func) is not None
                                                 or (ctx.qualname(c.func) or "").startswith("jax."))
                    for c in astutil.walk(inner))
                for inner in inner_loops(getattr(loop, "body", None) or []))
    return memo[key]


def loop_bound(ctx: Walk, loop: ast.AST) -> frozenset[str]:
    """Names (re)bound inside a loop, including its target; cached per loop node."""
    memo = ctx.memo.setdefault("loop_bound", {})
    key = loop
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
                stack.extend(astutil.children(n))
        memo[key] = frozenset(names)
    return memo[key]

def loop_targets(loop: ast.AST) -> frozenset[str]:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return frozenset(n.id for n in astutil.walk(loop.target) if isinstance(n, ast.Name))
    if isinstance(loop, COMPREHENSIONS):
        return frozenset(n.id for g in loop.generators for n in astutil.walk(g.target) if isinstance(n, ast.Name))
    return frozenset()

def enclosing_loop_of(ctx: Walk, name: str) -> ast.AST | None:
    for loop in reversed(ctx.loops):
        if name in loop_bound(ctx, loop):
            return loop
    return None
