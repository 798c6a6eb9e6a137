"""The module's semantic model: names, definitions and classes, resolved the way Python does.

`Analysis` is what every rule reads. This module holds name and definition resolution; the
mixins add jitted callables (callables.py) and value kinds (kinds.py).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.callables import CallablesMixin
from jaxmem.evaluators.review.semantic.jit import JitInfo
from jaxmem.evaluators.review.semantic.kinds import KindsMixin
from jaxmem.evaluators.review.semantic.names import _END, ARRAY_TYPES, CANONICAL, JIT_NAMES, REPLICATION, TREE_MAPS, pos
from jaxmem.evaluators.review.semantic.parts import PartsMixin
from jaxmem.evaluators.review.semantic.scopes import Binding, ClassInfo, Scope

_UNSET = object()

# Calls that return the same pytree (of the same class) they are given, placed elsewhere.
PYTREE_PRESERVING = REPLICATION | {"jax.device_put", "jax.device_put_replicated", "jax.block_until_ready",
                                   "jax.device_get"}


class Analysis(CallablesMixin, KindsMixin, PartsMixin):
    """Module facts; built by `build(tree)` in one recursive pass plus a resolution pass."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.tree = tree
        self.lines = lines
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}  # last def per name (any scope)
        self.jitted_defs: dict[ast.AST, JitInfo] = {}  # FunctionDef -> info, when jitted
        self.classes: dict[ast.ClassDef, ClassInfo] = {}
        self.scopes: dict[ast.AST, Scope] = {}
        self.module_scope = Scope(tree, None, self)
        self.scopes[tree] = self.module_scope
        self.imports_jax_line: int | None = None
        self.defvjp: list[tuple[ast.Call, Scope]] = []
        self.transform_args: list[tuple[ast.AST, str, Scope]] = []  # (function expr, qualname, scope)
        self.attr_jits: dict[str, list[JitInfo]] = {}  # attribute name -> jitted attributes of any class
        # Calls inside loops, for the call graph: (call, innermost loop, scope, under `if i % N`).
        self.loop_calls: list[tuple[ast.Call, ast.AST | None, Scope, bool]] = []
        self.calls_by_name: dict[str, list[tuple[ast.Call, Scope]]] = {}  # `f(...)` call sites by name
        self.key_loops: set[ast.AST] = set()  # `for m in metrics: ... metrics[m]` (astutil.walks_keys)
        self.mapped_lambdas: dict[ast.Lambda, tuple[ast.Call, Scope]] = {}  # `tree.map(lambda x: ..., tree)`
        # Rules ask for the same call's name many times. Keyed by the node itself, not its id:
        # rules also ask about nodes they make on the fly (`ast.Name(arg)`), and a freed node's id
        # is reused by the next one, which would read the first one's answer.
        self._qcache: dict[ast.AST, str | None] = {}
        self._jcache: dict[ast.AST, JitInfo | None] = {}
        # jit_from_call per (call, scope), filled only once the model is built (`built`): during
        # the build, bindings later in the file are not known yet.
        self._mcache: dict[tuple[ast.AST, int], tuple | None] = {}
        self.built = False
        self._kcache: dict[tuple[ast.AST, bool], object] = {}
        self._khits: set[tuple] = set()  # kinds cut short by a cycle, below the one being worked out
        self._bkinds: dict[tuple[Binding, bool], object] = {}
        self._returns: dict[tuple[ast.AST, bool], str | None] = {}
        self.memo: dict = {}  # per-file results of predicates computed outside the walk (roles)
        self.module_name: str | None = None  # dotted name in a reviewed tree, when known
        self.project = None  # facts of the other files of a reviewed tree (project.Project), if any
        self._returned: dict[ast.AST, ast.AST | None] = {}

    def release(self) -> None:
        """Break the model's reference cycles (scopes point at the model and at each other) once a
        review is done with it, so reference counting frees the file's objects at once instead of
        the cycle collector tracing them (collector.py)."""
        for scope in self.scopes.values():
            scope.analysis = scope.parent = None
            scope.inner = []
            if scope._structure is not None:  # its flows point back at it
                scope._structure.flows.clear()
                scope._structure = None
        for cache in (self.scopes, self.memo, self.classes, self.jitted_defs, self._returned, self._qcache,
                      self._jcache, self._mcache, self._kcache, self._bkinds, self.mapped_lambdas):
            cache.clear()

    def leaf_kind(self, b: Binding, strict: bool) -> str | None:
        """A parameter of a lambda handed to a tree map (`tree_map(lambda v: v.item(), metrics)`):
        a leaf of the tree in its position, so a device array where that tree is proven to hold
        device arrays (in both readings: a guessed tree is as often masks or names). `map_with_path`
        passes each leaf's key path first."""
        call, scope = self.mapped_lambdas[b.node]
        names = [a.arg for a in b.node.args.args]
        i = names.index(b.name) - TREE_MAPS[self.qualname(call.func)] if b.name in names else -1
        trees = call.args[1:]
        if not 0 <= i < len(trees):
            return None
        return "jax" if self.kind(trees[i], scope, True) == "jax" else None

    # ---- names -------------------------------------------------------------------------
    def qualname(self, expr: ast.AST) -> str | None:
        """`jnp.zeros` -> "jax.numpy.zeros" when `jnp` is an import alias; else None."""
        q = self._qcache.get(expr, _UNSET)  # one lookup: asked of nearly every call and name read
        if q is _UNSET:
            q = self._qcache[expr] = self._qualname(expr)
        return q

    def _qualname(self, expr: ast.AST) -> str | None:
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        base = self.aliases.get(expr.id)
        if base is None:
            return None
        name = ".".join([base, *reversed(parts)]) if parts else base
        return CANONICAL.get(name, name)

    def annotates_array(self, annotation: ast.AST) -> bool:
        return any(isinstance(n, (ast.Attribute, ast.Name)) and self.qualname(n) in ARRAY_TYPES
                   for n in astutil.walk(annotation))

    def is_jit(self, expr: ast.AST) -> bool:
        return self.qualname(expr) in JIT_NAMES

    def resolve(self, name: str, scope: Scope, p: tuple[int, int] = _END) -> Binding | None:
        """The binding of `name` most likely to hold at `p`, searched outwards from `scope`."""
        s: Scope | None = scope
        while s is not None:
            found = s.reaching(name, p, s is scope)
            if found is not None:
                return found[0] if found else None
            s = s.parent
        return None

    def is_builtin(self, name: ast.AST, scope: Scope) -> bool:
        """`float` is the builtin here: not imported under that name, not bound in any scope."""
        if not isinstance(name, ast.Name) or name.id in self.aliases:
            return False
        s: Scope | None = scope
        while s is not None:
            if name.id in s.bindings:
                return False
            s = s.parent
        return True

    def resolve_def(self, expr: ast.AST | None, scope: Scope) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None:
        """The function a name (or `self.method`) refers to here, if it is defined in this module."""
        if isinstance(expr, ast.Lambda):
            return expr
        if isinstance(expr, ast.Name):
            b = self.resolve(expr.id, scope, pos(expr))
            if b is None:
                return None
            if b.how == "def":
                return b.node
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Lambda):
                return b.value
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name):
                # `fold_fn = make_fold(...)` where make_fold ends `return fold_fn`, an inner def
                factory = self.resolve_def(b.value.func, scope) if b.value.func is not expr else None
                if isinstance(factory, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return self.returned_def(factory)
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            cls = self.class_of_receiver(expr.value, scope)
            if cls is not None:
                return self._method(cls, expr.attr)
        return None

    def returned_def(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The inner function a factory returns by name (`def make(): def f(...): ...; return f`)."""
        if fn in self._returned:
            return self._returned[fn]
        self._returned[fn] = None  # recursion guard
        scope = self.scopes.get(fn)
        found = None
        stack = list(fn.body)
        while stack and scope is not None:
            n = stack.pop()
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Name):
                b = scope.reaching(n.value.id, pos(n.value))
                if b and b[0].how == "def" and isinstance(b[0].node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if found is not None and found is not b[0].node:
                        found = None
                        break
                    found = b[0].node
            elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.expr)):
                stack.extend(astutil.children(n))
        self._returned[fn] = found
        return found

    def unwrapped(self, it: ast.AST, scope: Scope) -> ast.AST:
        """`list(perm)`, `tuple(perm)`, `iter(perm)`: walked, the same elements (device scalars) as `perm`."""
        while (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("list", "tuple", "iter")
               and len(it.args) == 1 and not it.keywords and self.is_builtin(it.func, scope)):
            it = it.args[0]
        return it

    def method(self, cls: ClassInfo, name: str):
        """The method `name` of a module class, or of a module class it derives from."""
        return self._method(cls, name)

    def _method(self, cls: ClassInfo, name: str, depth: int = 0):
        if name in cls.methods:
            return cls.methods[name]
        if depth < 3:
            for base in cls.bases:
                other = self.local_class(base)
                if other is not None and other is not cls:
                    m = self._method(other, name, depth + 1)
                    if m is not None:
                        return m
        return None

    def local_class(self, expr: ast.AST) -> ClassInfo | None:
        if isinstance(expr, ast.Name):
            b = self.resolve(expr.id, self.module_scope)
            if b is not None and b.how == "class":
                return self.classes.get(b.node)
        return None

    def class_of_receiver(self, recv: ast.Name, scope: Scope) -> ClassInfo | None:
        """`self` inside a method of a module class, or a name bound to `C(...)` of one."""
        if recv.id in ("self", "cls"):
            return self.enclosing_class(scope)
        found = self._reaching_all(recv.id, scope, pos(recv))
        for b in found:
            cls = self._class_of_value(b, scope, 0)
            if cls is not None:
                return cls
        return None

    @property
    def is_package(self) -> bool:
        """This module is a package's `__init__.py` of the reviewed tree: `.` in its imports is itself."""
        return self.project is not None and self.project.is_package(self.module_name)

    def from_import(self, base: str, name: str) -> str:
        """What `from base import name` binds: `base.name`, or, where `base` is a module of the
        reviewed tree that imported `name` itself (`from .utils import jax, jnp`), that module."""
        if self.project is not None:
            base = self.project.beside(base, self.module_name)
        target = self.project.reexport(base, name) if self.project is not None else None
        return target or f"{base}.{name}"

    def enclosing_class(self, scope: Scope) -> ClassInfo | None:
        """The class whose method (or a function nested in one) `scope` is."""
        s: Scope | None = scope
        while s is not None and s.cls is None:
            s = s.parent
        return s.cls if s is not None else None

    def attr_makers(self, attr: ast.Attribute, scope: Scope) -> list[ast.Call]:
        """`self.x`: the calls the class's methods assign to it (`self.env = gym.make(...)`)."""
        if not (isinstance(attr.value, ast.Name) and attr.value.id == "self"):
            return []
        cls = self.class_of_receiver(attr.value, scope)
        return [b.value for b in cls.attrs.get(attr.attr, ()) if isinstance(b.value, ast.Call)] if cls else []

    def made_by(self, expr: ast.AST, scope: Scope, prefixes: tuple[str, ...]) -> bool:
        """A name whose constructor (`constructor_of`), or a `self.x` one of whose makers, is a
        call of something whose qualified name starts with one of `prefixes` (`gym.`, `optax.`)."""
        if isinstance(expr, ast.Name):
            return (self.constructor_of(expr, scope) or "").startswith(prefixes)
        return any((self.qualname(c.func) or "").startswith(prefixes)
                   for c in (self.attr_makers(expr, scope) if isinstance(expr, ast.Attribute) else ()))

    def made_facts(self, made_by: str, attr: str, guess: bool = True):
        """Project facts of `attr` on an instance that `made_by(...)` made (a class of another file
        of the tree); with `guess`, `C.setup(...)` with no such facts is read as making a C (a
        factory on the class: a guess, since a static method may return anything)."""
        if self.project is None:
            return None
        facts = self.project.function(f"{made_by}.{attr}")
        owner = made_by.rpartition(".")[0]
        if facts is None and guess and owner and not self.project.names_module(owner):
            facts = self.project.function(f"{owner}.{attr}")  # not `utils.make_state(...)`: a module's function
        return facts

    def constructor_of(self, recv: ast.Name, scope: Scope) -> str | None:
        """`timer = utils.Timer()`: the qualified name of the imported class a receiver was made
        from (for facts of its methods in another file of the tree)."""
        for b in self._reaching_all(recv.id, scope, pos(recv)):
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Call):
                q = self.qualname(b.value.func)
                if q is not None:
                    return q
        return None

    def annotated_class(self, recv: ast.Name, scope: Scope) -> str | None:
        """`def learner(agent: DrQAgent, ...)` (or `agent: DrQAgent = ...`): the qualified name
        of the imported class the receiver is annotated with, where every other binding that
        reaches it re-binds it from a method of itself (`agent, info = agent.update(batch)`: the
        functional update returning a new instance, the way JAX state classes are written)."""
        annotation = self.annotation_of(recv, scope)
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            # `model: "EnergyStorageModel"`: a forward reference, often to a class imported only
            # for type checking
            try:
                annotation = ast.parse(annotation.value.strip(), mode="eval").body
            except SyntaxError:
                return None
        return self.qualname(annotation) if annotation is not None else None

    def annotation_of(self, recv: ast.Name, scope: Scope) -> ast.AST | None:
        """The type annotation a receiver is declared with (a parameter's or an annotated
        assignment's), where every other binding that reaches it re-binds it from a method of
        itself; None where another binding could give it another type."""
        annotation = None
        for b in self._reaching_all(recv.id, scope, pos(recv)):
            if b.how == "param" and b.value is not None:
                annotation = b.value
            elif isinstance(b.node, ast.AnnAssign) and b.node.annotation is not None:
                annotation = b.node.annotation
            elif not (b.how == "assign" and isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Attribute)
                      and isinstance(b.value.func.value, ast.Name) and b.value.func.value.id == recv.id):
                return None
        return annotation

    def reaching_bindings(self, name: str, scope: Scope, p) -> list[Binding]:
        """Every binding of `name` that may reach position `p`, from the innermost scope that has one."""
        return self._reaching_all(name, scope, p)

    def _reaching_all(self, name: str, scope: Scope, p) -> list[Binding]:
        s: Scope | None = scope
        while s is not None:
            found = s.reaching(name, p, s is scope)
            if found is not None:
                return found
            s = s.parent
        return []

    def _class_of_value(self, b: Binding, scope: Scope, depth: int) -> ClassInfo | None:
        """`C(...)`, `C.create(...)` (a classmethod of a local class), or a pytree-preserving call
        of one (`flax.jax_utils.replicate(model)`, `jax.device_put(state)`): the same class."""
        if b.how != "assign" or b.index is not None or not isinstance(b.value, ast.Call) or depth > 3:
            return None
        func = b.value.func
        cls = self.local_class(func)
        if cls is None and isinstance(func, ast.Attribute):
            cls = self.local_class(func.value)  # `Trainer.create(...)`
        if cls is None and self.qualname(func) in PYTREE_PRESERVING and b.value.args and isinstance(
                b.value.args[0], ast.Name):
            # Any earlier binding of the argument, newest first (one may sit in a branch).
            name, at = b.value.args[0].id, pos(b.value)
            earlier = sorted((x for x in scope.bindings.get(name, ()) if x.at < at), key=lambda x: x.at, reverse=True)
            for inner in earlier or self._reaching_all(name, scope, at):
                cls = self._class_of_value(inner, scope, depth + 1)
                if cls is not None:
                    break
        return cls
