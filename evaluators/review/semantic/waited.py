"""Kinds the reviewed code states itself: results it waits on, methods of the tree's classes.

A library the reviewer cannot see (`s2fft.inverse`, a solver package) returns host or device
values, and nothing in its name says which. The code under review says so where it blocks on a
result: `s2fft.forward(...).block_until_ready()` or `jax.block_until_ready(res)` after `res =
lib.solve(...)`. NumPy arrays and Python numbers have no `block_until_ready`, so whoever wrote
that knew the call returns JAX arrays. The same function called elsewhere in the module then
returns device arrays too; so, as a guess, do the other functions of that package, unless it is a
general framework whose API mixes host and device values (flax's serialisation returns bytes).
Both are guesses for the possible tier: the call is not resolved exactly.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import (
    JAX_ARRAY_PREFIXES,
    JAX_LIBRARIES,
    KNOWN_BY_NAME,
    passed_argument,
    pos,
)

# Packages whose functions return host values as often as device arrays: one waited result says
# nothing about their other functions. (JAX and NumPy never get here: KNOWN_BY_NAME.)
_FRAMEWORKS = JAX_LIBRARIES | frozenset({"orbax", "tensorflow", "torch", "tf", "scipy", "pandas", "ml_collections",
                                         "wandb"})


def waited_kind(a, qualname: str) -> str | None:
    """"jax" when the module waits on the result of `qualname` somewhere, or (outside the
    frameworks) on that of another function of its top-level package; else None."""
    functions, packages = _waited(a)
    if qualname in functions:
        return "jax"
    top = qualname.split(".", 1)[0]
    return "jax" if top in packages and top not in _FRAMEWORKS else None


def _waited(a) -> tuple[frozenset[str], frozenset[str]]:
    memo = a.memo
    if "waited" not in memo:
        found: set[str] = set()
        if any("block_until_ready" in line for line in a.lines):
            for scope in a.scopes.values():
                for call in scope.calls:
                    target = _blocked(a, call)
                    parts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                    for t in parts:
                        if isinstance(t, ast.Name):
                            # the value the name holds where it is waited on, in this scope
                            b = a.resolve(t.id, scope, pos(call))
                            t = b.value if b is not None and b.how == "assign" else None
                        if isinstance(t, ast.Call):
                            q = a.qualname(t.func)
                            if q is not None and q.split(".", 1)[0] not in KNOWN_BY_NAME:
                                found.add(q)
        memo["waited"] = (frozenset(found), frozenset(q.split(".", 1)[0] for q in found))
    return memo["waited"]


def _blocked(a, n: ast.Call) -> ast.AST | None:
    """What `x.block_until_ready()` or `jax.block_until_ready(x)` waits on."""
    if isinstance(n.func, ast.Attribute) and n.func.attr == "block_until_ready" and not n.args:
        return n.func.value
    if n.args and a.qualname(n.func) == "jax.block_until_ready":
        return n.args[0]
    return None


def method_kind(a, func: ast.Attribute, scope, strict: bool) -> str | None:
    """`specter.spectralEMD(x, y)` on `specter = SPECTER()`, a class imported from another file of
    the reviewed tree: what that method returns there (project facts)."""
    if a.project is None or not isinstance(func.value, ast.Name):
        return None
    cls = a.constructor_of(func.value, scope)
    if cls is None:
        return None
    # `state = DDPMState.setup(cfg)`: a factory on the class, read as making one of it (a guess,
    # never strict), so `state.train_step(x)` is that class's method (model.made_facts).
    return project_kind(a.made_facts(cls, func.attr, guess=not strict), strict)


def project_kind(facts, strict: bool) -> str | None:
    """What a function of another file of the tree returns, by its facts: device arrays for a
    jitted callable (strict: one known exactly), else its recorded return kind."""
    if facts is not None and facts.jit is not None:
        return "jax" if facts.jit.exact or not strict else None
    return None if facts is None else facts.returns_strict if strict else facts.returns


def passed_kind(a, b) -> str | None:
    """`run_solver("CG", cg, A, b)` and `run_solver("BiCGSTAB", bicgstab, A, b)` where `def
    run_solver(name, solver_fn, A, b)` calls `solver_fn(A, b)`: what the parameter holds comes
    from the module's calls of the function. When every one passes a function of JAX's own
    (`jax.scipy.sparse.linalg.cg`) or a jitted one, calling the parameter returns device arrays.
    A guess (another module may pass something else): possible."""
    fn = b.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    calls = calls_by_name(a).get(fn.name)
    if not calls:
        return None
    for call, scope in calls:
        arg = passed_argument(call, fn, b.name)
        if arg is None:
            return None
        q = a.qualname(arg)
        if not (q is not None and q.startswith(JAX_ARRAY_PREFIXES) or a.jit_info(arg, scope) is not None):
            return None
    return "jax"


def calls_by_name(a) -> dict[str, list]:
    """Function name -> (call, scope) for the module's calls of a bare name."""
    memo = a.memo
    if "calls_by_name" not in memo:
        out: dict[str, list] = {}
        for scope in a.scopes.values():
            for call in scope.calls:
                if isinstance(call.func, ast.Name):
                    out.setdefault(call.func.id, []).append((call, scope))
        memo["calls_by_name"] = out
    return memo["calls_by_name"]
