"""How the builder learns that a name or attribute holds a jitted callable: made here by a jit
call or a jit factory, returned by a factory function or method of this module (resolved after
the pass, when every def is known), or jitted on one branch of a conditional."""
from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from jaxmem.evaluators.review.semantic.scopes import Binding

if TYPE_CHECKING:
    from jaxmem.evaluators.review.semantic.model import Analysis
    from jaxmem.evaluators.review.semantic.scopes import Scope


class JitBindings:
    """Mixed into the builder; `pending_*` are resolved by semantic.build after the pass."""

    a: Analysis
    scope: Scope
    pending_params: list  # (info, wrapped, scope): the parameters of a jitted callable made here
    pending_returns: list  # (binding, factory def, or (`self.make_step`, scope)): what it returns
    pending_attrs: list  # attribute bindings made by a factory

    def _jit_binding(self, b: Binding, value: ast.Call) -> None:
        compiled = _ahead_of_time(value)
        if compiled is not None:
            # `fast = jax.jit(f, donate_argnums=(0, 1)).lower(*args).compile()`: the compiled
            # executable runs the same program, with the same donation, returning device arrays.
            if isinstance(compiled, ast.Call):
                self._jit_binding(b, compiled)
            else:
                b.info = self.a.jit_info(compiled, self.scope)
            if b.info is not None and (b.info.static_argnums or b.info.static_argnames):
                # The executable takes the non-static arguments only (measured on jax 0.10.2:
                # `jit(f, static_argnums=0).lower(7, y).compile()(y)`; passing 7 too raises), so
                # jit's positions do not apply to its calls: what is donated is not read from them.
                b.info = dataclasses.replace(b.info, donate_argnums=None, static_argnums=frozenset(),
                                             static_argnames=frozenset())
            return
        factory = self.a.jit_factory(value, self.scope)
        if factory is not None:
            b.factory = factory
            return
        made = self.a.jit_from_call(value, self.scope)
        if made is None:
            if isinstance(value.func, ast.Name):
                # `step = make_step(...)` where make_step returns `jax.jit(...)`: one level.
                fn = self.a.resolve_def(value.func, self.scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.pending_returns.append((b, fn))
            elif isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name):
                # `step = self.get_train_step()`: a method factory, resolved once the class is
                # built (the method may be defined further down).
                self.pending_returns.append((b, (value.func, self.scope)))
            return
        info, wrapped = made
        info.wrapped = wrapped
        b.info = info
        self.pending_params.append((info, wrapped, self.scope))

    def _maybe_jit_binding(self, b: Binding, value: ast.IfExp) -> None:
        """`step = step if cfg.no_jit else jax.jit(step)`: jitted on one branch, so the name may
        hold a jitted callable (not exact: the other branch runs it eagerly)."""
        for branch in (value.body, value.orelse):
            if isinstance(branch, ast.Call):
                probe = Binding(b.name, b.how, b.at, b.node, value=branch)
                self._jit_binding(probe, branch)
                if probe.info is not None:
                    probe.info.exact = False
                    b.info = probe.info
                    return


def _ahead_of_time(value: ast.Call) -> ast.AST | None:
    """The jitted callable (a jit call or a name) of `<jitted>.lower(...).compile()`, else None."""
    func = value.func
    if not (isinstance(func, ast.Attribute) and func.attr == "compile" and isinstance(func.value, ast.Call)):
        return None
    lower = func.value.func
    if isinstance(lower, ast.Attribute) and lower.attr == "lower" and isinstance(lower.value, (ast.Call, ast.Name)):
        return lower.value
    return None
