"""JM504 offloaded-params-in-python-loop

What it does
    In a module that offloads with the `pinned_host` memory kind, flags Python `for` loops
    inside jitted functions (typically a loop over layers).

Why is this bad
    Parameter offloading streams one layer at a time only when the layers are consumed by
    `lax.scan`: XLA can then move each slice to the device just before it is needed. A Python
    loop unrolls the layers into one program and keeps the parameters on the device, so the
    offload saves nothing.

Example
    params = jax.device_put(params, sharding.with_memory_kind("pinned_host"))

    @jax.jit
    def forward(params, x):
        for w in params:
            x = jnp.tanh(x @ w)
        return x

Use instead
    @jax.jit
    def forward(params, x):
        def layer(x, w):
            w = jax.device_put(w, device_sharding)      # fetch one layer
            return jnp.tanh(x @ w), None
        return lax.scan(layer, x, params)[0]
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule


class OffloadedParamsInPythonLoop(Rule):
    code = "JM504"
    name = "offloaded-params-in-python-loop"
    topic = "host-offloading"
    severity = "warning"
    message = "Python loop inside a jitted function of a module that offloads to `pinned_host`: offloaded parameters stay on the device"
    fix = "Consume the stacked layer parameters with `lax.scan` so each layer is brought to the device only when used."
    node_types = (ast.For,)
    requires = ('pinned_host',)

    def check(self, node: ast.For, ctx: Ctx) -> None:
        if not ctx.scope.jitted:
            return
        offloads = ctx.memo.get("pinned_host")
        if offloads is None:
            offloads = ctx.memo["pinned_host"] = any("pinned_host" in line for line in ctx.analysis.lines)
        if offloads:
            ctx.report(self, node)


RULE = OffloadedParamsInPythonLoop()
