"""JM803 arrays-accumulated-across-steps

What it does
    Flags `history.append(x)` in a loop when `x` is a device array produced by the loop's
    state update: the carried state itself (`x = step(x)`) or another output of that update
    (`w, grad = step(w, batch)`), and that update trains (a training step, gradients handed in,
    an optimizer applied) or `x` is named as trained state (`params`, `opt_state`, `model`):
    keeping every version of the model is what runs out of memory. The frames of a rollout or a
    simulation kept for rendering or plotting are the purpose of the list, not a leak. Names that read as scalars (loss, accuracy, norm, ...) are
    not flagged: collecting device scalars and reading them once is the fix for per-step syncs.
    Nor are values that start as scalars or visibly small arrays (a full reduction such as
    `jnp.mean(x)`, the value of `jax.value_and_grad`), a `deque(maxlen=...)`, which keeps only
    its last items, and loops of a few literal iterations.

    Opt-in (`--select JM803`): on the real-code benchmark (24 public JAX repositories) the
    lists it found were kept on purpose (rollouts to render, MCMC samples): 2 false positives,
    no real leak.

Why is this bad
    The list holds a reference to every step's buffer, so none of them can be freed: device
    memory grows linearly with the number of steps until it runs out. Keeping every version
    of a model state is the usual way long runs OOM late.

Example
    for batch in batches:
        params = update(params, batch)
        history.append(params)

Use instead
    for i, batch in enumerate(batches):
        params = update(params, batch)
        if i % 1000 == 0:
            history.append(jax.device_get(params))   # host copy, device buffer can be freed
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import sizes
from jaxmem.evaluators.review.semantic.loops import loop_targets, not_per_step
from jaxmem.evaluators.review.semantic.names import named_trained
from jaxmem.evaluators.review.semantic.training import training_call

# Conventional names of per-step scalars: holding a few hundred of them costs nothing.
SCALAR_HINTS = ("loss", "acc", "metric", "norm", "err", "score", "reward", "perplex", "lr", "value")
SMALL_ELEMENTS = 1 << 10  # a few KiB per step: even 100k steps of it fit in a few hundred MiB


class ArraysAccumulatedAcrossSteps(Rule):
    code = "JM803"
    name = "arrays-accumulated-across-steps"
    topic = "live-arrays-cleanup"
    severity = "warning"
    default = False  # opt-in: see "What it does"
    message = "`{what}` appended every iteration keeps each step's device buffer alive: memory grows with the step count"
    fix = "Keep only what you need: append a host copy (`jax.device_get`) every N steps, a reduced scalar, or overwrite one slot."
    node_types = (ast.Call,)
    requires = ('.append(',)
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not ctx.host_loop or len(node.args) != 1:
            return
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append"):
            return
        arg = node.args[0]
        if _bounded(func.value, ctx):
            return  # `deque(maxlen=k)`: it keeps the last k items, not every step's
        if (isinstance(arg, ast.Name) and ctx.kind(arg) == "jax"
                and not any(h in arg.id.lower() for h in SCALAR_HINTS) and self._trained_update(arg.id, ctx)
                and not self._small(arg.id, ctx) and not not_per_step(ctx, sync=False)):
            ctx.report(self, node, what=arg.id)

    @staticmethod
    def _small(name: str, ctx: Ctx) -> bool:
        """The carried value starts as a scalar or a visibly small array (`jax.random.normal(key)`)."""
        loop = ctx.loops[-1]
        start = ast.Name(name, ast.Load(), lineno=loop.lineno, col_offset=loop.col_offset - 1)
        n = sizes.element_count(start, ctx.analysis, ctx.scope)
        if n is None:  # not bound before the loop: what the loop binds it to (`_, loss = step(s)`)
            here = ctx.stack[-1]
            now = ast.Name(name, ast.Load(), lineno=here.lineno, col_offset=here.col_offset)
            n = sizes.element_count(now, ctx.analysis, ctx.scope)
        return n is not None and n <= SMALL_ELEMENTS

    def _trained_update(self, name: str, ctx: Ctx) -> bool:
        update = self._state_update(name, ctx)
        if update is None:
            return False
        return named_trained(name) or (isinstance(update.value, ast.Call) and training_call(update.value, ctx))

    @staticmethod
    def _state_update(name: str, ctx: Ctx) -> ast.Assign | None:
        """Bound in the innermost loop by `a, ... = f(c, ...)` where `c` is carried: read in the
        loop before the loop assigns it, so its value flows from one iteration to the next.

        The loop's own targets, and names assigned fresh at the top of each iteration, carry
        nothing across steps.
        """
        loop = ctx.loops[-1]
        fresh = loop_targets(loop)
        if name in fresh:
            return None
        body = getattr(loop, "body", None)
        if not isinstance(body, list):
            return None
        for stmt in astutil.walk(loop):
            if not isinstance(stmt, ast.Assign):
                continue
            stored = {n.id for t in stmt.targets for n in astutil.walk(t) if isinstance(n, ast.Name)}
            if name not in stored:
                continue
            loaded = {n.id for n in astutil.walk(stmt.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if any(_first_event(c, body) == "load" for c in (stored & loaded) - fresh):
                return stmt
        return None


def _bounded(container: ast.AST, ctx: Ctx) -> bool:
    """A name bound to `collections.deque(..., maxlen=...)`."""
    if not isinstance(container, ast.Name):
        return False
    b = ctx.analysis.resolve(container.id, ctx.scope, (container.lineno, container.col_offset))
    return (b is not None and b.how == "assign" and isinstance(b.value, ast.Call)
            and ctx.qualname(b.value.func) == "collections.deque"
            and (len(b.value.args) > 1 or any(k.arg == "maxlen" for k in b.value.keywords)))


def _names(node: ast.AST, ctx_type: type) -> set[str]:
    return {n.id for n in astutil.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx_type)}


def _first_event(name: str, stmts: list[ast.stmt]) -> str | None:
    """"load" or "store": what happens to `name` first when the statements run in order."""
    for st in stmts:
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if (st.value is not None and name in _names(st.value, ast.Load)) or (
                    isinstance(st, ast.AugAssign) and name in _names(st.target, ast.Store)):
                return "load"
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if any(name in _names(t, ast.Load) for t in targets):
                return "load"  # `x[i] = v` reads x
            if any(name in _names(t, ast.Store) for t in targets):
                return "store"
        elif isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.If)):
            header = st.iter if isinstance(st, (ast.For, ast.AsyncFor)) else st.test
            if name in _names(header, ast.Load):
                return "load"
            # A branch may not run: a load inside either decides; a store decides only when
            # both branches of an if/else store first.
            body, orelse = _first_event(name, st.body), _first_event(name, st.orelse)
            if "load" in (body, orelse):
                return "load"
            if isinstance(st, ast.If) and body == orelse == "store":
                return "store"
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        else:
            if name in _names(st, ast.Load):
                return "load"
            if name in _names(st, ast.Store):
                return "store"
    return None


RULE = ArraysAccumulatedAcrossSteps()
