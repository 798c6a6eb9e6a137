"""State carried through a loop: which calls replace their own arguments.

`state = step(state, batch)` is the shape of every loop that steps a model, an environment or a
decoder: the call's result replaces one of its arguments, directly or through the result's parts.
Loop roles (roles.py), donation (JM401) and "is this an epoch loop" (loops.py) read it here.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.helpers import calls_in
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import GRADIENT_APPLIERS, LOOP_TYPES, UPDATE_APPLIERS, dotted
from jaxmem.evaluators.review.semantic.scopes import Scope
from jaxmem.evaluators.review.semantic.sizes import SMALL_LOOP, trip_count
from jaxmem.evaluators.review.semantic.training import applies_gradients, zipped_update

# Packages whose functions are operations, not a user's step (`x = jnp.tanh(x)`, `s = np.clip(s)`).
LIBRARIES = ("jax.", "numpy.", "math.", "scipy.", "flax.", "optax.", "haiku.", "equinox.", "chex.", "torch.",
             "tensorflow.", "functools.", "itertools.", "operator.", "random.", "os.", "time.", "copy.")


def replaced_state_calls(a: Analysis, loop: ast.AST, scope: Scope):
    """(call, names) for each call in the loop's own statements whose result replaces one of its
    arguments: directly (`s = f(s, x)`, `s, m = f(s)`, `s = f(s)[0]`) or through a name bound to
    the result (`out = f(s)` then `s = out.state`, `s, m = out`, `s = out["state"]`; `new_s, loss =
    f(s)` then `s = new_s`, also only on some paths: `if not eval: s = new_s`). Only state
    the loop carries counts: a name whose value at the call comes from the previous iteration
    (not the loop target, not bound earlier in the same iteration: `batch = reshard(batch)` on a
    fresh batch transforms data, it carries nothing)."""
    if not isinstance(loop, LOOP_TYPES):
        return  # a comprehension builds a value; it carries no state between iterations
    fresh = set(_keys(loop.target)) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    yield from _block(a, loop.body, scope, fresh, {})


def state_replacements(a: Analysis, body: list[ast.stmt], scope: Scope):
    """The same reading over a function body: calls whose result replaces an argument that the
    body did not bind before (a parameter, or state kept on `self`)."""
    yield from _block(a, body, scope, set(), {})


def _block(a: Analysis, body: list[ast.stmt], scope: Scope, fresh: set[str],
           results: dict[str, tuple[ast.Call, frozenset[str]]]):
    """One block of the loop body in order. `fresh`: names already bound in this iteration on
    every path to here; the branches of an `if` each start from it and bind only for themselves."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _block(a, stmt.body, scope, set(fresh), dict(results))
            yield from _block(a, stmt.orelse, scope, set(fresh), dict(results))
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _block(a, stmt.body, scope, fresh, results)
            continue
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and _few(a, stmt, scope):
            # A loop of a few iterations inside the step (gradient accumulation over 4 micro-batches)
            # is part of each iteration of this loop: its state is this loop's state.
            yield from _block(a, stmt.body, scope, fresh | set(_keys(stmt.target)), results)
            continue
        if isinstance(stmt, ast.Try):
            yield from _block(a, stmt.body, scope, fresh, results)
            for h in stmt.handlers:
                yield from _block(a, h.body, scope, set(fresh), dict(results))
            yield from _block(a, stmt.orelse, scope, fresh, results)
            yield from _block(a, stmt.finalbody, scope, fresh, results)
            continue
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        written = frozenset(k for t in targets for k in _keys(t))
        zipped = zipped_update(value)
        if zipped is not None and applies_gradients(zipped):
            # `params = [p - lr * g for p, g in zip(params, grads)]`: SGD written as a comprehension
            carried = written & _read_by(zipped) - fresh
            if carried:
                yield zipped, carried
            fresh |= written
            continue
        call = value.value if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call) else value
        if isinstance(call, ast.Call):
            if _a_step(a, call, scope):
                # The receiver is read too: `model, info = model.update(batch)` replaces `model`.
                receiver = _keys(call.func.value) if isinstance(call.func, ast.Attribute) and (
                    a.jit_info(call.func, scope) is not None or a.resolve_def(call.func, scope) is not None) else []
                read = _read_by(call)
                read |= frozenset(receiver)
                carried = (written & read) - fresh
                if carried:
                    yield call, carried
                elif (rebuilt := _rebuilt_from(call, written, results)) is not None:
                    yield rebuilt  # `bundle = Bundle(state=new_state, ...)`, a class of the user's package
                else:
                    # `out = f(s)`, also `new_state, loss = f(s)`: each name bound to a result
                    for t in targets:
                        for n in ([t] if isinstance(t, ast.Name) else t.elts if isinstance(t, (ast.Tuple, ast.List))
                                  else []):
                            if isinstance(n, ast.Name):
                                results[n.id] = (call, read - fresh)
            elif (rebuilt := _rebuilt_from(call, written, results)) is not None:
                yield rebuilt
        elif isinstance(value, ast.BinOp):
            # `theta = theta + eps * grad_fn(theta, y)`: gradient ascent written as arithmetic on
            # a step's result; the step's arguments carry the state the statement replaces.
            for inner in astutil.walk(value):
                if isinstance(inner, ast.Call) and _a_step(a, inner, scope):
                    carried = (written & _read_by(inner)) - fresh
                    if carried:
                        yield inner, carried
                        break
        else:
            # `s = out.state`, `s = out["s"]`, and `s, n = s_, n_` (the results renamed at once)
            for part in value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]:
                base = part
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in results:
                    call, read = results[base.id]
                    if written & read:
                        yield call, written & read
                        break
        fresh |= written


def _rebuilt_from(call: ast.Call, written: frozenset[str], results) -> tuple[ast.Call, frozenset[str]] | None:
    """`bundle = Bundle(state=new_state, ...)` or `state = state.replace(params=new_params)` after
    `new_state, m = step(bundle.state, x)`: the state the step read is rebuilt around its result
    (a wrapper, a dataclass replace), which replaces it as surely as `bundle.state = new_state`."""
    # Only a container built around the value: a class (`Bundle(...)`, `TrainState(...)`) or a
    # `replace`; any other call of a result computes new data from it (`env.step(action)`,
    # `jnp.argmax(logits)`: fed back, fed_back_calls, not the step's own state).
    name = dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    if not (last[:1].isupper() or last in ("replace", "_replace")):
        return None
    for arg in [*call.args, *(kw.value for kw in call.keywords)]:
        base = arg
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        if isinstance(base, ast.Name) and base.id in results:
            step, read = results[base.id]
            carried = frozenset(k for k in read if k in written or k.split(".")[0] in written)
            if carried:
                return step, carried
    return None


def _read_by(call: ast.Call) -> frozenset[str]:
    """The names (and dotted keys) a call's arguments read."""
    return frozenset(k for arg in [*call.args, *(kw.value for kw in call.keywords)] for k in _keys(arg))


def fed_back_calls(a: Analysis, loop: ast.AST, scope: Scope):
    """(call, names) for each step-like call in the loop's own statements whose result flows,
    through any computation later in the same iteration, into the next value of an argument it
    read: `logits = model(tokens)`, `nxt = sample(logits)`, `tokens = jnp.concatenate([tokens,
    nxt])` - a decoder feeding its output back. Each iteration then depends on the one before,
    however the result is transformed. Kept apart from `replaced_state_calls`: the fed-back value
    is new data, not the call's own state (nothing here could be donated)."""
    if not isinstance(loop, LOOP_TYPES):
        return
    fresh = set(_keys(loop.target)) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    derived: dict[str, list[tuple[ast.Call, frozenset[str]]]] = {}
    seen: set[int] = set()
    for stmt in _own_assignments(loop.body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        written = frozenset(k for t in targets for k in _keys(t))
        origins = [o for n in astutil.walk(stmt.value) if isinstance(n, ast.Name) for o in derived.get(n.id, ())]
        value = stmt.value.value if isinstance(stmt.value, ast.Subscript) else stmt.value
        if isinstance(value, ast.Call) and _a_step(a, value, scope):
            read = _read_by(value)
            origins.append((value, read - fresh))
        for call, read in origins:
            back = (written & read) - fresh
            if back and id(call) not in seen and call is not value:
                seen.add(id(call))
                yield call, back
        for t in written:
            derived[t] = origins
        fresh |= written


def _own_assignments(body: list[ast.stmt]):
    """Assignments in the loop body, in order, through `if`/`with`/`try` blocks (not inner loops)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) or (isinstance(stmt, ast.AnnAssign) and stmt.value is not None):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for block in (getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from _own_assignments(block)


def _few(a: Analysis, loop: ast.For | ast.AsyncFor, scope: Scope) -> bool:
    n = trip_count(loop.iter, a, scope)
    return n is not None and n <= SMALL_LOOP


def _a_step(a: Analysis, call: ast.Call, scope: Scope) -> bool:
    """A call that can run a step: a jitted callable, a local or project function, a method, an
    unknown callable. Not a JAX or NumPy operation (`x = jnp.tanh(x)`), not a builtin."""
    if a.jit_info(call.func, scope) is not None:
        return True
    q = a.qualname(call.func)
    if q is not None:
        if a.project is not None and a.project.function(q) is not None:
            return True
        # A function of the user's own package (not a numerical library's operation) may well be
        # the step: `state = train_step(state, batch)` imported from elsewhere. So is a library
        # call that applies gradients (`params = jax.tree.map(lambda p, g: p - lr * g, params,
        # grads)`: SGD written inline; a tree map of anything else is arithmetic, not a step).
        if q in GRADIENT_APPLIERS:
            return q in UPDATE_APPLIERS or applies_gradients(call)
        return not q.startswith(LIBRARIES)
    if isinstance(call.func, ast.Name) and a.is_builtin(call.func, scope):
        return False
    if isinstance(call.func, ast.Attribute) and a.kind(call.func.value, scope) in ("jax", "np", "scalar"):
        return False  # `x = x.reshape(...)`: a method of an array, not a step
    # A callable looked up in a container (`fns["step"](state, batch)`) is as unknown as a name.
    return isinstance(call.func, (ast.Name, ast.Attribute, ast.Subscript))


def _keys(expr: ast.AST) -> list[str]:
    """The names an expression passes or binds: `s`, `self.s`, the elements of a tuple."""
    if isinstance(expr, ast.Starred):
        return _keys(expr.value)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return [k for e in expr.elts for k in _keys(e)]
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.Attribute):
        d = dotted(expr)
        return [d] if d is not None else []
    return []


def own_calls(body: list[ast.stmt]) -> tuple[list[ast.Call], list[ast.Call]]:
    """A loop body's calls split in two: those of its own statements, and those inside its inner
    loops (nested defs in neither)."""
    inner = list(calls_in(list(inner_loops(body))))
    seen = set(inner)
    return [c for c in calls_in(body) if c not in seen], inner


def inner_loops(body: list[ast.stmt]):
    for stmt in body:
        if isinstance(stmt, LOOP_TYPES):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for block in (getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from inner_loops(block)
