"""What every rule needs to know about a module, computed once per file.

`Analysis` resolves import aliases (`import jax.numpy as jnp`, `from jax import jit`), finds
jitted functions however they were made (decorators, `functools.partial(jax.jit, ...)`,
`f = jax.jit(g)`, jit factories), and guesses which names hold JAX arrays, NumPy arrays or
host lists. The guesses are flow-insensitive per function scope: cheap (one pass, no
dataflow) and good enough for lint rules, which only need "likely a device array here".
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from evaluators.review.astutil import _FIELDS, LEAVES, fields

JIT_NAMES = frozenset({"jax.jit", "jax.pmap", "jax.experimental.pjit.pjit", "jax.pjit"})
# Transforms whose function argument is traced: float()/print on its values do not sync.
TRACING_NAMES = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.checkpoint", "jax.jacfwd", "jax.jacrev",
    "jax.hessian", "jax.linearize", "jax.jvp", "jax.vjp", "jax.eval_shape", "jax.make_jaxpr",
    "jax.shard_map", "jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.cond",
    "jax.lax.switch", "jax.lax.map", "jax.lax.associative_scan", "jax.custom_jvp", "jax.custom_vjp",
})
# Control-flow primitives compile their body like jit does, even when called outside jit.
COMPILED_BODY_NAMES = frozenset({
    "jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.cond", "jax.lax.switch",
    "jax.lax.map", "jax.lax.associative_scan",
})
# Transforms whose result, when called, is arrays (make_jaxpr gives a jaxpr, eval_shape shapes).
RETURNS_ARRAYS = frozenset({"jax.grad", "jax.value_and_grad", "jax.vmap", "jax.jacfwd", "jax.jacrev",
                            "jax.hessian", "jax.checkpoint", "jax.shard_map", "jax.pmap"})
CANONICAL = {
    "jax.remat": "jax.checkpoint",
    "jax.ad_checkpoint.checkpoint": "jax.checkpoint",
    "jax.ad_checkpoint.remat": "jax.checkpoint",
    "jax.experimental.shard_map.shard_map": "jax.shard_map",
    "jax.tree_util.tree_map": "jax.tree.map",
    "jax.tree_map": "jax.tree.map",
    "jax.config.config.update": "jax.config.update",
}
JAX_ARRAY_PREFIXES = ("jax.numpy.", "jax.random.", "jax.lax.", "jax.nn.", "jax.scipy.", "jax.image.")
JAX_ARRAY_FUNCS = frozenset({
    "jax.device_put", "jax.device_put_replicated", "jax.device_put_sharded", "jax.tree.map",
    "jax.block_until_ready", "jax.make_array_from_callback", "jax.make_array_from_process_local_data",
    "jax.make_array_from_single_device_arrays",
})
JAX_NON_ARRAY = frozenset({
    "jax.numpy.shape", "jax.numpy.ndim", "jax.numpy.size", "jax.numpy.dtype", "jax.numpy.result_type",
    "jax.numpy.issubdtype", "jax.numpy.iinfo", "jax.numpy.finfo", "jax.numpy.promote_types",
    "jax.numpy.can_cast", "jax.lax.axis_index",
})
# Array attributes that live on the host (metadata): reading them never syncs.
HOST_ATTRS = frozenset({
    "shape", "dtype", "ndim", "size", "nbytes", "itemsize", "sharding", "device", "devices",
    "weak_type", "aval", "committed", "is_fully_addressable", "is_fully_replicated", "format",
})
HOST_METHODS = {"item": "scalar", "tolist": "list", "is_deleted": "scalar", "devices": None,
                "on_device_size_in_bytes": "scalar", "addressable_data": "jax", "copy_to_host_async": None}
NUMPY_NON_ARRAY = frozenset({"numpy.shape", "numpy.ndim", "numpy.size", "numpy.dtype", "numpy.prod",
                             "numpy.iinfo", "numpy.finfo", "numpy.issubdtype"})
SCALAR_BUILTINS = frozenset({"float", "int", "bool", "complex", "len", "sum", "max", "min", "abs", "round"})
ARRAY_TYPES = frozenset({"jax.Array", "jax.numpy.ndarray"})  # not ArrayLike: that admits NumPy
HOST_KINDS = frozenset({"np", "scalar", "list", "hostlist"})
# Iterating a device array yields device arrays; a NumPy array or a list of host values, host data.
ELEMENT_KIND = {"jax": "jax", "np": "np", "hostlist": "np"}
LIST_BUILTINS = frozenset({"list", "tuple", "sorted", "range", "zip", "enumerate", "reversed"})


def dotted(expr: ast.AST) -> str | None:
    """`self.step` -> "self.step": the raw name, for matching call sites to assignments."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def literal_ints(node: ast.AST | None) -> frozenset[int] | None:
    """`0`, `(0, 1)`, `[2]` -> the ints; None when not a literal (then rules must not guess)."""
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List)):
        out = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, int)):
                return None
            out.add(elt.value)
        return frozenset(out)
    return None


def literal_strs(node: ast.AST | None) -> frozenset[str] | None:
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List)):
        out = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            out.add(elt.value)
        return frozenset(out)
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


@dataclass
class JitInfo:
    """How a jitted callable was made; `None` sets mean "not a literal, unknown"."""

    node: ast.AST
    params: tuple[str, ...] | None = None
    donate_argnums: frozenset[int] | None = frozenset()
    donate_argnames: frozenset[str] | None = frozenset()
    static_argnums: frozenset[int] | None = frozenset()
    static_argnames: frozenset[str] | None = frozenset()

    @classmethod
    def from_keywords(cls, node: ast.AST, keywords: list[ast.keyword]) -> JitInfo:
        info = cls(node=node)
        for kw in keywords:
            if kw.arg in ("donate_argnums", "static_argnums"):
                setattr(info, kw.arg, literal_ints(kw.value))
            elif kw.arg in ("donate_argnames", "static_argnames"):
                setattr(info, kw.arg, literal_strs(kw.value))
            elif kw.arg is None:  # **kwargs: anything could be donated
                info.donate_argnums = None
        return info

    @property
    def donation_known(self) -> bool:
        return self.donate_argnums is not None and self.donate_argnames is not None

    def donated_positions(self) -> frozenset[int]:
        """Positions donated, with names mapped through the signature as JAX itself does."""
        out = set(self.donate_argnums or ())
        if self.params and self.donate_argnames:
            out.update(i for i, p in enumerate(self.params) if p in self.donate_argnames)
        return frozenset(out)

    def static_positions(self) -> frozenset[int]:
        out = set(self.static_argnums or ())
        if self.params and self.static_argnames:
            out.update(i for i, p in enumerate(self.params) if p in self.static_argnames)
        return frozenset(out)

    def static_names(self) -> frozenset[str]:
        out = set(self.static_argnames or ())
        if self.params:
            out.update(self.params[i] for i in (self.static_argnums or ()) if 0 <= i < len(self.params))
        return frozenset(out)


@dataclass
class Scope:
    """A function body (or the module): the unit of the flow-insensitive kind guesses."""

    node: ast.AST
    parent: Scope | None
    analysis: Analysis
    params: tuple[str, ...] = ()
    jit: JitInfo | None = None
    jitted: bool = False  # compiled: jit, pmap, or a lax control-flow body (possibly nested)
    traced: bool = False  # any transform (grad, vmap, ...): values are tracers, not arrays
    assigns: list[tuple[ast.AST, ast.AST, bool]] = field(default_factory=list)
    has_loops: bool = False  # only loops can read a name before its binding in source order
    _kinds: dict[str, str | None] | None = None

    def kinds(self) -> dict[str, str]:
        if self._kinds is None:
            self._kinds = {}
            if self.traced:
                static = self.jit.static_names() if self.jit else frozenset()
                for p in self.params:
                    if p not in static and p not in ("self", "cls"):
                        self._kinds[p] = "jax"
            args = getattr(self.node, "args", None)
            if isinstance(args, ast.arguments):
                # `x: jax.Array` (also `jax.Array | None`): the author says it is a device array.
                for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    if a.annotation is not None and self.analysis.annotates_array(a.annotation):
                        self._kinds[a.arg] = "jax"
            # The last binding in source order wins: straight-line re-binding (`x = jnp.ones(3)`
            # then `x = to_host(x)`) ends unknown, as it should. In a loop a name can be read
            # before its binding (`total = total + loss` above `loss = step(...)`): a second
            # round settles those.
            for _ in range(2 if self.has_loops else 1):
                for target, value, is_iter in self.assigns:
                    if is_iter:
                        self._bind_iter(target, value)
                    else:
                        self._bind(target, self.analysis.kind(value, self))
        return self._kinds

    def _bind(self, target: ast.AST, k: str | None) -> None:
        if isinstance(target, ast.Name):
            self._kinds[target.id] = k  # None: bound here, kind unknown (shadows outer scopes)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind(elt.value if isinstance(elt, ast.Starred) else elt, k)

    def _bind_iter(self, target: ast.AST, it: ast.AST) -> None:
        """Loop targets: rows of an array, items of a host list, through zip/enumerate."""
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate")
                and it.func.id not in self.analysis.aliases and it.args):
            parts = list(it.args) if it.func.id == "zip" else [None, it.args[0]]
            if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(parts):
                for t, p in zip(target.elts, parts):
                    if p is None:
                        self._bind(t, None)
                    else:
                        self._bind_iter(t, p)
            else:
                self._bind(target, None)
            return
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys", "values"):
            # Dict methods on a pytree: keys are host strings, values have the dict's kind.
            recv = self.analysis.kind(it.func.value, self)
            self._bind(target, None)
            if it.func.attr == "values" and recv == "jax":
                self._bind(target, "jax")
            elif (it.func.attr == "items" and recv == "jax" and isinstance(target, (ast.Tuple, ast.List))
                    and len(target.elts) == 2):
                self._bind(target.elts[1], "jax")
            return
        self._bind(target, ELEMENT_KIND.get(self.analysis.kind(it, self)))

    def lookup(self, name: str) -> str | None:
        scope: Scope | None = self
        while scope is not None:
            kinds = scope.kinds()
            if name in kinds:
                return kinds[name]
            scope = scope.parent
        return None


class Analysis:
    """Module facts; built by `build(tree)` in one recursive pass."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.tree = tree
        self.lines = lines
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.jitted: dict[str, JitInfo] = {}  # dotted name at call sites -> info
        self.jit_factories: dict[str, JitInfo] = {}  # `my_jit = partial(jax.jit, ...)`
        self.jitted_defs: dict[ast.AST, JitInfo] = {}  # FunctionDef -> info, when jitted
        self.compiled_defs: set[str] = set()  # names passed to lax.scan & co
        self.traced_defs: set[str] = set()  # names passed to grad, vmap, ...
        self.wrapped_jit: dict[str, JitInfo] = {}  # `step = jax.jit(train_step)`: "train_step" -> info
        self.scopes: dict[ast.AST, Scope] = {}
        self.module_scope = Scope(tree, None, self)
        self.scopes[tree] = self.module_scope
        self.imports_jax_line: int | None = None
        # Rules ask for the same call's name many times; the tree outlives this cache, so ids are stable.
        self._qcache: dict[int, str | None] = {}
        self._bound: dict[str, JitInfo | None] = {}
        self._jcache: dict[int, JitInfo | None] = {}
        self._returns: dict[ast.AST, str | None] = {}

    # ---- names -------------------------------------------------------------------------
    def qualname(self, expr: ast.AST) -> str | None:
        """`jnp.zeros` -> "jax.numpy.zeros" when `jnp` is an import alias; else None."""
        key = id(expr)
        if key in self._qcache:
            return self._qcache[key]
        q = self._qcache[key] = self._qualname(expr)
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
                   for n in ast.walk(annotation))

    def is_jit(self, expr: ast.AST) -> bool:
        return self.qualname(expr) in JIT_NAMES

    def jit_from_call(self, call: ast.Call, scope: Scope | None = None) -> tuple[JitInfo, ast.AST | None] | None:
        """A call that makes a jitted function: returns its info and the wrapped expression."""
        func = call.func
        if self.is_jit(func):
            info = JitInfo.from_keywords(call, call.keywords)
            return info, (call.args[0] if call.args else None)
        if isinstance(func, ast.Name) and func.id in self.jit_factories:
            base = self.jit_factories[func.id]
            info = JitInfo.from_keywords(call, call.keywords)
            for attr in ("donate_argnums", "donate_argnames", "static_argnums", "static_argnames"):
                if not getattr(info, attr):
                    setattr(info, attr, getattr(base, attr))
            return info, (call.args[0] if call.args else None)
        # partial(jax.jit, ...)(g)
        if isinstance(func, ast.Call):
            factory = self.jit_factory(func)
            if factory is not None:
                info = JitInfo.from_keywords(call, [*func.keywords, *call.keywords])
                return info, (call.args[0] if call.args else None)
        return None

    def jit_factory(self, call: ast.Call) -> JitInfo | None:
        """`functools.partial(jax.jit, **kw)` or `jax.jit(**kw)` with no function: a decorator maker."""
        if self.qualname(call.func) == "functools.partial" and call.args and self.is_jit(call.args[0]):
            return JitInfo.from_keywords(call, call.keywords)
        if self.is_jit(call.func) and not call.args:
            return JitInfo.from_keywords(call, call.keywords)
        return None

    def params_of(self, wrapped: ast.AST | None) -> tuple[str, ...] | None:
        if isinstance(wrapped, ast.Lambda):
            return tuple(a.arg for a in [*wrapped.args.posonlyargs, *wrapped.args.args])
        name = dotted(wrapped) if wrapped is not None else None
        if name is None:
            return None
        bound = name.startswith(("self.", "cls."))
        fn = self.functions.get(name.rsplit(".", 1)[-1] if bound else name)
        if fn is None:
            return None
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        return params[1:] if bound and params else params

    def jit_info(self, func: ast.AST) -> JitInfo | None:
        """The jitted callable a call site invokes, if known (cached per node: rules ask often)."""
        key = id(func)
        if key in self._jcache:
            return self._jcache[key]
        info = self._jcache[key] = self._jit_info(func)
        return info

    def _jit_info(self, func: ast.AST) -> JitInfo | None:
        name = dotted(func)
        if name is not None:
            info = self.jitted.get(name)
            if info is not None:
                return info
            if name.startswith(("self.", "cls.")) and name.count(".") == 1:
                return self._bound_method(name)
        if isinstance(func, ast.Call):
            made = self.jit_from_call(func)
            if made is not None:
                info, wrapped = made
                info.params = self.params_of(wrapped)
                return info
        return None

    def _bound_method(self, name: str) -> JitInfo | None:
        """`self.step(...)` for `@jax.jit def step(self, ...)`: positions shift past `self`."""
        if name in self._bound:
            return self._bound[name]
        base = self.jitted.get(name.split(".", 1)[1])
        info = None
        if base is not None and base.params and base.params[0] in ("self", "cls"):
            def shift(nums):
                return None if nums is None else frozenset(i - 1 for i in nums if i > 0)
            info = JitInfo(base.node, base.params[1:], shift(base.donate_argnums), base.donate_argnames,
                           shift(base.static_argnums), base.static_argnames)
        self._bound[name] = info
        return info

    def return_kind(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        """Kind of what a plain (unjitted) module function returns: `jax` if any return is."""
        if fn in self._returns:
            return self._returns[fn]
        self._returns[fn] = None  # recursion guard
        scope = self.scopes.get(fn)
        kinds = set()
        stack = list(fn.body)
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Return) and n.value is not None and scope is not None:
                kinds.add(self.kind(n.value, scope))
            elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, (ast.stmt, ast.excepthandler)))
        k = "jax" if "jax" in kinds else ("np" if kinds == {"np"} else None)
        self._returns[fn] = k
        return k

    # ---- kinds --------------------------------------------------------------------------
    def kind(self, expr: ast.AST, scope: Scope) -> str | None:
        """"jax" (device array or pytree of them), "np" (NumPy array), "scalar", "hostlist" (a list
        known to hold host values), "list" (contents unknown), or None (unknown)."""
        t = type(expr)
        if t is ast.Name:
            return scope.lookup(expr.id)
        if t is ast.Call:
            return self._call_kind(expr, scope)
        if t is ast.Subscript:
            k = self.kind(expr.value, scope)
            return k if k in ("jax", "np") else None
        if t is ast.Attribute:
            if expr.attr in HOST_ATTRS:
                return None
            k = self.kind(expr.value, scope)
            return k if k in ("jax", "np") else None
        if t is ast.BinOp:
            left, right = self.kind(expr.left, scope), self.kind(expr.right, scope)
            for k in ("jax", "np"):
                if k in (left, right):
                    return k
            return "scalar" if left == right == "scalar" else None
        if t is ast.Constant:
            return "scalar" if isinstance(expr.value, (int, float, complex)) and not isinstance(expr.value, bool) else None
        if t in (ast.List, ast.Tuple):
            kinds = {self.kind(e, scope) for e in expr.elts}
            if "jax" in kinds:
                return "jax"
            return "hostlist" if kinds and kinds <= HOST_KINDS else "list"
        if t in (ast.ListComp, ast.GeneratorExp):
            k = self.kind(expr.elt, scope)
            return "jax" if k == "jax" else "hostlist" if k in HOST_KINDS else "list"
        if t is ast.UnaryOp:
            return self.kind(expr.operand, scope)
        if t is ast.IfExp:
            return self.kind(expr.body, scope) or self.kind(expr.orelse, scope)
        if t is ast.Starred or t is ast.Await:
            return self.kind(expr.value, scope)
        return None

    def _call_kind(self, call: ast.Call, scope: Scope) -> str | None:
        func = call.func
        q = self.qualname(func)
        if q is not None:
            if q in JAX_ARRAY_FUNCS or (q.startswith(JAX_ARRAY_PREFIXES) and q not in JAX_NON_ARRAY):
                return "jax"
            if q == "jax.device_get":
                return "np"
            if q.startswith("numpy.") and q not in NUMPY_NON_ARRAY:
                return "np"
        if isinstance(func, ast.Name) and func.id not in self.aliases and func.id not in self.functions:
            if func.id in SCALAR_BUILTINS:
                return "scalar"
            if func.id in LIST_BUILTINS:
                return "list"
        if self.jit_info(func) is not None:
            return "jax"
        if isinstance(func, ast.Name) and func.id in self.functions and func.id not in self.aliases:
            return self.return_kind(self.functions[func.id])
        if isinstance(func, ast.Call) and self.qualname(func.func) in RETURNS_ARRAYS:
            return "jax"  # jax.grad(f)(x), jax.vmap(f)(x)
        if isinstance(func, ast.Attribute):
            recv = self.kind(func.value, scope)
            if recv in ("jax", "np"):
                if func.attr in ("items", "keys", "values", "get") and recv == "jax":
                    return None if func.attr != "get" else "jax"
                if func.attr in HOST_METHODS:
                    return HOST_METHODS[func.attr]
                return recv
        return None


class _Builder:
    """One recursive pass: imports, functions, jitted callables, per-scope assignments."""

    _methods: dict[type, object] = {}  # node class -> unbound visit function (or generic_visit)

    def __init__(self, analysis: Analysis):
        self.a = analysis
        self.scope = analysis.module_scope

    def visit(self, node: ast.AST) -> None:
        cls = node.__class__
        fn = self._methods.get(cls)
        if fn is None:
            fn = self._methods[cls] = getattr(_Builder, f"visit_{cls.__name__}", _Builder.generic_visit)
        fn(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        for name in _FIELDS.get(node.__class__) or fields(node.__class__):
            v = getattr(node, name, None)
            if v is None:
                continue
            if v.__class__ is list:
                for item in v:
                    if item.__class__ not in LEAVES and isinstance(item, ast.AST):
                        visit(item)
            elif v.__class__ not in LEAVES and isinstance(v, ast.AST):
                visit(v)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # A dotted chain holds nothing this pass records except what sits at its base.
        base = node.value
        while base.__class__ is ast.Attribute:
            base = base.value
        if base.__class__ not in LEAVES:
            self.visit(base)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.a.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.a.aliases[top] = top
            if alias.name.split(".")[0] == "jax" and self.a.imports_jax_line is None:
                self.a.imports_jax_line = node.lineno

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None or node.level:
            return
        for alias in node.names:
            self.a.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        if node.module.split(".")[0] == "jax" and self.a.imports_jax_line is None:
            self.a.imports_jax_line = node.lineno

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        params = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        scope = Scope(node, self.scope, self.a, params=params,
                      jitted=self.scope.jitted, traced=self.scope.traced)
        self.a.scopes[node] = scope
        if not isinstance(node, ast.Lambda):
            self.a.functions[node.name] = node
            for dec in node.decorator_list:
                info = self._decorator_jit(dec, node)
                if info is not None:
                    self.a.jitted_defs[node] = info
                    self.a.jitted[node.name] = info
                    scope.jit = info
                    scope.jitted = scope.traced = True
                elif self._decorator_traces(dec):
                    scope.traced = True
            self.visit_list(node.decorator_list)
        for d in [*args.defaults, *args.kw_defaults]:
            if d is not None:
                self.visit(d)
        prev, self.scope = self.scope, scope
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        else:
            self.visit_list(node.body)
        self.scope = prev

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_list(self, nodes: list[ast.AST]) -> None:
        for n in nodes:
            self.visit(n)

    def _decorator_jit(self, dec: ast.AST, fn: ast.AST) -> JitInfo | None:
        params = self.a.params_of(ast.Name(fn.name))
        info = None
        if self.a.is_jit(dec):
            info = JitInfo(node=dec)
        elif isinstance(dec, ast.Name) and dec.id in self.a.jit_factories:
            base = self.a.jit_factories[dec.id]
            info = JitInfo(dec, None, base.donate_argnums, base.donate_argnames,
                           base.static_argnums, base.static_argnames)
        elif isinstance(dec, ast.Call):
            info = self.a.jit_factory(dec)
        if info is not None:
            info.params = params
        return info

    def _decorator_traces(self, dec: ast.AST) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        q = self.a.qualname(target)
        if q == "functools.partial" and isinstance(dec, ast.Call) and dec.args:
            q = self.a.qualname(dec.args[0])
        return q in TRACING_NAMES

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.scope.assigns.append((target, node.value, False))
        self._maybe_jit_assignment(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.scope.assigns.append((node.target, node.value, False))
            self._maybe_jit_assignment([node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.scope.assigns.append((node.target, ast.BinOp(node.target, node.op, node.value), False))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.scope.assigns.append((node.target, node.value, False))
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self.scope.assigns.append((node.target, node.iter, True))
        self.scope.has_loops = True
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        self.scope.has_loops = True
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.scope.assigns.append((node.target, node.iter, True))
        self.generic_visit(node)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.scope.assigns.append((item.optional_vars, item.context_expr, False))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        q = self.a.qualname(node.func)
        if q in TRACING_NAMES or q in JIT_NAMES:
            bodies = node.args[:3] if q in ("jax.lax.cond", "jax.lax.switch", "jax.lax.fori_loop", "jax.lax.while_loop") else node.args[:1]
            for arg in bodies:
                for elt in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]):
                    name = dotted(elt)
                    if name:
                        (self.a.compiled_defs if q in COMPILED_BODY_NAMES or q in JIT_NAMES
                         else self.a.traced_defs).add(name.rsplit(".", 1)[-1])
        self.generic_visit(node)

    def _maybe_jit_assignment(self, targets: list[ast.AST], value: ast.AST) -> None:
        if not isinstance(value, ast.Call):
            return
        q = self.a.qualname(value.func)
        if q == "functools.partial" or (q in JIT_NAMES and not value.args):
            factory = self.a.jit_factory(value)
            if factory is not None:
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.a.jit_factories[t.id] = factory
                return
        made = self.a.jit_from_call(value)
        if made is None:
            # Module-level aliases: `jit = jax.jit`, `np_ = numpy`: resolve through them too.
            return
        info, wrapped = made
        info.params = self.a.params_of(wrapped)
        if wrapped is not None and dotted(wrapped):
            self.a.wrapped_jit[dotted(wrapped).rsplit(".", 1)[-1]] = info
        for t in targets:
            name = dotted(t)
            if name:
                self.a.jitted[name] = info
                # Call sites often use the bare attribute (`self.step` defined, `trainer.step` used).
                if "." in name:
                    self.a.jitted.setdefault(name.rsplit(".", 1)[-1], info)


def _mark_compiled(a: Analysis) -> None:
    """Functions wrapped by name (`jax.jit(g)`, `lax.scan(body, ...)`) are compiled or traced."""
    for fn_node, scope in list(a.scopes.items()):
        name = getattr(fn_node, "name", None)
        if name is None:
            continue
        if name in a.compiled_defs:
            scope.jitted = scope.traced = True
            if scope.jit is None:
                scope.jit = a.wrapped_jit.get(name)
        elif name in a.traced_defs:
            scope.traced = True
    # Nested functions inherit from their (now possibly compiled) parents.
    for scope in a.scopes.values():
        p = scope.parent
        while p is not None:
            scope.jitted |= p.jitted
            scope.traced |= p.traced
            p = p.parent


def build(tree: ast.Module, lines: list[str]) -> Analysis:
    a = Analysis(tree, lines)
    # Imports first: decorators and assignments below may refer to names imported later in
    # the walk order (imports inside functions, or after use in a notebook cell).
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _Builder(a).visit(node)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            q = a.qualname(node.value)
            if q is not None and isinstance(node.value, (ast.Attribute, ast.Name)):
                a.aliases[node.targets[0].id] = q
    _Builder(a).visit(tree)
    # Wrapped functions defined after the wrapping call get their parameters now.
    for info in a.jitted.values():
        if info.params is None and isinstance(info.node, ast.Call) and info.node.args:
            info.params = a.params_of(info.node.args[0])
    _mark_compiled(a)
    return a
