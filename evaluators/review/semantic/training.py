"""Trained state: what a step that learns replaces (parameters, optimizer state).

Two rules ask the same question of a `state = f(state, ...)` in a loop. JM401 (donation pays)
and JM803 (a list that keeps every step's value grows without bound) both matter where the
replaced value is trained state, the largest buffers a program keeps. On the real-code benchmark
every true positive of either rule was such a loop; environment rollouts, render loops and
simulations (a few keys, one episode, a recording kept on purpose) were false positives.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.helpers import own_nodes
from jaxmem.evaluators.review.semantic.names import (
    COMPILED_BODIES,
    EAGER_LOOPS,
    GRADIENT_TRANSFORMS,
    last_name,
    named_for_training,
    pos,
)
from jaxmem.evaluators.review.semantic.walk import Walk

GRADIENT_CALLS = frozenset({"grad", "value_and_grad", "vjp", "filter_grad", "filter_value_and_grad",
                            "apply_gradients", "apply_updates"})


def zipped_update(value: ast.AST | None) -> ast.Call | None:
    """`[p - lr * g for p, g in zip(params, grads)]` (also inside `tuple(...)`/`list(...)`):
    trees zipped leaf by leaf and combined with arithmetic in a comprehension, the same update
    per leaf as a tree map (SGD written inline); its `zip(...)` call, else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("tuple", "list") \
            and len(value.args) == 1:
        value = value.args[0]
    if not isinstance(value, (ast.ListComp, ast.GeneratorExp)) or len(value.generators) != 1:
        return None
    gen = value.generators[0]
    it = gen.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" and len(it.args) >= 2):
        return None
    leaves = {n.id for n in astutil.walk(gen.target) if isinstance(n, ast.Name)}
    return it if any(isinstance(n, ast.BinOp) and sum(isinstance(m, ast.Name) and m.id in leaves
                                                        for m in astutil.walk(n)) >= 2
                     for n in astutil.walk(value.elt)) else None


def applies_gradients(call: ast.Call) -> bool:
    """`w = update(w, g)`, `params = sgd(params, grads)`: gradients handed in at the call site."""
    values = [*call.args, *(k.value for k in call.keywords)]
    return names_gradients(call) or any(isinstance(v, ast.Name) and v.id in ("g", "gs") for v in values)


def names_gradients(call: ast.Call) -> bool:
    """A name handed to the call says it holds gradients (`grads`, `clipped_grads`); a bare `g`
    says less."""
    return any(isinstance(v, ast.Name) and "grad" in v.id.lower() for v in [*call.args, *(k.value for k in call.keywords)])


def jitted_def(info, ctx: Walk):
    """The function that was jitted, where this module defines it (decorated, wrapped, or wrapped
    through `functools.partial`)."""
    fn = info.wrapped
    if isinstance(fn, ast.Call) and ctx.analysis.qualname(fn.func) == "functools.partial" and fn.args:
        fn = fn.args[0]
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return fn
    return ctx.analysis.resolve_def(fn, ctx.scope) if fn is not None else None


def callee(call: ast.Call, ctx: Walk):
    """(jit info, def): what the call runs, where this module defines it - the function behind a
    jitted callable, or the def its name resolves to (None when out of sight)."""
    info = ctx.jit_info(call.func)
    return info, jitted_def(info, ctx) if info is not None else ctx.analysis.resolve_def(call.func, ctx.scope)


def one_step_def(fn, analysis):
    """`fn` when it is a def of this module with no loop of its own (one step per call), else None."""
    scope = analysis.scopes.get(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    return fn if scope is not None and not scope.has_loops else None


def runs_compiled_loop(fn, analysis, deep: bool = True) -> bool:
    """The function runs a compiled loop (`lax.scan`, `lax.fori_loop`, ...), in its body or one
    call deep (`run_and_log` calling the jitted `run_chunk` that scans): each call is a chunk of
    many steps (an epoch, `eval_freq` steps), not one."""
    if fn is None:
        return False
    memo = analysis.memo.setdefault("runs_compiled_loop", {})
    if (fn, deep) not in memo:
        memo[fn, deep] = False  # recursion guard
        memo[fn, deep] = _runs_compiled_loop(fn, analysis, deep)
    return memo[fn, deep]


def _runs_compiled_loop(fn, analysis, deep: bool) -> bool:
    scope = analysis.scopes.get(fn, analysis.module_scope)
    for c in calls_in(fn, analysis):
        if analysis.qualname(c.func) in EAGER_LOOPS:
            return True
        if deep:
            inner = analysis.resolve_def(c.func, scope)
            if inner is not None and inner is not fn and runs_compiled_loop(inner, analysis, deep=False):
                return True
    return False


def steps_once(fn, ctx: Walk) -> bool:
    """A def that takes one training step per call: it trains, has no loop of its own, runs no
    compiled loop (`lax.scan` over the batches makes one call an epoch of steps) and is not named
    for a pass over the data (`train_epoch`). Asked of a local def, and of a def in another file
    of the tree (its facts carry the answer: semantic/project.py)."""
    fn = one_step_def(fn, ctx.analysis)
    if fn is None or "epoch" in fn.name.lower():
        return False
    if any(ctx.analysis.qualname(c.func) in EAGER_LOOPS for c in helpers.calls_in(fn.body)):
        return False
    return trains(fn, ctx)


def _gradient_call(call: ast.Call) -> bool:
    name = last_name(call.func)
    # `opt_update(i, g, opt_state)`, `tx.update(...)`, `svi.update(...)`: an optimizer step
    return name in GRADIENT_CALLS or name.endswith("update") or name.endswith("updates")


def trains(fn, ctx: Walk, depth: int = 0) -> bool:
    """The function computes gradients or applies an optimizer, in its body or one call deep, or
    in a body it hands to a compiled loop or branch.
    The answer depends on the function alone, so it is worked out once per file (rules and the
    facts of an imported module ask it of the same functions many times)."""
    if fn is None:
        return False
    memo = ctx.analysis.memo.setdefault("trains", {})
    key = (fn, depth)
    if key not in memo:
        memo[key] = False  # a body that scans its caller again reads "no" while it is worked out
        memo[key] = _trains(fn, ctx, depth)
    return memo[key]


def _trains(fn, ctx: Walk, depth: int) -> bool:
    a = ctx.analysis
    scope = a.scopes.get(fn, a.module_scope)
    for n in calls_in(fn, a):
        if _gradient_call(n):
            return True
        if depth == 0:
            callee = a.resolve_def(n.func, scope)
            if callee is not None and callee is not fn and trains(callee, ctx, 1):
                return True
            if callee is None and a.project is not None and isinstance(n.func, (ast.Name, ast.Attribute)):
                # `update_critic(...)` imported from another file of the tree, which takes gradients
                facts = helpers.project_facts(a, n.func, scope)
                if facts is not None and facts.trains:
                    return True
        # `lax.scan(_update_step, runner_state, None, length=n)`: the body handed to a compiled
        # loop or branch is part of this function's program, however deep the loops nest
        # (an epoch scans its updates, an update scans its minibatches).
        for body in _compiled_bodies(n, a, scope):
            if body is not fn and trains(body, ctx, depth):
                return True
    return False


def _compiled_bodies(call: ast.Call, a, scope) -> list:
    """The defs of this module that a compiled loop or branch runs (`lax.scan(body, ...)`,
    `lax.fori_loop(0, n, body, ...)`, `lax.cond(p, f, g, ...)`)."""
    positions = COMPILED_BODIES.get(a.qualname(call.func) or "")
    if not positions:
        return []
    found = (a.resolve_def(call.args[p], scope) for p in positions if p < len(call.args))
    return [d for d in found if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


def calls_in(fn: ast.AST, analysis) -> list[ast.Call]:
    """Every call in a function (its header and body, nested functions and classes included),
    from what the model recorded while building, instead of walking the function again."""
    scope = analysis.scopes.get(fn)
    if scope is None:
        return [n for n in astutil.walk(fn) if isinstance(n, ast.Call)]
    args = fn.args
    header = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if not isinstance(fn, ast.Lambda):
        header += fn.decorator_list
    out = [n for h in header for n in astutil.walk(h) if isinstance(n, ast.Call)]
    stack = [scope]
    while stack:
        s = stack.pop()
        out.extend(s.calls)
        out.extend(s.header_calls)
        stack.extend(s.inner)
    return out


def training_call(call: ast.Call, ctx: Walk) -> bool:
    """The call is a training step: named as one, handed gradients, or a function (jitted or
    not) that takes gradients or applies an optimizer."""
    if named_for_training(call.func) or applies_gradients(call):
        return True
    return trains(callee(call, ctx)[1], ctx)


def gradient_transform(func: ast.AST, ctx: Walk) -> ast.Call | None:
    """`jax.grad(f)` that `func` is, written inline or bound to a name (also under `jax.jit`:
    `jax.jit(jax.value_and_grad(f))`): that transform's call, else None."""
    made = func
    if isinstance(func, ast.Name):
        b = ctx.analysis.resolve(func.id, ctx.scope, pos(func))
        made = b.value if b is not None and b.how == "assign" and b.index is None else None
        if isinstance(made, ast.Call) and ctx.analysis.jit_from_call(made, ctx.scope) is not None and made.args:
            made = made.args[0]
    if isinstance(made, ast.Call) and ctx.qualname(made.func) in GRADIENT_TRANSFORMS and made.args:
        return made
    return None


def gradient_decorator(a, fn: ast.AST | None) -> str | None:
    """`@jax.value_and_grad` / `@eqx.filter_value_and_grad` on a def that no jit decorator
    compiles: calling it takes gradients eagerly. The decorator's text, else None."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn in a.jitted_defs:
        return None
    for dec in fn.decorator_list:
        if a.decorator_qualname(dec) in GRADIENT_TRANSFORMS:
            return "@" + ast.unparse(dec)[:40]
    return None


def computed_gradients(call: ast.Call, ctx: Walk) -> bool:
    """A name handed to `call` holds gradients that the code computed just before, proven by
    where it was bound: `loss, grads = grad_fn(params, x)` with `grad_fn = jax.value_and_grad(f)`
    (jitted or not), `grads = jax.grad(f)(params)`, or the result of a function that takes
    gradients: in its body, or by a gradient decorator (`@eqx.filter_value_and_grad`), here or in
    another file of the reviewed tree."""
    for v in [*call.args, *(k.value for k in call.keywords)]:
        if not isinstance(v, ast.Name):
            continue
        b = ctx.analysis.resolve(v.id, ctx.scope, pos(v))
        made = b.value if b is not None and b.how == "assign" else None
        if isinstance(made, ast.Call) and takes_gradients(made, ctx):
            return True
    return False


def takes_gradients(call: ast.Call, ctx: Walk, *, directly: bool = False) -> bool:
    """The call computes gradients: a gradient transform's result called, a function decorated
    with one (`@eqx.filter_value_and_grad`), or (unless `directly`) a function that takes them in
    its body, which may also loop over a whole epoch; here or in another file of the tree."""
    if gradient_transform(call.func, ctx) is not None:
        return True
    a = ctx.analysis
    fn = a.resolve_def(call.func, ctx.scope)
    if fn is not None:
        return gradient_decorator(a, fn) is not None or (not directly and trains(fn, ctx))
    if a.project is not None:
        facts = a.project.function(a.qualname(call.func) or "")
        return facts is not None and (facts.grad_decorated is not None or (not directly and facts.trains))
    return False


def updates_own_state(scope, analysis) -> bool:
    """A method, run eagerly, whose own statements store an optimizer's or a gradient step's result
    on `self` (`updates, self.opt_state = self.optimizer.update(...)`, `self.params =
    optax.apply_updates(...)`, `self.state = self.state.apply_gradients(...)`, or an NNX
    optimizer kept on `self` updating the model in place). Such a method is a
    training step whoever calls it, once per step; and it cannot be running under jit (assigning a
    traced value to `self` would leak a tracer), so whatever it computes runs op by op."""
    fn = scope.node
    if scope.cls is None or scope.traced or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    memo = analysis.memo.setdefault("updates_own_state", {})
    if fn not in memo:
        memo[fn] = any(_stores_step_on_self(n) or _nnx_step_on_self(n, scope, analysis)
                       for n in own_nodes(fn) if isinstance(n, ast.stmt))
    return memo[fn]


NNX_OPTIMIZERS = ("flax.nnx.Optimizer", "flax.nnx.optimizer.", "flax.nnx.training.optimizer.", "flax.nnx.ModelAndOptimizer")


def nnx_optimizer(expr: ast.AST, scope, analysis) -> bool:
    """A Flax NNX optimizer (`nnx.Optimizer(model, optax.adam(...))`): a name bound to one, or an
    attribute of `self` a method of the class sets to one. Its `update(model, grads)` runs the
    optax update and writes the model's parameters in place."""
    return analysis.made_by(expr, scope, NNX_OPTIMIZERS)


def _nnx_step_on_self(stmt: ast.stmt, scope, analysis) -> bool:
    """`self.optimizer.update(self.model, grads)` with an NNX optimizer kept on `self`: the method
    changes the object's model in place, a training step of its own."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "update"
            and len(call.args) >= 2 and isinstance(call.func.value, ast.Attribute)
            and nnx_optimizer(call.func.value, scope, analysis))


def _stores_step_on_self(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Assign):
        return False
    value = stmt.value
    if not (isinstance(value, ast.Call) and _gradient_call(value)):
        return False
    targets = [e for t in stmt.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    return any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" for t in targets)
