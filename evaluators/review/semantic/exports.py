"""What a module of the reviewed tree binds for the files that import it.

`from .common import jax, jnp` binds what `common.py` imported itself (a re-export), and `from
utils.imports import *` binds every public name the module has: its own imports, functions and
classes, and what its own star imports bring. Read from the module's tree, parsed once per process
(Project.source_tree) and cached by the Project that asks (`project` below; not imported here,
which imports this module).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import absolute_module, import_bindings


def star_import(project, node: ast.AST, module: str | None) -> dict[str, str] | None:
    """What `node` binds when it is `from <module of the tree> import *` (empty when that module is
    not in the tree, or no tree is reviewed); None when `node` is no star import."""
    if not (isinstance(node, ast.ImportFrom) and node.names[0].name == "*"):
        return None
    base = absolute_module(node, module, project is not None and project.is_package(module))
    return project.star_exports(project.beside(base, module)) if base and project is not None else {}


def top_level_imports(project, path: str, module: str) -> dict[str, str]:
    """Names a module binds by its own top-level imports, to the absolute names they stand for
    (a star import of another module of the tree included)."""
    got = project.source_tree(path, needs=b"import")
    return _imports_of(project, got[1], module) if got is not None else {}


def _imports_of(project, tree: ast.Module, module: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        star = star_import(project, node, module)
        if star is not None:
            for name, target in star.items():
                out.setdefault(name, target)
            continue
        for name, target in import_bindings(node, module, package=project.is_package(module)):
            out[name] = target
    return out


def star_names(project, dotted: str, module: str) -> dict[str, str]:
    """What `from <dotted> import *` binds (Project.star_exports, which caches it)."""
    got = project.source_tree(project.files[module])
    if got is None:
        return {}
    tree = got[1]
    out = _imports_of(project, tree, module)  # the same tree: a module not kept is parsed once here
    public = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = f"{dotted}.{node.name}"
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple))
              and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)):
            public = {e.value for e in node.value.elts}
    return {n: t for n, t in out.items() if (n in public if public is not None else not n.startswith("_"))}
