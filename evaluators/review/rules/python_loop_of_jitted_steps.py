"""JM507 python-loop-of-jitted-steps

What it does
    Flags a Python `for` loop, run eagerly, that does nothing but advance state it carries
    through a jitted function (`pos, vel = step(pos, vel, m)`), perhaps keeping each result in
    a list (`trajectory.append(pos)`) or splitting a key: no data from the host enters it (it
    walks `range(n)` or a device array, never a loader), nothing in it reads a value back,
    prints, branches or breaks, and it calls nothing but JAX. That is exactly the shape
    `lax.scan` (or `lax.fori_loop`) compiles into one program. Not flagged: loops the source
    shows to run fewer than 100 times in all (its own count times those of the loops around it),
    loops whose jitted function runs a compiled loop of its own (`run_epoch` scanning 2,000
    steps per call: the dispatch is paid once per many steps), and loops whose state grows on every
    call (JM308's case: a scan cannot carry it as it is).

    A new rule (its findings are possible until unseen readings judge it): whether the loop is
    worth rewriting depends on the step's size, which the source does not show.

Why is this bad
    Each iteration is one dispatch from Python: tens of microseconds of host work before the
    device sees the step. For a small step (a few particles, a small MLP on full-batch data, a
    filter update) that overhead is most of the run. Measured on jax 0.10.2, CPU
    (benchmarks/claims/jm507_python_loop_of_jitted_steps.py, 2,000 steps): a three-body
    leapfrog step took 18.8 us per step from a Python loop against 0.1 us inside one
    `lax.scan`; a 256x256 matmul step took about twice as long from the loop.

Example
    for _ in range(n_steps):
        pos, vel = step(pos, vel, masses)      # jitted, a few dozen flops
        trajectory.append(pos)
    trajectory = jnp.stack(trajectory)

Use instead
    @jax.jit
    def simulate(pos, vel, masses):
        def body(carry, _):
            pos, vel = step(*carry, masses)
            return (pos, vel), pos
        return jax.lax.scan(body, (pos, vel), None, length=n_steps)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.flow import replaced_state_calls
from jaxmem.evaluators.review.semantic.growth import grown_argument
from jaxmem.evaluators.review.semantic.loops import loop_targets
from jaxmem.evaluators.review.semantic.names import dotted
from jaxmem.evaluators.review.semantic.sizes import trip_count
from jaxmem.evaluators.review.semantic.training import jitted_def, runs_compiled_loop

# Below this many iterations the dispatches cost a few milliseconds in all: not worth a rewrite.
WORTH_SCANNING = 100
# JAX calls a scan body can hold as they are (a key split, array operations, tree maps); a
# transfer or a read (`device_get`, `device_put`, `block_until_ready`) is host interaction.
_HOST_JAX = frozenset({"jax.device_get", "jax.device_put", "jax.block_until_ready", "jax.debug.print",
                       "jax.debug.callback", "jax.profiler.trace"})
_BARS = frozenset({"tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"})
_RANGES = frozenset({"range", "trange", "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange"})
_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Pass)


class PythonLoopOfJittedSteps(Rule):
    code = "JM507"
    name = "python-loop-of-jitted-steps"
    topic = "scan-over-loops"
    severity = "info"
    message = ("this Python loop only advances `{state}` through jitted `{step}`: one dispatch per iteration, "
               "which dominates a small step; `lax.scan` runs the whole loop as one program")
    fix = ("Move the loop into a jitted function as `jax.lax.scan` (the kept results become its stacked "
           "output) or `jax.lax.fori_loop`.")
    node_types = (ast.For,)
    requires = ('jit', 'pmap')
    earns_sure = True  # possible until unseen readings judge it

    def check(self, node: ast.For, ctx: Ctx) -> None:
        if ctx.scope.traced or node.orelse or not self._steps_iterations(node, ctx):
            return
        if not all(isinstance(s, _STATEMENTS) and _plain_targets(s) for s in node.body):
            return  # a branch, a nested loop, a `with`, a `break`: not one scan body as it stands
        if any(_host_slice(n, node, ctx) for s in node.body for n in astutil.walk(s)):
            return  # `xs[i]` of a NumPy array: data from the host enters every iteration
        lists = _list_names(ctx, node)
        if not all(self._scan_call(c, lists, ctx) for s in node.body for c in astutil.walk(s) if isinstance(c, ast.Call)):
            return
        if any(isinstance(s, ast.Expr) and not _appends(s.value, lists) for s in node.body):
            return  # a bare call kept for its effect (a plot, a print): host work each iteration
        for call, names in replaced_state_calls(ctx.analysis, node, ctx.scope):
            info = ctx.jit_info(call.func)
            # (`jax.jit(f)(x)` made in the loop is JM301's: a compile per iteration, not a dispatch.)
            if info is not None and info.exact and not isinstance(call.func, ast.Call):
                if runs_compiled_loop(jitted_def(info, ctx), ctx.analysis):
                    return  # `run_epoch` scans 2,000 steps per call: one dispatch per epoch costs nothing
                if grown_argument(call, info, node, ctx) is not None:
                    return  # the state grows every call (JM308's): no scan carries it as it is
                ctx.report(self, node, state=", ".join(sorted(names)), step=dotted(call.func) or "function",
                           sure=True)
                return

    @staticmethod
    def _steps_iterations(node: ast.For, ctx: Ctx) -> bool:
        """`range(n)` (also inside tqdm) with no short count in the source, or a device array."""
        it = node.iter
        if isinstance(it, ast.Call) and dotted(it.func) in _BARS and it.args:
            it = it.args[0]  # tqdm(range(n)); tqdm(loader) then fails below: the data comes from the host
        n = trip_count(it, ctx.analysis, ctx.scope)
        if n is not None and n * _repeats(node, ctx) < WORTH_SCANNING:
            return False  # (50 leapfrog steps per sample, for each of 2,000 samples, are 100,000 dispatches)
        if isinstance(it, ast.Call) and dotted(it.func) in _RANGES:
            return True
        # Rows of one device array (`for t in ts`), not a list of arrays built on the host side.
        return not isinstance(it, (ast.List, ast.Tuple, ast.ListComp)) and ctx.kind(it, strict=True) == "jax"

    @staticmethod
    def _scan_call(call: ast.Call, lists: set[str], ctx: Ctx) -> bool:
        """A call a scan body can hold: a jitted callable, a JAX function, a list append."""
        if _appends(call, lists):
            return True
        info = ctx.jit_info(call.func)
        if info is not None:
            return info.exact
        q = ctx.qualname(call.func)
        if q is not None:
            return q.startswith("jax.") and q not in _HOST_JAX
        # `pos.copy()`, `x.reshape(...)`: a method of a device array
        return isinstance(call.func, ast.Attribute) and ctx.kind(call.func.value, strict=True) == "jax"


def _repeats(loop: ast.For, ctx: Ctx) -> float:
    """How many times enclosing statement loops run this one: a counted loop (`range(n)`, a
    `while`) whose count the source does not give runs it many times; a walk over a collection of
    unknown size (`for lr in lrs`, a sweep over settings) is not taken to repeat it."""
    times = 1.0
    for lp in ctx.loops:
        if lp is loop or not isinstance(lp, (ast.For, ast.While)):
            continue
        m = trip_count(lp.iter, ctx.analysis, ctx.scope) if isinstance(lp, ast.For) else None
        counted = isinstance(lp, ast.While) or (isinstance(lp.iter, ast.Call) and dotted(lp.iter.func) in _RANGES)
        times *= m if m is not None else (float("inf") if counted else 1.0)
    return times


def _plain_targets(stmt: ast.stmt) -> bool:
    """Assigned names only: an element or attribute store (`hist[i] = x`, `self.s = x`) writes
    into a host object."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred)) for t in targets if t is not None
               for n in astutil.walk(t))


def _host_slice(n: ast.AST, loop: ast.For, ctx: Ctx) -> bool:
    """A subscript by the loop's target of something not proven a device array."""
    if not isinstance(n, ast.Subscript) or not isinstance(n.ctx, ast.Load):
        return False
    targets = loop_targets(loop)
    by_target = any(isinstance(x, ast.Name) and x.id in targets for x in astutil.walk(n.slice))
    return by_target and ctx.kind(n.value, strict=True) != "jax"


def _appends(call: ast.AST, lists: set[str]) -> bool:
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name) and call.func.value.id in lists)


def _list_names(ctx: Ctx, loop: ast.For) -> set[str]:
    """Names bound to a list literal before the loop in its function (`trajectory = [pos]`)."""
    fn = ctx.scope.node
    return {t.id for n in astutil.walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, (ast.List, ast.ListComp))
            and getattr(n, "lineno", 0) < loop.lineno for t in n.targets if isinstance(t, ast.Name)}


RULE = PythonLoopOfJittedSteps()
