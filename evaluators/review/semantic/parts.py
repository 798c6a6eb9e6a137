"""Positions of the tuples a function returns: `eta, support = check_shear(...)` where the
function returns `eta, int(g) + 1` gives `support` the kind of that position (a Python number),
in this file or, through the project's facts, in another file of the reviewed tree."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.astutil import own_returns
from jaxmem.evaluators.review.semantic.scopes import Scope

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class PartsMixin:
    def position_kind(self, value: ast.AST | None, index: int, scope: Scope, strict: bool) -> tuple[bool, str | None]:
        """(whether the source shows position `index` of an unpacked value, the kind there). In the
        strict reading a position that a function's returns leave unknown (`return params, info`,
        `info` from an object's own method) is shown, and proves nothing: the call's kind as a
        whole (a tuple with a device array somewhere) says nothing about this element."""
        part, shown = self._position(value, index, scope)
        if part is None:
            return strict and shown, None
        if isinstance(part, str):  # "jax?": a device array on some path, not proven
            return True, ("jax" if not strict else None) if part == "jax?" else (part or None)
        return True, self.kind(part, scope, strict)

    def _position(self, value: ast.AST | None, index: int, scope: Scope) -> tuple[ast.AST | str | None, bool]:
        """What position `index` of an unpacked value is, where the source shows it: an element of a
        literal tuple, or that position of the tuples a function of this file or of the tree returns
        (`eta, support = check_shear(...)` returning `eta, int(g) + 1`: returned_parts); and
        whether the position exists there at all."""
        if isinstance(value, (ast.Tuple, ast.List)) and index < len(value.elts):
            if not any(isinstance(e, ast.Starred) for e in value.elts):
                return value.elts[index], True
        if isinstance(value, ast.Call) and self.jit_info(value.func, scope) is None:
            fn = self.resolve_def(value.func, scope) if isinstance(value.func, ast.Name) else None
            parts = self.returned_parts(fn) if isinstance(fn, _FUNCS) else self.project_parts(value.func)
            if index < len(parts):
                return parts[index], True
        return None, False

    def returned_parts(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str | None, ...]:
        """Per position of the tuples (one length) every return gives: the kind all agree on, else
        "jax?" (some may put a device array there), "" (all known host values), else None."""
        memo = self.memo.setdefault("returned_parts", {})
        if fn not in memo:
            memo[fn] = ()  # recursion guard
            memo[fn] = self._parts(fn)
        return memo[fn]

    def _parts(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str | None, ...]:
        scope, rets = self.scopes.get(fn), own_returns(fn)
        if scope is None or not rets or any(not isinstance(r.value, ast.Tuple) or any(
                isinstance(e, ast.Starred) for e in r.value.elts) for r in rets) or len(
                {len(r.value.elts) for r in rets}) != 1:
            return ()
        out = []
        for i in range(len(rets[0].value.elts)):
            strict = {self.kind(r.value.elts[i], scope, True) for r in rets}
            loose = {self.kind(r.value.elts[i], scope) for r in rets}
            out.append(strict.pop() if len(strict) == 1 and None not in strict else "jax?" if "jax" in loose
                       else "" if None not in loose else None)
        return tuple(out)

    def project_parts(self, func: ast.AST) -> tuple[str | None, ...]:
        facts = self.project.function(q) if self.project is not None and (q := self.qualname(func)) else None
        return facts.parts if facts is not None else ()
