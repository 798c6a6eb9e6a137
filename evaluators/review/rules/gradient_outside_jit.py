"""JM305 gradient-outside-jit

What it does
    Flags a gradient computed eagerly on every step of a Python training loop:
    `jax.grad(loss)(params, batch)` or `jax.value_and_grad(...)` (Flax NNX's and Equinox's alike)
    called outside any jitted function, in the loop or in a step function the loop calls that
    nothing jits, on a loss that is not jitted either; also in a method that stores its
    optimizer step on `self` (`self.params = optax.apply_updates(...)`): such a method is a
    training step whoever calls it, and cannot run under jit.

Why is this bad
    Outside `jit`, JAX dispatches every primitive of the forward and the backward pass on its own:
    one small device call per operation, each waiting its turn in Python, nothing fused, every
    intermediate written out in full. Measured here on jax 0.10.2 (CPU, one step of an MLP with
    SGD): 9.9 ms eagerly against 0.12 ms jitted for a 64-128-128-1 network, 15.9 ms against
    3.8 ms for a 256-512-512-512-10 one at batch 128. Under `jit` the whole step is one compiled
    program, dispatched once, and with donation it updates the parameters in place.

Example
    for x, y in batches:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params = jax.tree.map(lambda p, g: p - lr * g, params, grads)

Use instead
    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.roles import enclosing_role, in_training_step
from jaxmem.evaluators.review.semantic.training import gradient_decorator, gradient_transform, updates_own_state


class GradientOutsideJit(Rule):
    code = "JM305"
    name = "gradient-outside-jit"
    topic = "jit-compilation"
    severity = "warning"
    message = ("{what} computes gradients eagerly on every step: the forward and backward pass are dispatched "
               "operation by operation instead of running as one compiled program")
    fix = "Jit the training step, gradient and update together (`@jax.jit`, donating the parameters), or at least `jax.jit(jax.value_and_grad(loss))`."
    node_types = (ast.Call,)
    only_in_host_loops = False  # also a method that stores its step on `self`, loop or not
    # Its 16 sure findings on 12h's first run were all trainers that compile the method through
    # their class in __init__ (`self.train_step = jax.pmap(Trainer.train_step)`), which the model
    # did not read as compiled; fixed in the model with a fixture (JM305/clean_method_pmapped_in_init).
    # Its proven findings on 12i-12u's first runs: 7 right, 3 wrong, the 3 wrong ones on 12t one
    # cause: samplers' opt-out `jit=False` loops beside a compiled `lax.fori_loop` default, now a
    # debugging switch whose steps are not proven (roles.compiled_alternative; semantic test).
    record_from = "unseen-2026-12v"
    requires = ("grad",)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        # A method that stores its step's result on `self` is a training step of its own, run
        # eagerly by construction (semantic.training.updates_own_state), loop in sight or not.
        own_step = not ctx.loops and updates_own_state(ctx.scope, ctx.analysis)
        if not (ctx.host_loop or ctx.per_step_body or own_step) or ctx.scope.traced:
            return
        what = self._eager_gradient(node.func, ctx)
        if what is None:
            return
        if not own_step:
            if periodic(ctx, sync=False) or not_per_step(ctx, (), sync=False):
                return
            # A loop that computes gradients and carries nothing from step to step is not
            # training (a sensitivity map, a saliency loop over inputs): its one eager pass is
            # the job.
            if not enclosing_role(ctx).steps:
                return
        ctx.report(self, node, what=what, sure=own_step or in_training_step(ctx))

    @staticmethod
    def _eager_gradient(func: ast.AST, ctx: Ctx) -> str | None:
        """`jax.grad(f)` written inline or bound to a name, not jitted, of a function that is not
        jitted: the text to show, else None."""
        if isinstance(func, ast.Name) and ctx.jit_info(func) is not None:
            return None  # `grad_fn = jax.jit(jax.value_and_grad(f))`
        made = gradient_transform(func, ctx)
        if made is None:
            # A def decorated with a gradient transform and never jitted, here or in another file
            # of the reviewed tree (`@eqx.filter_value_and_grad def compute_loss(...)`).
            a = ctx.analysis
            dec = gradient_decorator(a, a.resolve_def(func, ctx.scope))
            if dec is None and a.project is not None and ctx.jit_info(func) is None:
                facts = a.project.function(ctx.qualname(func) or "")
                dec = facts.grad_decorated if facts is not None and facts.jit is None else None
            return f"`{ast.unparse(func)[:40]}`, decorated with `{dec}` and never jitted," if dec else None
        loss = made.args[0]
        if ctx.jit_info(loss) is not None:
            return None  # grad of a jitted function: its forward and backward run compiled
        fn = ctx.analysis.resolve_def(loss, ctx.scope)
        scope = ctx.analysis.scopes.get(fn) if fn is not None else None
        if scope is not None and scope.jitted:  # (`traced` it is anyway: grad traces it)
            return None
        if scope is not None and _runs_compiled(scope, ctx):
            return None
        return f"`{ast.unparse(func)[:40]}`" if func is made else f"`{func.id}`, a `{ast.unparse(made.func)}` nobody jits,"


def _runs_compiled(scope, ctx: Ctx) -> bool:
    """The differentiated function hands its heavy work to a jitted callable (`pred =
    model.batch_forward(x)` with `@jax.jit def batch_forward`): its forward and backward run as
    compiled programs; only the few operations around that call are eager."""
    a = ctx.analysis
    for call in scope.calls:
        if a.jit_info(call.func, scope) is not None:
            return True
        if isinstance(call.func, ast.Attribute) and call.func.attr in a.attr_jits:
            return True
    return False


RULE = GradientOutsideJit()
