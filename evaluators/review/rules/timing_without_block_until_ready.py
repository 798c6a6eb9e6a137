"""JM701 timing-without-block-until-ready

What it does
    Flags `t0 = time.perf_counter()` ... `time.perf_counter() - t0` around JAX work when
    nothing in between waits for the result (`block_until_ready`, a host read), and
    `timeit.timeit(lambda: f(x))` whose callable does not block either. When the region does
    wait, it still flags a region holding the first call of a jitted function in that block:
    the timing then includes tracing and compilation.

Why is this bad
    JAX returns from a call as soon as the work is queued. Without waiting, the timer measures
    dispatch, not computation, and the numbers look far too good (or move to whichever later
    line happens to sync).

Example
    t0 = time.perf_counter()
    y = f(x)
    print(time.perf_counter() - t0)

Use instead
    f(x).block_until_ready()               # compile outside the timed region
    t0 = time.perf_counter()
    y = f(x).block_until_ready()
    print(time.perf_counter() - t0)
"""
from __future__ import annotations

import ast

from evaluators.review.context import dotted
from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules._util import TIMERS, is_sync


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


class TimingWithoutBlockUntilReady(Rule):
    code = "JM701"
    name = "timing-without-block-until-ready"
    topic = "async-dispatch"
    severity = "warning"
    message = "this timing stops before the JAX work finishes: without `block_until_ready` it measures dispatch only"
    compile_message = "the timed region contains the first call of jitted `{func}`: it measures compilation too"
    compile_fix = "Call the function once before starting the timer (and block on it) so compilation is not timed."
    fix = "Call `.block_until_ready()` (or `jax.block_until_ready(tree)`) on the result inside the timed region; warm up first."
    wants_bodies = True
    requires = ('time',)
    node_types = (ast.Call,)

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        # timeit.timeit(lambda: f(x), number=...)
        if ctx.qualname(node.func) in ("timeit.timeit", "timeit.repeat") and node.args:
            fn = node.args[0]
            if isinstance(fn, ast.Lambda) and self._runs_jax(fn.body, ctx) and not self._waits([fn.body], ctx):
                ctx.report(self, node)

    def check_body(self, body: list[ast.stmt], ctx: Ctx) -> None:
        starts: dict[str, int] = {}
        for i, stmt in enumerate(body):
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and self._is_timer(stmt.value, ctx)):
                starts[stmt.targets[0].id] = i
                continue
            for name, start in list(starts.items()):
                stop = self._elapsed(stmt, name, ctx)
                if stop is None:
                    continue
                region = body[start + 1:i + 1]
                if self._runs_jax_region(region, ctx):
                    if not self._waits(region, ctx):
                        ctx.report(self, stop)
                    else:
                        first = self._first_jit_call(region, body[:start], ctx)
                        if first:
                            # Information only: a training script timing its whole run may want compilation in.
                            ctx.report(self, stop, message=self.compile_message, fix=self.compile_fix,
                                       severity="info", func=first)
                del starts[name]

    @staticmethod
    def _first_jit_call(region: list[ast.stmt], before: list[ast.stmt], ctx: Ctx) -> str | None:
        """A jitted function called in the timed region and never before it in this block."""
        def jitted_calls(stmts):
            # Definitions call nothing when they run; skipping them keeps module-level timing cheap.
            return [dotted(n.func) or "function" for s in stmts if not isinstance(s, _DEFS) for n in ast.walk(s)
                    if isinstance(n, ast.Call) and ctx.analysis.jit_info(n.func) is not None]
        warmed = set(jitted_calls(before))
        return next((f for f in jitted_calls(region) if f not in warmed), None)

    def _is_timer(self, node: ast.AST, ctx: Ctx) -> bool:
        return isinstance(node, ast.Call) and ctx.qualname(node.func) in TIMERS

    def _elapsed(self, stmt: ast.stmt, name: str, ctx: Ctx) -> ast.AST | None:
        for n in ast.walk(stmt):
            if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and self._is_timer(n.left, ctx)
                    and isinstance(n.right, ast.Name) and n.right.id == name):
                return n
        return None

    def _runs_jax_region(self, region: list[ast.stmt], ctx: Ctx) -> bool:
        return any(self._runs_jax(n, ctx) for stmt in region for n in ast.walk(stmt))

    @staticmethod
    def _runs_jax(node: ast.AST, ctx: Ctx) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and ctx.kind(n) == "jax":
                return True
        return False

    @staticmethod
    def _waits(region: list[ast.AST], ctx: Ctx) -> bool:
        return any(is_sync(ctx, n) for stmt in region for n in ast.walk(stmt)
                   if not (isinstance(n, ast.Call) and TimingWithoutBlockUntilReady._prints_only_time(n, ctx)))

    @staticmethod
    def _prints_only_time(call: ast.Call, ctx: Ctx) -> bool:
        """`print(time.perf_counter() - t0)` is where the timing ends, not a wait on JAX."""
        return isinstance(call.func, ast.Name) and call.func.id == "print" and not any(
            ctx.kind(a) == "jax" for a in call.args)


RULE = TimingWithoutBlockUntilReady()
