"""What a per-step body calls, and the role of the steps it runs on: shared by per_step.py (this
file's call graph) and importers.py (the calls other files of the tree make).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic import roles
from jaxmem.evaluators.review.semantic.names import LOOP_TYPES

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SKIP = (*_FUNCS, ast.ClassDef, ast.Lambda, *LOOP_TYPES)


def body_calls(fn: ast.AST) -> list[ast.Call]:
    """Calls a function's body makes on every run: not in its own loops (those are loop calls),
    nested functions or classes, and not behind a periodic test (`if step % 100 == 0:`). Kept on
    the node: per_step.py and importers.py both ask (trees never change)."""
    found = fn.__dict__.get("_jm_body_calls")
    if found is not None:
        return found
    found, todo = [], list(getattr(fn, "body", ()))
    while todo:
        node = todo.pop()
        if isinstance(node, _SKIP):
            continue
        if isinstance(node, ast.If) and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                                            for n in astutil.walk(node.test)):
            todo.append(node.test)
            todo.extend(node.orelse)  # the other arm runs on the other steps
            continue
        if node.__class__ is ast.Call:
            found.append(node)
        todo.extend(astutil.children(node))
    fn.__dict__["_jm_body_calls"] = found
    return found


def drives_steps(analysis, scope) -> bool:
    """The body runs steps of its own (a loop of it trains or steps state): a driver, whose other
    calls run once per drive, not once per step, whatever calls the driver."""
    return any(isinstance(loop, LOOP_TYPES) and roles.role(analysis, loop, scope).steps for _s, _e, loop in scope.loops)


def step_role_of(analysis, scope, proven: bool = True) -> roles.Role:
    """The role of the steps a per-step scope runs on: its own, or its caller's loop's. What a
    per-step body calls is handed the role unproven (`proven=False`): one call from a loop is
    what the model proves; further down, the callee may be a small part of a long step (a debug
    print once per generation of an optimiser that trains networks in between)."""
    r = scope.step_role
    if r is None and scope.per_step_loop is not None and scope.per_step_scope is not None:
        r = roles.role(analysis, scope.per_step_loop, scope.per_step_scope)
    return roles.Role(r.role, r.proven and proven) if r is not None else roles.Role("other")
