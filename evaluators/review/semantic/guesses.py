"""Kinds guessed from how a call's results are used, where the callable is out of sight.

A step handed in as a parameter or kept on an object (`self.optimizer.step(params, opt_state, k)`)
cannot be read, but what the code does with its results still says what they are. These are
guesses for the default reading only, never proof: a finding resting on one is "possible".
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.names import last_name, named_trained, pos
from jaxmem.evaluators.review.semantic.scopes import Binding, Scope

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _siblings(b: Binding, scope: Scope) -> set[str] | None:
    """The names a tuple-unpacking binding binds, inside a function; None for anything else."""
    target = b.node.targets[0] if isinstance(b.node, ast.Assign) and len(b.node.targets) == 1 else None
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(scope.node, _FUNCS):
        return None
    return {e.id for e in target.elts if isinstance(e, ast.Name)}


def feeds_gradients(a, b: Binding, scope: Scope) -> bool:
    """`loss, grads = loss_and_grad(p, data)`: a sibling of the unpacking is handed to an
    optimizer's update as its gradients (the update of an optimizers triple, or an
    `...update(grads, ...)` call with a name that says gradients), so the call computes a loss and
    its gradients: device arrays, unless it converts them itself."""
    siblings = _siblings(b, scope)
    if not siblings:
        return False
    memo = a.memo.setdefault("feeds_gradients", {})
    if b.node not in memo:
        memo[b.node] = any(_gradient_argument(a, c, siblings, scope) for c in astutil.walk(scope.node)
                           if isinstance(c, ast.Call))
    return memo[b.node]


def _gradient_argument(a, call: ast.Call, names: set[str], scope: Scope) -> bool:
    if a.optimizer_part(call.func, scope) == 1:
        # `opt_update(i, grads, opt_state)`: the second argument is the gradients, by the API
        return len(call.args) > 1 and isinstance(call.args[1], ast.Name) and call.args[1].id in names
    last = last_name(call.func)
    if not (last.endswith(("update", "updates")) or last == "apply_gradients"):
        return False
    return any(isinstance(v, ast.Name) and v.id in names and "grad" in v.id.lower()
               for v in [*call.args, *(k.value for k in call.keywords)])


def steps_trained_state(b: Binding, scope: Scope) -> bool:
    """`loss, params, opt_state = self.optimizer.step(params, opt_state, key)` in a loop: the call
    takes state and its result replaces it every iteration (a sibling of the unpacking is one of
    its arguments), and either that state is named as trained (`params`, `opt_state`, `model`) or
    the call is named as a step (`train_step`, `learner.update`, `self.optimizer.step`). Such a
    call is a training step of a JAX program, and what it returns beside the new state (the loss,
    the metrics) comes out of the same computation: device arrays. Outside a loop the same shape
    is setup (`steps, callback = self._setup_learn(steps, ...)`), and proves nothing."""
    siblings = _siblings(b, scope)
    if not siblings or scope.loop_at(pos(b.node)) is None:
        return False
    return isinstance(b.value, ast.Call) and _steps(b.value, siblings, b.name)


def step_out_of_sight(a, node: ast.Assign, scope: Scope) -> bool:
    """The same reading of a statement of a loop's body (`params, state, loss = step_fn(params,
    state, batch)`) whose callable cannot be read (a parameter, an object's attribute): the loop
    queues the step's device work every iteration (a guess: what rests on it is never proven)."""
    if not (len(node.targets) == 1 and isinstance(node.value, ast.Call)) or a.qualname(node.value.func) is not None \
            or a.resolve_def(node.value.func, scope) is not None:
        return False
    target = node.targets[0]
    if not isinstance(target, (ast.Tuple, ast.List)):
        return False
    siblings = {e.id for e in target.elts if isinstance(e, ast.Name)}
    return any(_steps(node.value, siblings, name) for name in siblings)


def _steps(call: ast.Call, siblings: set[str], own: str) -> bool:
    """`own`: the name whose kind is asked (it does not count as replaced state)."""
    passed = {v.id for v in [*call.args, *(k.value for k in call.keywords)] if isinstance(v, ast.Name)}
    replaced = (siblings & passed) - {own}
    if not replaced:
        return False
    name = last_name(call.func).lower()
    # `train_step`, `step`, `update`, `learner.update`; `env.step(action)` replaces no trained state
    # by name, and is a step only on a receiver named as trained (`self.optimizer.step`).
    stepping = ("train" in name or name == "update" or name.endswith("_update")
                or ("step" in name and (isinstance(call.func, ast.Name)
                                        or any(named_trained(p) for p in _receiver_parts(call.func)))))
    return stepping or any(named_trained(n) for n in replaced)


def _receiver_parts(func: ast.AST) -> list[str]:
    """`self.optimizer.step` -> ["self", "optimizer"]."""
    out, node = [], func.value if isinstance(func, ast.Attribute) else None
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        out.append(node.id)
    return out
