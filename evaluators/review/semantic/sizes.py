"""Sizes the source fixes: trip counts of loops, element counts of arrays, int constants."""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import pos
from jaxmem.evaluators.review.semantic.scopes import Scope

SMALL_LOOP = 16  # iterations; a loop this short runs a per-step cost a handful of times


def int_value(expr: ast.AST, analysis: Analysis, scope: Scope, depth: int = 0) -> int | None:
    """An int literal, or a name bound to one (`N = 10`), or simple arithmetic of those, including
    `int()` of a division (`steps = int(3600 / dt)` with `dt = 900`)."""
    v = _number(expr, analysis, scope, depth)
    return v if type(v) is int else None


def _number(expr: ast.AST, analysis: Analysis, scope: Scope, depth: int) -> int | float | None:
    if depth > 8:
        return None
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        v = _number(expr.operand, analysis, scope, depth + 1)
        return None if v is None else -v
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow, ast.Div)):
        left = _number(expr.left, analysis, scope, depth + 1)
        right = _number(expr.right, analysis, scope, depth + 1)
        if left is None or right is None:
            return None
        op = type(expr.op)
        try:
            if op is ast.Pow:
                return left ** right if type(right) is int and 0 <= right < 64 else None
            if op is ast.Add:
                return left + right
            if op is ast.Sub:
                return left - right
            if op is ast.Mult:
                return left * right
            return (left // right if op is ast.FloorDiv else left / right) if right else None
        except (OverflowError, ZeroDivisionError):
            return None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "int" \
            and len(expr.args) == 1 and not expr.keywords and analysis.is_builtin(expr.func, scope):
        v = _number(expr.args[0], analysis, scope, depth + 1)
        return int(v) if v is not None and abs(v) < 2 ** 62 else None
    if isinstance(expr, ast.Name):
        b = analysis.resolve(expr.id, scope, pos(expr))
        if b is not None and b.how == "assign" and b.value is not None and b.value is not expr:
            value = b.value
            if b.index is not None:
                if not (isinstance(value, ast.Tuple) and b.index < len(value.elts)):
                    return None
                value = value.elts[b.index]
            return _number(value, analysis, scope, depth + 1)
        if b is not None and b.how == "param":
            return _param_int(b, analysis, depth)
    return None


def _param_int(b, analysis: Analysis, depth: int) -> int | None:
    """A parameter that every call of its function in this module fills with an int the source
    fixes (`optimize(..., num_steps=15)`, or the default where a call leaves it out): the largest
    of them. None when the function has no such call here, or one call passes something else."""
    fn = b.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = fn.args
    params = [a.arg for a in [*args.posonlyargs, *args.args]]
    defaults = dict(zip(params[len(params) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    values = []
    for call, s, arg in analysis.param_sites(b):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None  # `f(*args)`, `f(**cfg)`: what lands on the parameter is out of sight
        v = int_value(arg, analysis, s, depth + 1) if arg is not None else (
            int_value(defaults[b.name], analysis, analysis.module_scope, depth + 1) if b.name in defaults else None)
        if v is None:
            return None
        values.append(v)
    return max(values) if values else None


_LITERAL_ARRAYS = frozenset({"numpy.array", "numpy.asarray", "jax.numpy.array", "jax.numpy.asarray"})


def trip_count(it: ast.AST, analysis: Analysis, scope: Scope, depth: int = 0) -> int | None:
    """Iterations of `for ... in it` when the source says so: `range(5)`, a literal tuple or
    dict, a name bound to one (`formats = [...]`), a comprehension over one, `d.items()` of a
    literal dict, `jnp.array([0.2, 0.5, 0.8])`."""
    if depth > 6:
        return None
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in it.elts):
        return len(it.elts)
    if isinstance(it, ast.Dict) and None not in it.keys:
        return len(it.keys)
    if isinstance(it, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        if len(it.generators) == 1 and not it.generators[0].ifs:
            return trip_count(it.generators[0].iter, analysis, scope, depth + 1)
        return None
    if isinstance(it, ast.Name):
        b = analysis.resolve(it.id, scope, pos(it))
        if b is not None and b.how == "assign" and b.index is None and b.value is not None and b.value is not it:
            if isinstance(b.value, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
                                    ast.DictComp, ast.GeneratorExp, ast.Name, ast.Call)):
                return trip_count(b.value, analysis, scope, depth + 1)
        return None
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys", "values") \
            and not it.args:
        return trip_count(it.func.value, analysis, scope, depth + 1)
    if isinstance(it, ast.Call) and analysis.qualname(it.func) in _LITERAL_ARRAYS and len(it.args) == 1:
        arg = it.args[0]
        if isinstance(arg, (ast.List, ast.Tuple)):
            return len(arg.elts)  # the first axis of a literal array
        return None
    if isinstance(it, ast.Call) and it.args and analysis.qualname(it.func) in _PROGRESS:
        # A progress bar iterates what it wraps: `tqdm(range(n))`; `trange(n)` is `range(n)`.
        q = analysis.qualname(it.func)
        if q.endswith("trange"):
            return trip_count(ast.Call(ast.Name("range", ast.Load()), it.args, []), analysis, scope, depth + 1)
        return trip_count(it.args[0], analysis, scope, depth + 1)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and analysis.is_builtin(it.func, scope):
        name, args = it.func.id, it.args
        if name == "range" and 1 <= len(args) <= 3:
            vals = [int_value(a, analysis, scope) for a in args]
            if any(v is None for v in vals):
                return None
            start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
            return len(range(start, stop, step)) if step else None
        if name in ("enumerate", "reversed", "sorted", "list", "tuple") and args:
            return trip_count(args[0], analysis, scope, depth + 1)
        if name == "zip" and args:
            counts = [trip_count(a, analysis, scope, depth + 1) for a in args]
            known = [c for c in counts if c is not None]
            return min(known) if known else None
    return None


_PROGRESS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm", "tqdm.rich.tqdm",
                       "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange", "rich.progress.track"})


_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "any", "all", "prod", "std", "var", "argmax", "argmin",
                         "amax", "amin", "median", "nanmean", "nansum", "count_nonzero"})


_SHAPED = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like"})


_ELEMENTWISE_HINT = ("log", "exp", "sqrt", "abs", "sin", "cos", "tanh", "float32", "float64", "int32", "asarray", "array")


def element_count(expr: ast.AST | None, analysis: Analysis, scope: Scope, depth: int = 0) -> int | None:
    """Number of elements of the value an expression builds, when the source fixes it: a scalar
    (1), `jnp.zeros((1024, 1024))`, `np.zeros(40)`, `jax.random.normal(key)` (1), and names
    bound to those. None when not visible."""
    if expr is None or depth > 12:
        return None
    if isinstance(expr, ast.Constant):
        return 1 if isinstance(expr.value, (int, float, complex)) and not isinstance(expr.value, bool) else None
    if isinstance(expr, ast.UnaryOp):
        return element_count(expr.operand, analysis, scope, depth + 1)
    if isinstance(expr, ast.BinOp):
        left = element_count(expr.left, analysis, scope, depth + 1)
        right = element_count(expr.right, analysis, scope, depth + 1)
        return None if left is None or right is None else max(left, right)
    if isinstance(expr, ast.Name):
        b = analysis.resolve(expr.id, scope, pos(expr))
        if b is not None and b.how == "assign" and b.index is None and b.value is not None and b.value is not expr:
            return element_count(b.value, analysis, scope, depth + 1)
        if b is not None and b.how == "assign" and b.index is not None and isinstance(b.value, ast.Call):
            return _output_count(b.value, b.index, analysis, scope, depth + 1)
        return None
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    q = analysis.qualname(func)
    if q is None:
        if isinstance(func, ast.Attribute) and func.attr in ("reshape", "astype", "copy", "ravel", "flatten"):
            return element_count(func.value, analysis, scope, depth + 1)
        return None
    if not q.startswith(("numpy.", "jax.numpy.", "jax.random.")):
        return None
    fn = q.rsplit(".", 1)[-1]
    if fn in _REDUCTIONS and q.startswith(("numpy.", "jax.numpy.")) and not any(
            kw.arg in ("axis", "axes", "keepdims") for kw in expr.keywords) and len(expr.args) <= 1:
        return 1  # `jnp.any(x)`, `jnp.mean(loss)`: reduced over every axis
    shape = None
    for kw in expr.keywords:
        if kw.arg in ("shape", "size"):
            shape = kw.value
    if shape is None:
        if fn in _SHAPED and expr.args:
            if fn.endswith("_like"):
                return element_count(expr.args[0], analysis, scope, depth + 1)
            shape = expr.args[0]
        elif q.startswith("jax.random."):
            if fn in ("key", "PRNGKey", "split", "fold_in"):
                return None
            if len(expr.args) >= 2:
                shape = expr.args[1]
            else:
                return 1  # `jax.random.normal(key)`: shape () by default
        elif q.startswith("numpy.random.") and fn in ("rand", "randn"):
            shape = ast.Tuple(list(expr.args)) if expr.args else None
            if shape is None:
                return 1
        elif fn in ("array", "asarray") and expr.args:
            arg = expr.args[0]
            if isinstance(arg, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in arg.elts):
                return len(arg.elts)
            return element_count(arg, analysis, scope, depth + 1)
        elif any(fn.startswith(h) for h in _ELEMENTWISE_HINT) and expr.args:
            counts = [element_count(a, analysis, scope, depth + 1) for a in expr.args]
            return None if any(c is None for c in counts) else max(counts)
    if shape is None:
        return None
    dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
    total = 1
    for d in dims:
        v = int_value(d, analysis, scope)
        if v is None or v < 0:
            return None
        total *= v
    return total


VALUE_AND_GRAD = frozenset({"jax.value_and_grad", "flax.nnx.value_and_grad", "equinox.filter_value_and_grad"})


def _output_count(call: ast.Call, index: int, analysis: Analysis, scope: Scope, depth: int) -> int | None:
    """Elements of output `index` of a call: `value, grads = jax.value_and_grad(f)(x)` gives a
    scalar value (value_and_grad requires one); for a function of this module (jitted or not,
    also one a factory returns), the same position of the tuple it returns."""
    if depth > 12:
        return None
    func = call.func
    if isinstance(func, ast.Call) and analysis.qualname(func.func) in VALUE_AND_GRAD:
        aux = next((k.value for k in func.keywords if k.arg == "has_aux"), None)
        if index == 0 and not (isinstance(aux, ast.Constant) and aux.value):
            return 1
        return None
    fn = analysis.resolve_def(func, scope)
    if fn is None:
        info = analysis.jit_info(func, scope)
        wrapped = info.wrapped if info is not None else None
        fn = analysis.resolve_def(wrapped, scope) if isinstance(wrapped, (ast.Name, ast.Attribute)) else (
            wrapped if isinstance(wrapped, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    inner = analysis.scopes.get(fn)
    if inner is None:
        return None
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            if isinstance(n.value, ast.Tuple) and index < len(n.value.elts):
                return element_count(n.value.elts[index], analysis, inner, depth + 1)
            return None
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.expr)):
            stack.extend(astutil.children(n))
    return None


def distinct_values(it: ast.AST, analysis: Analysis, scope: Scope) -> int | None:
    """How many different values `for x in it` binds, where the source fixes it but not the trip
    count: a list of one repeated value (`[CHUNK] * (T // CHUNK)`), plus what `.append(...)` adds
    to it afterwards in the same scope (`chunks.append(T % CHUNK)` for the remainder)."""
    appended = 0
    if isinstance(it, ast.Name):
        b = analysis.resolve(it.id, scope, pos(it))
        if b is None or b.how != "assign" or b.index is not None or b.value is None:
            return None
        name, it = it.id, b.value
        for n in scope.calls:
            if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
                if n.func.attr != "append":
                    return None  # extend, insert, ...: values the source does not show
                appended += 1
    if not (isinstance(it, ast.BinOp) and isinstance(it.op, ast.Mult)):
        return None
    for seq in (it.left, it.right):
        if isinstance(seq, (ast.List, ast.Tuple)) and seq.elts and not any(isinstance(e, ast.Starred) for e in seq.elts):
            return len({ast.dump(e) for e in seq.elts}) + appended
    return None


def record_fields_loop(loop: ast.AST, analysis: Analysis, scope: Scope) -> bool:
    """`for name, v in stats.items(): print(name, jnp.mean(v))`: a loop over the fields of a
    record (a dict's keys, items or values) whose body runs no step: it calls nothing jitted,
    no function of its own module and no bare function it cannot see (a step may hide there).
    Its trip count is the number of fields the code's structure makes (a model's variables, a
    step's metrics), not a number of steps or examples: no hot loop by itself, and as hot as the
    loops around it when nested."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("items", "keys", "values") and not it.args):
        return False
    for stmt in loop.body:
        for n in astutil.walk(stmt):
            if n.__class__ is not ast.Call:
                continue
            func = n.func
            if analysis.jit_info(func, scope) is not None or analysis.resolve_def(func, scope) is not None:
                return False
            if isinstance(func, ast.Name) and not analysis.is_builtin(func, scope) \
                    and not (analysis.qualname(func) or "").startswith(("jax.", "numpy.")):
                return False
    return True
