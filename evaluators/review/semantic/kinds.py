"""Value kinds by data flow: device array, NumPy array, Python scalar, host list, unknown.

Two readings of the same flow. The default one guesses where the source leaves a choice (a name
bound to an array on one path and to something else on another is "jax"; a callable matched by
attribute name only is taken for the jitted one). The strict one (`strict=True`) follows only
proven steps: every reaching binding agrees, a callable resolved exactly, a function whose every
return is the kind. A rule's finding is "sure" only where the strict reading gives its premise.

Flows followed: assignment, augmented assignment, tuple unpacking (position by position where
the value is a literal tuple or a function returning one), subscripts and attributes of results
(`metrics["loss"]`, `state.params`), loop targets (rows of an array, items of a filled list, dict
values), returns of local functions, calls of jitted callables, JAX/NumPy functions, methods of
arrays, `jax.tree.map` by what its function returns, and functions of other files of the reviewed
tree (project.py).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.astutil import number_list, own_returns
from jaxmem.evaluators.review.semantic.guesses import feeds_gradients, steps_trained_state
from jaxmem.evaluators.review.semantic.inplace import inplace_on_numpy
from jaxmem.evaluators.review.semantic.names import (
    ARRAY_RESULT_METHODS,
    ELEMENT_KIND,
    EMPTY_CONTAINERS,
    GRADIENT_TRANSFORMS,
    HOST_ATTRS,
    HOST_KINDS,
    HOST_METHODS,
    JAX_ARRAY_FUNCS,
    JAX_ARRAY_PREFIXES,
    JAX_NON_ARRAY,
    LIST_BUILTINS,
    NUMPY_NON_ARRAY,
    OPTIMIZER_TRIPLES,
    REPLICATION,
    RETURNS_ARRAYS,
    SCALAR_BUILTINS,
    defers_to_array,
    elementwise_compare,
    keyword,
    numpy_returning,
    object_literal,
    pos,
)
from jaxmem.evaluators.review.semantic.scopes import Binding, Scope, callee_key
from jaxmem.evaluators.review.semantic.waited import method_kind, passed_kind, project_kind, waited_kind

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
AXIS_SIZE = frozenset({"jax.lax.psum"})
_NNX_SPLIT = ("flax.nnx.split", "flax.nnx.graph.split")
_BUSY = object()  # in a kinds cache while that kind is being worked out
# Flax NNX's metric objects: `compute()` returns device arrays (a dict of them for MultiMetric),
# from the jnp arrays the metric keeps (flax/nnx/training/metrics.py: `Average.compute -> jax.Array`).
NNX_METRICS = ("flax.nnx.MultiMetric", "flax.nnx.metrics.", "flax.nnx.training.metrics.")


class KindsMixin:
    # ---- bindings -----------------------------------------------------------------------
    def binding_kind(self, b: Binding, scope: Scope, strict: bool = False) -> str | None:
        # `total = total + loss` in a loop reads its own binding: a cycle, cut short (_cached)
        return self._cached(self._bkinds, (b, strict), self._binding_kind, b, scope, strict)

    def _cached(self, cache: dict, key: tuple, compute, *args) -> str | None:
        """`compute(*args)`, remembered. A key asked again while being worked out (a loop's value read
        back into itself) reads unknown there; what was worked out below it on that path is not
        kept (kept, it made answers depend on which rule asked first)."""
        if key in cache:
            k = cache[key]
            if k is _BUSY:
                self._khits.add(key)
                return None
            return k
        cache[key] = _BUSY
        outer, self._khits = self._khits, set()
        try:
            k = compute(*args)
        finally:
            hits = self._khits
            hits.discard(key)
            self._khits = outer | hits if hits else outer
            if hits:
                del cache[key]
            else:
                cache[key] = k
        return k

    def _binding_kind(self, b: Binding, scope: Scope, strict: bool) -> str | None:
        if b.how == "param":
            if scope.traced and b.name not in ("self", "cls") and not (
                    scope.jit is not None and b.name in scope.jit.static_names()):
                return "jax"  # a tracer; under jit, a device array at run time
            if b.node in self.mapped_lambdas:
                return self.leaf_kind(b, strict)  # `tree_map(lambda v: v.item(), metrics)`: a leaf
            return "jax" if b.value is not None and self.annotates_array(b.value) else None
        if b.value is None or b.how in ("def", "class", "import"):
            return None
        if b.how == "iter":
            if b.element == "index":
                return "scalar"
            if b.element == "dictvalue":
                return "jax" if self.kind(b.value, scope, strict) == "jax" else None
            if (isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name) and b.value.func.id == "range"
                    and self.is_builtin(b.value.func, scope)):
                return "scalar"  # `for dx in range(n)`: Python ints
            return ELEMENT_KIND.get(self.kind(self.unwrapped(b.value, scope), scope, strict))
        if b.index is not None:
            if b.index == 0 and isinstance(b.value, ast.Call) and self.qualname(b.value.func) in _NNX_SPLIT:
                return None  # the graphdef: static structure, no arrays
            shown, k = self.position_kind(b.value, b.index, scope, strict)
            if shown:
                return k
        if isinstance(b.node, ast.AugAssign) and inplace_on_numpy(self, b, scope, strict):
            return "np"  # `p += grad`: NumPy's in-place operator keeps the array NumPy (and converts grad)
        k = self.kind(b.value, scope, strict)
        if k is None and not strict and b.index is not None and isinstance(b.value, ast.Call) \
                and (feeds_gradients(self, b, scope) or steps_trained_state(b, scope)):
            return "jax"  # a sibling is handed on as gradients, or replaces trained state: guesses.py
        return k

    def optimizer_part(self, func: ast.AST, scope: Scope) -> int | None:
        """0, 1 or 2 where `func` names the init, update or get_params function unpacked from a
        `jax.example_libraries.optimizers` triple (`opt_init, opt_update, get_params = adam(lr)`)."""
        if not isinstance(func, ast.Name):
            return None
        b = self.resolve(func.id, scope, pos(func))
        if b is not None and b.how == "assign" and b.index is not None and isinstance(b.value, ast.Call) \
                and (self.qualname(b.value.func) or "").startswith(OPTIMIZER_TRIPLES):
            return b.index
        return None

    # ---- expressions --------------------------------------------------------------------
    def kind(self, expr: ast.AST, scope: Scope, strict: bool = False) -> str | None:
        """"jax" (device array or pytree of them), "np" (NumPy array), "scalar", "hostlist" (a list
        known to hold host values), "scalars" (a list of Python numbers), "list" (contents unknown),
        or None (unknown). `strict`: only what the source proves."""
        return self._cached(self._kcache, (expr, strict), self._kind, expr, scope, strict)

    def proven(self, expr: ast.AST, scope: Scope, kind: str = "jax") -> bool:
        """The strict reading gives `kind`: every step from the source to `expr` is proven."""
        return self.kind(expr, scope, True) == kind

    def _kind(self, expr: ast.AST, scope: Scope, strict: bool) -> str | None:
        t = type(expr)
        if t is ast.Name:
            return scope.lookup(expr.id, pos(expr), strict)
        if t is ast.Call:
            return self._call_kind(expr, scope, strict)
        if t is ast.Subscript:
            k = self.kind(expr.value, scope, strict)
            if k in ("jax", "np"):
                return k
            if isinstance(expr.value, ast.Name):
                return self.container_item_kind(expr.value, scope, strict)
            return None
        if t is ast.Attribute:
            if expr.attr in HOST_ATTRS:
                return None
            if scope.attr_bindings and isinstance(expr.value, ast.Name) and expr.value.id == "self":
                found = scope.attr_reaching(expr.attr, pos(expr))
                if found is not None:
                    # `self.state = new_state` earlier in this method (or later in its loop): the
                    # attribute holds what was assigned, as a local name would; with no binding
                    # that reaches the read (`self.x` read before this method sets it), unknown.
                    return scope.kind_of(found, strict)
            k = self.kind(expr.value, scope, strict)
            return k if k in ("jax", "np") else None
        if t is ast.BinOp:
            left, right = self.kind(expr.left, scope, strict), self.kind(expr.right, scope, strict)
            for k in ("jax", "np"):
                if k in (left, right):
                    return k
            return "scalar" if left == right == "scalar" else None
        if t is ast.Constant:
            return "scalar" if isinstance(expr.value, (int, float, complex)) and not isinstance(expr.value, bool) else None
        if t in (ast.List, ast.Tuple):
            kinds = {self.kind(e, scope, strict) for e in expr.elts}
            if "jax" in kinds:
                return "jax"
            if kinds == {"scalar"}:
                return "scalars"
            return "hostlist" if kinds and kinds <= HOST_KINDS else "list"
        if t in (ast.ListComp, ast.GeneratorExp):
            k = self.kind(expr.elt, scope, strict)
            return "jax" if k == "jax" else "scalars" if k == "scalar" else "hostlist" if k in HOST_KINDS else "list"
        if t is ast.UnaryOp:
            return self.kind(expr.operand, scope, strict)
        if t is ast.IfExp:
            body, orelse = self.kind(expr.body, scope, strict), self.kind(expr.orelse, scope, strict)
            if strict:
                return body if body == orelse else None
            return body or orelse
        if t is ast.Starred or t is ast.Await:
            return self.kind(expr.value, scope, strict)
        if t is ast.Compare:
            return self._compare_kind(expr, scope, strict)
        return None

    def _compare_kind(self, expr: ast.Compare, scope: Scope, strict: bool) -> str | None:
        """`g == g`, `loss < 0.5`: an array compared elementwise gives an array of booleans, on
        the device when either side is a device array and the other one an array or a number. `is`,
        `in`, a chain (`a < b < c` reads the first result as a Python bool) or a string or dict
        operand (`mode == "train"`, compared as Python objects) give no array."""
        operands = (expr.left, expr.comparators[0])
        if not elementwise_compare(expr) or any(object_literal(v) for v in operands):
            return None
        # NumPy arrays and Python numbers defer to JAX's operator; another object (a pandas column,
        # a value of unknown kind) may answer with its own.
        kinds = {self.kind(v, scope, strict) for v in operands}
        if not kinds <= {"jax", "np", "scalar"}:
            return None
        return "jax" if "jax" in kinds else "np" if "np" in kinds else None

    def container_item_kind(self, name: ast.Name, scope: Scope, strict: bool = False) -> str | None:
        """`stops[0]` where `stops` starts empty (`[]`, `deque(...)`) and is filled with
        `stops.append(x)`: "jax" when a device array is put in (strict: when every item is).
        `history[m]` where `history = {"loss": np.zeros(n), ...}`: the kind all values share."""
        s: Scope | None = scope
        while s is not None:
            if name.id in s.bindings:
                b = s.reaching(name.id, pos(name), s is scope)
                b = b[0] if b else None
                if b is not None and b.how == "assign" and b.index is None and isinstance(b.value, ast.Dict) \
                        and b.value.keys:
                    kinds = {self.kind(v, s, strict) for v in b.value.values} if None not in b.value.keys else set()
                    # Items stored or added to later (`totals[k] += loss`): a device array on some path.
                    stored = {self.binding_kind(item, s, strict) for item in s.item_sets.get(name.id, ())}
                    if not strict and "jax" in stored:
                        return "jax"
                    return kinds.pop() if len(kinds) == 1 and kinds <= {"jax", "np"} and not stored - kinds else None
                if b is None or b.how != "assign" or b.index is not None or not (
                        self._empty_container(b.value) or (not strict and number_list(b.value))):
                    return None  # `losses = [0.0]` then device losses appended: a guess (`losses[-1]`)
                kinds = [self.kind(item, s, strict) for item in s.appends.get(name.id, ())]
                kinds += [self.binding_kind(item, s, strict) for item in s.item_sets.get(name.id, ())]
                if strict:
                    return "jax" if kinds and all(k == "jax" for k in kinds) else None
                return "jax" if "jax" in kinds else None
            s = s.parent
        return None

    def _empty_container(self, value: ast.AST | None) -> bool:
        if isinstance(value, ast.List):
            return not value.elts
        if isinstance(value, ast.Dict):
            return not value.keys
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Name) and value.func.id in ("list", "dict") and not value.args:
                return True
            return self.qualname(value.func) in EMPTY_CONTAINERS and not value.args
        return False

    def _tree_map_kind(self, call: ast.Call, scope: Scope, strict: bool) -> str | None:
        """By what the mapped function returns: `np.asarray` gives NumPy arrays, `float` Python
        numbers, `lambda x: x.shape` shapes; other functions over a tree of device arrays give
        device arrays (strict: only when the tree is proven one)."""
        f = call.args[0] if call.args else keyword(call, "f")
        result = self._mapped_kind(f, scope)
        if result != "jax":
            return result
        trees = call.args[1:]
        if strict:
            return "jax" if trees and any(self.kind(t, scope, True) == "jax" for t in trees) else None
        return "jax"

    def _mapped_kind(self, f: ast.AST | None, scope: Scope) -> str | None:
        body = f.body if isinstance(f, ast.Lambda) else f
        if isinstance(body, ast.Attribute) and isinstance(f, ast.Lambda) and body.attr in HOST_ATTRS:
            return None
        func = body.func if isinstance(f, ast.Lambda) and isinstance(body, ast.Call) else (
            f if isinstance(f, (ast.Name, ast.Attribute)) else None)
        if func is None:
            return "jax"
        if isinstance(func, ast.Name) and self.is_builtin(func, scope) and func.id in SCALAR_BUILTINS:
            return "scalar"
        if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and isinstance(f, ast.Lambda):
            return "scalar"
        q = self.qualname(func)
        if q is not None and q.startswith("numpy."):
            return None if q in NUMPY_NON_ARRAY else "np"
        if q == "jax.device_get":
            return "np"
        if q in JAX_NON_ARRAY:
            return None  # `jax.tree.map(jnp.shape, tree)`: shapes
        return "jax"

    def _call_kind(self, call: ast.Call, scope: Scope, strict: bool) -> str | None:
        func = call.func
        q = self.qualname(func)
        if q is not None:
            if q == "jax.tree.map":
                return self._tree_map_kind(call, scope, strict)
            if q in AXIS_SIZE and call.args and isinstance(call.args[0], ast.Constant):
                return "scalar"  # `psum(1, axis)`: the axis size, a Python int
            if q == "jax.eval_shape":
                return None  # shapes and dtypes, no arrays
            if q == "typing.cast" and len(call.args) == 2:
                return self.kind(call.args[1], scope, strict)  # `cast(TrainState, state)` returns `state`
            if q in JAX_ARRAY_FUNCS or (q.startswith(JAX_ARRAY_PREFIXES) and q not in JAX_NON_ARRAY):
                return "jax"
            if q == "jax.device_get":
                return "np"
            if q.startswith("numpy.") and q not in NUMPY_NON_ARRAY or numpy_returning(q):
                return "jax" if defers_to_array(q, call, lambda e: self.kind(e, scope, strict)) else "np"
            if q in REPLICATION and call.args:
                # Flax's replicate puts a tree on every device; unreplicate takes shard 0 of each
                # leaf (`tree_map(lambda x: x[0], tree)`): device arrays stay device arrays.
                return "jax" if q.endswith(".replicate") else self.kind(call.args[0], scope, strict)
            return self.project_return_kind(q, strict) or (None if strict else (
                self._differentiated(func, scope) or waited_kind(self, q)))  # `lib.f(x).block_until_ready()`
        if isinstance(func, ast.Name) and self.is_builtin(func, scope):
            if func.id in SCALAR_BUILTINS:
                return "scalar"
            if func.id in LIST_BUILTINS:
                return "list"
            return None
        info = self.jit_info(func, scope)
        if info is not None:
            # A jitted callable returns device arrays; strict: only one resolved exactly, not by attribute name.
            return "jax" if info.exact or not strict else None
        if isinstance(func, ast.Name):
            fn = self.resolve_def(func, scope)
            if isinstance(fn, _FUNCS):
                return self.return_kind(fn, strict)
            if isinstance(fn, ast.Lambda):
                # `unreplicate = lambda tree: jax.tree.map(lambda x: x[0], tree)`: what its body gives
                # (its parameters unknown, so strict proves little through it).
                return self.kind(fn.body, self.scopes.get(fn, scope), strict)
            # `forward = jax.vmap(self.forward_pass)` ... `forward(params, x)`: the name holds a
            # transformed function, whose calls give arrays as the inline form does.
            b = self.resolve(func.id, scope, pos(func))
            if b is not None and b.how == "param" and not strict and passed_kind(self, b):
                return "jax"  # `solver_fn(A, b)`, every caller here passing `jax.scipy...cg` (waited.py)
            if b is not None and b.how == "assign" and b.index is None and isinstance(b.value, ast.Call):
                # `step = jax.vmap(f)`, or `step = make_step(...)` of another file returning its inner def
                made = "jax" if self.qualname(b.value.func) in RETURNS_ARRAYS else self.made_returns(b.value, strict)
                if made is not None:
                    return made
            if self.optimizer_part(func, scope) is not None:
                # `opt_init, opt_update, get_params = optimizers.adam(lr)`: each of the three
                # returns a pytree of device arrays (the state, the new state, the parameters).
                return "jax"
            return None if strict else self._differentiated(func, scope)
        if isinstance(func, ast.Call) and self.qualname(func.func) in RETURNS_ARRAYS:
            return "jax"  # jax.grad(f)(x), jax.vmap(f)(x)
        if isinstance(func, ast.Attribute):
            recv = self.kind(func.value, scope, strict)
            if recv in ("jax", "np"):
                if func.attr in ("items", "keys", "values", "get") and recv == "jax":
                    return None if func.attr != "get" else "jax"
                if func.attr in HOST_METHODS:
                    return HOST_METHODS[func.attr]
                # `result.to_dict()`: the object's own method, which may well convert: not proven
                return None if strict and recv == "jax" and func.attr not in ARRAY_RESULT_METHODS else recv
            if recv is None and func.attr == "compute" and self.made_by(func.value, scope, NNX_METRICS):
                return "jax"  # `metrics = nnx.MultiMetric(...)` ... `metrics.compute()`
            if recv is None and isinstance(func.value, ast.Name):
                # `state.train_step(x)` on `state = State.setup(cfg)`, a class of this module: what
                # the method returns, read as a local function's result is.
                fn = self.resolve_def(func, scope)
                if isinstance(fn, _FUNCS):
                    return self.return_kind(fn, strict)
            if recv is None:  # `specter.spectralEMD(x)`, a method of a class of another file of the tree
                return method_kind(self, func, scope, strict) or (None if strict else self._differentiated(func, scope))
        return None

    def _differentiated(self, func: ast.AST, scope: Scope) -> str | None:
        """`loss = problem.objective(params, batch)` where this module also differentiates
        `problem.objective` (`jit(grad(problem.objective))`), the same `problem`: a function
        jax.grad can take returns a JAX scalar, so called as it is, on the parameters, it computes
        one on the device. A guess (the default reading): pure Python arithmetic on Python numbers
        is differentiable too."""
        targets = self.memo.get("differentiated")
        if targets is None:
            targets = self.memo["differentiated"] = frozenset(
                key for expr, q, sc in self.transform_args if q in GRADIENT_TRANSFORMS
                and (key := callee_key(expr, sc)) is not None)
        key = callee_key(func, scope)
        return "jax" if key is not None and key in targets else None

    def return_kind(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, strict: bool = False) -> str | None:
        """Kind of what a plain (unjitted) local function returns: `jax` if any return is (strict:
        if every return is)."""
        key = (fn, strict)
        if key in self._returns:
            return self._returns[key]
        self._returns[key] = None  # recursion guard
        scope = self.scopes.get(fn)
        kinds = [self.kind(r.value, scope, strict) for r in own_returns(fn) if r.value is not None] if scope else []
        if strict:
            k = kinds[0] if kinds and len(set(kinds)) == 1 and kinds[0] in ("jax", "np") else None
        else:
            k = "jax" if "jax" in kinds else ("np" if set(kinds) == {"np"} else None)
        self._returns[key] = k
        return k

    def project_return_kind(self, qualname: str, strict: bool) -> str | None:
        """A function imported from another file of the reviewed tree (project.py): its return kind."""
        return project_kind(self.project.function(qualname) if self.project is not None else None, strict)
