"""JM401 missing-donation

What it does
    Flags `state = step(state, ...)` in a loop, where `step` is jitted and the argument whose
    result replaces it is not donated (`donate_argnums` / `donate_argnames`). Reported once per
    jitted function and argument (the fix is at its definition); names of PRNG keys and
    counters (`key`, `rng`, `step`, ...) are left alone, being a few bytes.

Why is this bad
    Without donation the output needs a fresh buffer while the input is still alive: during
    each step the old and the new state coexist, doubling the peak memory of that state.
    Donation lets XLA write the result into the input's buffer (it works on CPU, GPU and TPU;
    measured here: alias bytes 0 -> 4 MiB, peak RSS 596 -> 404 MiB for a 200 MB state).

Example
    @jax.jit
    def update(params, grads):
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    for grads in stream:
        params = update(params, grads)

Use instead
    @partial(jax.jit, donate_argnums=0)
    def update(params, grads):
        ...
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule


def target_names(targets: list[ast.AST]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


SMALL_STATE_HINTS = ("key", "rng", "seed", "step", "count")


class MissingDonation(Rule):
    code = "JM401"
    name = "missing-donation"
    topic = "buffer-donation"
    severity = "info"  # right for large states; small ones lose little, so it is advice, not a warning
    message = "`{arg}` is replaced by the result of jitted `{func}` without donation: old and new buffers coexist every step"
    fix = "Donate the argument: `jax.jit(..., donate_argnums={pos})` (or donate_argnames) so the output reuses its buffer."
    node_types = (ast.Assign,)
    requires = ('jit', 'pmap')
    only_in_host_loops = True

    def check(self, node: ast.Assign, ctx: Ctx) -> None:
        if not ctx.host_loop or not isinstance(node.value, ast.Call):
            return
        call = node.value
        info = ctx.analysis.jit_info(call.func)
        if info is None or not info.donation_known:
            return
        donated = info.donated_positions()
        static = info.static_positions()
        names = target_names(node.targets)
        params = info.params or ()
        for pos, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return  # positions after *args are unknown
            if isinstance(arg, ast.Name) and arg.id in names and pos not in donated and pos not in static:
                self._report(ctx, arg, call, str(pos))
                return
        for kw in call.keywords:
            if isinstance(kw.value, ast.Name) and kw.value.id in names and kw.arg in params:
                pos = params.index(kw.arg)
                if pos not in donated and pos not in static:
                    self._report(ctx, kw.value, call, str(pos))
                    return

    def _report(self, ctx: Ctx, arg: ast.Name, call: ast.Call, pos: str) -> None:
        if any(h in arg.id.lower() for h in SMALL_STATE_HINTS):
            return  # PRNG keys and counters: a few bytes, donation saves nothing
        # The fix is at the definition, so one finding per jitted function and argument is
        # enough; every further call site would repeat it.
        seen = ctx.memo.setdefault("missing_donation", set())
        key = (id(ctx.analysis.jit_info(call.func)), pos)
        if key in seen:
            return
        seen.add(key)
        ctx.report(self, arg, arg=arg.id, func=ast.unparse(call.func), pos=pos)


RULE = MissingDonation()
