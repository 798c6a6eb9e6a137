"""The reviewer's semantic model of a module: the one thing every rule reads.

Like ruff's `ruff_python_semantic`, the model is built once per file and queried by rules; no
rule keeps its own list of exceptions. It knows, per module:

- names: import aliases resolved once; every binding per scope with its position, so a name
  resolves as Python resolves it (model.py, scopes.py);
- jitted callables however they were made, and what each one donates and treats as static,
  with the donation semantics of jit, pmap, pjit and the framework wrappers (jit.py,
  callables.py);
- traced code: bodies given to jit, grad, vmap, lax control flow, custom rules, kernels, Module
  methods (traced.py);
- value kinds by data flow: device array, NumPy array, Python scalar, host list, unknown, through
  assignments, tuple unpacking, subscripts and attributes of results, returns and calls, with a
  strict reading that says when a kind is proven rather than guessed (kinds.py);
- loops by role (training, evaluation, decoding, setup, epochs) and branches that run once per
  N steps (loops.py); host reads and explicit waits (syncs.py); sizes the source fixes (sizes.py).

`build(tree, lines)` returns the `Analysis`; `project.py` carries facts across the files of one
reviewed tree.
"""
from __future__ import annotations

import ast
import dataclasses

from jaxmem.evaluators.review.astutil import own_returns
from jaxmem.evaluators.review.semantic import exports
from jaxmem.evaluators.review.semantic.builder import _Builder
from jaxmem.evaluators.review.semantic.jit import JitInfo
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import absolute_module, import_bindings, pos
from jaxmem.evaluators.review.semantic.scopes import Binding, ClassInfo, Scope
from jaxmem.evaluators.review.semantic.traced import functions_in, mark_traced

__all__ = ["Analysis", "Binding", "ClassInfo", "JitInfo", "Scope", "absolute_module", "build", "returned_jit"]


def _resolve_pending(a: Analysis, builder: _Builder) -> None:
    for info, wrapped, scope in builder.pending_params:
        info.params = a.params_of(wrapped, scope)
        for fn in functions_in(a, wrapped, scope) if wrapped is not None else ():
            s = a.scopes.get(fn)
            if s is not None and s.jit is None:
                s.jit = info
    for b, fn in builder.pending_returns:
        if isinstance(fn, tuple):  # (a method call's `self.make_step`, its scope)
            fn = a.resolve_def(*fn)
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
        b.info = returned_jit(a, fn, b.index)


def returned_jit(a: Analysis, fn, index: int | None) -> JitInfo | None:
    """The jitted callable a factory returns (in position `index` of the tuple it returns):
    `return jax.jit(...)`, `return step` where `step = jax.pmap(...)` or `@jax.jit def step`."""
    memo = a.memo.setdefault("returned_jit", {})
    if (fn, index) not in memo:
        memo[(fn, index)] = None  # recursion guard
        memo[(fn, index)] = _returned_jit(a, fn, index)
    return memo[(fn, index)]


def _returned_jit(a: Analysis, fn, index: int | None) -> JitInfo | None:
    scope = a.scopes.get(fn)
    if scope is None or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    found_info, plain = None, False
    for n in own_returns(fn):
        if n.value is None or (isinstance(n.value, ast.Constant) and n.value.value is None):
            continue  # `return None` on a path that fails: what the factory makes otherwise
        value = n.value
        if index is not None:
            if not (isinstance(value, ast.Tuple) and index < len(value.elts)):
                continue
            value = value.elts[index]
        info = _jit_returned(a, value, scope)
        if info is None:
            plain = True
        elif found_info is None:
            found_info = info
    if found_info is None and index is None:
        inner = a.returned_def(fn)  # `return _eval_fn`, a `@jax.jit` def in the factory
        if inner is not None and inner in a.jitted_defs:
            return a.jitted_defs[inner]
    if found_info is not None and plain and found_info.exact:
        # `return circuit` on one path, `return jax.jit(circuit)` on another: what a call of
        # the factory gives is jitted only on some paths, not proven.
        found_info = dataclasses.replace(found_info, exact=False)
    return found_info


def _jit_returned(a: Analysis, value: ast.AST, scope) -> JitInfo | None:
    if isinstance(value, ast.Call):
        return a.made_jit(value, scope)
    if isinstance(value, ast.Name):
        found = scope.reaching(value.id, pos(value))
        if found and found[0].info is not None:
            return found[0].info
        if found and found[0].how == "def" and found[0].node in a.jitted_defs:
            return a.jitted_defs[found[0].node]
    return None


def build(tree: ast.Module, lines: list[str], module: str | None = None, project=None) -> Analysis:
    """The model of one module. `module`: its dotted name in a reviewed tree (relative imports
    resolve through it); `project`: the tree's other files (project.Project), followed on demand."""
    a = Analysis(tree, lines)
    a.module_name, a.project = module, project
    # Imports first: decorators and assignments below may refer to names imported later in
    # the walk order (imports inside functions, or after use in a notebook cell).
    own = None
    for node in _top_level(tree):
        # `from utils.imports import *` of a module of the reviewed tree: what it binds (`jax`,
        # `partial`, its own functions) is bound here too, unless this file binds the name itself.
        star = exports.star_import(project, node, module)
        if star is not None:
            own = _own_top_level_names(tree) if own is None else own
            for name, target in star.items():
                if name not in own:
                    a.aliases.setdefault(name, target)
            continue
        for name, target in import_bindings(node, module, a.from_import, package=a.is_package):
            a.aliases.setdefault(name, target)
    _conventional_aliases(a, tree)
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
    mark_traced(a)
    a.built = True
    return a


# The names JAX code conventionally imports under, for code that uses them without importing them
# (a snippet pasted without its imports, a notebook whose import cell is in another notebook).
CONVENTIONAL = {"jax": "jax", "jnp": "jax.numpy", "lax": "jax.lax", "np": "numpy", "optax": "optax"}


def _conventional_aliases(a: Analysis, tree: ast.Module) -> None:
    """Only where the module imports nothing of JAX and uses `jax.`/`jnp.`: each conventional
    name it reads and binds nowhere (no import, assignment, parameter or def) resolves as usual."""
    if any(v == "jax" or v.startswith("jax.") for v in a.aliases.values()):
        return
    if not any("jnp." in line or "jax." in line for line in a.lines):
        return
    bound: set[str] = set()
    read: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((al.asname or al.name).split(".")[0] for al in n.names)
    for name, target in CONVENTIONAL.items():
        if name in read and name not in bound and name not in a.aliases:
            a.aliases[name] = target


def _own_top_level_names(tree: ast.Module) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _top_level(tree: ast.Module):
    """Module statements, including those inside top-level `if`/`try` (guarded imports)."""
    stack = list(reversed(tree.body))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.If, ast.Try)):
            for block in (n.body, n.orelse, getattr(n, "finalbody", []), *[h.body for h in getattr(n, "handlers", [])]):
                stack.extend(reversed(block))
