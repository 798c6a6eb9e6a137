"""Where a function of the module is called from: host loops that call it by name, and loops that
call a method on a receiver known to be an instance of its class (JM301 asks whether a function
that builds a jitted function runs again and again).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.roles import role
from jaxmem.evaluators.review.semantic.walk import Walk


def called_in_loop(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Walk, roles: tuple[str, ...] = ()) -> bool:
    """A host loop of this module calls the function by its name; with `roles`, a loop that
    trains, steps state or runs epochs (not a sweep over configurations, which each compile
    anyway, nor a benchmark's loop over variants)."""
    return any(isinstance(c.func, ast.Name) and c.func.id == fn.name
               and (not roles or role(ctx.analysis, loop, s).role in roles)
               for c, loop, s, _g in ctx.analysis.loop_calls)


def method_called_in_loop(fn: ast.FunctionDef | ast.AsyncFunctionDef, scope, ctx: Walk) -> bool:
    """A method of this module's class called in a loop of this module on a receiver known to be an
    instance of that class: `self.evaluator.unroll(cfg)` where the class declares `evaluator:
    StandardEvaluator` or sets it from `StandardEvaluator(...)`, or `ev.unroll(cfg)` for `ev` made so."""
    a = ctx.analysis
    cls = a.enclosing_class(scope)
    if cls is None or cls.methods.get(fn.name) is not fn:
        return False
    for call, _loop, s, _guarded in a.loop_calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == fn.name):
            continue
        recv = func.value
        if isinstance(recv, ast.Name) and a.class_of_receiver(recv, s) is cls:
            return True
        if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
            owner = a.enclosing_class(s)
            if owner is not None and cls in _attr_classes(owner, recv, s, a):
                return True
    return False


def _attr_classes(owner, attr: ast.Attribute, scope, a):
    """The classes of this module that `self.<attr>` of `owner` holds: declared in the class body
    (`evaluator: StandardEvaluator`) or assigned from a call of the class (`attr_makers`)."""
    for stmt in owner.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr.attr:
            yield a.local_class(stmt.annotation)
    for call in a.attr_makers(attr, scope):
        yield a.local_class(call.func)
