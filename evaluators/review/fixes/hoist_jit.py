"""JM301 fix: create the jitted function once, before the loop, instead of on every iteration.

    for lr in lrs:                                       step = jax.jit(lambda w, g, lr: w - lr * g)
        step = jax.jit(lambda w, g: w - lr * g)    ->    for lr in lrs:
        w = step(w, g)                                       w = step(w, g, lr)

Safe where nothing the wrapped function reads is rebound (or changed through an attribute or an
item) in the loops it leaves: it then traces exactly what each iteration traced before, once. A
jit used in place (`jax.jit(self.apply)(x)`) gets a name of its own. Where the function reads a
value the loop changes (the loop variable `lr` above), the fix is unsafe and only for a lambda:
that value becomes a trailing parameter, passed at every call of the jitted name in the loop; it
is then traced rather than baked in as a constant, so code that uses it as a shape, an index into
a Python list or in Python control flow no longer traces. A function defined inside the loop, a
`functools.partial` of loop values, and a jit rebuilt on each call of a method get no fix.
"""
from __future__ import annotations

import ast

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import Tree, expr_ast, free_names, fresh_name, stmt_ast, stored_names, tree
from jaxmem.evaluators.review.fixes._edits import Edits, moved, take_leading
from jaxmem.evaluators.review.fixes._imports import Imports
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix, message_is
from jaxmem.evaluators.review.fixes.jit_makers import _maker_of


def _changed_in(t: Tree, loop: cst.CSTNode) -> set[str]:
    """Names a loop rebinds, or changes through an attribute or item (`self.x = ...`, `d[k] = ...`)."""
    tree_ = stmt_ast(t, loop)
    out = stored_names(tree_)
    if tree_ is not None:
        for n in ast.walk(tree_):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                base = target
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if base is not target and isinstance(base, ast.Name):
                    out.add(base.id)
    return out


def _method_receivers(t: Tree, loop: cst.CSTNode, skip: cst.CSTNode) -> set[str]:
    """Names whose methods the loop calls (`model.update(...)`), outside `skip`."""
    inside = set(map(id, t.walk(skip)))
    return {n.func.value.value for n in t.walk(loop) if id(n) not in inside and isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name)}


def _name_for(t: Tree, wrapped: cst.CSTNode | None) -> str:
    if isinstance(wrapped, cst.Name):
        return f"{wrapped.value}_jit"
    if isinstance(wrapped, cst.Attribute):
        return f"{wrapped.attr.value.lstrip('_')}_jit"
    return "jitted_fn"


def _wrapped(call: cst.Call) -> cst.CSTNode | None:
    """The function a jit call wraps: its first positional argument."""
    first = next((a for a in call.args if a.keyword is None and not a.star), None)
    return first.value if first is not None else None


def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    if message_is(finding, "call_message"):
        return None   # rebuilt on each call of a function: the fix is a cache, not a move
    t = tree(source)
    imports = Imports(t)
    calls = t.at_all(finding, (cst.Call,))
    if not calls:
        return _hoist_def(t, finding)
    # `jax.jit(f)(x)` starts where `jax.jit(f)` does: the jit is the call that makes the function.
    call = next((c for c in calls if (_maker_of(c, imports) or ("",))[0] in ("call", "partial")
                 and not (isinstance(c.func, cst.Call) and _maker_of(c.func, imports)
                          and _maker_of(c.func, imports)[0] == "call")), None)
    if call is None:
        return None
    loops = t.enclosing_loops(call)
    if not loops:
        return None
    stmt = t.statement(call)
    if stmt is None or not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    assign = (isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1
              and isinstance(small.targets[0].target, cst.Name))
    target = small.targets[0].target.value if assign else None
    reads = free_names(expr_ast(t, call))
    changed = [_changed_in(t, loop) for loop in loops]
    if target is not None:
        # Assigned once in the loop it leaves: another assignment would pick a different function.
        assigned = [sum(isinstance(n, ast.Name) and n.id == target and isinstance(n.ctx, ast.Store)
                        for n in ast.walk(stmt_ast(t, loop) or ast.Module(body=[], type_ignores=[])))
                    for loop in loops]
    else:
        assigned = [0 for _ in loops]
    # The outermost loop the expression does not depend on (loops nest: each changes a superset).
    k = -1
    for i, names in enumerate(changed):
        if reads & (names - ({target} if target else set())) or (target and assigned[i] != 1):
            break
        k = i
    if k >= 0:
        # An object the function reads whose methods the loop calls may change inside: each
        # iteration's trace saw its state then, the one trace sees it once.
        stateful = reads & _method_receivers(t, loops[k], call) - set(imports.modules.values())
        return _hoist(t, finding, call, stmt, loops[k], target, None, UNSAFE if stateful else SAFE)
    wrapped = _wrapped(call)
    if not isinstance(wrapped, cst.Lambda):
        return None
    outer = loops[-1]
    extra = sorted(reads & changed[-1] - {target} if target else reads & changed[-1])
    if not extra or (target and assigned[-1] != 1):
        return None
    return _hoist(t, finding, call, stmt, outer, target, extra, UNSAFE)


def _hoist(t: Tree, finding: Finding, call: cst.Call, stmt: cst.SimpleStatementLine, loop: cst.CSTNode,
           target: str | None, extra: list[str] | None, applicability: str) -> Fix | None:
    edits = Edits()
    new_call = call
    if extra:
        lam = _wrapped(call)
        params = lam.params
        if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.star_kwarg is not None \
                or params.kwonly_params or params.posonly_params or any(p.default is not None for p in params.params):
            return None
        added = [*params.params, *(cst.Param(cst.Name(n)) for n in extra)]
        new_lam = lam.with_changes(params=params.with_changes(params=added))
        args = [a.with_changes(value=new_lam) if a.value is lam else a for a in call.args]
        new_call = call.with_changes(args=args)
    name = target or fresh_name(t.source, _name_for(t, _wrapped(call)))
    if extra and not _pass_extra(t, call, loop, target, name, extra, edits):
        return None
    if target is not None:
        new_stmt = moved(stmt.with_changes(body=[stmt.body[0].with_changes(value=new_call)]))
        edits.delete(stmt)
    else:
        new_stmt = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], new_call)])
        if not extra:
            edits.sub(call, cst.Name(name))
        target = name
    edits.insert_before(loop, take_leading(loop, [new_stmt], edits))
    out = edits.apply(t)
    where = "before the loop" + (f" (passing {', '.join(extra)} as an argument)" if extra else "")
    return make_fix(finding, applicability, f"create `{target}` once, {where}", out)


def _pass_extra(t: Tree, call: cst.Call, loop: cst.CSTNode, target: str | None, name: str, extra: list[str],
                edits: Edits) -> bool:
    """Append the new arguments at every call of the jitted function; False where a use of it is
    not a plain call inside the loop (its other callers would miss them)."""
    extra_args = [cst.Arg(cst.Name(n)) for n in extra]

    def extended(c: cst.Call) -> cst.Call | None:
        if any(a.star for a in c.args):
            return None
        positional = [a for a in c.args if a.keyword is None]
        keywords = [a for a in c.args if a.keyword is not None]
        if keywords:
            added = [cst.Arg(cst.Name(n), keyword=cst.Name(n)) for n in extra]
            return c.with_changes(args=[*positional, *keywords, *added])
        return c.with_changes(args=[*positional, *extra_args])

    if target is None:
        parent = t.parent(call)
        if not (isinstance(parent, cst.Call) and parent.func is call):
            return False
        new = extended(parent)
        if new is None:
            return False
        edits.sub(parent, new.with_changes(func=cst.Name(name)))
        return True
    scope = t.scope_of(call)
    inside = set(map(id, t.walk(loop)))
    for node in t.walk(scope):
        if isinstance(node, cst.Name) and node.value == target:
            parent = t.parent(node)
            if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.Attribute) and parent.attr is node):
                continue
            if id(node) not in inside:
                return False
            if not (isinstance(parent, cst.Call) and parent.func is node):
                return False
            new = extended(parent)
            if new is None:
                return False
            edits.sub(parent, new)
    return True


def _hoist_def(t: Tree, finding: Finding) -> Fix | None:
    """`@jax.jit def f` inside a loop: moved before the loop when its body reads nothing the loop
    changes (a def reads free names when called, so it then traces the same function once)."""
    fn = next((n for n in t.walk() if isinstance(n, cst.FunctionDef) and t.pos(n.name)[0] == finding.line), None)
    if fn is None:
        return None
    loops = t.enclosing_loops(fn)
    if not loops or t.body_of(fn) is None:
        return None
    tree_ = stmt_ast(t, fn)
    reads: set[str] = set()
    if tree_ is not None and tree_.body and isinstance(tree_.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        inner = tree_.body[0]
        local = stored_names(ast.Module(body=inner.body, type_ignores=[]))
        args = inner.args
        local |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        reads = {n.id for n in ast.walk(inner) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local
        reads |= free_names(ast.Module(body=[ast.Expr(d) for d in inner.decorator_list], type_ignores=[]))
    k = -1
    for i, loop in enumerate(loops):
        changed = _changed_in(t, loop)
        count = sum(1 for n in t.walk(loop) if isinstance(n, cst.FunctionDef) and n.name.value == fn.name.value)
        if reads & changed or count != 1 or any(
                isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name) and n.target.value == fn.name.value
                for n in t.walk(loop)):
            break
        k = i
    if k < 0:
        return None
    edits = Edits()
    edits.delete(fn)
    edits.insert_before(loops[k], take_leading(loops[k], [moved(fn)], edits))
    return make_fix(finding, SAFE, f"define jitted `{fn.name.value}` once, before the loop", edits.apply(t))
