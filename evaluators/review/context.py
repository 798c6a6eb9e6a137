"""What every rule needs to know about a module, computed once per file.

`Analysis` resolves import aliases once (`import jax.numpy as jnp`, `from flax import nnx`) and
records every name binding per scope with its position, so a name is resolved the way Python
resolves it: in the enclosing function first, then outwards, and to the binding that reaches
the use in source order (`loss = loss.item()` reads the array, not the float it becomes). On
top of that it knows:

- jitted callables however they were made: decorators, `functools.partial(jax.jit, ...)`,
  `f = jax.jit(g)`, jit factories (also one that returns a `@jax.jit` inner def, stored on
  `self`), methods and `self.f = jax.jit(...)` attributes, and the jit wrappers of Flax NNX,
  Equinox and Haliax; an attribute is never matched by name on an instance of a library class;
- traced code: bodies given to jit, grad, vmap, `lax` control flow (also through
  `functools.partial`), `custom_vjp`/`custom_jvp` rules, `pallas_call` kernels, Flax/Haiku
  Module methods and initializers, and module functions that only compiled code calls;
- guesses of which names hold device arrays, NumPy arrays or host lists ("kinds"), flow-
  sensitive within a function and cheap: no fixpoint, good enough for lint rules that only
  need "likely a device array here" (`jax.tree.map(np.asarray, t)` is NumPy, an item of a list
  or deque filled by `.append(device_array)` is a device array, `range` gives Python ints).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from jaxmem.evaluators.review.astutil import _FIELDS, LEAVES, fields

# ---- what the frameworks call things -----------------------------------------------------
JIT_NAMES = frozenset({
    "jax.jit", "jax.pmap", "jax.experimental.pjit.pjit", "jax.pjit",
    "flax.nnx.jit", "flax.nnx.pmap", "equinox.filter_jit", "equinox.filter_pmap", "haliax.named_jit",
    # Objax: `objax.Jit(f, vars)` and `objax.Parallel(f, vars)` compile `f` (jit / pmap) and return
    # a module whose calls give device arrays; neither takes a donation argument.
    "objax.Jit", "objax.Parallel",
})
# Control flow and staging primitives whose function arguments are compiled into one program,
# called inside or outside jit. Values: the positions of the function arguments.
COMPILED_BODIES: dict[str, tuple[int, ...]] = {
    "jax.lax.scan": (0,), "jax.lax.fori_loop": (2,), "jax.lax.while_loop": (0, 1), "jax.lax.cond": (1, 2),
    "jax.lax.switch": (1,), "jax.lax.map": (0,), "jax.lax.associative_scan": (0,),
    "jax.shard_map": (0,), "jax.experimental.pallas.pallas_call": (0,),
    "flax.nnx.scan": (0,), "flax.nnx.fori_loop": (2,), "flax.nnx.while_loop": (0, 1), "flax.nnx.cond": (1, 2),
    "flax.nnx.switch": (1,), "flax.nnx.shard_map": (0,),
    "flax.linen.scan": (0,), "flax.linen.while_loop": (0, 1), "flax.linen.cond": (1, 2), "flax.linen.switch": (1,),
    "haliax.scan": (0,), "haliax.fold": (0,), "haliax.map": (0,),
    "equinox.internal.while_loop": (0, 1), "equinox.internal.scan": (0,),
}
CONTROL_FLOW = frozenset(k for k in COMPILED_BODIES if not k.endswith(("shard_map", "pallas_call")))
PALLAS = "jax.experimental.pallas.pallas_call"
# Transforms whose function argument is traced (values are tracers), without being compiled on
# their own.
TRACING_NAMES = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.checkpoint", "jax.jacfwd", "jax.jacrev",
    "jax.hessian", "jax.linearize", "jax.jvp", "jax.vjp", "jax.eval_shape", "jax.make_jaxpr",
    "jax.custom_jvp", "jax.custom_vjp", "jax.named_call",
    "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.nnx.vmap", "flax.nnx.remat", "flax.nnx.checkpoint",
    "flax.nnx.eval_shape", "flax.nnx.custom_vjp", "flax.nnx.jvp", "flax.nnx.vjp",
    "flax.linen.jit", "flax.linen.vmap", "flax.linen.remat", "flax.linen.checkpoint", "flax.linen.named_call",
    "flax.linen.custom_vjp", "flax.linen.map_variables", "flax.linen.compact", "flax.linen.nowrap",
    "equinox.filter_grad", "equinox.filter_value_and_grad", "equinox.filter_vmap", "equinox.filter_eval_shape",
    "equinox.filter_checkpoint", "equinox.filter_custom_vjp", "equinox.filter_custom_jvp",
    "equinox.filter_make_jaxpr", "equinox.filter_shard_map",
    "haliax.vmap", "haliax.named_call",
    "haiku.transform", "haiku.transform_with_state", "haiku.without_apply_rng", "haiku.vmap", "haiku.remat",
    "objax.Vectorize", "objax.GradValues", "objax.Grad",
}) | JIT_NAMES | frozenset(COMPILED_BODIES)
CUSTOM_RULES = frozenset({"jax.custom_jvp", "jax.custom_vjp", "flax.nnx.custom_vjp", "flax.linen.custom_vjp",
                          "equinox.filter_custom_vjp", "equinox.filter_custom_jvp"})
# Transforms whose result, when called, is arrays (make_jaxpr gives a jaxpr, eval_shape shapes).
RETURNS_ARRAYS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.checkpoint",
    "jax.shard_map", "jax.pmap", "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.nnx.vmap", "flax.nnx.remat",
    "equinox.filter_grad", "equinox.filter_value_and_grad", "equinox.filter_vmap",
})
MODULE_BASES = {"flax.linen.Module": "linen", "flax.nnx.Module": "nnx", "equinox.Module": "equinox",
                "haiku.Module": "linen", "flax.nnx.Object": "nnx"}
CANONICAL = {
    "jax.remat": "jax.checkpoint",
    "jax.ad_checkpoint.checkpoint": "jax.checkpoint",
    "jax.ad_checkpoint.remat": "jax.checkpoint",
    "jax.experimental.shard_map.shard_map": "jax.shard_map",
    "jax.experimental.pjit": "jax.experimental.pjit.pjit",
    "jax.tree_util.tree_map": "jax.tree.map",
    "jax.tree_map": "jax.tree.map",
    "jax.config.config.update": "jax.config.update",
    "haliax.partitioning.named_jit": "haliax.named_jit",
    "flax.linen.module.Module": "flax.linen.Module",
    "flax.nnx.module.Module": "flax.nnx.Module",
    "flax.nnx.transforms.compilation.jit": "flax.nnx.jit",
    "jax.experimental.pallas.core.pallas_call": PALLAS,
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
    "jax.numpy.can_cast", "jax.lax.axis_index", "jax.lax.broadcast_shapes", "jax.numpy.broadcast_shapes",
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
HOST_KINDS = frozenset({"np", "scalar", "list", "hostlist", "scalars"})
# Iterating a device array yields device arrays; a NumPy array or a list of host values, host
# data; a list of Python numbers ("scalars"), Python numbers.
ELEMENT_KIND = {"jax": "jax", "np": "np", "hostlist": "np", "scalars": "scalar"}
# Containers that start empty and are filled with `.append(x)`: reading an item gives what was put in.
EMPTY_CONTAINERS = frozenset({"collections.deque"})
APPENDERS = frozenset({"append", "appendleft", "insert"})
LIST_BUILTINS = frozenset({"list", "tuple", "sorted", "range", "zip", "enumerate", "reversed"})
PROPERTY_DECORATORS = frozenset({"property", "functools.cached_property", "cached_property"})
_END = (10**9, 0)  # position of a synthetic node: after everything


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


def pos(node: ast.AST) -> tuple[int, int]:
    line = getattr(node, "lineno", None)
    return _END if line is None else (line, node.col_offset)


def end_pos(node: ast.AST) -> tuple[int, int]:
    line = getattr(node, "end_lineno", None)
    return _END if line is None else (line, node.end_col_offset)


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
    maker: str = "jax.jit"
    donate_from: int | None = None  # equinox `donate="all"` (0) / `"all-except-first"` (1)
    exact: bool = True  # False: matched by attribute name only (another object may have it)
    wrapped: ast.AST | None = None  # the expression that was jitted, when visible

    @classmethod
    def from_keywords(cls, node: ast.AST, keywords: list[ast.keyword], maker: str = "jax.jit") -> JitInfo:
        info = cls(node=node, maker=maker)
        for kw in keywords:
            if kw.arg in ("donate_argnums", "static_argnums"):
                setattr(info, kw.arg, literal_ints(kw.value))
            elif kw.arg in ("donate_argnames", "static_argnames"):
                setattr(info, kw.arg, literal_strs(kw.value))
            elif kw.arg == "donate" and maker.startswith("equinox."):
                v = kw.value.value if isinstance(kw.value, ast.Constant) else None
                if v in ("all", "warn"):
                    info.donate_from = 0
                elif v in ("all-except-first", "warn-except-first"):
                    info.donate_from = 1
                elif v != "none":
                    info.donate_argnums = None
            elif kw.arg in ("donate_args", "donate_kwargs"):  # haliax: a pytree of flags
                info.donate_argnums = None
            elif kw.arg is None:  # **kwargs: anything could be donated
                info.donate_argnums = None
        return info

    def merged(self, base: JitInfo) -> JitInfo:
        """This call's keywords over a factory's (`my_jit = partial(jax.jit, ...)`)."""
        for attr in ("donate_argnums", "donate_argnames", "static_argnums", "static_argnames"):
            if not getattr(self, attr):
                setattr(self, attr, getattr(base, attr))
        if self.donate_from is None:
            self.donate_from = base.donate_from
        self.maker = base.maker
        return self

    @property
    def donation_known(self) -> bool:
        return self.donate_argnums is not None and self.donate_argnames is not None

    @property
    def donates_anything(self) -> bool:
        return bool(self.donate_argnums or self.donate_argnames) or self.donate_from is not None

    def donates(self, position: int) -> bool:
        return position in self.donated_positions() or (self.donate_from is not None and position >= self.donate_from)

    def donated_positions(self) -> frozenset[int]:
        """Positions donated, with names mapped through the signature as JAX itself does."""
        out = set(self.donate_argnums or ())
        if self.params and self.donate_argnames:
            out.update(i for i, p in enumerate(self.params) if p in self.donate_argnames)
        if self.donate_from is not None and self.params:
            out.update(range(self.donate_from, len(self.params)))
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

    def bound(self) -> JitInfo:
        """The same callable reached as a bound method: positions shift past `self`."""
        def shift(nums):
            return None if nums is None else frozenset(i - 1 for i in nums if i > 0)
        return JitInfo(self.node, self.params[1:] if self.params else self.params, shift(self.donate_argnums),
                       self.donate_argnames, shift(self.static_argnums), self.static_argnames, self.maker,
                       None if self.donate_from is None else max(0, self.donate_from - 1), self.exact, self.wrapped)


@dataclass
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
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    attrs: dict[str, list[Binding]] = field(default_factory=dict)  # `self.x = ...` in methods
    bases: list[ast.AST] = field(default_factory=list)


@dataclass
class Scope:
    """A function body, a class body or the module: the unit of name resolution."""

    node: ast.AST
    parent: Scope | None  # the scope names are looked up in next (class bodies are skipped)
    analysis: Analysis
    params: tuple[str, ...] = ()
    jit: JitInfo | None = None
    jitted: bool = False  # compiled: jit, pmap, or a lax control-flow body (possibly nested)
    traced: bool = False  # any transform (grad, vmap, ...): values are tracers, not arrays
    reasons: set[str] = field(default_factory=set)  # jit, control, custom, pallas, module, transform
    cls: ClassInfo | None = None  # for methods: the class they belong to
    is_class: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    loops: list[tuple[tuple[int, int], tuple[int, int], ast.AST]] = field(default_factory=list)
    per_step: ast.AST | None = None  # a call in a host loop that runs this function every step
    has_loops: bool = False
    appends: dict[str, list[ast.AST]] = field(default_factory=dict)  # `name.append(x)`: the x's

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
        bs = self.bindings.get(name)
        if not bs:
            return None
        before = None
        for b in bs:
            if b.at < p and (b.until is None or p <= b.until) and (before is None or b.at >= before.at):
                before = b
        loop = self.loop_at(p)
        back = None
        if loop is not None and not (before is not None and before.at >= loop[0]):
            # Read before its (re)binding in the loop body: the value comes from the previous
            # iteration, i.e. from the last binding in the loop.
            for b in bs:
                if loop[0] <= b.at <= loop[1] and b.at >= p and b.until is None and (back is None or b.at >= back.at):
                    back = b
        out = [b for b in (back, before) if b is not None]
        if out:
            return out
        if own and self.node is not self.analysis.tree and not self.is_class:
            return []  # a local read before assignment: nothing known
        # A name read before its binding from a function body that runs later.
        return [max((b for b in bs if b.until is None), key=lambda b: b.at, default=bs[-1])]

    def lookup(self, name: str, p: tuple[int, int] = _END) -> str | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.reaching(name, p, scope is self)
            if found is not None:
                kinds = [self.analysis.binding_kind(b, scope) for b in found]
                return "jax" if "jax" in kinds else (kinds[0] if kinds else None)
            scope = scope.parent
        return None


class Analysis:
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
        # Rules ask for the same call's name many times; the tree outlives this cache, so ids are stable.
        self._qcache: dict[int, str | None] = {}
        self._jcache: dict[int, JitInfo | None] = {}
        self._kcache: dict[int, str | None] = {}
        self._bkinds: dict[int, str | None] = {}
        self._returns: dict[ast.AST, str | None] = {}
        self._returned: dict[ast.AST, ast.AST | None] = {}

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
                stack.extend(ast.iter_child_nodes(n))
        self._returned[fn] = found
        return found

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
            s: Scope | None = scope
            while s is not None and s.cls is None:
                s = s.parent
            return s.cls if s is not None else None
        b = self.resolve(recv.id, scope, pos(recv))
        if b is not None and b.how == "assign" and b.index is None and isinstance(b.value, ast.Call):
            return self.local_class(b.value.func)
        return None

    # ---- jitted callables -----------------------------------------------------------------
    def jit_from_call(self, call: ast.Call, scope: Scope | None = None) -> tuple[JitInfo, ast.AST | None] | None:
        """A call that makes a jitted function: returns its info and the wrapped expression."""
        func = call.func
        scope = scope or self.module_scope
        q = self.qualname(func)
        if q in JIT_NAMES:
            if not call.args and not any(k.arg in ("fun", "f", "fn") for k in call.keywords):
                return None  # `jax.jit(static_argnums=...)` alone is a decorator maker
            info = JitInfo.from_keywords(call, call.keywords, q)
            return info, self._wrapped(call)
        factory = self.jit_factory_of(func, scope)
        if factory is not None:
            info = JitInfo.from_keywords(call, call.keywords, factory.maker).merged(factory)
            return info, self._wrapped(call)
        return None

    @staticmethod
    def _wrapped(call: ast.Call) -> ast.AST | None:
        if call.args:
            return call.args[0]
        return keyword(call, "fun") or keyword(call, "f") or keyword(call, "fn")

    def jit_factory(self, call: ast.Call, scope: Scope | None = None) -> JitInfo | None:
        """`functools.partial(jax.jit, **kw)` or `jax.jit(**kw)` with no function: a decorator maker."""
        q = self.qualname(call.func)
        if q == "functools.partial" and call.args:
            inner = self.qualname(call.args[0])
            if inner in JIT_NAMES:
                return JitInfo.from_keywords(call, call.keywords, inner)
            return None
        if q in JIT_NAMES and not call.args and not any(k.arg in ("fun", "f", "fn") for k in call.keywords):
            return JitInfo.from_keywords(call, call.keywords, q)
        return None

    def jit_factory_of(self, func: ast.AST, scope: Scope) -> JitInfo | None:
        """`my_jit` bound to `partial(jax.jit, ...)`, or `partial(jax.jit, ...)` written inline."""
        if isinstance(func, ast.Call):
            return self.jit_factory(func, scope)
        if isinstance(func, ast.Name):
            b = self.resolve(func.id, scope, pos(func))
            if b is not None and b.factory is not None:
                return b.factory
        return None

    def params_of(self, wrapped: ast.AST | None, scope: Scope | None = None) -> tuple[str, ...] | None:
        scope = scope or self.module_scope
        if isinstance(wrapped, ast.Lambda):
            return tuple(a.arg for a in [*wrapped.args.posonlyargs, *wrapped.args.args])
        if isinstance(wrapped, ast.Call) and self.qualname(wrapped.func) == "functools.partial" and wrapped.args:
            inner = self.params_of(wrapped.args[0], scope)
            if inner is None:
                return None
            rest = inner[len(wrapped.args) - 1:]
            bound = {k.arg for k in wrapped.keywords}
            out = []
            for p in rest:
                if p in bound:
                    break  # a keyword-bound parameter makes the rest keyword-only
                out.append(p)
            return tuple(out)
        fn = self.resolve_def(wrapped, scope) if wrapped is not None else None
        if fn is None:
            return None
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        if isinstance(wrapped, ast.Attribute) and params and params[0] in ("self", "cls"):
            return params[1:]
        return params

    def jit_info(self, func: ast.AST, scope: Scope | None = None) -> JitInfo | None:
        """The jitted callable a call site invokes, if known (cached per node: rules ask often)."""
        key = id(func)
        if key in self._jcache:
            return self._jcache[key]
        self._jcache[key] = None  # recursion guard (`f = f` chains)
        info = self._jcache[key] = self._jit_info(func, scope or self.module_scope)
        return info

    def _jit_info(self, func: ast.AST, scope: Scope) -> JitInfo | None:
        if isinstance(func, ast.Name):
            b = self.resolve(func.id, scope, pos(func))
            if b is None:
                return None
            if b.info is not None:
                return b.info
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Name) and b.value is not func:
                return self.jit_info(b.value, scope)  # `step = train_step`
            if b.how == "param":
                return self._param_jit(b)
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if self.aliases.get(func.value.id):
                return None  # a module attribute (`jax.numpy.sum`)
            cls = self.class_of_receiver(func.value, scope)
            if cls is not None:
                return self._class_jit(cls, func.attr)
            recv = self.resolve(func.value.id, scope, pos(func.value))
            if (recv is not None and recv.how == "assign" and recv.index is None and isinstance(recv.value, ast.Call)
                    and self.qualname(recv.value.func) is not None):
                return None  # `env = catch.Catch()`: an instance of a library class, not one of ours
            candidates = self.attr_jits.get(func.attr, [])
            other = self.functions.get(func.attr)
            if len(candidates) == 1 and (other is None or other in self.jitted_defs):
                c = candidates[0]
                return JitInfo(c.node, c.params, c.donate_argnums, c.donate_argnames, c.static_argnums,
                               c.static_argnames, c.maker, c.donate_from, False, c.wrapped)
            return None
        if isinstance(func, ast.Call):
            made = self.jit_from_call(func, scope)
            if made is not None:
                info, wrapped = made
                info.params = self.params_of(wrapped, scope)
                info.wrapped = wrapped
                return info
        return None

    def _param_jit(self, b: Binding) -> JitInfo | None:
        """A parameter that every call of its function in this module fills with the same kind
        of jitted callable (`train_epoch(train_step_fn, ...)` with `train_step_fn = jax.jit(...)`)."""
        fn = b.node
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        sites = [(c, s) for c, s in self.calls_by_name.get(fn.name, ()) if self.resolve_def(c.func, s) is fn]
        if not sites:
            return None
        found = None
        for call, s in sites:
            arg = keyword(call, b.name)
            if arg is None and b.name in params and params.index(b.name) < len(call.args):
                arg = call.args[params.index(b.name)]
            if arg is None or isinstance(arg, ast.Starred):
                return None
            info = self.jit_info(arg, s) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if info is None:
                return None
            found = found or info
        return JitInfo(found.node, found.params, found.donate_argnums, found.donate_argnames, found.static_argnums,
                       found.static_argnames, found.maker, found.donate_from, False, found.wrapped)

    def _class_jit(self, cls: ClassInfo, name: str, depth: int = 0) -> JitInfo | None:
        if name in cls.attrs:
            for b in reversed(cls.attrs[name]):
                if b.info is not None:
                    return b.info
            return None
        m = cls.methods.get(name)
        if m is not None:
            info = self.jitted_defs.get(m)
            if info is not None:
                return info.bound() if info.params and info.params[0] in ("self", "cls") else info
            return self._property_jit(m)
        if depth < 3:
            for base in cls.bases:
                other = self.local_class(base)
                if other is not None and other is not cls:
                    found = self._class_jit(other, name, depth + 1)
                    if found is not None:
                        return found
        return None

    def _property_jit(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> JitInfo | None:
        """`@property def step(self): return jax.jit(...)`: the attribute is a jitted callable."""
        if not any((dotted(d) or "") in PROPERTY_DECORATORS or self.qualname(d) in PROPERTY_DECORATORS
                   for d in fn.decorator_list):
            return None
        scope = self.scopes.get(fn)
        for n in ast.walk(fn):
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and scope is not None:
                made = self.jit_from_call(n.value, scope)
                if made is not None:
                    info, wrapped = made
                    info.params = self.params_of(wrapped, scope)
                    return info
        return None

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
    def binding_kind(self, b: Binding, scope: Scope) -> str | None:
        key = id(b)
        if key in self._bkinds:
            return self._bkinds[key]
        self._bkinds[key] = None  # recursion guard: `total = total + loss` in a loop
        k = self._binding_kind(b, scope)
        self._bkinds[key] = k
        return k

    def _binding_kind(self, b: Binding, scope: Scope) -> str | None:
        if b.how == "param":
            if scope.traced and b.name not in ("self", "cls") and not (
                    scope.jit is not None and b.name in scope.jit.static_names()):
                return "jax"
            ann = b.value
            return "jax" if ann is not None and self.annotates_array(ann) else None
        if b.value is None or b.how in ("def", "class", "import"):
            return None
        if b.how == "iter":
            if b.element == "index":
                return "scalar"
            if b.element == "dictvalue":
                return "jax" if self.kind(b.value, scope) == "jax" else None
            if (isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name) and b.value.func.id == "range"
                    and self.is_builtin(b.value.func, scope)):
                return "scalar"  # `for dx in range(n)`: Python ints
            return ELEMENT_KIND.get(self.kind(b.value, scope))
        if (b.index == 0 and isinstance(b.value, ast.Call)
                and self.qualname(b.value.func) in ("flax.nnx.split", "flax.nnx.graph.split")):
            return None  # the graphdef: static structure, no arrays
        return self.kind(b.value, scope)

    def kind(self, expr: ast.AST, scope: Scope) -> str | None:
        """"jax" (device array or pytree of them), "np" (NumPy array), "scalar", "hostlist" (a list
        known to hold host values), "list" (contents unknown), or None (unknown)."""
        key = id(expr)
        if key in self._kcache:
            return self._kcache[key]
        self._kcache[key] = None
        k = self._kcache[key] = self._kind(expr, scope)
        return k

    def _kind(self, expr: ast.AST, scope: Scope) -> str | None:
        t = type(expr)
        if t is ast.Name:
            return scope.lookup(expr.id, pos(expr))
        if t is ast.Call:
            return self._call_kind(expr, scope)
        if t is ast.Subscript:
            k = self.kind(expr.value, scope)
            if k in ("jax", "np"):
                return k
            if isinstance(expr.value, ast.Name):
                return self.container_item_kind(expr.value, scope)
            return None
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
            if kinds == {"scalar"}:
                return "scalars"
            return "hostlist" if kinds and kinds <= HOST_KINDS else "list"
        if t in (ast.ListComp, ast.GeneratorExp):
            k = self.kind(expr.elt, scope)
            return "jax" if k == "jax" else "scalars" if k == "scalar" else "hostlist" if k in HOST_KINDS else "list"
        if t is ast.UnaryOp:
            return self.kind(expr.operand, scope)
        if t is ast.IfExp:
            return self.kind(expr.body, scope) or self.kind(expr.orelse, scope)
        if t is ast.Starred or t is ast.Await:
            return self.kind(expr.value, scope)
        return None

    def container_item_kind(self, name: ast.Name, scope: Scope) -> str | None:
        """`stops[0]` where `stops` starts empty (`[]`, `deque(...)`) and is filled with
        `stops.append(x)`: "jax" when a device array is put in."""
        s: Scope | None = scope
        while s is not None:
            if name.id in s.bindings:
                b = s.reaching(name.id, pos(name), s is scope)
                b = b[0] if b else None
                if b is None or b.how != "assign" or b.index is not None or not self._empty_container(b.value):
                    return None
                for item in s.appends.get(name.id, ()):
                    if self.kind(item, s) == "jax":
                        return "jax"
                return None
            s = s.parent
        return None

    def _empty_container(self, value: ast.AST | None) -> bool:
        if isinstance(value, ast.List):
            return not value.elts
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Name) and value.func.id == "list" and not value.args:
                return True
            return self.qualname(value.func) in EMPTY_CONTAINERS and not value.args
        return False

    def _tree_map_kind(self, call: ast.Call, scope: Scope) -> str | None:
        """`jax.tree.map(np.asarray, tree)` gives NumPy arrays, `jax.tree.map(lambda x: x.shape,
        tree)` shapes; any other function, device arrays (as before)."""
        f = call.args[0] if call.args else keyword(call, "f")
        if isinstance(f, (ast.Name, ast.Attribute)):
            fq = self.qualname(f)
            if fq is not None and fq.startswith("numpy."):
                return None if fq in NUMPY_NON_ARRAY else "np"
        if isinstance(f, ast.Lambda):
            body = f.body
            if isinstance(body, ast.Attribute) and body.attr in HOST_ATTRS:
                return None
            if isinstance(body, ast.Call):
                bq = self.qualname(body.func)
                if bq is not None and bq.startswith("numpy."):
                    return None if bq in NUMPY_NON_ARRAY else "np"
        return "jax"

    def _call_kind(self, call: ast.Call, scope: Scope) -> str | None:
        func = call.func
        q = self.qualname(func)
        if q is not None:
            if q == "jax.tree.map":
                return self._tree_map_kind(call, scope)
            if q in JAX_ARRAY_FUNCS or (q.startswith(JAX_ARRAY_PREFIXES) and q not in JAX_NON_ARRAY):
                return "jax"
            if q == "jax.device_get":
                return "np"
            if q.startswith("numpy.") and q not in NUMPY_NON_ARRAY:
                return "np"
            return None
        if isinstance(func, ast.Name) and self.is_builtin(func, scope):
            if func.id in SCALAR_BUILTINS:
                return "scalar"
            if func.id in LIST_BUILTINS:
                return "list"
            return None
        if self.jit_info(func, scope) is not None:
            return "jax"
        if isinstance(func, ast.Name):
            fn = self.resolve_def(func, scope)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return self.return_kind(fn)
            return None
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
    """One recursive pass: imports, scopes, bindings with positions, classes, transform uses."""

    _methods: dict[type, object] = {}  # node class -> unbound visit function (or generic_visit)

    def __init__(self, analysis: Analysis):
        self.a = analysis
        self.scope = analysis.module_scope
        self.loop_depth = 0
        self.guarded = 0  # inside `if step % N ...:` within the current loop

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

    def visit_list(self, nodes: list[ast.AST]) -> None:
        for n in nodes:
            self.visit(n)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # A dotted chain holds nothing this pass records except what sits at its base.
        base = node.value
        while base.__class__ is ast.Attribute:
            base = base.value
        if base.__class__ not in LEAVES:
            self.visit(base)

    # ---- imports --------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.a.aliases[alias.asname] = alias.name
                name = alias.asname
            else:
                name = alias.name.split(".")[0]
                self.a.aliases[name] = name
            self.scope.bind(Binding(name, "import", pos(node), node))
            if alias.name.split(".")[0] == "jax" and self.a.imports_jax_line is None:
                self.a.imports_jax_line = node.lineno

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None or node.level:
            for alias in node.names:
                self.scope.bind(Binding(alias.asname or alias.name, "import", pos(node), node))
            return
        for alias in node.names:
            name = alias.asname or alias.name
            self.a.aliases[name] = f"{node.module}.{alias.name}"
            self.scope.bind(Binding(name, "import", pos(node), node))
        if node.module.split(".")[0] == "jax" and self.a.imports_jax_line is None:
            self.a.imports_jax_line = node.lineno

    # ---- functions and classes --------------------------------------------------------------
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        all_args = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        cls = self.scope.cls if self.scope.is_class else None
        lookup_parent = self.scope.parent if self.scope.is_class else self.scope
        scope = Scope(node, lookup_parent, self.a, params=params, cls=cls)
        self.a.scopes[node] = scope
        for d in [*args.defaults, *args.kw_defaults]:
            if d is not None:
                self.visit(d)
        if not isinstance(node, ast.Lambda):
            self.visit_list(node.decorator_list)
            info = None
            for dec in node.decorator_list:
                info = info or self._decorator_jit(dec, node)
                q = self._decorator_q(dec)
                if q in TRACING_NAMES:
                    scope.reasons.add("custom" if q in CUSTOM_RULES else "control" if q in CONTROL_FLOW
                                      else "jit" if q in JIT_NAMES else "transform")
            if info is not None:
                self.a.jitted_defs[node] = info
                scope.jit = info
                scope.reasons.add("jit")
            self.a.functions[node.name] = node
            binding = Binding(node.name, "def", pos(node), node, info=info)
            if cls is not None:
                cls.methods[node.name] = node
                if info is not None:
                    self.a.attr_jits.setdefault(node.name, []).append(
                        info.bound() if info.params and info.params[0] in ("self", "cls") else info)
            self.scope.bind(binding)
            if cls is not None and cls.framework is not None:
                if cls.framework == "linen" or node.name in ("__call__", "setup"):
                    scope.reasons.add("module")
        start = pos(node)
        for a in all_args:
            scope.bind(Binding(a.arg, "param", start, node, value=a.annotation))
        for a in (args.vararg, args.kwarg):
            if a is not None:
                scope.bind(Binding(a.arg, "param", start, node))
        if len(params) >= 2 and params[0] in ("key", "rng", "prng_key", "rngs") and params[1] == "shape":
            scope.reasons.add("transform")  # an initializer: called inside init, traced
        prev, self.scope = self.scope, scope
        saved_depth, self.loop_depth, self.guarded = (self.loop_depth, self.guarded), 0, 0
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        else:
            self.visit_list(node.body)
        self.scope, (self.loop_depth, self.guarded) = prev, saved_depth

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _decorator_q(self, dec: ast.AST) -> str | None:
        target = dec.func if isinstance(dec, ast.Call) else dec
        q = self.a.qualname(target)
        if q == "functools.partial" and isinstance(dec, ast.Call) and dec.args:
            q = self.a.qualname(dec.args[0])
        return q

    def _decorator_jit(self, dec: ast.AST, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> JitInfo | None:
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        info = None
        q = self.a.qualname(dec)
        if q in JIT_NAMES:
            info = JitInfo(node=dec, maker=q)
        elif isinstance(dec, ast.Call):
            info = self.a.jit_factory(dec, self.scope)
            if info is None and isinstance(dec.func, ast.Name):
                base = self.a.jit_factory_of(dec.func, self.scope)  # `@my_jit(static_argnums=1)`? rare
                if base is not None:
                    info = JitInfo.from_keywords(dec, dec.keywords, base.maker).merged(base)
        elif isinstance(dec, ast.Name):
            base = self.a.jit_factory_of(dec, self.scope)
            if base is not None:
                info = JitInfo(dec, None, base.donate_argnums, base.donate_argnames, base.static_argnums,
                               base.static_argnames, base.maker, base.donate_from)
        if info is not None:
            info.params = params
            info.wrapped = fn
        return info

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_list(node.decorator_list)
        self.visit_list(node.bases)
        info = ClassInfo(node, bases=list(node.bases))
        for base in node.bases:
            q = self.a.qualname(base)
            if q in MODULE_BASES:
                info.framework = MODULE_BASES[q]
            else:
                other = self.a.local_class(base)
                if other is not None and other.framework:
                    info.framework = other.framework
        self.a.classes[node] = info
        self.scope.bind(Binding(node.name, "class", pos(node), node))
        body = Scope(node, self.scope, self.a, cls=info, is_class=True)
        self.a.scopes[node] = body
        prev, self.scope = self.scope, body
        saved_depth, self.loop_depth, self.guarded = (self.loop_depth, self.guarded), 0, 0
        self.visit_list(node.body)
        self.scope, (self.loop_depth, self.guarded) = prev, saved_depth

    # ---- bindings -------------------------------------------------------------------------
    def _targets(self, target: ast.AST, stmt: ast.AST, value: ast.AST | None, at, how="assign",
                 index: int | None = None, element: str | None = None, until=None) -> None:
        if isinstance(target, ast.Name):
            b = Binding(target.id, how, at, stmt, value=value, index=index, element=element, until=until)
            if how == "assign" and index is None and isinstance(value, ast.Call):
                self._jit_binding(b, value)
            self.scope.bind(b)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                self._targets(elt.value if isinstance(elt, ast.Starred) else elt, stmt, value, at, how,
                              i if index is None else index, element, until)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = self._method_class()
            if cls is not None:
                b = Binding(target.attr, "assign", at, stmt, value=value, index=index)
                if index is None and isinstance(value, ast.Call):
                    self._jit_binding(b, value)
                    if b.info is not None:
                        self.a.attr_jits.setdefault(target.attr, []).append(b.info)
                    else:
                        self.pending_attrs.append(b)  # made by a factory: known after resolution
                cls.attrs.setdefault(target.attr, []).append(b)
        elif isinstance(target, ast.Starred):
            self._targets(target.value, stmt, value, at, how, index, element, until)

    def _method_class(self) -> ClassInfo | None:
        s = self.scope
        return s.cls if not s.is_class else None

    def _jit_binding(self, b: Binding, value: ast.Call) -> None:
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
            return
        info, wrapped = made
        info.wrapped = wrapped
        b.info = info
        self.pending_params.append((info, wrapped, self.scope))

    pending_params: list
    pending_returns: list
    pending_attrs: list

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        at = end_pos(node)
        for target in node.targets:
            self._targets(target, node, node.value, at)
            if not isinstance(target, ast.Name):
                self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._targets(node.target, node, node.value, end_pos(node))
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add) and isinstance(node.value, ast.List):
            self.scope.appends.setdefault(node.target.id, []).extend(node.value.elts)  # `history += [x]`
        if isinstance(node.target, ast.Name):
            load = ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.lineno, col_offset=node.col_offset)
            self.scope.bind(Binding(node.target.id, "assign", end_pos(node), node, value=ast.BinOp(load, node.op, node.value)))
        else:
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._targets(node.target, node, node.value, end_pos(node))

    def _loop(self, node: ast.AST, start, end) -> None:
        self.scope.loops.append((start, end, node))
        self.scope.has_loops = True

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._loop(node, pos(node), end_pos(node))
        self._iter_targets(node.target, node.iter, node, pos(node.target))
        self.loop_depth += 1
        saved, self.guarded = self.guarded, 0
        self.visit_list(node.body)
        self.loop_depth -= 1
        self.guarded = saved
        self.visit_list(node.orelse)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self._loop(node, pos(node), end_pos(node))
        self.loop_depth += 1
        saved, self.guarded = self.guarded, 0
        self.visit(node.test)
        self.visit_list(node.body)
        self.loop_depth -= 1
        self.guarded = saved
        self.visit_list(node.orelse)

    def _comprehension(self, node: ast.AST) -> None:
        start, end = pos(node), end_pos(node)
        self._loop(node, start, end)
        self.loop_depth += 1
        for _i, gen in enumerate(node.generators):
            self.visit(gen.iter)
            # Visible in the whole comprehension: the element is written before the `for`.
            self._iter_targets(gen.target, gen.iter, node, start, until=end)
            for cond in gen.ifs:
                self.visit(cond)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.loop_depth -= 1

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _iter_targets(self, target: ast.AST, it: ast.AST, stmt: ast.AST, at, until=None) -> None:
        """Loop targets: rows of an array, items of a host list, through zip/enumerate/items."""
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate")
                and it.func.id not in self.a.aliases and it.args and isinstance(target, (ast.Tuple, ast.List))):
            parts = list(it.args) if it.func.id == "zip" else [None, it.args[0]]
            if len(target.elts) == len(parts):
                for t, p in zip(target.elts, parts):
                    if p is None:
                        self._targets(t, stmt, None, at, "iter", element="index", until=until)
                    else:
                        self._iter_targets(t, p, stmt, at, until)
                return
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values")
                and not it.args):
            recv = it.func.value
            if it.func.attr == "values":
                self._targets(target, stmt, recv, at, "iter", element="dictvalue", until=until)
            elif isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                self._targets(target.elts[0], stmt, None, at, "iter", until=until)
                self._targets(target.elts[1], stmt, recv, at, "iter", element="dictvalue", until=until)
            else:
                self._targets(target, stmt, None, at, "iter", until=until)
            return
        self._targets(target, stmt, it, at, "iter", element="elem", until=until)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._targets(item.optional_vars, node, item.context_expr, end_pos(item.optional_vars))
        self.visit_list(node.body)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(Binding(node.name, "assign", pos(node), node))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        q = self.a.qualname(node.func)
        if q in TRACING_NAMES:
            positions = COMPILED_BODIES.get(q, (0,))
            for i in positions:
                if i < len(node.args):
                    self.a.transform_args.append((node.args[i], q, self.scope))
            for kw in node.keywords:
                if kw.arg in ("f", "fun", "fn", "body_fun", "cond_fun", "true_fun", "false_fun", "branches", "kernel"):
                    self.a.transform_args.append((kw.value, q, self.scope))
        elif isinstance(node.func, ast.Call) and self.a.jit_factory(node.func, self.scope) is not None and node.args:
            self.a.transform_args.append((node.args[0], self.a.jit_factory(node.func, self.scope).maker, self.scope))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in ("defvjp", "defjvp", "defjvps")
              and node.args):
            self.a.defvjp.append((node, self.scope))
        if isinstance(node.func, ast.Name):
            self.a.calls_by_name.setdefault(node.func.id, []).append((node, self.scope))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in APPENDERS and node.args
              and isinstance(node.func.value, ast.Name)):
            self.scope.appends.setdefault(node.func.value.id, []).append(node.args[-1])
        if self.loop_depth and not self.scope.is_class:
            self.a.loop_calls.append((node, self._innermost_loop(node), self.scope, self.guarded > 0))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        periodic = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(node.test))
        self.guarded += periodic
        self.visit_list(node.body)
        self.guarded -= periodic
        self.visit_list(node.orelse)

    def _innermost_loop(self, node: ast.AST) -> ast.AST | None:
        found = self.scope.loop_at(pos(node))
        return found[2] if found else None


def _mark_traced(a: Analysis) -> None:
    """Functions given to jit, grad, lax control flow, custom rules or pallas_call are traced."""
    for expr, q, scope in a.transform_args:
        reason = ("custom" if q in CUSTOM_RULES else "pallas" if q == PALLAS else "control" if q in CONTROL_FLOW
                  else "jit" if q in JIT_NAMES or q in ("jax.shard_map", "flax.nnx.shard_map") else "transform")
        for fn in _functions_in(a, expr, scope):
            s = a.scopes.get(fn)
            if s is not None:
                s.reasons.add(reason)
    for call, scope in a.defvjp:
        for arg in call.args:
            for fn in _functions_in(a, arg, scope):
                s = a.scopes.get(fn)
                if s is not None:
                    s.reasons.add("custom")
    for _node, scope in a.scopes.items():
        if scope.reasons:
            scope.traced = True
            scope.jitted = bool(scope.reasons & {"jit", "control", "pallas"})
    _inherit(a)
    # A module function that is only ever called from compiled code (`fold(state)` inside a
    # `lax.fori_loop` body) is compiled with it; two rounds reach a helper of a helper.
    for _ in range(2):
        if not _called_only_when_traced(a):
            break
        _inherit(a)


def _inherit(a: Analysis) -> None:
    """Nested functions inherit from their (now possibly compiled) parents."""
    for _node, scope in a.scopes.items():
        p = scope.parent
        while p is not None:
            scope.jitted |= p.jitted
            scope.traced |= p.traced
            p = p.parent


def _called_only_when_traced(a: Analysis) -> bool:
    names = {c.func.id for calls in a.calls_by_name.values() for c, s in calls if s.jitted}
    if not names:
        return False
    sites: dict[ast.AST, list[Scope]] = {}
    for name in names:
        for call, s in a.calls_by_name.get(name, ()):
            fn = a.resolve_def(call.func, s)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sites.setdefault(fn, []).append(s)
    changed = False
    for fn, callers in sites.items():
        scope = a.scopes.get(fn)
        # Compiled callers only: under grad or vmap alone a Python loop still runs on the host.
        if scope is None or scope.traced or not all(c.jitted for c in callers):
            continue
        scope.traced = scope.jitted = True
        scope.reasons.add("callee")
        changed = True
    return changed


def _functions_in(a: Analysis, expr: ast.AST, scope: Scope, depth: int = 0) -> list[ast.AST]:
    """The local functions an argument refers to: a name, a lambda, `partial(f, ...)`, a list."""
    if depth > 3:
        return []
    if isinstance(expr, (ast.List, ast.Tuple)):
        return [f for e in expr.elts for f in _functions_in(a, e, scope, depth + 1)]
    if isinstance(expr, ast.Call) and a.qualname(expr.func) == "functools.partial" and expr.args:
        return _functions_in(a, expr.args[0], scope, depth + 1)
    if isinstance(expr, ast.Call) and a.qualname(expr.func) in TRACING_NAMES and expr.args:
        return _functions_in(a, expr.args[0], scope, depth + 1)  # jit(vmap(f))
    fn = a.resolve_def(expr, scope)
    return [fn] if fn is not None else []


def _resolve_pending(a: Analysis, builder: _Builder) -> None:
    for info, wrapped, scope in builder.pending_params:
        info.params = a.params_of(wrapped, scope)
        for fn in _functions_in(a, wrapped, scope) if wrapped is not None else ():
            s = a.scopes.get(fn)
            if s is not None and s.jit is None:
                s.jit = info
    for b, fn in builder.pending_returns:
        scope = a.scopes.get(fn)
        if scope is None:
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Call):
                made = a.jit_from_call(n.value, scope)
                if made is not None:
                    info, wrapped = made
                    info.params = a.params_of(wrapped, scope)
                    info.wrapped = wrapped
                    b.info = info
                    break
        if b.info is None:
            inner = a.returned_def(fn)  # `return _eval_fn`, a `@jax.jit` def in the factory
            if inner is not None and inner in a.jitted_defs:
                b.info = a.jitted_defs[inner]



def build(tree: ast.Module, lines: list[str]) -> Analysis:
    a = Analysis(tree, lines)
    # Imports first: decorators and assignments below may refer to names imported later in
    # the walk order (imports inside functions, or after use in a notebook cell).
    for node in _top_level(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                a.aliases.setdefault(alias.asname or alias.name.split(".")[0],
                                     alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                a.aliases.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
    for node in tree.body:
        # Module-level aliases: `jit = jax.jit`, `np_ = numpy`: resolve through them too.
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            q = a.qualname(node.value)
            if q is not None and isinstance(node.value, (ast.Attribute, ast.Name)):
                a.aliases[node.targets[0].id] = q
    builder = _Builder(a)
    builder.pending_params, builder.pending_returns, builder.pending_attrs = [], [], []
    builder.visit_list(tree.body)
    _resolve_pending(a, builder)
    for b in builder.pending_attrs:
        if b.info is not None:
            a.attr_jits.setdefault(b.name, []).append(b.info)
    _mark_traced(a)
    return a


def _top_level(tree: ast.Module):
    """Module statements, including those inside top-level `if`/`try` (guarded imports)."""
    stack = list(reversed(tree.body))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.If, ast.Try)):
            for block in (n.body, n.orelse, getattr(n, "finalbody", []), *[h.body for h in getattr(n, "handlers", [])]):
                stack.extend(reversed(block))
