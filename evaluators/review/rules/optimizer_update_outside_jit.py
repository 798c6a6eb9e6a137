"""JM304 optimizer-update-outside-jit

What it does
    Flags an optax optimizer step run eagerly in a Python training loop: `tx.update(grads,
    opt_state, ...)` on an optimizer made with `optax.*`, an NNX `nnx.Optimizer`'s
    `update(model, grads)`, or Flax's
    `state.apply_gradients(grads=...)` (a `TrainState` method that runs `tx.update` and then
    `optax.apply_updates`, per its docstring), outside any jitted function. Also a moving
    average of the parameters updated eagerly on every step of a loop proven to train
    (`ema = jax.tree.map(lambda e, p: d * e + (1 - d) * p, ema, params)`, `optax.incremental_update`,
    a comprehension over zipped trees such as SGD written inline, `[p - lr * g for p, g in
    zip(params, grads)]`, or a helper of this module, a local optimizer class's `update`
    included, that does one): the same per-leaf dispatch (measured: 11.5 ms per
    step eagerly against 2.1 ms jitted for 100 leaves of a 256-wide MLP, jax 0.10.2, CPU).

Why is this bad
    Outside `jit`, JAX dispatches every operation on its own: the optimizer's arithmetic runs as
    several small device calls per parameter leaf (Adam: about ten per leaf), each with its own
    dispatch overhead and its own full-size intermediate in memory, on every step. Measured here
    on jax 0.10.2 (CPU, 16 leaves of a 256-wide MLP, Adam written with `jax.tree.map`): 6.8 ms per
    step eagerly against 1.1 ms jitted. Under `jit` the update fuses into a few kernels and, with
    donation, updates the parameters in place.

Example
    for batch in batches:
        grads = grad_fn(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)

Use instead
    @jax.jit
    def train_step(params, opt_state, batch):
        grads = jax.grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.helpers import own_calls
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.names import UPDATE_APPLIERS
from jaxmem.evaluators.review.semantic.roles import in_training_step
from jaxmem.evaluators.review.semantic.training import nnx_optimizer, updates_own_state, zipped_update


class OptimizerUpdateOutsideJit(Rule):
    code = "JM304"
    name = "optimizer-update-outside-jit"
    topic = "jit-compilation"
    severity = "warning"
    message = "`{func}` runs the optimizer eagerly in this loop: each of its operations is dispatched on its own for every parameter leaf, every step"
    fix = ("Move the gradient and the optimizer step (`tx.update` and `optax.apply_updates`, or `state.apply_gradients`) "
           "into one jitted train step (donate the parameters and optimizer state).")
    node_types = (ast.Call,)
    only_in_host_loops = False  # also a method that stores its step on `self`, loop or not
    # Its 16 sure findings on 12h's first run were all trainers that compile the method through
    # their class in __init__ (`self.train_step = jax.pmap(Trainer.train_step)`), which the model
    # did not read as compiled; fixed in the model with a fixture (JM305/clean_method_pmapped_in_init).
    record_from = "unseen-2026-12i"
    # an optax optimizer, a TrainState, an NNX Optimizer; a tree map (a moving average of parameters)
    requires = ("optax", "apply_gradients", "Optimizer", "tree_map", "tree.map", "tree_util")

    tree_message = ("`{func}` combines trees from the training step leaf by leaf eagerly on every step (a moving "
                    "average, a manual update, an accumulation): its arithmetic is dispatched op by op for every leaf "
                    "instead of running inside the jitted step")
    tree_fix = "Do it inside the jitted train step (return the result with the new state), or jit the update once."

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        own_step = not ctx.loops and updates_own_state(ctx.scope, ctx.analysis)
        if not (ctx.host_loop or ctx.per_step_body or own_step) or ctx.scope.traced:
            return
        if self._eager_tree_update(node, ctx):
            return
        # The optimizer's arithmetic is in `tx.update` (Adam: moments, bias correction, scaling);
        # `optax.apply_updates` alone is one add per leaf, not worth a finding of its own.
        if not self._update_step(node, ctx):
            return
        if isinstance(node.func, ast.Attribute) and node.func.attr == "update" and _compiled_update(node.func.value, ctx):
            return  # `sgldoptim = optim_sgld(eps)` whose GradientTransformation holds a jitted update_fn
        func = f"{ast.unparse(node.func.value)[:30]}.{node.func.attr}" if isinstance(node.func, ast.Attribute) else node.func.id
        if not own_step and (periodic(ctx, sync=False) or not_per_step(ctx, (), sync=False)):
            return
        # Sure in a loop proven to train, or where the call replaces its own input (`u, opt_state
        # = tx.update(g, opt_state)`, `state = state.apply_gradients(grads=g)`): the optimizer
        # state it carries from step to step is the proof that this loop trains.
        # A method that stores the update on `self` is a training step run eagerly by
        # construction (semantic.training.updates_own_state).
        message = None
        if own_step:
            message = ("`{func}` runs the optimizer eagerly in a method that updates the object's own state, which nothing "
                       "jits: each of its operations is dispatched on its own for every parameter leaf, every update")
        ctx.report(self, node, func=func, message=message,
                   sure=own_step or in_training_step(ctx) or self._replaces_input(node, ctx))

    def _eager_tree_update(self, node: ast.Call, ctx: Ctx) -> bool:
        """`ema = apply_ema(ema, model)` or `ema = jax.tree.map(lambda e, p: d * e + (1 - d) * p, ema,
        params)` in a loop proven to train, where the helper (a function of this module, one call
        deep) or the call itself combines two trees leaf by leaf with arithmetic, and a device
        array from the step is one of them: measured on jax 0.10.2 (CPU, 100 leaves of a 256-wide
        MLP), an eager EMA update took 11.5 ms per step against 2.1 ms jitted. True when reported."""
        if not ctx.host_loop or not node.args:
            return False
        func = ast.unparse(node.func)[:40]
        if _tree_arithmetic(node, ctx):
            trees = node.args[1:]
        elif zipped_update(ctx.parent) is node:
            trees, func = node.args, ast.unparse(ctx.parent)  # `[p - lr * g for p, g in zip(params, grads)]`
            func = func if len(func) <= 50 else func[:47] + "..."
        else:
            fn = ctx.analysis.resolve_def(node.func, ctx.scope)
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _updates_trees(fn, ctx):
                return False
            trees = node.args
        if (not in_training_step(ctx) or ctx.jit_info(node.func) is not None or not any(ctx.proven(t) for t in trees)
                or periodic(ctx, sync=False) or not_per_step(ctx, (), sync=False)):
            return False
        ctx.report(self, node, message=self.tree_message, fix=self.tree_fix, func=func)
        return True

    @staticmethod
    def _replaces_input(node: ast.Call, ctx: Ctx) -> bool:
        stmt = ctx.parent
        if not (isinstance(stmt, ast.Assign) and stmt.value is node and ctx.loops):
            return False
        written = {n.id for t in stmt.targets for n in astutil.walk(t) if isinstance(n, ast.Name)}
        read = {a.id for a in [node.func.value, *node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Name)}
        return bool(written & read)

    def _update_step(self, node: ast.Call, ctx: Ctx) -> bool:
        """`tx.update(grads, state, ...)` on an optax or NNX optimizer, Flax's
        `state.apply_gradients(grads=...)` (keyword only; Keras' method of that name takes them
        positionally), or any call whose results are applied as updates (`_applied_as_updates`)."""
        func = node.func
        if _applied_as_updates(node, ctx):
            return True
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr == "update":
            return len(node.args) >= 2 and (self._optax_object(func.value, ctx)
                                            or nnx_optimizer(func.value, ctx.scope, ctx.analysis))
        return func.attr == "apply_gradients" and any(k.arg == "grads" for k in node.keywords)

    @staticmethod
    def _optax_object(expr: ast.AST, ctx: Ctx) -> bool:
        """A name bound to `optax.something(...)` (an optimizer or a chain of transformations), or
        an attribute of `self` that a method of the class sets so (`self.optimizer = optax.adam(...)`)."""
        return ctx.analysis.made_by(expr, ctx.scope, ("optax.",))


_TRANSFORMATIONS = frozenset({"optax.GradientTransformation", "optax.GradientTransformationExtraArgs"})


def _compiled_update(receiver: ast.AST, ctx: Ctx) -> bool:
    """The optimizer was made by a function of this module that returns
    `optax.GradientTransformation(init_fn, update_fn)` with `update_fn` a jitted def: its `update`
    runs one compiled program, not the optimizer's operations one by one."""
    if not isinstance(receiver, ast.Name):
        return False
    a = ctx.analysis
    b = a.resolve(receiver.id, ctx.scope, (receiver.lineno, receiver.col_offset))
    factory = a.resolve_def(b.value.func, ctx.scope) if b is not None and isinstance(b.value, ast.Call) else None
    if not isinstance(factory, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    inner = a.scopes.get(factory)
    for ret in astutil.own_returns(factory):
        made = ret.value
        if not (isinstance(made, ast.Call) and a.qualname(made.func) in _TRANSFORMATIONS):
            continue
        update = made.args[1] if len(made.args) > 1 else next((k.value for k in made.keywords if k.arg == "update"), None)
        fn = a.resolve_def(update, inner) if update is not None and inner is not None else None
        if fn is not None and fn in a.jitted_defs:
            return True
    return False


def _applied_as_updates(node: ast.Call, ctx: Ctx) -> bool:
    """`updates, opt_state = self.opt_update(grads, opt_state, params)` whose first result a later
    statement of the same function applies (`optax.apply_updates(params, updates)`): however the
    callable was made (a class attribute's table of optax constructors, the update half of an
    `init, update = optax.adam(lr)` pair), a call whose results are applied as updates is the
    optimizer's update step."""
    stmt = ctx.parent
    if not (isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1 and len(node.args) >= 2
            and isinstance(node.func, (ast.Attribute, ast.Name))):
        return False
    if ctx.jit_info(node.func) is not None or ctx.analysis.resolve_def(node.func, ctx.scope) is not None:
        return False  # a compiled step that returns updates, or a function of this file (checked where it runs)
    target = stmt.targets[0]
    if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name)):
        return False
    name = target.elts[0].id
    return any(isinstance(n, ast.Call) and n.lineno > node.lineno and len(n.args) >= 2
               and isinstance(n.args[1], ast.Name) and n.args[1].id == name and ctx.qualname(n.func) in UPDATE_APPLIERS
               for n in ctx.scope.calls)


RULE = OptimizerUpdateOutsideJit()


def _updates_trees(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Ctx) -> bool:
    """A function of this module, run eagerly, whose own calls combine trees with arithmetic."""
    memo = ctx.memo.setdefault("JM304_updates_trees", {})
    if fn not in memo:
        inner = ctx.analysis.scopes.get(fn)
        memo[fn] = inner is not None and not inner.traced and (
            any(_tree_arithmetic(c, ctx, inner) for c in own_calls(fn, ctx.analysis))
            or any(zipped_update(n) is not None for n in astutil.walk(fn)))
    return memo[fn]


def _tree_arithmetic(call: ast.Call, ctx: Ctx, scope=None) -> bool:
    """`jax.tree.map(lambda a, b: a * d + b * (1 - d), t1, t2)` (two or more trees combined leaf by
    leaf with arithmetic; the function may be a name bound to a lambda or a def here), or optax's
    `incremental_update(new, old, step_size)`."""
    q = ctx.qualname(call.func)
    if q == "optax.incremental_update":
        return True
    if q != "jax.tree.map" or len(call.args) < 3:
        return False
    fn = ctx.analysis.resolve_def(call.args[0], scope or ctx.scope)
    return any(isinstance(n, ast.BinOp) for stmt in astutil.statements(fn) for n in astutil.walk(stmt))
