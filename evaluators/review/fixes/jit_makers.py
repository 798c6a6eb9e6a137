"""Where a jitted function is made, found from a call of it: `jax.jit`, `jax.pmap`, `pjit`,
`nnx.jit` as a decorator (`@jax.jit`, `@jax.jit(...)`, `@partial(jax.jit, ...)`) or an assignment
(`step = jax.jit(f, ...)`, `self.step = jax.jit(self._step)`), in the calling scope or a class.

Separate from `donation.py` because it reads code without editing it, and the JM301 fix
(`hoist_jit.py`) reads the same makers.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.fixes._cst import Tree
from jaxmem.evaluators.review.fixes._imports import Imports, dotted, qualify

JIT_MAKERS = {"jax.jit": "jit", "jax.experimental.pjit.pjit": "jit", "jax.pjit": "jit", "flax.nnx.jit": "jit",
              "jax.pmap": "pmap", "flax.nnx.pmap": "pmap"}
PARTIAL = "functools.partial"


class Maker:
    """Where the jitted callable is made, and how to add keywords to it."""

    def __init__(self, kind: str, maker: str, node: cst.CSTNode, *, offset: int = 0, decorator=None):
        self.kind = kind          # "bare" (@jax.jit), "call" (jax.jit(f, ...) / @jax.jit(...)), "partial"
        self.maker = maker        # "jax.jit", "jax.pmap", ...
        self.node = node          # the decorator expression or call to edit
        self.offset = offset      # 1 when the jitted function takes `self` and the call is a method call
        self.decorator = decorator


def _maker_of(expr: cst.CSTNode, imports: Imports) -> tuple[str, str] | None:
    """(kind, maker) when `expr` makes a jitted function: `jax.jit`, `jax.jit(...)`, `partial(jax.jit, ...)`."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        q = qualify(imports, expr)
        return ("bare", q) if q in JIT_MAKERS else None
    if isinstance(expr, cst.Call):
        q = qualify(imports, expr.func)
        if q in JIT_MAKERS:
            return "call", q
        if q == PARTIAL and expr.args and expr.args[0].keyword is None:
            inner = qualify(imports, expr.args[0].value)
            if inner in JIT_MAKERS:
                return "partial", inner
        if isinstance(expr.func, cst.Call):  # partial(jax.jit, ...)(f)
            made = _maker_of(expr.func, imports)
            if made and made[0] == "partial":
                return "partial", made[1]
    return None


def _decorated(fn: cst.FunctionDef, imports: Imports, offset: int) -> Maker | None:
    if not fn.decorators:
        return None
    made = _maker_of(fn.decorators[0].decorator, imports)   # the outermost decorator sees the call
    if made is None:
        return None
    return Maker(made[0], made[1], fn.decorators[0].decorator, offset=offset, decorator=fn.decorators[0])


def _assigned(value: cst.CSTNode, imports: Imports) -> Maker | None:
    made = _maker_of(value, imports)
    if made is None or made[0] == "bare":
        return None
    node = value.func if made[0] == "partial" and isinstance(value.func, cst.Call) else value
    return Maker(made[0], made[1], node)


def _scope_statements(t: Tree, scope: cst.CSTNode):
    """Statements of a scope's own code (not of functions or classes inside it), in order."""
    stack = list(reversed(scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            continue
        inner = []
        for block_owner in (s, getattr(s, "orelse", None), getattr(s, "finalbody", None)):
            body = getattr(block_owner, "body", None)
            if isinstance(body, cst.IndentedBlock):
                inner.extend(body.body)
        for h in getattr(s, "handlers", ()) or ():
            if isinstance(h.body, cst.IndentedBlock):
                inner.extend(h.body.body)
        if isinstance(getattr(s, "orelse", None), cst.Else) and isinstance(s.orelse.body, cst.IndentedBlock):
            inner.extend(s.orelse.body.body)
        stack.extend(reversed(inner))


def _definitions(t: Tree, scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """`def name` and `name = <expr>` statements of one scope."""
    out = []
    for s in _scope_statements(t, scope):
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            out.append(s)
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                        small.targets[0].target, cst.Name) and small.targets[0].target.value == name:
                    out.append(small)
    return out


def _scopes_out(t: Tree, node: cst.CSTNode) -> list[cst.CSTNode]:
    return [p for p in t.ancestors(node) if isinstance(p, (cst.FunctionDef, cst.Module))]


def _find_maker(t: Tree, imports: Imports, call: cst.Call) -> Maker | None:
    func = call.func
    if isinstance(func, cst.Call):   # `jax.jit(step)(state, batch)`: made where it is called
        return _assigned(func, imports)
    if isinstance(func, cst.Name):
        for scope in _scopes_out(t, call):
            defs = _definitions(t, scope, func.value)
            if not defs:
                continue
            if len(defs) != 1:
                return None
            d = defs[0]
            if isinstance(d, cst.FunctionDef):
                return _decorated(d, imports, 0)
            return _assigned(d.value, imports)
        return None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        recv, attr = func.value.value, func.attr.value
        cls = next((p for p in t.ancestors(call) if isinstance(p, cst.ClassDef)), None)
        if recv == "self" and cls is not None:
            return _in_class(t, imports, cls, attr)
        # `gan = GAN()` then `gan.update(...)`: a module class with a jitted method.
        for scope in _scopes_out(t, call):
            defs = _definitions(t, scope, recv)
            if not defs:
                continue
            d = defs[0]
            if len(defs) == 1 and isinstance(d, cst.Assign) and isinstance(d.value, cst.Call) and isinstance(
                    d.value.func, cst.Name):
                klass = next((s for s in t.module.body if isinstance(s, cst.ClassDef)
                              and s.name.value == d.value.func.value), None)
                if klass is not None:
                    return _in_class(t, imports, klass, attr)
            return None
    return None


def _in_class(t: Tree, imports: Imports, cls: cst.ClassDef, attr: str) -> Maker | None:
    found: list[Maker | None] = []
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == attr:
            params = s.params.params
            offset = 1 if params and params[0].name.value in ("self", "cls") else 0
            if any(dotted(d.decorator) in ("staticmethod", "classmethod") for d in s.decorators[1:]):
                offset = 0
            found.append(_decorated(s, imports, offset))
    for node in t.walk(cls):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Attribute) and dotted(target) == f"self.{attr}":
                found.append(_assigned(node.value, imports))
    return found[0] if len(found) == 1 else None
