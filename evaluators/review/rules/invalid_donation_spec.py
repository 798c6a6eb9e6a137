"""JM403 invalid-donation-spec

What it does
    Flags `donate_argnums` that point past the wrapped function's positional parameters, and
    arguments that are both donated and static, for `jax.jit` and `pjit`. The function is the
    one the name means at that point (by scope and definition order).

Why is this bad
    Both raise `ValueError` when the function is jitted (checked on jax 0.10.2): "Jitted
    function has donate_argnums=(3,), but only accepts 1 positional arguments" and
    "static_argnames and donate_argnames cannot intersect". Nothing is donated and the
    program stops.

Example
    @partial(jax.jit, donate_argnums=(0, 2))
    def step(state, batch):
        ...

Use instead
    @partial(jax.jit, donate_argnums=0)
    def step(state, batch):
        ...
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import JitInfo

# Makers whose ValueError was checked on jax 0.10.2 (`jax.pmap` accepts the same spec silently).
CHECKED = frozenset({"jax.jit", "jax.experimental.pjit.pjit", "jax.pjit"})


class InvalidDonationSpec(Rule):
    code = "JM403"
    name = "invalid-donation-spec"
    topic = "buffer-donation"
    severity = "error"
    message = "{problem}: jax raises ValueError when this function is jitted"
    fix = "Donate only positions of the function's own parameters (0-based), and never a static argument."
    node_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign)
    requires = ('donate_argnums',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if isinstance(node, ast.Assign):
            made = ctx.analysis.jit_from_call(node.value, ctx.scope) if isinstance(node.value, ast.Call) else None
            if made is None or not isinstance(made[1], ast.Name):
                return
            info, wrapped = made
            # The function this name means here (by scope and definition order), not the last
            # def of that name in the file.
            fn = ctx.analysis.resolve_def(wrapped, ctx.scope)
            info.params = ctx.analysis.params_of(wrapped, ctx.scope)
        else:
            info = ctx.analysis.jitted_defs.get(node)
            fn = node
        if (info is None or info.params is None or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                or fn.args.vararg is not None or info.maker not in CHECKED):
            return
        problem = self._problem(info)
        if problem:
            ctx.report(self, node, problem=problem)

    @staticmethod
    def _problem(info: JitInfo) -> str | None:
        n = len(info.params)
        bad = sorted(i for i in (info.donate_argnums or ()) if i >= n or i < -n)
        if bad:
            return f"donate_argnums {bad} but the function takes {n} positional argument{'s' if n != 1 else ''}"
        both = info.donated_positions() & info.static_positions()
        if both:
            names = ", ".join(info.params[i] for i in sorted(both) if 0 <= i < n)
            return f"argument {names!r} is both donated and static"
        return None


RULE = InvalidDonationSpec()
