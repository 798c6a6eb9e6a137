"""Value kinds by data flow: device array, NumPy array, Python scalar, host list, unknown."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import (
    ELEMENT_KIND,
    EMPTY_CONTAINERS,
    HOST_ATTRS,
    HOST_KINDS,
    HOST_METHODS,
    JAX_ARRAY_FUNCS,
    JAX_ARRAY_PREFIXES,
    JAX_NON_ARRAY,
    LIST_BUILTINS,
    NUMPY_NON_ARRAY,
    RETURNS_ARRAYS,
    SCALAR_BUILTINS,
    keyword,
    pos,
)
from jaxmem.evaluators.review.semantic.scopes import Binding, Scope


class KindsMixin:
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
