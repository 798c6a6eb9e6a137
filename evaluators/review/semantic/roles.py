"""What a loop is for, read from its data flow: training, stepping state, evaluating, setup, epochs.

A per-step host read costs the same instruction count everywhere, but it is a problem only in a
loop whose steps the device could otherwise run back to back, and the code's job elsewhere (an
evaluator gathers predictions to compute a metric). The role of a loop is read from what it does
with the values it carries, never from a path or a project's names:

- train: a call whose result replaces one of its own arguments (`state = step(state, batch)`,
  also through the result's attributes, items or unpacking: `out = learn(state);
  state = out.learner_state`) and that trains: it takes gradients or applies an optimizer in its
  body or one call deep, is handed gradients, or is a jitted callable named as a training step;
- step: the same replaced-state call without training (an environment rollout, a decoder feeding
  its cache back, a simulation);
- eval: runs compiled or JAX work every iteration but carries no state through it (evaluation,
  inference over a data set, metrics);
- epoch: an outer loop whose body runs a loop of steps, or a loop over epochs;
- setup: a loop of a few iterations that the source fixes (a demo, warm-up runs);
- host: queues no device work at all.

`proven` says the role's premise holds without a guess: the step is a callable resolved exactly
(a jitted callable, a local function, one of the reviewed tree) and trains by its body, not only
by its name.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.branches import under_guessed_guard, under_periodic_guard_in
from jaxmem.evaluators.review.semantic.envs import fed_to_host_env
from jaxmem.evaluators.review.semantic.flow import inner_loops, own_calls, replaced_state_calls, state_replacements
from jaxmem.evaluators.review.semantic.helpers import calls_in
from jaxmem.evaluators.review.semantic.loops import dispatches, epoch_loop, small_loop
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import (
    COMPREHENSIONS,
    EAGER_LOOPS,
    JIT_NAMES,
    LOOP_TYPES,
    last_name,
    named_for_training,
    pos,
)
from jaxmem.evaluators.review.semantic.scopes import Scope
from jaxmem.evaluators.review.semantic.stops import in_stop_check, optional_stop
from jaxmem.evaluators.review.semantic.training import (
    GRADIENT_CALLS,
    applies_gradients,
    callee,
    computed_gradients,
    gradient_transform,
    names_gradients,
    one_step_def,
    runs_compiled_loop,
    trains,
)
from jaxmem.evaluators.review.semantic.walk import At, statement_loop

STEP_ROLES = ("train", "step")


@dataclass(frozen=True)
class Role:
    role: str
    proven: bool = False
    call: ast.Call | None = None  # the call that replaces the loop's state, for train and step
    state: frozenset[str] = frozenset()  # the names (or `self.x`) it replaces

    @property
    def steps(self) -> bool:
        return self.role in STEP_ROLES


def role(analysis: Analysis, loop: ast.AST, scope: Scope) -> Role:
    """The role of a statement loop (a comprehension has none: it is work within a step)."""
    memo = analysis.memo.setdefault("roles", {})
    key = loop
    if key not in memo:
        memo[key] = Role("other")  # recursion guard
        r = _role(analysis, loop, scope)
        if r.proven and r.steps and compiled_alternative(analysis, loop, scope):
            r = Role(r.role, False, r.call, r.state)
        memo[key] = r
    return memo[key]


def compiled_alternative(a: Analysis, loop: ast.AST, scope: Scope) -> bool:
    """`if jit: state = lax.fori_loop(0, n, body, state)` / `else: for _ in range(n): state =
    step(state)`: the loop is the eager alternative of a compiled one in the other branch (a
    debugging switch), not the path the code runs by default. Its steps are not proven."""
    memo = a.memo.setdefault("compiled_alternative", {})
    if loop not in memo:
        memo[loop] = False
        for node in astutil.walk(scope.node):
            if isinstance(node, ast.If):
                for here, other in ((node.body, node.orelse), (node.orelse, node.body)):
                    if any(stmt is loop for stmt in here) and any(
                            a.qualname(c.func) in EAGER_LOOPS for c in calls_in(other)):
                        memo[loop] = True
    return memo[loop]


def _role(a: Analysis, loop: ast.AST, scope: Scope) -> Role:
    if isinstance(loop, COMPREHENSIONS) or not isinstance(loop, LOOP_TYPES):
        return Role("other")
    if small_loop(loop, a, scope):
        return Role("setup", proven=True)
    at = At(a, scope)
    if epoch_loop(loop, at):
        return Role("epoch", proven=True)
    found = list(replaced_state_calls(a, loop, scope))
    if found:
        best = None
        for call, names in found:
            r = call_role(at, call, names)
            if best is None or (r.role, r.proven) > (best.role, best.proven) and r.role == "train" or (
                    best.role != "train" and r.proven and not best.proven):
                best = r
        return best
    for inner in inner_loops(loop.body):
        if role(a, inner, scope).steps:
            return Role("epoch", proven=True)
    step = _in_place_step(at, loop)
    if step is not None:
        return step
    if loop in a.key_loops:
        return Role("other")  # the fields of one record (a step's metrics), not a data set
    if dispatches(at, loop):
        return Role("eval", proven=True)
    return Role("host", proven=True)


def _in_place_step(at: At, loop: ast.AST) -> Role | None:
    """`loss = train_step(model, optimizer, x, y)` under `nnx.jit`: a step that trains in place
    (an NNX optimizer updates the model it was handed) replaces no name, yet the loop trains. A
    call in the loop's own statements of a function of this file that takes gradients, updates an
    optimizer it was handed and has no loop of its own; proven when that function is a jitted one
    resolved exactly."""
    for call in own_calls(loop.body)[0]:
        info, fn = callee(call, at)
        fn = one_step_def(fn, at.analysis)
        if fn is not None and (_updates_a_parameter(fn) or _updates_shared_optimizer(fn, at)) and trains(fn, at):
            return Role("train", info is not None and info.exact, call, frozenset())
    return None


def _updated_names(calls: list[ast.Call]) -> set[str]:
    """The names whose `.update(...)` the calls make (`optimizer.update(grads)` -> "optimizer")."""
    return {c.func.value.id for c in calls
            if isinstance(c.func, ast.Attribute) and c.func.attr == "update" and isinstance(c.func.value, ast.Name)}


def _updates_a_parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The function calls `.update(...)` on one of its own parameters (`optimizer.update(grads)`,
    `optimizer.update(model, grads)`): an NNX optimizer handed in, updating the model in place."""
    params = {p.arg for p in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    return not params.isdisjoint(_updated_names(list(calls_in(fn.body))))


_TAKES_GRADIENTS = GRADIENT_CALLS - {"apply_gradients", "apply_updates"}  # computes them, not applies


def _updates_shared_optimizer(fn, at: At) -> bool:
    """The function takes gradients (`grad`, `value_and_grad`, ...) and calls `.update(...)` on a
    name it does not bind itself (`optimizer.update(grads)` on a module-level optimizer that owns
    the parameters, as BrainState and NNX scripts write it): it trains state it shares."""
    scope = at.analysis.scopes.get(fn)
    if scope is None:
        return False
    calls = list(calls_in(fn.body))
    if not any(last_name(c.func) in _TAKES_GRADIENTS for c in calls):
        return False
    return any(name not in scope.bindings for name in _updated_names(calls))


def call_role(at: At, call: ast.Call, names: frozenset[str]) -> Role:
    a = at.analysis
    info, fn = callee(call, at)
    exact = (info is not None and info.exact) or fn is not None
    q = a.qualname(call.func)
    facts = a.project.function(q) if a.project is not None and q else None
    if fn is None and facts is not None:
        # Defined in another file of the reviewed tree: its facts were worked out there.
        if facts.trains or applies_gradients(call):
            return Role("train", info is not None, call, names)
        return Role("step", info is not None, call, names)
    if trains(fn, at):
        # A step that scans many steps per call (`run_chunk` = `lax.scan(body, carry, keys)`):
        # what the loop does per call, it does once per chunk, like a read every N steps.
        return Role("train", (exact or computed_gradients(call, at)) and not runs_compiled_loop(fn, a), call, names)
    if applies_gradients(call):
        # Handed gradients: proven when the code computed them just before (then the update
        # trains whatever applies it, `jax.tree.map` included), or when a function resolved
        # exactly is handed a name that says so (`update_func(state, grads)`). A bare `g` says
        # less: handed forward outputs named `g`, an ensemble Kalman update is no training step.
        return Role("train", (exact and names_gradients(call)) or computed_gradients(call, at), call, names)
    if named_for_training(call.func) and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        # Named as a training step, body out of sight (imported, built elsewhere): proven only for
        # a jitted callable resolved exactly. A visible body that takes no gradient is a step.
        return Role("train", info is not None and info.exact, call, names)
    return Role("step", exact, call, names)


def step_loop(ctx) -> tuple[ast.AST | None, Scope | None]:
    """The loop whose every iteration runs the current node: the innermost enclosing statement
    loop of this function, or, in the body of a function a host loop calls every step, that loop."""
    loop = statement_loop(ctx)
    if loop is not None:
        return loop, ctx.scope
    if ctx.per_step is not None:
        return ctx.scope.per_step_loop, ctx.scope.per_step_scope
    return None, None


def enclosing_role(ctx) -> Role:
    """The role of the nearest enclosing loop that steps (train or step), looking out through
    inner loops of this function (a loop over a step's metrics runs inside that step); else the
    role of the innermost statement loop."""
    first = None
    for loop in reversed(ctx.loops):
        if not isinstance(loop, LOOP_TYPES):
            continue
        r = role(ctx.analysis, loop, ctx.scope)
        first = first or r
        if r.steps:
            return r
        if r.role in ("epoch", "eval"):
            break
    if first is None and ctx.per_step is not None:
        if ctx.scope.step_role is not None:
            return ctx.scope.step_role
        if ctx.scope.per_step_loop is not None:
            return role(ctx.analysis, ctx.scope.per_step_loop, ctx.scope.per_step_scope)
    return first or Role("other")


def step_method(a: Analysis, scope: Scope) -> Role | None:
    """A function whose own statements replace, through a jitted call that trains, state it keeps
    on `self` or state it is handed and returns (`params, opt_state, loss = self._step(params,
    opt_state, batch)` ... `return params, opt_state`): a training step, whoever calls it."""
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    at = At(a, scope)
    returned = _returned_names(fn) if scope.cls is None else None  # read lazily for methods
    if returned is not None and returned.isdisjoint(scope.params):
        return None  # a plain function that returns none of its parameters carries no state
    for call, names in state_replacements(a, fn.body, scope):
        handed = [n for n in names if n in scope.params]
        if handed and returned is None:
            returned = _returned_names(fn)
        kept = frozenset(n for n in names if n.startswith("self.") or n in handed and n in returned)
        if kept and a.jit_info(call.func, scope) is not None:
            r = call_role(at, call, kept)
            if r.role == "train":
                return r
    return None


def _returned_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a function returns (`return params, opt_state`)."""
    return {n.id for r in astutil.own_returns(fn) if r.value is not None for n in
            (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]) if isinstance(n, ast.Name)}


def per_step_read(ctx, values: list[ast.AST], *, gather: bool = False, stop_check: bool = False) -> str | None:
    """How sure it is that reading `values` on the host here is a per-step cost to remove:
    "sure" in a proven training loop when a value is proven a device array; None where the read
    is the code's job (an evaluation loop gathering results, `gather`); else "possible" (a loop of
    another role, a value whose kind was guessed, a stop check that decides whether to go on)."""
    if fed_to_host_env(ctx, values):
        return None  # the environment needs it on the host this step anyway (semantic/envs.py)
    r = enclosing_role(ctx)
    if gather and r.role == "eval":
        return None
    loop = statement_loop(ctx)
    if loop is not None and compiles_per_iteration(ctx, loop):
        return None  # a sweep: each iteration compiles a new program, which dwarfs reading its result
    if loop is not None and runs_of_steps(ctx, loop):
        return None  # once per run (a restart, a round) of the steps a loop inside it takes
    if stop_check or in_stop_check(ctx, loop) or not (r.role == "train" and r.proven):
        return "possible"
    if under_guessed_guard(ctx) is not None or optional_stop(ctx, loop):
        return "possible"  # a debugging path, an unseen cadence test, a lazy initialisation
    if loop is not None and eager_steps(ctx, loop):
        return "possible"
    return "sure" if any(ctx.proven(v) for v in values) else "possible"


def runs_of_steps(ctx, loop: ast.AST) -> bool:
    """Each iteration of `loop` is a run of many steps, taken by a loop inside it or by a function
    of this file that it calls and that steps in a loop of its own (a restart of an optimiser, a
    federated round, a boosting round), while its own statements step no state: a host read
    among them runs once per run, not once per step (judges of unseen code call such reads
    wrong: the per-run result is the code's output). The per-step reads are those in the inner
    loop, read there."""
    memo = ctx.memo.setdefault("runs_of_steps", {})
    if loop not in memo:
        a, scope = ctx.analysis, ctx.scope
        own, _inner = own_calls(loop.body)
        own_set = set(own)  # (nodes hash by identity)
        steps_itself = any(call in own_set for call, _names in replaced_state_calls(a, loop, scope))
        memo[loop] = not steps_itself and (any(role(a, inner, scope).steps for inner in inner_loops(loop.body)) or any(
            (s := a.scopes.get(a.resolve_def(call.func, scope))) is not None and not s.traced
            and any(isinstance(n, LOOP_TYPES) and role(a, n, s).steps for _b, _e, n in s.loops) for call in own))
    return memo[loop]


def compiles_per_iteration(ctx, loop: ast.AST) -> bool:
    """The loop's own body jits a new function on every iteration (`jax.jit(jax.grad(f_i))(x)`, a
    `@jax.jit` def, over a closure of this iteration's model): a sweep over configurations, where
    each iteration traces and compiles a program. A host read of the one result it computes is the
    sweep's output, and its cost is small beside the compile (JM301 reports the compile itself
    where a function defined once would do)."""
    memo = ctx.memo.setdefault("compiles_per_iteration", {})
    if loop not in memo:
        a, scope = ctx.analysis, ctx.scope
        # A jit under `if i % 10 == 0:` rebuilds every N-th iteration (JM301 says so): the other
        # iterations run compiled code, and their reads are the loop's ordinary per-step reads.
        memo[loop] = any(
            (isinstance(n, ast.Call) and a.is_jit(n.func) and n.args and _made_in(a, scope, loop, n.args[0])
             or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(a.decorator_qualname(d) in JIT_NAMES for d in n.decorator_list))
            and not under_periodic_guard_in(n, loop, a, scope)
            for stmt in loop.body for n in astutil.walk(stmt))
    return memo[loop]


def _made_in(a: Analysis, scope: Scope, loop: ast.AST, fn: ast.AST) -> bool:
    """A function object made anew in each iteration of `loop`: a lambda or a transform written
    there (`jax.grad(f)`, `partial(f, x)`), or a name the loop body binds to one (a def included)."""
    if isinstance(fn, (ast.Lambda, ast.Call)):
        return True
    b = a.resolve(fn.id, scope, pos(fn)) if isinstance(fn, ast.Name) else None
    return (b is not None and b.how in ("def", "assign") and isinstance(b.value if b.how == "assign" else b.node,
                                                                          (ast.Lambda, ast.Call, ast.FunctionDef))
            and loop.lineno <= b.node.lineno <= loop.end_lineno)


def eager_steps(ctx, loop: ast.AST) -> bool:
    """The loop takes its gradients eagerly (`jax.value_and_grad(loss)(params, ...)` in its body,
    or in a step function of this file that nothing jits) and calls nothing compiled: the host
    dispatches every operation of the step one by one and the device never runs far ahead of it,
    so a host read gives up little overlap. What such a loop costs is the eager step itself
    (JM305), not the read: not proven for the read."""
    memo = ctx.memo.setdefault("eager_steps", {})
    if loop not in memo:
        calls = list(calls_in(loop.body))
        memo[loop] = (not any(ctx.jit_info(c.func) is not None for c in calls)
                      and any(gradient_transform(c.func, ctx) is not None or _eager_step_function(ctx, c)
                              for c in calls))
    return memo[loop]


def _eager_step_function(ctx, call: ast.Call) -> bool:
    """`loss, params, opt_state = train_step(...)` where this file's `train_step`, run eagerly
    (not traced, nothing jits it), calls a gradient transform in its own body."""
    a = ctx.analysis
    fn = a.resolve_def(call.func, ctx.scope)
    scope = a.scopes.get(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if scope is None or scope.traced or fn in a.jitted_defs:
        return False
    at = At(a, scope)
    return any(gradient_transform(c.func, at) is not None for c in calls_in(fn.body))


def in_training_step(ctx) -> bool:
    """The current node runs on every step of a loop proven to train."""
    r = enclosing_role(ctx)
    return r.role == "train" and r.proven


def per_step_transfer(ctx, value: ast.AST) -> bool:
    """Sure that `value` crosses host->device on every step of a proven training loop: the loop
    trains and the value is proven host data (a NumPy array, or a list of host values)."""
    return in_training_step(ctx) and ctx.kind(value, strict=True) in ("np", "hostlist", "scalars")
