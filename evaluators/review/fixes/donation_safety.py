"""Whether donating a jitted call's arguments (the JM401 fix) is safe: nothing can read a donated
buffer after the call. Every use of the jitted function rebinds what it donates, the first step
donates a value made for the loop, no other name or closure holds it, and it is not exported.

Separate from `donation.py` because it only reads the code around the call sites: the fix makes
its edit either way, and this decides whether it is offered as safe or unsafe.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.fixes._cst import Tree, target_names
from jaxmem.evaluators.review.fixes._imports import Imports, qualify
from jaxmem.evaluators.review.fixes.jit_makers import _find_maker, _scope_statements

# Calls whose result may be the very array they were given: donating it deletes the caller's.
ALIASING = frozenset({"jax.numpy.asarray", "jax.device_put", "jax.numpy.array", "numpy.asarray", "jax.tree.map",
                      "jax.tree_util.tree_map", "copy.copy"})
FRESH_PREFIXES = ("jax.numpy.", "numpy.", "jax.random.", "jax.nn.initializers.")


def _targets(stmt: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    if isinstance(stmt, cst.Assign):
        for t_ in stmt.targets:
            for n in target_names(t_.target):
                out.add(n)
    return out


def _call_rebinds(t: Tree, call: cst.Call, positions: list[int], names: list[str], offset: int) -> bool:
    """Every donated argument of this call is a name the same statement rebinds."""
    parent = t.parent(call)
    targets = _targets(parent) if isinstance(parent, cst.Assign) and parent.value is call else set()
    i = offset
    for a in call.args:
        if a.star:
            return False
        if a.keyword is None:
            if i in positions and not (isinstance(a.value, cst.Name) and a.value.value in targets):
                return False
            i += 1
        elif a.keyword.value in names and not (isinstance(a.value, cst.Name) and a.value.value in targets):
            return False
    return True


def _uses_rebind(t: Tree, call: cst.Call, positions: list[int], names: list[str], offset: int) -> bool:
    func = call.func
    key = t.code(func)
    for node in t.walk():
        if isinstance(node, (cst.Name, cst.Attribute)) and node is not func and t.code(node) == key:
            parent = t.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is not node:
                continue   # `x.update` where `update` is only the attribute's name
            if isinstance(parent, (cst.FunctionDef, cst.AssignTarget, cst.ImportAlias, cst.Param)):
                continue   # its definition
            if isinstance(parent, cst.Call) and parent.func is node:
                if not _call_rebinds(t, parent, positions, names, offset):
                    return False
                continue
            if isinstance(node, cst.Name) and isinstance(parent, cst.Attribute):
                continue   # `self.step` counted as the attribute
            return False   # passed around, stored, returned: its other callers are unknown
    return True


def _fresh_start(t: Tree, imports: Imports, call: cst.Call, name: str) -> bool:
    """The value the first step donates was made for this loop: the last binding of `name` before
    the loop is an array constructor, a jitted call, or a call with literal-only arguments."""
    loops = t.enclosing_loops(call)
    if not loops:
        return False
    loop = loops[-1]
    scope = t.scope_of(call)
    start = t.pos(loop)
    last = None
    for s in _scope_statements(t, scope):
        if t.pos(s) >= start:
            break
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and name in _bound(small):
                    last = small
        elif isinstance(s, (cst.For, cst.While, cst.If, cst.With, cst.Try)) and name in _bound_anywhere(t, s):
            last = s   # bound in a block: which value reaches the loop is not plain
    if last is None or not isinstance(last, (cst.Assign, cst.AnnAssign)) or last.value is None:
        return False
    if isinstance(last, cst.Assign) and (len(last.targets) != 1 or not isinstance(last.targets[0].target, cst.Name)):
        return _fresh_value(t, imports, last.value, tuple_ok=True)
    return _fresh_value(t, imports, last.value)


def _bound(small) -> set[str]:
    if isinstance(small, cst.Assign):
        return _targets(small)
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        return set(target_names(small.target))
    return set()


def _bound_anywhere(t: Tree, node: cst.CSTNode) -> set[str]:
    out = set()
    for n in t.walk(node):
        if isinstance(n, cst.AssignTarget):
            out |= set(target_names(n.target))
        elif isinstance(n, cst.For):
            out |= set(target_names(n.target))
    return out


def _fresh_value(t: Tree, imports: Imports, value: cst.CSTNode, tuple_ok: bool = False) -> bool:
    if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
        return True   # arithmetic makes a new array
    if not isinstance(value, cst.Call):
        return False
    q = qualify(imports, value.func)
    if q in ALIASING:
        return False
    if q is not None and q.startswith(FRESH_PREFIXES):
        return True
    if isinstance(value.func, (cst.Name, cst.Attribute)):
        made = _find_maker(t, imports, value)
        if made is not None:
            return True   # a jitted call: its outputs are new buffers
    # A call of code the fix cannot see: fresh only when given nothing it could hand back.
    return all(_literalish(a.value) for a in value.args)


def _literalish(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)):
        return True
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_literalish(e.value) for e in node.elements)
    if isinstance(node, cst.Call):
        return all(_literalish(a.value) for a in node.args)
    return False


def _aliased(t: Tree, call: cst.Call, name: str) -> bool:
    """Another name holds the value, or a nested function reads it: donating would delete an
    array that is still reachable."""
    scope = t.scope_of(call)
    for node in t.walk(scope):
        if node is not scope and isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if name in _reads_from_outside(t, node):
                return True
            continue
        if isinstance(node, cst.Assign) and node.value is not call and name in target_names(node.value):
            return True
        if isinstance(node, (cst.Yield, cst.Return)) and node.value is not None and name in target_names(node.value):
            parent_loop = t.enclosing_loops(node)
            if parent_loop:
                return True
    return False


def _reads_from_outside(t: Tree, fn: cst.CSTNode) -> set[str]:
    """Names a nested function or lambda reads from the scope around it (a closure)."""
    import ast
    import textwrap

    try:
        tree_ = ast.parse(textwrap.dedent(t.code(fn)).strip() if isinstance(fn, cst.FunctionDef)
                          else f"({t.code(fn).strip()})")
    except SyntaxError:
        return {"?"}
    out: set[str] = set()
    for node in ast.walk(tree_):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            local = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(y for y in (a.vararg, a.kwarg) if y)]}
            body = node.body if isinstance(node.body, list) else [node.body]
            for stmt in body:
                local |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            for stmt in body:
                out |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                        and n.id not in local}
    return out


def _exported(t: Tree, name: str) -> bool:
    for s in t.module.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and "__all__" in _targets(small):
                    return name in t.code(small.value)
    return False
