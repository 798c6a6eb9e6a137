"""JM106 host-callback-per-iteration

What it does
    Flags `jax.debug.callback`, `jax.experimental.io_callback` and `jax.debug.print` in the body of
    a compiled loop (`lax.scan`, `fori_loop`, `while_loop`, `lax.map`, their Flax NNX forms), in a
    function nested in one, or in a function of the file that only such bodies call: the training
    scan of a PureJaxRL-style `train` function, an optimizer's scanned iterations. Not inside a
    `lax.cond` branch (that runs only when taken), and not `jax.pure_callback` (its result is work
    the program needs).

Why is this bad
    A callback stops the compiled loop at the host on every iteration: its operands are sent to the
    host (a device->host copy on GPU and TPU) and the Python function runs before the loop goes on.
    `io_callback` and `jax.debug.*` also carry an effect, which takes jit's slower dispatch path
    (jax/_src/pjit.py; ~85 us per `debug.callback` measured on this CPU). The worst case is a host
    function that uses what it is sent only on some calls (`if t - last >= ckpt_freq:
    save(runner_state)`): the whole runner state is copied on every iteration and dropped on most.
    Shown as sure only then, and not under a trace-time switch (`if config.DEBUG:` in traced code
    is a Python test the user turned on); other callbacks per iteration (a scalar logged each
    update) are shown as possible.

Example
    def _update_step(runner_state, _):
        ...
        jax.debug.callback(save_checkpoint, runner_state, metric)   # save_checkpoint: `if due: ...`
        return runner_state, metric

    runner_state, metrics = jax.lax.scan(_update_step, runner_state, None, n_updates)

Use instead
    def _update_step(runner_state, _):
        ...
        jax.lax.cond(runner_state.update_i % ckpt_every == 0,
                     lambda: jax.debug.callback(save_checkpoint, runner_state, metric),
                     lambda: None)                      # a callback in an untaken branch does not run
        return runner_state, metric
    # or return the metrics from the scan and read them on the host once, after it
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import callbacks


class HostCallbackPerIteration(Rule):
    code = "JM106"
    name = "host-callback-per-iteration"
    topic = "host-callbacks"
    severity = "warning"
    message = ("`{func}` runs on every iteration of a compiled loop: its operands go to the host (a device->host "
               "copy on GPU/TPU) and Python runs before the loop goes on{why}")
    fix = ("Run the callback only on the iterations that need it (`jax.lax.cond(due, lambda: jax.debug.callback(...), "
           "lambda: None)`: an untaken branch does not call the host), or return the values from the loop and read "
           "them once after it.")
    node_types = (ast.Call,)
    call_names = callbacks.EFFECT_CALLBACKS
    requires = ("callback", "debug.print", "print(")

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.scope.traced or not callbacks.loop_iteration(ctx.analysis, ctx.scope):
            return
        func = ctx.qualname(node.func).replace("jax.experimental.", "")
        host = None if func == "jax.debug.print" else callbacks.host_function(ctx.analysis, node, ctx.scope)
        used = callbacks.used_only_when(host) if host is not None else None
        if used is not None:
            param, test = used
            why = (f"; `{host.name}` uses `{param}` only under the `if` on line {test.lineno}, so on the other "
                   f"iterations the copy is made for nothing")
        else:
            why = ""
        # An `if` in traced code tests a Python value at trace time (a traced one would raise): a
        # switch such as `if config.DEBUG:` the user turned on to get per-iteration output.
        switched = any(isinstance(n, ast.If) for n in self._own_stack(ctx))
        ctx.report(self, node, func=func, why=why, sure=used is not None and not switched)

    @staticmethod
    def _own_stack(ctx: Ctx):
        for n in reversed(ctx.stack[:-1]):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return
            yield n


RULE = HostCallbackPerIteration()
