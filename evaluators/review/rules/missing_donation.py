"""JM401 missing-donation

What it does
    Flags `state = step(state, ...)` in a loop, where `step` is jitted and an argument whose
    result replaces it is not donated (`donate_argnums` / `donate_argnames`, Equinox
    `donate=`). Every argument is checked (`rng, state = step(rng, state, batch)` is about
    `state`) and one finding per jitted function names them all. Left alone: PRNG keys and
    counters (`key`, `rng`, `step`, ...), values that are not arrays or are small where the
    source shows their size (scalars, `np.zeros(40)`), a graphdef from `nnx.split`, old values
    the loop keeps in whole or in part (`history.append(state)`, `rollout.append(state.frame)`:
    donating would delete live buffers), updates under `if step % N == 0:`, loops of a
    few literal iterations unless the state is visibly large, and benchmarks. The state must be
    trained state (the jitted function takes gradients or applies an optimizer, in its body or one
    call deep, or is handed gradients; or the argument is named `params`, `opt_state`, `model`,
    `train_state`, ...), or visibly large (4 MiB or more): environment rollouts and render loops
    carry a few keys and one episode, where a second copy costs nothing.

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

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import loops, sizes
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard_in
from jaxmem.evaluators.review.semantic.names import NO_DONATION, dotted, named_trained
from jaxmem.evaluators.review.semantic.roles import call_role, replaced_state_calls
from jaxmem.evaluators.review.semantic.training import training_call
from jaxmem.evaluators.review.semantic.walk import At


def target_names(targets: list[ast.AST]) -> set[str]:
    return {n.id for t in targets for n in astutil.walk(t) if isinstance(n, ast.Name)}


SMALL_STATE_HINTS = ("key", "rng", "seed", "step", "count")
# Donation pays where a loop replaces trained state (rules/_training.py): the jitted function
# must visibly train, or the argument be named as trained state.
SMALL_ELEMENTS = 1 << 16  # 256 KiB of float32: a second copy of this costs nothing that matters
LARGE_ELEMENTS = 1 << 20  # 4 MiB of float32: worth donating even in a short loop
KEEPERS = frozenset({"append", "extend", "insert", "add", "put", "setdefault", "update"})


class MissingDonation(Rule):
    code = "JM401"
    name = "missing-donation"
    topic = "buffer-donation"
    severity = "info"  # right for large states; small ones lose little, so it is advice, not a warning
    message = "`{arg}` {verb} replaced by the result of jitted `{func}` without donation: old and new buffers coexist every step"
    fix = "Donate the argument: `jax.jit(..., donate_argnums={pos})` (or donate_argnames) so the output reuses its buffer."
    fix_equinox = "Donate it: `eqx.filter_jit(donate=\"all\")` (or \"all-except-first\", passing what must survive first) so the output reuses its buffers."
    fix_haliax = "Donate it with `named_jit(..., donate_args=...)` so the output reuses its buffers."
    fix_pmap_keyword = ("Pass the state positionally and donate its position (`jax.pmap(..., donate_argnums=...)`): "
                        "pmap donates no argument passed by keyword.")
    node_types = (ast.For, ast.AsyncFor, ast.While)
    requires = ('jit', 'pmap')

    def check(self, loop: ast.AST, ctx: Ctx) -> None:
        if ctx.scope.traced or loops.benchmark_function(ctx.scope, ctx.analysis):
            return
        short = loops.small_loop(loop, ctx.analysis, ctx.scope)
        for call, replaced in replaced_state_calls(ctx.analysis, loop, ctx.scope):
            info = ctx.jit_info(call.func)
            if info is None or not info.donation_known or info.maker in NO_DONATION or _guarded(call, loop, ctx):
                continue  # `if step % 1000 == 0: avg = refresh(avg)`: the extra copy lives every N-th step
            found = self._undonated(call, info, replaced)
            if not found:
                continue
            # Reported where the step trains by any evidence (its name included); sure only where
            # the loop's role is proven: the step's own body trains.
            role = call_role(At(ctx.analysis, ctx.scope), call, replaced)
            trains = training_call(call, ctx)
            # State kept on an object (`trainer.train_state = new_state`, `self.state`): worth
            # donating where the step trains; its size and other readers are out of sight, so
            # possible only.
            on_object = [(p, arg) for p, arg in found if isinstance(arg, ast.Attribute)]
            keep = [(p, arg) for p, arg in found
                    if isinstance(arg, ast.Name) and self._worth_donating(arg, loop, short, ctx, trains or named_trained(arg.id))]
            keep += [(p, arg) for p, arg in on_object
                     if (trains or named_trained(arg.attr)) and not short and not _read_elsewhere(arg, loop)
                     and not any(h in arg.attr.lower() for h in SMALL_STATE_HINTS)]
            if not keep:
                continue
            # The fix is at the definition, so one finding per jitted function is enough; every
            # further call site would repeat it.
            seen = ctx.memo.setdefault("missing_donation", set())
            if id(info) in seen:
                continue
            seen.add(id(info))
            args = ", ".join(dict.fromkeys(_key(a) for _p, a in keep))
            positions = sorted({p for p, _a in keep})
            fix = None
            if info.maker.startswith("equinox."):
                fix = self.fix_equinox
            elif info.maker.startswith("haliax."):
                fix = self.fix_haliax
            elif info.pmapped and any(isinstance(a, ast.Name) and a in [k.value for k in call.keywords] for _p, a in keep):
                fix = self.fix_pmap_keyword
            # Sure where the loop proves it trains (the step's own body takes gradients or applies an
            # optimizer) in a loop of many steps; a step trained only by its name, or a short loop,
            # is possible.
            sure = role.role == "train" and role.proven and not short and not any(
                isinstance(a, ast.Attribute) for _p, a in keep)
            ctx.report(self, keep[0][1], arg=args, verb="are" if "," in args else "is", func=ast.unparse(call.func),
                       pos=str(positions[0]) if len(positions) == 1 else str(tuple(positions)), fix=fix, sure=sure)

    @staticmethod
    def _undonated(call: ast.Call, info, replaced: frozenset[str]) -> list[tuple[int, ast.Name]]:
        """The replaced arguments the call does not donate, by JAX's rules for its maker: a
        positional argument by position, a keyword one by `donates_keyword` (pmap: never)."""
        static = info.static_positions()
        params = info.params or ()
        found: list[tuple[int, ast.Name]] = []
        for p, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break  # positions after *args are unknown
            if _key(arg) in replaced and not info.donates(p) and p not in static:
                found.append((p, arg))
        for kw in call.keywords:
            if _key(kw.value) in replaced and kw.arg in params:
                p = params.index(kw.arg)
                if p not in static and not info.donates_keyword(kw.arg):
                    found.append((p, kw.value))
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(recv, ast.Name) and recv.id in replaced and info.receiver_donated is False:
            found.append((-1, recv))  # `model, info = model.update(...)`: the method's own instance
        if info.receiver_donated is not None:
            # A bound method: JAX counts positions on the function, where `self` is argument 0.
            found = [(p + 1, arg) for p, arg in found]
        return found

    def _worth_donating(self, arg: ast.Name, loop: ast.AST, short: bool, ctx: Ctx, trained: bool) -> bool:
        if any(h in arg.id.lower() for h in SMALL_STATE_HINTS):
            return False  # PRNG keys and counters: a few bytes, donation saves nothing
        a = ctx.analysis
        just_before = (loop.lineno, loop.col_offset - 1)
        before = a.resolve(arg.id, ctx.scope, just_before)  # the value the loop starts from
        if before is not None and before.how == "assign":
            if (before.index == 0 and isinstance(before.value, ast.Call)
                    and a.qualname(before.value.func) in ("flax.nnx.split", "flax.nnx.graph.split")):
                return False  # a GraphDef: static structure, no buffers
            if a.binding_kind(before, ctx.scope) == "scalar":
                return False
        size = sizes.element_count(ast.Name(arg.id, ast.Load(), lineno=loop.lineno, col_offset=loop.col_offset - 1),
                                    a, ctx.scope)
        if size is not None and size <= SMALL_ELEMENTS:
            return False
        if (short or not trained) and (size is None or size < LARGE_ELEMENTS):
            # a demo loop of a few steps: the extra copy lives a few steps; state that is not
            # trained (a rollout, a simulation) counts only where the source shows it is large
            return False
        return not self._kept(arg.id, loop, ctx) and not self._kept_from_before(arg.id, loop, ctx)

    @staticmethod
    def _kept_from_before(name: str, loop: ast.AST, ctx: Ctx) -> bool:
        """`original = model` before the loop and `original` read after it starts: the first
        step's input must survive, so donating it would delete a live array."""
        start = (loop.lineno, loop.col_offset)
        for other, bindings in ctx.scope.bindings.items():
            if other == name:
                continue
            for b in bindings:
                if (b.how == "assign" and b.index is None and b.at < start and isinstance(b.value, ast.Name)
                        and b.value.id == name and _read_after(ctx.scope.node, other, start)):
                    return True
        return False

    @staticmethod
    def _kept(name: str, loop: ast.AST, ctx: Ctx) -> bool:
        """The loop keeps the old value somewhere (a list, a dict, another name, a yield)."""
        for n in astutil.walk(loop):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in KEEPERS
                    and ctx.jit_info(n.func) is None):  # `gan.update(rng, state, batch)` is the step itself
                if any(_mentions(a, name) for a in [*n.args, *(k.value for k in n.keywords)]):
                    return True
            elif isinstance(n, (ast.Yield, ast.YieldFrom)) and n.value is not None and _mentions(n.value, name):
                return True
            elif isinstance(n, ast.Assign) and _mentions(n.value, name, bare_only=True):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        # `prev = state` keeps it, unless `prev` is re-bound in the loop anyway
                        # (`test_state = state` then `test_state = evaluate(test_state)`).
                        if t.id != name and _bindings(loop, t.id) == 1:
                            return True
                    else:
                        return True  # `cache[i] = state`, `self.best = state`
            elif isinstance(n, ast.AugAssign) and isinstance(n.value, (ast.List, ast.Tuple)) and _mentions(n.value, name):
                return True  # `history += [state]`
        return False


def _read_after(fn: ast.AST, name: str, start: tuple[int, int]) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               and (n.lineno, n.col_offset) > start for n in astutil.walk(fn))


def _bindings(loop: ast.AST, name: str) -> int:
    return sum(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in astutil.walk(loop))


def _mentions(expr: ast.AST, name: str, bare_only: bool = False) -> bool:
    """`expr` holds the value itself or a part of it (`state`, `(state, t)`, `[state]`,
    `state.pipeline_state`, `state["params"]`), not something computed from it."""
    if isinstance(expr, ast.Name):
        return expr.id == name
    if isinstance(expr, (ast.Attribute, ast.Subscript)) and not bare_only:
        return _mentions(expr.value, name)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(_mentions(e, name) for e in expr.elts)
    if isinstance(expr, ast.Dict) and not bare_only:
        return any(v is not None and _mentions(v, name) for v in expr.values)
    if isinstance(expr, ast.Dict):
        return any(v is not None and _mentions(v, name) for v in expr.values)
    return False


def _guarded(call: ast.Call, loop: ast.AST, ctx: Ctx) -> bool:
    """The call sits under `if step % N == 0:` inside the loop: it runs every N-th step."""
    return under_periodic_guard_in(call, loop, ctx.analysis, ctx.scope)


def _key(arg: ast.AST) -> str | None:
    """The name an argument passes: `state`, or `trainer.train_state` for state kept on an object."""
    return arg.id if isinstance(arg, ast.Name) else dotted(arg) if isinstance(arg, ast.Attribute) else None


def _read_elsewhere(arg: ast.Attribute, loop: ast.AST) -> bool:
    """`best = trainer.state` in the loop, besides the step's own argument and the assignment that
    replaces it: another reader that a donation would leave holding a deleted array."""
    key = dotted(arg)
    return any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and n is not arg and dotted(n) == key
               and not isinstance(parent, ast.Attribute)
               for parent in astutil.walk(loop) for n in astutil.children(parent))


RULE = MissingDonation()

