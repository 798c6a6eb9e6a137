"""Helpers that read their arguments on the host: `meter.update(loss)` where `update` does
`float(loss)`.

Training loops written with habits from other frameworks pass the step's outputs to a small
accumulator or logger class of the user's own (`AverageMeter.update`, `Accumulator.add`) that turns
each argument into a Python number. The sync is then one call deep, in code of the same file or
notebook: the call site passes device arrays, the callee's body calls `float()` on them. The model
answers which parameters a local function or method converts, so a rule can cost the call.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.branches import early_return_guard, periodic_guard
from jaxmem.evaluators.review.semantic.model import PYTREE_PRESERVING, Analysis

_BUILTIN_CONVERTERS = frozenset({"float", "int", "bool", "complex"})
# `any(leaves)` / `all(flags)` take the truth value of each element: one host read per device array.
_TRUTH_CONVERTERS = frozenset({"any", "all"})
_NUMPY_CONVERTERS = frozenset({"numpy.asarray", "numpy.array", "jax.device_get"})
_METHODS = frozenset({"item", "tolist"})
_CALL_CONVERTERS = _BUILTIN_CONVERTERS | _TRUTH_CONVERTERS  # once, not per call read
_PASS_THROUGH = frozenset({"zip", "enumerate", "list", "tuple", "reversed", "iter"})
_TREE_LEAVES = frozenset({"jax.tree.leaves", "jax.tree_util.tree_leaves", "jax.tree_leaves", "jax.tree.flatten",
                          "jax.tree_util.tree_flatten", "jax.tree_flatten"})
_METADATA = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "sharding", "device"})


def converted_params(a: Analysis, fn: ast.AST) -> dict[str, str]:
    """Parameter -> how the function's own body turns it into a host value (`float(b)`), directly
    or through names bound from it (`for a, b in zip(self.data, args): float(b)`). `*args` is
    keyed by its name. Empty for a function under a transform (its values are tracers)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    memo = a.memo.setdefault("converted_params", {})
    if fn not in memo:
        memo[fn] = {}  # recursion guard: methods that call each other
        scope = a.scopes.get(fn)
        memo[fn] = {} if scope is None or scope.traced else _converted(a, fn)
    return memo[fn]


def _converted(a: Analysis, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    args = fn.args
    params = [p.arg for p in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    if args.vararg is not None:
        params.append(args.vararg.arg)
    origin: dict[str, set[str]] = {p: {p} for p in params if p not in ("self", "cls")}

    def bind(target: ast.AST, found: set[str]) -> None:
        for n in astutil.walk(target):
            if isinstance(n, ast.Name) and found:
                origin.setdefault(n.id, set()).update(found)

    out: dict[str, str] = {}
    # After `if step % every != 0: return` the body runs once in many calls: its reads are periodic.
    scope = a.scopes.get(fn)
    guard = early_return_guard(fn, a, scope)
    after = guard.end_lineno if guard is not None else None
    # So do the reads under `if step % every == 0:` in the body (a report helper called every step):
    # nodes come in source order, so a guard's body is a span of positions to skip.
    skip = None
    for n in own_nodes(fn):
        if after is not None and getattr(n, "lineno", 0) > after:
            break
        if skip is not None and hasattr(n, "lineno"):
            if skip[0] <= (n.lineno, n.col_offset) <= skip[1]:
                continue
            if (n.lineno, n.col_offset) > skip[1]:
                skip = None  # (the guard's test comes before its body)
        if isinstance(n, ast.If) and periodic_guard(n, None, a, scope):
            skip = ((n.body[0].lineno, n.body[0].col_offset), (n.body[-1].end_lineno, n.body[-1].end_col_offset))
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            bind(n.target, _sources(a, origin, n.iter))
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                bind(t, _sources(a, origin, n.value))
        elif isinstance(n, ast.Call):
            how = _conversion(a, n)
            if how is None:
                # `self.log_scalar(tag, lr, step)` where that method of the class converts `value`
                for arg, inner in _converted_by_own_method(a, fn, n):
                    for p in _sources(a, origin, arg):
                        out.setdefault(p, inner)
            else:
                arg = n.func.value if isinstance(n.func, ast.Attribute) and n.func.attr in _METHODS else (
                    n.args[0] if n.args else None)
                for p in _sources(a, origin, arg) if arg is not None else ():
                    out.setdefault(p, how)
    return out


def _converted_by_own_method(a: Analysis, fn: ast.AST, call: ast.Call):
    """(argument, how) for the arguments of `self.method(...)` that a method of the same class
    converts on the host: the helper's helper (`log_learning_rate` calls `self.log_scalar`)."""
    if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"):
        return []
    scope = a.scopes.get(fn)
    cls = a.enclosing_class(scope) if scope is not None else None
    method = a.method(cls, call.func.attr) if cls is not None else None
    if method is None or method is fn:
        return []
    converted = converted_params(a, method)
    return list(argument_converted(a, call, method, converted)) if converted else []


def _sources(a: Analysis, origin: dict[str, set[str]], expr: ast.AST) -> set[str]:
    """The parameters `expr` is (or holds an element of): the name itself, a field or item of it,
    a tuple of them, `zip`/`enumerate` over them, a dict's `.items()`/`.values()`, their tree
    leaves, arithmetic on them (`loss / n`). Not the result of any other call: an action a policy
    computes from `params` is not `params` (a rollout helper converts the action, which the
    environment needs on the host anyway), and a diagnostic a script computes from the state with
    `jnp` (measured on 44 readings: about a hundred more possible findings in analysis loops for
    three more clear cases found); nor a shape or dtype, which the host knows without waiting. A
    module function, not a
    closure: a recursive closure is a reference cycle, which kept each file's whole model for the
    cycle collector to trace (collector.py)."""
    if isinstance(expr, ast.Name):
        return set(origin.get(expr.id, ()))
    if isinstance(expr, ast.Attribute) and expr.attr in _METADATA:
        return set()  # `x.shape[0]`: known on the host without waiting for `x`
    if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _sources(a, origin, expr.value)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return {p for e in expr.elts for p in _sources(a, origin, e)}
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in _PASS_THROUGH:
        return {p for e in expr.args for p in _sources(a, origin, e)}
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("items", "values"):
        return _sources(a, origin, expr.func.value)  # `for k, v in metrics.items()`: its values
    if isinstance(expr, ast.Call) and a.qualname(expr.func) in PYTREE_PRESERVING and expr.args:
        return _sources(a, origin, expr.args[0])  # `device_get(unreplicate(metrics))`: the same values
    if isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
        return {p for e in astutil.children(expr) if isinstance(e, ast.expr) for p in _sources(a, origin, e)}
    if isinstance(expr, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
        # `any(jnp.isnan(l).any() for l in leaves)`: what the comprehension walks
        return {p for g in expr.generators for p in _sources(a, origin, g.iter)}
    if not isinstance(expr, ast.Call):
        return set()
    q = a.qualname(expr.func)
    if q == "jax.tree.map":
        return {p for e in expr.args[1:] for p in _sources(a, origin, e)}  # `tree_map(lambda x: x[0], metrics)`
    if q in _TREE_LEAVES and expr.args:
        return _sources(a, origin, expr.args[0])  # `jax.tree.leaves(flags)`: the same values, listed
    return set()


def _conversion(a: Analysis, call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name) and call.func.id in _CALL_CONVERTERS \
            and len(call.args) == 1 and call.func.id not in a.aliases:
        return f"{call.func.id}()"
    if isinstance(call.func, ast.Attribute) and call.func.attr in _METHODS and not call.args:
        return f".{call.func.attr}()"
    q = a.qualname(call.func)
    if q in _NUMPY_CONVERTERS and call.args:
        return q.replace("numpy.", "np.")
    # `plt.plot(losses)`, `ax.plot(history["loss"])`: matplotlib converts what it is handed with
    # NumPy, a device array's values copied to the host (an axes object is not traced: its name
    # does; `.step` and `.bar` are left out, as other objects' methods have those names).
    if call.args and isinstance(call.func, ast.Attribute) and call.func.attr in PLOT_METHODS and (
            q is None or q.startswith("matplotlib.")):
        return f".{call.func.attr}()"
    return None


PLOT_METHODS = frozenset({"plot", "semilogy", "semilogx", "loglog", "scatter", "hist", "errorbar", "fill_between",
                          "stackplot", "boxplot", "violinplot"})


_NESTED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})


def own_nodes(fn: ast.AST):
    """The function's statements and expressions in source order, not those of nested defs."""
    stack = list(reversed(fn.body))
    while stack:
        n = stack.pop()
        cls = n.__class__
        if cls in _NESTED:
            continue
        yield n
        children = astutil.children(n)
        if cls in _COMPREHENSIONS:  # generators first: source order
            children = [*n.generators, *(c for c in children if c.__class__ is not ast.comprehension)]
        stack.extend(reversed(children))


def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[tuple[str, ...], str | None]:
    """The positional parameters' names and the `*args` name: what a call's arguments land on."""
    args = fn.args
    return tuple(p.arg for p in [*args.posonlyargs, *args.args]), args.vararg.arg if args.vararg else None


def arguments(call: ast.Call, fn: ast.AST | tuple):
    """(argument expression, parameter name) for each argument of `call`: positional ones up to a
    `*args` splat (beyond the named parameters, the `*args` name or None), then keywords (`**kw`
    has none). `fn`: the function, or its `signature` (a function of another file, from the
    project facts); `obj.method(...)` skips the method's `self`/`cls`, and so does `obj(...)`, an
    instance called (its `__call__`: no module function names its first parameter `self`)."""
    positional, vararg = signature(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
    if positional and (positional[0] == "self" or positional[0] == "cls" and isinstance(call.func, ast.Attribute)):
        positional = positional[1:]
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        yield arg, positional[i] if i < len(positional) else vararg
    for kw in call.keywords:
        if kw.arg:
            yield kw.value, kw.arg


def argument_converted(a: Analysis, call: ast.Call, fn: ast.AST | tuple, converted: dict[str, str]):
    """(argument expression, how) for each argument of `call` that lands on a converted parameter.
    `fn`: the function, or its `signature` (a function of another file, from the project facts)."""
    for arg, name in arguments(call, fn):
        if name in converted:
            yield arg, converted[name]


def own_calls(fn: ast.AST, a: Analysis | None = None):
    """The calls of the function's own statements (not of functions or classes defined in it):
    recorded by the model as it was built, or found by walking when the function is not modelled."""
    scope = a.scopes.get(fn) if a is not None else None
    if scope is not None:
        yield from scope.calls
        return
    yield from calls_in(fn.body)


def calls_in(roots: list[ast.AST]):
    """The calls in these statements, outside functions and classes defined in them."""
    stack = list(roots)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call):
            yield n
        stack.extend(astutil.children(n))


def calls_one_deep(a: Analysis, fn: ast.AST, accept, key: str, depth: int = 0,
                   methods: frozenset[str] = frozenset()) -> bool:
    """The function's own statements call something whose qualified name `accept` takes (a clock,
    a file loader) or a method named in `methods` on any receiver (`x.block_until_ready()`), or
    call a local function that does; memoized in the model under `key`."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    memo = a.memo.setdefault(key, {})
    if fn not in memo:
        memo[fn] = False
        scope = a.scopes.get(fn)
        for n in own_calls(fn, a):
            if accept(a.qualname(n.func)) or (isinstance(n.func, ast.Attribute) and n.func.attr in methods) or (
                    depth == 0 and scope is not None
                    and calls_one_deep(a, a.resolve_def(n.func, scope), accept, key, 1, methods)):
                memo[fn] = True
                break
    return memo[fn]


def called_def(a: Analysis, func: ast.AST, scope) -> ast.AST | None:
    """The function a call runs, where this module defines it: a function or method
    (`resolve_def`), or the `__call__` of a module class whose instance is called (`mean_loss(loss)`
    after `mean_loss = Mean()`: a running mean that does `val.item()` on what it is handed)."""
    fn = a.resolve_def(func, scope)
    if fn is None and isinstance(func, ast.Name):
        cls = a.class_of_receiver(func, scope)
        if cls is not None:
            fn = a.method(cls, "__call__")
    return fn


def project_facts(a: Analysis, func: ast.AST, scope):
    """Facts of a function or method defined in another file of the tree: `utils.tick(...)`, or
    `timer.tock(...)` on `timer = Timer()` where `Timer` is imported from there."""
    if a.project is None:
        return None
    q = a.qualname(func)
    if q is not None:
        return a.project.function(q)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        cls = a.constructor_of(func.value, scope)
        if cls is not None:
            return a.project.function(f"{cls}.{func.attr}")
    return None


def tree_facts(a: Analysis, func: ast.AST, scope):
    """`project_facts`, and also a method through a receiver's declared class (`logger: Logger`)
    or one `self` inherits from a base class defined in another file of the tree. None when there
    is no tree, or the callee is not found in it."""
    facts = project_facts(a, func, scope)
    if facts is not None or a.project is None or a.qualname(func) is not None:
        return facts
    if isinstance(func, ast.Name):
        # `mean_loss(loss)` on `mean_loss = Mean()`, Mean imported from another file: its __call__
        cls = a.constructor_of(func, scope)
        return a.project.function(f"{cls}.__call__") if cls is not None else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
        # `self.reporter.log_learning_rate(lr, step)`: the class the attribute was made from
        q = attribute_class(a, func.value, scope)
        return a.project.function(f"{q}.{func.attr}") if q is not None else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    recv = func.value
    if recv.id in ("self", "cls"):
        cls = a.class_of_receiver(recv, scope)
        if cls is None or func.attr in cls.methods:
            return None
        for base in cls.bases:
            bq = a.qualname(base)
            facts = a.project.function(f"{bq}.{func.attr}") if bq else None
            if facts is not None:
                return facts
        return None
    typed = a.annotated_class(recv, scope)
    return a.project.function(f"{typed}.{func.attr}") if typed else None


def attribute_class(a: Analysis, recv: ast.Attribute, scope) -> str | None:
    """`self.reporter`, where every method of the class that sets it assigns `Logger(...)` of an
    imported class, or an `__init__` parameter annotated with one (`reporter: TensorBoardLogger`):
    that class's qualified name."""
    if not (isinstance(recv.value, ast.Name) and recv.value.id == "self"):
        return None
    cls = a.enclosing_class(scope)
    found = set()
    for b in (cls.attrs.get(recv.attr, ()) if cls is not None else ()):
        q = None
        if isinstance(b.value, ast.Call):
            q = a.qualname(b.value.func)
        elif isinstance(b.value, ast.Name) and "__init__" in cls.methods:
            init_scope = a.scopes.get(cls.methods["__init__"])
            param = a.resolve(b.value.id, init_scope) if init_scope is not None else None
            if param is not None and param.how == "param" and param.value is not None:
                q = a.qualname(param.value)
        found.add(q)
    return found.pop() if len(found) == 1 and None not in found else None


def runs_layers(a: Analysis, cls, fn: ast.AST) -> bool:
    """A method of a network class, not jitted, whose own statements run the network's layers:
    it calls `self(...)`, a submodule the class keeps (`self.decoder(x)`, an attribute assigned
    in a method, not a method itself), or the items of a list of them (`for layer in self.layers:
    x = layer(x)`). `model.step(token, cache)`, `model.generate(...)`, `vae.decode(z)` are such
    forward passes; `model.num_params()` is not."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn in a.jitted_defs or fn.name.startswith("__"):
        return False
    memo = a.memo.setdefault("runs_layers", {})
    if fn not in memo:
        kept = {name for name in cls.attrs if name not in cls.methods}
        layers: set[str] = set()  # loop names over a kept list (`for layer in self.layers`)
        for n in astutil.walk(fn):
            if (isinstance(n, ast.For) and isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Attribute)
                    and _self_attr(n.iter) in kept):
                layers.add(n.target.id)
        memo[fn] = any(isinstance(c.func, ast.Name) and (c.func.id == "self" or c.func.id in layers)
                       or _self_attr(c.func) in kept for c in own_calls(fn, a))
    return memo[fn]


def _self_attr(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def array_params(a: Analysis, fn: ast.AST) -> frozenset[str]:
    """The parameters the function declares as arrays (`start: Float[Array, "D_in"]`, `x:
    jax.Array`): what a caller passes there is a device array by the callee's own word."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()
    args = fn.args
    return frozenset(p.arg for p in [*args.posonlyargs, *args.args, *args.kwonlyargs]
                     if p.annotation is not None and a.annotates_array(p.annotation))


def declared_arrays(a: Analysis, func: ast.AST, scope) -> frozenset[str]:
    """`array_params` of a function of another file of the tree that a call runs, from its facts."""
    facts = tree_facts(a, func, scope)
    return frozenset(facts.array_params) if facts is not None else frozenset()


def callee_conversions(a: Analysis, func: ast.AST, scope) -> tuple[dict[str, str], ast.AST | tuple | None, ast.AST | None]:
    """What the function a call runs turns into host values: (converted parameters, the signature
    source `argument_converted` reads, the local def or None). A function of this module, or one of
    another file of the reviewed tree through its facts (`utils.update_metrics(m, metrics)`)."""
    fn = called_def(a, func, scope)
    converted, sig = converted_params(a, fn), fn
    if fn is None:
        facts = tree_facts(a, func, scope)
        if facts is not None and facts.converts:
            converted, sig = dict(facts.converts), facts.signature
    return converted, sig, fn
