"""JM302 large-constant-captured-by-jit

What it does
    Flags a large array that a jitted function closes over instead of taking it as an argument,
    where the source shows it is large:

    - a module-level array with a literal shape of at least 262,144 elements, or loaded from a
      file, read as a global;
    - an array loaded from a file (a data set, a checkpoint's weights: `np.load`,
      `scipy.io.loadmat`, `pickle.load`, a restored checkpoint, a Transformers Flax model's
      `from_pretrained`, or a helper of the reviewed tree that calls one) in an enclosing
      function or the module, read inside as an array (indexed, through an attribute such as
      `.params`, an operand of a JAX operation, or the parameters handed to a network's `apply`);
    - a file read inside the jitted function itself, which runs once while it is traced;
    - a Flax NNX module passed as a static argument (a jitted method of an NNX network class
      that marks its instance static, or a static parameter annotated with such a class): its
      weights become constants of the program, and in-place updates are not seen;
    - `self.x` read as data by a jitted method that marks `self` static, where the class assigns
      `self.x` again after construction: the program is cached per `self`, so the value of the
      first trace is a constant of it and later values are never seen (measured on jax 0.10.2:
      `self.w` re-assigned from ones to fives, the method still returned 3.0, and the lowered
      program holds `self.w` as a `stablehlo.constant`).

    Arrays of unknown origin are left alone: most closed-over arrays are small tables.

Why is this bad
    Arrays closed over by a jitted function are embedded in the compiled program as
    constants: the program grows by the array's size, compilation slows down, and every
    distinct jitted function holds its own copy. `JAX_CAPTURED_CONSTANTS_WARN_BYTES` makes JAX
    log such captures.

Example
    TABLE = np.random.rand(2048, 2048)

    @jax.jit
    def lookup(idx):
        return TABLE[idx]

Use instead
    @jax.jit
    def lookup(table, idx):
        return table[idx]

    table = jax.device_put(TABLE)   # once
    lookup(table, idx)
"""
from __future__ import annotations

import ast
import math

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.loads import is_loader_call, loaded
from jaxmem.evaluators.review.semantic.names import passed_argument

LARGE_ELEMENTS = 262_144  # 1 MiB of float32
SHAPED = frozenset({"zeros", "ones", "empty", "full"})
FILE_LOADS = frozenset({"numpy.load", "numpy.loadtxt", "numpy.fromfile", "numpy.genfromtxt", "jax.numpy.load"})


def literal_size(call: ast.Call, q: str) -> int | None:
    """Element count of a creation call with literal sizes; None when not visible."""
    fn = q.rsplit(".", 1)[-1]
    shape = None
    for kw in call.keywords:
        if kw.arg in ("shape", "size"):
            shape = kw.value
    if shape is None:
        if fn in SHAPED and call.args:
            shape = call.args[0]
        elif fn in ("rand", "randn") and q.startswith("numpy.random"):
            shape = ast.Tuple(list(call.args))
        elif fn == "arange" and len(call.args) == 1:
            shape = call.args[0]
        elif fn == "eye" and call.args:
            shape = ast.Tuple([call.args[0], call.args[0]])
        elif q.startswith("jax.random.") and len(call.args) >= 2:
            shape = call.args[1]
    if shape is None:
        return None
    dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
    if not all(isinstance(d, ast.Constant) and isinstance(d.value, int) for d in dims):
        return None
    return math.prod(d.value for d in dims)


class LargeConstantCapturedByJit(Rule):
    code = "JM302"
    name = "large-constant-captured-by-jit"
    topic = "jit-compilation"
    severity = "warning"
    message = "`{name}` {what}: the jitted function compiles it into its program as a constant"
    fix = ("Pass the array as an argument of the jitted function (device_put it once) instead of closing over it; "
           "load files outside the jitted function.")
    static_module_message = ("`{name}` is a static argument holding a Flax NNX module: static arguments are keyed by "
                             "identity, so its weights are compiled into the program as constants, every new module "
                             "object compiles again, and weights changed in place are never seen")
    static_module_fix = ("Pass the module as data: `nnx.jit` (it splits the module into graph and state), or "
                         "`nnx.split` it and jit over the state with only the graphdef static.")
    node_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    requires = ('jit', 'pmap', 'lax')
    # Rewritten after 12j to read where a closed-over array came from; its one sure finding on
    # 12k's first run, wrong, was an eager lax.scan body (fixed: JM302/clean_eager_scan_closure).
    # The record of the rewritten rule starts with the next reading.
    record_from = "unseen-2026-12l"

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        a = ctx.analysis
        scope = a.scopes[node]
        # Only the outermost compiled function reports; nested ones are inside its program. A
        # control-flow body (`lax.scan`, `fori_loop`) run eagerly is no such program: lax lifts
        # the arrays it closes over into operands of the loop, not constants.
        if not scope.jitted or (scope.parent is not None and scope.parent.jitted) or "jit" not in scope.reasons:
            return
        large = ctx.memo.get("large_globals")
        if large is None:
            large = ctx.memo["large_globals"] = self._large_globals(ctx)
        own = _own_scopes(scope)
        local = {name for s in own for name in s.bindings}  # bound in the function: not captured
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        parents: dict[ast.AST, ast.AST] = {}  # filled on first need: most functions capture nothing

        def parent_map() -> dict[ast.AST, ast.AST]:
            if not parents:
                for stmt in body:
                    for parent in astutil.walk(stmt):
                        for child in astutil.children(parent):
                            parents[child] = parent
            return parents

        seen: set[str] = set()
        for stmt in body:
            for n in astutil.walk(stmt):
                if (isinstance(n, ast.Call) and n.func not in seen
                        and is_loader_call(a, n, _scope_of(n, own, scope))):
                    seen.add(n.func)
                    ctx.report(self, n, name=ast.unparse(n.func)[:40],
                               what="reads a file while the function is traced, and what it returns is an array")
                if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)) or n.id in seen or n.id in local:
                    continue
                what = self._captured(n, scope, parent_map, large, ctx)
                if what is not None:
                    seen.add(n.id)  # once per function is enough to locate it
                    ctx.report(self, n, name=n.id, what=what)
        static_module = _static_nnx_module(node, scope, ctx)
        if static_module is not None:
            ctx.report(self, node, message=self.static_module_message, fix=self.static_module_fix, name=static_module)
        for n, attr in _static_self_state(node, scope, parent_map, ctx):
            ctx.report(self, n, name=f"self.{attr}", what=(
                "is read by a jitted method that marks `self` static, and the class re-assigns it after "
                "construction: its value at the first trace is compiled in as a constant, and the new "
                "values are never seen (the cached program is keyed by `self`)"))

    def _captured(self, n: ast.Name, scope, parent_map, large, ctx: Ctx) -> str | None:
        """How the captured name `n` is known to be a large array (None where it is not)."""
        a = ctx.analysis
        outer = scope.parent
        while outer is not None and n.id not in outer.bindings:
            outer = outer.parent
        if outer is None:
            return None
        bindings = outer.bindings[n.id]
        if any(b.how in ("import", "def", "class", "param") for b in bindings):
            return None  # a module, a function, or an argument of the enclosing function: not seen here
        if n.id in large and outer is a.module_scope:
            return f"is a module-level array ({large[n.id]}) read as a global"
        if not loaded(a, n.id, outer):
            return None
        parents = parent_map()
        top = n
        while parents.get(top) is not None and isinstance(parents[top], (ast.Attribute, ast.Subscript)) \
                and parents[top].value is top:
            top = parents[top]
        up = parents.get(top)
        if isinstance(up, ast.Call) and up.func is top:
            return None  # called (`model.apply(...)`): a callable, not data handed to the program
        if _used_as_array(n, top, up, ctx):
            return "is loaded from a file outside the jitted function and captured from there"
        return None

    @staticmethod
    def _large_globals(ctx: Ctx) -> dict[str, str]:
        out: dict[str, str] = {}
        for stmt in ctx.analysis.tree.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue
            q = ctx.qualname(stmt.value.func)
            if q is None or not q.startswith(("numpy.", "jax.numpy.", "jax.random.")):
                continue
            if q in FILE_LOADS:
                desc = "loaded from a file"
            else:
                n = literal_size(stmt.value, q)
                if n is None or n < LARGE_ELEMENTS:
                    continue
                desc = f"{n:,} elements"
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = desc
        return out


def _static_self_state(node: ast.AST, scope, parent_map, ctx: Ctx):
    """(node, attr) for each `self.attr` a jitted method with `self` static reads as data, where
    the class assigns that attribute in a method other than `__init__` (state that changes)."""
    info, cls = scope.jit, ctx.analysis.enclosing_class(scope)
    if info is None or cls is None or not info.params or info.params[0] != "self" \
            or "self" not in info.static_names():
        return
    # Re-assigned outside __init__ to arrays: a copy of parameters, a JAX or NumPy result, what a
    # call returns (`self.nn_params, self.loss = fit(y)`), or data the method was handed
    # (`self.X_train = X` in `fit`): state that changes after the first trace.
    later = {attr: [b for b in bindings if _method_of(cls, b.node) not in (None, "__init__")]
             for attr, bindings in cls.attrs.items()}
    arrays = {attr for attr, bs in later.items() if any(_array_valued(b.value, ctx) for b in bs)}
    # Of unknown kind (a call's result, a name): read as data only where it is indexed, an operand,
    # or handed to the method's own function (not as a sharding or an annotation to a JAX helper).
    unknown = {attr for attr, bs in later.items() if any(_array_valued(b.value, ctx, loose=True) for b in bs)} - arrays
    changed = arrays | unknown
    seen: set[str] = set()
    for n in astutil.walk(node):
        if not (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                and isinstance(n.ctx, ast.Load) and n.attr in changed and n.attr not in seen
                and n.attr not in cls.methods):
            continue
        up = parent_map().get(n)
        # Read as data: indexed, an operand, or an argument of a JAX operation, a tree map, or a
        # network's `apply` (not a method called on an object kept on the instance).
        if isinstance(up, ast.Subscript) and up.value is n or isinstance(up, ast.BinOp) or (
                isinstance(up, ast.Call) and n in up.args and (
                    n.attr not in unknown and (
                        (ctx.qualname(up.func) or "").startswith(("jax.numpy.", "jax.lax.", "jax.nn.", "jax.tree"))
                        or isinstance(up.func, ast.Attribute) and up.func.attr in ("apply", "apply_fn"))
                    # handed to a function the method defines or transforms (`jax.vmap(embed)(self.nn_params, x)`)
                    or _local_or_transformed(up.func, node, ctx))):
            seen.add(n.attr)
            yield n, n.attr


def _static_nnx_module(node: ast.AST, scope, ctx: Ctx) -> str | None:
    """The parameter of a jitted function that is marked static and holds a Flax NNX module: the
    instance of a method of an NNX network class (`@partial(jax.jit, static_argnums=0)` on a
    method), or a parameter annotated with such a class. NNX modules hash by identity, so jit
    accepts them as static; measured on jax 0.10.2 with flax 0.12.8: the lowered program embeds
    the weights, zeroing the kernel in place left the jitted output unchanged (-24.26 against
    0.0 eagerly), and a second module object compiled again (58 ms against 0.1 ms). An Equinox
    or Linen module hashes by its fields instead (arrays there make jit raise, or the params are
    passed apart), so only NNX is reported."""
    info = scope.jit
    if info is None or not info.params or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    static = info.static_names()
    if not static:
        return None
    a = ctx.analysis
    cls = a.enclosing_class(scope)
    if info.params[0] in static and cls is not None and cls.methods.get(node.name) is node:
        if cls.network and cls.framework == "nnx":
            return info.params[0]
    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
        if arg.arg in static and arg.annotation is not None:
            local = a.local_class(arg.annotation)
            if (local is not None and local.network and local.framework == "nnx"
                    or a.qualname(arg.annotation) == "flax.nnx.Module"):
                return arg.arg
    return None


def _array_valued(value: ast.AST | None, ctx: Ctx, loose: bool = False) -> bool:
    """A JAX or NumPy result, a copy; `loose`: also any call's result and a plain name (data a
    method was handed), not a constant, a container literal or a builtin's result."""
    if loose and isinstance(value, ast.Name):
        return True
    if not isinstance(value, ast.Call):
        return False
    q = ctx.qualname(value.func) or ""
    if q.startswith(("jax.numpy.", "numpy.", "optax.apply_updates", "copy.deepcopy", "jax.device_put")):
        return True
    return loose and not (isinstance(value.func, ast.Name) and ctx.builtin(value.func))


def _local_or_transformed(func: ast.AST, method: ast.AST, ctx: Ctx) -> bool:
    """`single_embed(...)` defined in the jitted method, or `jax.vmap(f)(...)`: the argument is
    data for traced code."""
    if isinstance(func, ast.Call):
        return (ctx.qualname(func.func) or "").startswith("jax.")
    fn = ctx.analysis.resolve_def(func, ctx.analysis.scopes.get(method, ctx.scope))
    return fn is not None and method.lineno <= fn.lineno <= getattr(method, "end_lineno", method.lineno)


def _method_of(cls, stmt: ast.AST) -> str | None:
    line = getattr(stmt, "lineno", 0)
    for name, fn in cls.methods.items():
        if fn.lineno <= line <= getattr(fn, "end_lineno", fn.lineno):
            return name
    return None


def _used_as_array(n: ast.Name, top: ast.AST, up: ast.AST | None, ctx: Ctx) -> bool:
    """Read the way arrays are read: indexed or through an attribute (`x[i]`, `state.params`), an
    operand of a JAX operation or a matrix product, or the parameters handed to a network's
    `apply`. A count or a callable that a loader also returned (`num_train, idx = load()`) is not."""
    if top is not n:
        return True
    if isinstance(up, ast.BinOp) and isinstance(up.op, ast.MatMult):
        return True
    if isinstance(up, ast.Call) and n in up.args:
        q = ctx.qualname(up.func) or ""
        if q.startswith(("jax.numpy.", "jax.lax.", "jax.nn.", "jax.scipy.")):
            return True
        if q == "jax.tree.map" and up.args[0] is not n:
            return True  # `jax.tree.map(lambda x: x[idx], dataset)`: each leaf read as an array
        if isinstance(up.func, ast.Attribute) and up.func.attr == "apply" and up.args[0] is n:
            return True
        # `sample_batch(rng, dataset, bs)`: a function of this module that reads it as an array
        fn = ctx.analysis.resolve_def(up.func, ctx.scope)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            param = next((p.arg for p in [*fn.args.posonlyargs, *fn.args.args]
                          if passed_argument(up, fn, p.arg) is n), None)
            return param is not None and _param_read_as_array(fn, param, ctx)
    return False


def _param_read_as_array(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str, ctx: Ctx) -> bool:
    """The function reads its parameter as arrays are read: indexed, mapped over leaf by leaf, or
    an operand of a JAX operation (one level; not through further calls)."""
    for parent in astutil.walk(fn):
        for child in astutil.children(parent):
            if not (isinstance(child, ast.Name) and child.id == param and isinstance(child.ctx, ast.Load)):
                continue
            if isinstance(parent, ast.Subscript) and parent.value is child:
                return True
            if isinstance(parent, ast.Call) and child in parent.args:
                q = ctx.qualname(parent.func) or ""
                if q.startswith(("jax.numpy.", "jax.lax.", "jax.nn.")) or (q == "jax.tree.map" and parent.args[0] is not child):
                    return True
    return False


def _own_scopes(scope) -> list:
    out, stack = [], [scope]
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(s.inner)
    return out


def _scope_of(node: ast.AST, own: list, default):
    """The innermost of the function's scopes whose node contains `node` (for name resolution)."""
    best = default
    line = getattr(node, "lineno", 0)
    for s in own:
        start, end = getattr(s.node, "lineno", 0), getattr(s.node, "end_lineno", -1)
        if start <= line <= end and start >= getattr(best.node, "lineno", 0):
            best = s
    return best


RULE = LargeConstantCapturedByJit()
