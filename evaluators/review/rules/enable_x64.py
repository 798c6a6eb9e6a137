"""JM901 enable-x64

What it does
    Opt-in (`--select JM901`). Flags turning on 64-bit types: `jax.config.update("jax_enable_x64", True)`,
    `JAX_ENABLE_X64` set to a true value in `os.environ`, and `jax.experimental.enable_x64()`.

Why is this bad
    With x64 enabled, Python floats and NumPy's default float64 arrays stay 64-bit on the
    device: every such array takes twice the memory and twice the transfer bytes of float32,
    and float64 math is much slower on GPUs and emulated on TPUs.

Example
    jax.config.update("jax_enable_x64", True)

Use instead
    # keep the default (32-bit); request float64 locally only where precision needs it,
    # e.g. inside `with jax.experimental.enable_x64():` around one computation
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes

TRUE = frozenset({"1", "true", "True", "yes"})


class EnableX64(Rule):
    code = "JM901"
    name = "enable-x64"
    topic = "mixed-precision"
    severity = "warning"
    message = "64-bit mode is enabled {how}: float arrays double their device memory and transfer size"
    fix = "Stay in 32-bit (or bf16) by default; enable float64 only around the computation that needs it."
    node_types = (ast.Call, ast.Assign)
    call_names = ENV_CALLS | {"jax.config.update", "jax.experimental.enable_x64"}
    requires = ('x64', 'X64')
    # Opt-in: on the first runs of 16 unseen readings (12b-12q) all 75 of its findings that were
    # judged right or wrong were wrong (46 more debatable): code that enables x64 does so for the
    # precision it needs (Cholesky solves, nested sampling, spectral grids, fp64 checkpoints),
    # and it found nothing on the tuned-on benchmark. What it states is still true, for whoever
    # asks: `--select JM901`.
    default = False

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if isinstance(node, ast.Call):
            q = ctx.qualname(node.func)
            if q in ("jax.config.update", "jax.config.config.update") and len(node.args) == 2:
                flag, value = node.args
                if (isinstance(flag, ast.Constant) and flag.value == "jax_enable_x64"
                        and isinstance(value, ast.Constant) and value.value):
                    ctx.report(self, node, how="with jax.config.update")
                    return
            if q == "jax.experimental.enable_x64" and ctx.scope is ctx.analysis.module_scope and not self._in_with(ctx):
                ctx.report(self, node, how="by jax.experimental.enable_x64()")
                return
        for key, value in env_writes(ctx, node):
            if key == "JAX_ENABLE_X64" and const_str(value) in TRUE:
                ctx.report(self, node, how="through JAX_ENABLE_X64")

    @staticmethod
    def _in_with(ctx: Ctx) -> bool:
        return isinstance(ctx.parent, ast.withitem)


RULE = EnableX64()
