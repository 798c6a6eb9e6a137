"""Bindings and scopes: where a name gets a value, and which binding reaches a use."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Protocol

from jaxmem.evaluators.review.semantic.jit import JitInfo
from jaxmem.evaluators.review.semantic.names import _END, dotted
from jaxmem.evaluators.review.semantic.reach import Structure, reaching


class _Model(Protocol):
    """What a scope asks of the module's model (model.Analysis), named here so that this
    module, which the model imports, does not import it back."""

    tree: ast.Module

    def binding_kind(self, b: Binding, scope: Scope, strict: bool = False) -> str | None: ...

@dataclass(eq=False)  # identity: a memo key (kinds.py), never equal to another binding
class Binding:
    """One place where a name gets a value. `how`: assign, iter, param, def, class, import, with."""

    name: str
    how: str
    at: tuple[int, int]  # the binding is visible to uses after this position
    node: ast.AST  # the statement (or def/class/lambda/loop) that binds
    value: ast.AST | None = None  # what was assigned (the whole right-hand side)
    index: int | None = None  # position in a tuple target: `a, b = f()` -> 0, 1
    element: str | None = None  # iter: "elem" (element of value), "dictvalue", "index"
    until: tuple[int, int] | None = None  # comprehension variables: visible only inside
    info: JitInfo | None = None  # the binding makes a jitted callable
    factory: JitInfo | None = None  # the binding makes a jit decorator (`partial(jax.jit, ...)`)


@dataclass
class ClassInfo:
    node: ast.ClassDef
    framework: str | None = None  # "linen" | "nnx" | "equinox" when a Module subclass
    network: bool = False  # a subclass of a framework's Module (NETWORK_BASES), not another object of it
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    attrs: dict[str, list[Binding]] = field(default_factory=dict)  # `self.x = ...` in methods
    bases: list[ast.AST] = field(default_factory=list)


@dataclass
class Scope:
    """A function body, a class body or the module: the unit of name resolution."""

    node: ast.AST
    parent: Scope | None  # the scope names are looked up in next (class bodies are skipped)
    analysis: _Model
    params: tuple[str, ...] = ()
    jit: JitInfo | None = None
    jitted: bool = False  # compiled: jit, pmap, or a lax control-flow body (possibly nested)
    traced: bool = False  # any transform (grad, vmap, ...): values are tracers, not arrays
    reasons: set[str] = field(default_factory=set)  # jit, control, custom, pallas, module, transform
    cls: ClassInfo | None = None  # for methods: the class they belong to
    is_class: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    # `self.x = ...` in this method, by attribute: read like a local name (kinds.py), apart from
    # `bindings` because `self.x` is no name of the scope (closures, captured names).
    attr_bindings: dict[str, list[Binding]] = field(default_factory=dict)
    loops: list[tuple[tuple[int, int], tuple[int, int], ast.AST]] = field(default_factory=list)
    per_step: ast.AST | None = None  # a call in a host loop that runs this function every step
    per_step_loop: ast.AST | None = None  # that loop, and the scope it is in
    per_step_scope: Scope | None = None
    step_role: object | None = None  # the role of the steps it runs per (roles.Role), when not its loop's
    per_step_why: str | None = None  # why it runs per step, where no loop of this file calls it (per_step.py)
    has_loops: bool = False
    appends: dict[str, list[ast.AST]] = field(default_factory=dict)  # `name.append(x)`: the x's
    # `name[k] = x` (also as one target of an unpacking): how each stored item got its value
    item_sets: dict[str, list[Binding]] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)  # calls in this body (not nested scopes)
    header_calls: list[ast.Call] = field(default_factory=list)  # in headers of defs/classes in it
    inner: list[Scope] = field(default_factory=list)  # functions and classes defined in this body
    _structure: Structure | None = field(default=None, repr=False)  # built on first need (reach.py)

    def bind(self, b: Binding) -> None:
        self.bindings.setdefault(b.name, []).append(b)

    def loop_at(self, p: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int], ast.AST] | None:
        best = None
        for start, end, node in self.loops:
            if start <= p <= end and (best is None or start >= best[0]):
                best = (start, end, node)
        return best

    def reaching(self, name: str, p: tuple[int, int], own: bool = True) -> list[Binding] | None:
        """Bindings of `name` in this scope that may hold at position `p`, most likely first;
        None when the name is not bound here (look in the parent scope). `own` is False when
        the read is in a nested function, which runs when it is called, not where it is written."""
        return self._reaching(self.bindings.get(name), p, own)

    def attr_reaching(self, attr: str, p: tuple[int, int]) -> list[Binding] | None:
        """Bindings of `self.<attr>` made in this method that may hold at `p` (as `reaching`)."""
        return self._reaching(self.attr_bindings.get(attr), p, True)

    def _reaching(self, bs: list[Binding] | None, p: tuple[int, int], own: bool) -> list[Binding] | None:
        if not bs:
            return None
        before = None
        for b in bs:
            if b.at < p and (b.until is None or p <= b.until) and (before is None or b.at >= before.at):
                before = b
        loop = self.loop_at(p) if self.loops else None  # most scopes have no loop: no call
        back = None
        if loop is not None and not (before is not None and before.at >= loop[0]):
            # Read before its (re)binding in the loop body: the value comes from the previous
            # iteration, i.e. from the last binding in the loop.
            for b in bs:
                if loop[0] <= b.at <= loop[1] and b.at >= p and b.until is None and (back is None or b.at >= back.at):
                    back = b
        out = [b for b in (back, before) if b is not None]
        if own and before is not None and len(bs) > 1 and before.until is None and self._apart(before, p):
            # The last binding written before the read is in a branch the read is not in: every
            # binding some path carries here (reach.py), the previous iteration's first.
            out = [*out[:1 if back is not None else 0],
                   *(b for b in reaching(self._structure, bs, p) if b is not back)]
        if out:
            return out
        if own and self.node is not self.analysis.tree and not self.is_class:
            return []  # a local read before assignment: nothing known
        # A name read before its binding from a function body that runs later.
        return [max((b for b in bs if b.until is None), key=lambda b: b.at, default=bs[-1])]

    def _apart(self, before: Binding, p: tuple[int, int]) -> bool:
        if self._structure is None:
            body = getattr(self.node, "body", None)
            if not isinstance(body, list) or not body:
                return False  # a lambda: one expression, no blocks
            self._structure = Structure(body)
        return self._structure.apart(before.node, p)

    def lookup(self, name: str, p: tuple[int, int] = _END, strict: bool = False) -> str | None:
        """The kind of `name` at `p`. Where two bindings may reach it (a value from the previous
        iteration and one from before the loop), "jax" if either is; strict: only if both agree."""
        scope: Scope | None = self
        while scope is not None:
            found = scope.reaching(name, p, scope is self)
            if found is not None:
                return scope.kind_of(found, strict)
            scope = scope.parent
        return None

    def kind_of(self, found: list[Binding], strict: bool = False) -> str | None:
        """The kind of a read that these bindings of this scope may reach: "jax" if either is;
        strict: only if they agree."""
        kinds = [self.analysis.binding_kind(b, self, strict) for b in found]
        if strict:
            return kinds[0] if kinds and len(set(kinds)) == 1 else None
        return "jax" if "jax" in kinds else (kinds[0] if kinds else None)


def callee_key(expr: ast.AST, scope: Scope) -> tuple | None:
    """A callable's dotted name and where its first name is bound (`self`: the class), so that
    `fn` in two functions, each its own parameter, are two callables."""
    name = dotted(expr)
    if name is None:
        return None
    base = name.partition(".")[0]
    if base == "self" and scope.cls is not None:
        return name, id(scope.cls)
    s: Scope | None = scope
    while s is not None and base not in s.bindings:
        s = s.parent
    return name, id(s.node) if s is not None else None
