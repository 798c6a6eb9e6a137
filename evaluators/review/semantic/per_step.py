"""Which function bodies run once per step: the call graph behind `Walk.per_step`.

A rule that sees `float(loss)` in a function's body asks whether that body runs on every step of
some loop. It does when:

1. a host loop of the module calls the function on every iteration (not under `if step % N`, not
   a short or per-epoch loop), and the function runs no steps of its own (a driver, such as a
   `train_epoch` whose loop calls the step, runs once per epoch: drives_steps);
2. it runs a training step on state it keeps or is handed (roles.step_method), whoever calls it,
   and not in a loop of its own;
3. a framework calls it once per step by its contract (FRAMEWORK_STEPS): a Gym environment's
   `step`, a PyTorch module's `forward`, a Keras callback's batch hook;
4. another file of the reviewed tree calls it on every step (importers.py);
5. a function that runs per step calls it from its own body, not behind a periodic test: the
   call graph followed down, a few levels (a logging helper that a step helper calls).

Only one call from a loop is proven: 3 and 5 always come with an unproven role, and 4 does unless
the other file's loop calls the function itself (and proves its role), so what rules find there
is reported as possible.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic import importers, loops, roles
from jaxmem.evaluators.review.semantic.names import LOOP_TYPES
from jaxmem.evaluators.review.semantic.step_calls import body_calls, drives_steps, step_role_of
from jaxmem.evaluators.review.semantic.walk import At

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEPTH = 3  # levels of calls followed down from a per-step body

# Methods a framework calls once per step of whatever loop drives it, by the base class that
# promises it. An environment's `step` runs once per environment step of the agent's loop, a
# wrapper's `observation`/`reward`/`action` once per step of the environment it wraps (a vector
# environment's `step`, or `step_wait`, once per step of all its copies), a PyTorch
# module's `forward` once per batch, a Keras or Stable-Baselines callback's hook once per batch or
# environment step, a PyTorch dataset's `__getitem__` once per sample.
_GYM = ("gym", "gymnasium", "gym.core", "gymnasium.core")
FRAMEWORK_STEPS: dict[str, tuple[str, ...]] = {
    **{f"{g}.Env": ("step",) for g in _GYM},
    **{f"{g}.Wrapper": ("step",) for g in _GYM},
    **{f"{g}.ObservationWrapper": ("observation", "step") for g in _GYM},
    **{f"{g}.RewardWrapper": ("reward", "step") for g in _GYM},
    **{f"{g}.ActionWrapper": ("action", "step") for g in _GYM},
    **{f"{g}.vector.{v}": ("step", "step_wait") for g in ("gym", "gymnasium")
       for v in ("VectorEnv", "SyncVectorEnv", "AsyncVectorEnv", "VectorEnvWrapper", "VectorWrapper")},
    "dm_env.Environment": ("step",),
    "torch.nn.Module": ("forward",),
    "torch.utils.data.Dataset": ("__getitem__",),
    "keras.callbacks.Callback": ("on_train_batch_end", "on_train_batch_begin", "on_batch_end", "on_batch_begin"),
    "tensorflow.keras.callbacks.Callback": ("on_train_batch_end", "on_train_batch_begin", "on_batch_end",
                                            "on_batch_begin"),
    "stable_baselines3.common.callbacks.BaseCallback": ("_on_step",),
    "pytorch_lightning.LightningModule": ("training_step",),
    "lightning.LightningModule": ("training_step",),
    "lightning.pytorch.LightningModule": ("training_step",),
}
HOST_APIS = ("gym.", "gymnasium.", "dm_env.")  # their environments return NumPy values by contract


def mark(analysis, remote: bool = True) -> None:
    """Set `per_step` (with what explains it) on every scope whose body runs once per step.
    Idempotent: a scope already marked keeps its first reason. `remote`: also ask the other files
    of the reviewed tree (off when this model is itself being read for another file's sake)."""
    _loop_callees(analysis)
    for scope in analysis.scopes.values():
        if scope.per_step is None and not scope.traced:  # step_method reads functions only
            found = roles.step_method(analysis, scope)
            if found is not None and not drives_steps(analysis, scope):
                scope.per_step, scope.step_role = found.call, found
    _framework_methods(analysis)
    _follow_down(analysis)
    if analysis.project is None or analysis.module_name is None:
        return
    # What this file calls per step is recorded from its own marks only, before other files'
    # are read: the same whichever file a process happens to review first.
    importers.record(analysis)
    if remote:
        importers.mark_remote(analysis, lambda other: mark(other, remote=False))
        _follow_down(analysis)


def _loop_callees(analysis) -> None:
    for call, loop, scope, guarded in analysis.loop_calls:
        if guarded or not isinstance(loop, LOOP_TYPES) or scope.traced:
            continue  # comprehensions build data; the steps run in statement loops
        callee = _callee(analysis, call, scope)
        if callee is None or callee is scope or callee.per_step is not None:
            continue
        if loops.small_loop(loop, analysis, scope) or loops.epoch_loop(loop, At(analysis, scope)):
            continue
        if drives_steps(analysis, callee):
            # `train_epoch(state, ...)`, whose own loop runs the steps: what it does outside that
            # loop (`return total_loss.item(), state`) runs once per epoch, not once per step.
            continue
        callee.per_step = call
        callee.per_step_loop, callee.per_step_scope = loop, scope


def _callee(analysis, call: ast.Call, scope):
    """The scope of the module function (or method) a call runs on the host, or None."""
    fn = analysis.resolve_def(call.func, scope)
    if not isinstance(fn, _FUNCS):
        return None
    callee = analysis.scopes.get(fn)
    if callee is None or callee.traced:
        return None
    if isinstance(call.func, ast.Attribute) and analysis.jit_info(call.func, scope) is not None:
        # `self.train_step` re-bound in `__init__` to a jitted or pmapped version of the method:
        # the call runs the compiled program, not the method's body on the host.
        return None
    return callee


def _framework_methods(analysis) -> None:
    for cls in analysis.classes.values():
        for name, host in _framework_names(analysis, cls, set()):
            fn = cls.methods.get(name)
            scope = analysis.scopes.get(fn) if fn is not None else None
            if scope is None or scope.traced or scope.per_step is not None:
                continue
            scope.per_step = fn
            scope.step_role = roles.Role("step")
            if host:
                # Gym's and dm_env's methods hand back host values by contract: reading what they
                # return to the host is their job (envs.fed_to_host_env).
                analysis.memo.setdefault("host_api_steps", set()).add(fn)
            scope.per_step_why = f"`{name}` runs once per step of whatever loop drives this {cls.node.name}"


def _framework_names(analysis, cls, seen: set) -> tuple[tuple[str, bool], ...]:
    """The per-step methods a class's bases promise, through its own module's subclasses, each
    with whether the framework takes what it returns as host values (an environment's API)."""
    if cls.node in seen:
        return ()
    seen.add(cls.node)
    out: list[tuple[str, bool]] = []
    for base in cls.bases:
        q = analysis.qualname(base)
        if q in FRAMEWORK_STEPS:
            out += [(name, q.startswith(HOST_APIS)) for name in FRAMEWORK_STEPS[q]]
        elif (other := analysis.local_class(base)) is not None:
            out += _framework_names(analysis, other, seen)
    return tuple(out)


def _follow_down(analysis) -> None:
    """Functions a per-step body calls run per step too (a few levels down)."""
    frontier = [s for s in analysis.scopes.values() if s.per_step is not None and not s.traced]
    for _ in range(_DEPTH):
        nxt = []
        for scope in frontier:
            fn = scope.node
            if not isinstance(fn, _FUNCS):
                continue
            callees = [(call, callee) for call in body_calls(fn) if (callee := _callee(analysis, call, scope))
                       is not None and callee is not scope and callee.per_step is None]
            if not callees or drives_steps(analysis, scope):
                continue  # (the cheap test first: most per-step bodies call no function of the module)
            role = step_role_of(analysis, scope, proven=False)
            if not role.steps:
                continue  # followed down from steps only: a sweep or an audit loop calls once per case
            for call, callee in callees:
                if callee.per_step is not None:
                    continue  # called twice from this body
                callee.per_step, callee.per_step_scope = call, scope
                callee.step_role = role
                name = getattr(fn, "name", "?")
                callee.per_step_why = f"`{name}` calls it on line {call.lineno}, and `{name}` runs once per step"
                nxt.append(callee)
        frontier = nxt
        if not frontier:
            break
