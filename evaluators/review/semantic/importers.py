"""Who calls a module's functions from the other files of a reviewed tree, and how often.

project.py follows calls forward (a caller reads the facts of what it imports). A helper's own
review needs the other direction: `log_metrics` in `utils.py` has no loop around it there, but
`train.py` imports it and calls it on every step of its training loop, so a `float(loss)` in its
body is a per-step host read. The index below is built once per process from the files' import
lines (a regular expression, no parse); only the files that import a function of the module
under review are modelled, once each (and kept for their own review, as project.py keeps trees).
"""
from __future__ import annotations

import ast
import re

from jaxmem.evaluators.review.semantic import loops, roles
from jaxmem.evaluators.review.semantic.branches import guard_around
from jaxmem.evaluators.review.semantic.jax_use import tree_module
from jaxmem.evaluators.review.semantic.names import LOOP_TYPES
from jaxmem.evaluators.review.semantic.project import MAX_BYTES
from jaxmem.evaluators.review.semantic.step_calls import body_calls, drives_steps, step_role_of
from jaxmem.evaluators.review.semantic.walk import At

_FROM = re.compile(rb"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.MULTILINE)
_NAME = re.compile(rb"(\w+)(?:\s+as\s+\w+)?")


def mark_remote(analysis, mark_local) -> None:
    """Mark the module's functions that another file of the tree calls on every step.
    `mark_local`: per_step.mark without this step, run on the model of an importer that has not
    recorded its per-step calls yet (one this process has not reviewed)."""
    project, module = analysis.project, analysis.module_name
    wanted = _imported_names(project).get(module)
    if not wanted:
        return
    steps = project.memo.setdefault("steps", {})
    for name, bindings in analysis.module_scope.bindings.items():
        if name not in wanted:
            continue
        fn = bindings[-1].node
        scope = analysis.scopes.get(fn) if bindings[-1].how == "def" else None
        if scope is None or scope.traced or scope.per_step is not None:
            continue
        for other in dict.fromkeys(wanted[name]):
            if (module, name) in steps:
                break
            if other in project.memo.setdefault("recorded", set()):
                continue  # what it calls per step is recorded already
            a = _model(project, other)
            if a is not None:
                mark_local(a)  # records what it calls per step
        if (module, name) in steps:
            where, role = steps[module, name]
            scope.per_step, scope.step_role = fn, role
            scope.per_step_why = f"{where} calls it on every step"


def record(a) -> None:
    """Note, for the modules of the tree this one imports from, which of their functions it calls
    on every step (read when those modules are reviewed; importers are reviewed first, order.py)."""
    project, here = a.project, a.module_name
    if project is None or here is None or a.memo.get("recorded"):
        return
    a.memo["recorded"] = True
    project.memo.setdefault("recorded", set()).add(here)
    steps = project.memo.setdefault("steps", {})
    _imported_names(project)
    if here not in project.memo["importing"]:
        return  # imports nothing from the tree's modules by name
    for call, loop, scope, key in _per_step_calls(a, lambda c: _key(a, project, here, c)):
        if key in steps:
            continue
        if loop is not None:
            r = roles.role(a, loop, scope)
            role = roles.Role(r.role, r.proven and guard_around(call, loop, a, scope) is None)
        else:
            role = step_role_of(a, scope, proven=False)
        if not role.steps:
            continue  # a sweep, an evaluation or an audit loop: not what a step pays for
        steps[key] = (f"`{project.files[here].rsplit('/', 1)[-1]}`, line {call.lineno},", role)


def _imported_names(project) -> dict[str, dict[str, list[str]]]:
    """module of the tree -> function name -> the modules that import it with `from ... import`."""
    memo = project.memo.get("importers")
    if memo is not None:
        return memo
    out: dict[str, dict[str, list[str]]] = {}
    importing: set[str] = set()
    for importer, path in project.files.items():
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_BYTES)
        except OSError:
            continue
        for m in _FROM.finditer(raw):
            dotted = m.group(1).decode("ascii", "replace")
            target = tree_module(dotted, importer, project)
            if target is None or target == importer:
                continue
            names = out.setdefault(target, {})
            for n in _NAME.finditer(m.group(2).strip(b"()")):
                names.setdefault(n.group(1).decode("ascii", "replace"), []).append(importer)
            importing.add(importer)
    project.memo["importers"] = out
    project.memo["importing"] = importing  # the modules that import something from another by name
    return out


def _model(project, module: str):
    """The semantic model of another module of the tree, built once per process, and kept for
    its own review when that is due here (as project.py keeps what it models for facts)."""
    from jaxmem.evaluators.review import semantic

    path = project.files[module]
    kept, models = project._kept.get(path), project.memo.setdefault("models", {})
    if kept is not None and kept[2] is not None:
        return kept[2]
    if module not in models:
        got = project.source_tree(path)
        models[module] = got and semantic.build(got[1], got[0].splitlines(), module=module, project=project)
        if got and project.may_review(path) and module not in project._tainted:
            project._kept[path] = (got[0], got[1], models.pop(module))
            return project._kept[path][2]
    return models[module]


def _key(a, project, here: str, call: ast.Call) -> tuple[str, str] | None:
    """(module, name) of a call by name of a function another module of the tree defines."""
    q = a.qualname(call.func) if isinstance(call.func, ast.Name) else None
    if q is None or "." not in q:
        return None
    target = tree_module(q.rpartition(".")[0], here, project)
    return (target, q.rpartition(".")[2]) if target is not None and target != here else None


def _per_step_calls(a, key_of):
    """Calls of other modules' functions (`key_of` gives their key, or None) that run on every
    step: in a host loop (not under `if step % N`, not a short or per-epoch loop) or in a body that
    runs once per step. The key is asked first: most calls are of nothing in the tree."""
    for call, loop, scope, guarded in a.loop_calls:
        if guarded or not isinstance(loop, LOOP_TYPES) or scope.traced or (key := key_of(call)) is None:
            continue
        if loops.small_loop(loop, a, scope) or loops.epoch_loop(loop, At(a, scope)):
            continue
        yield call, loop, scope, key
    for scope in list(a.scopes.values()):
        if scope.per_step is not None and not scope.traced:
            found = [(call, key) for call in body_calls(scope.node) if (key := key_of(call)) is not None]
            if found and not drives_steps(a, scope):
                yield from ((call, None, scope, key) for call, key in found)
