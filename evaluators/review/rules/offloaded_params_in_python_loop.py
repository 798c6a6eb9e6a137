"""JM504 offloaded-params-in-python-loop

What it does
    Flags a Python `for` loop inside a jitted function (typically a loop over layers) that
    iterates over or reads values offloaded to the `pinned_host` memory kind: a parameter the
    module passes a `jax.device_put(..., <pinned_host sharding>)` result to, or such a global.

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

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule


class OffloadedParamsInPythonLoop(Rule):
    code = "JM504"
    name = "offloaded-params-in-python-loop"
    topic = "host-offloading"
    severity = "warning"
    message = "Python loop inside a jitted function reads `{name}`, offloaded to `pinned_host`: unrolled, the offloaded parameters stay on the device"
    fix = "Consume the stacked layer parameters with `lax.scan` so each layer is brought to the device only when used."
    node_types = (ast.For,)
    requires = ('pinned_host',)

    def check(self, node: ast.For, ctx: Ctx) -> None:
        if not ctx.scope.jitted:
            return
        offloaded = ctx.memo.get("offloaded")
        if offloaded is None:
            offloaded = ctx.memo["offloaded"] = _offloaded_names(ctx)
        if not offloaded:
            return
        fn = _enclosing_def(ctx)
        params = _offloaded_params(fn, offloaded, ctx) if fn is not None else set()
        used = {n.id for n in astutil.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        hit = sorted(used & (params | offloaded))
        if hit:
            ctx.report(self, node, name=hit[0])


def _mentions_pinned(expr: ast.AST, hosts: set[str]) -> bool:
    return any((isinstance(n, ast.Constant) and n.value == "pinned_host") or (isinstance(n, ast.Name) and n.id in hosts)
               for n in astutil.walk(expr))


def _offloaded_names(ctx: Ctx) -> set[str]:
    """Names bound to a pinned_host sharding, then names bound to values placed with one."""
    assigns = [(t.id, n.value) for n in astutil.walk(ctx.analysis.tree) if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)]
    hosts: set[str] = set()
    for _ in range(2):  # `host = dev.with_memory_kind("pinned_host")`, then `s = host`
        hosts |= {name for name, value in assigns if _mentions_pinned(value, hosts)
                  and not (isinstance(value, ast.Call) and ctx.qualname(value.func) == "jax.device_put")}
    return {name for name, value in assigns if isinstance(value, ast.Call) and ctx.qualname(value.func) == "jax.device_put"
            and any(_mentions_pinned(a, hosts) for a in [*value.args[1:], *(k.value for k in value.keywords)])}


def _enclosing_def(ctx: Ctx):
    scope = ctx.scope
    while scope is not None and not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = scope.parent
    return scope.node if scope is not None else None


def _offloaded_params(fn, offloaded: set[str], ctx: Ctx) -> set[str]:
    """Parameters of `fn` that some call in the module passes an offloaded name to."""
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    out = set()
    for n in astutil.walk(ctx.analysis.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == fn.name:
            for i, arg in enumerate(n.args):
                if isinstance(arg, ast.Name) and arg.id in offloaded and i < len(params):
                    out.add(params[i])
            for kw in n.keywords:
                if isinstance(kw.value, ast.Name) and kw.value.id in offloaded and kw.arg:
                    out.add(kw.arg)
    return out


RULE = OffloadedParamsInPythonLoop()
