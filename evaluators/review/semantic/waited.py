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
import sys

from jaxmem.evaluators.review.semantic.names import pos

# Packages whose functions return host values as often as device arrays, or are JAX itself and
# NumPy (their kinds are known by name): one waited result says nothing about their other functions.
_FRAMEWORKS = frozenset({"jax", "jaxlib", "numpy", "flax", "optax", "equinox", "haiku", "orbax", "chex",
                         "tensorflow", "torch", "tf", "scipy", "pandas", "ml_collections", "wandb"})
# JAX and NumPy are known by name; the standard library returns no device arrays.
_NOT_ARRAYS = frozenset({"jax", "numpy"}) | frozenset(sys.stdlib_module_names)


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
                            if q is not None and q.split(".", 1)[0] not in _NOT_ARRAYS:
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
    return a.project_return_kind(f"{cls}.{func.attr}", strict) if cls is not None else None
