"""JM601 fix: move an `XLA_*` or `JAX_*` environment variable set too late to before the first import.

    import jax                                        import os
    print(jax.devices())                              os.environ["XLA_FLAGS"] = "..."
    os.environ["XLA_FLAGS"] = "..."          ->       import jax
                                                      print(jax.devices())

Only a module-level statement that sets the variable from literals (`os.environ[K] = "v"`,
`os.environ.update({...})`, `os.environ.setdefault(K, "v")`, `os.putenv`) moves, with its comments,
to just before the first import of anything but `os`, `sys` and `__future__` (after the docstring);
`import os` comes along when it is imported later. Safe: it is what the statement was written to do
(the variable now takes effect, which is the point), unless another statement between the new and
the old place sets the same variable or the statement reads the environment (then the order of
the two writes, or what it reads, would change). A variable set inside a function gets no fix.
"""
from __future__ import annotations

import ast

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import stmt_ast, tree
from jaxmem.evaluators.review.fixes._edits import Edits, moved, take_leading
from jaxmem.evaluators.review.fixes._imports import dotted, is_future_import
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix, message_fields

EARLY_MODULES = frozenset({"os", "sys", "__future__"})
ENV_BUILTINS = frozenset({"str", "int", "float", "bool", "True", "False", "None"})


def _imports_only(stmt: cst.BaseStatement, modules: frozenset[str]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Import):
            if any(dotted(a.name).split(".")[0] not in modules for a in s.names):
                return False
        elif isinstance(s, cst.ImportFrom):
            if s.module is None or dotted(s.module).split(".")[0] not in modules:
                return False
        else:
            return False
    return True


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body)


def _docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _keys_written(tree_: ast.AST | None) -> set[str]:
    out: set[str] = set()
    if tree_ is None:
        return out
    for n in ast.walk(tree_):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.slice, ast.Constant):
            out.add(str(n.slice.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr in ("setdefault", "putenv", "__setitem__") and n.args and isinstance(n.args[0], ast.Constant):
                out.add(str(n.args[0].value))
            elif n.func.attr == "update" and n.args and isinstance(n.args[0], ast.Dict):
                out |= {str(k.value) for k in n.args[0].keys if isinstance(k, ast.Constant)}
            elif n.func.attr == "update":
                out |= {k.arg for k in n.keywords if k.arg}
    return out


def _reads_env(tree_: ast.AST | None) -> bool:
    """Reads the environment (`os.environ.get`, `os.environ[K]` loaded, `os.getenv`)."""
    if tree_ is None:
        return False
    for n in ast.walk(tree_):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and "environ" in ast.unparse(n.value):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "getenv", "copy",
                                                                                              "items", "pop"):
            return True
    return False


def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    t = tree(source)
    node = next(iter(t.at_all(finding, (cst.Assign, cst.Call, cst.Expr))), None)
    if node is None:
        return None
    stmt = t.statement(node)
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or t.parent(stmt) is not t.module:
        return None   # in a function or a block: when it runs is the code's business
    tree_ = stmt_ast(t, stmt)
    reads = {n.id for n in ast.walk(tree_) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} \
        if tree_ is not None else {"?"}
    if reads - {"os", "environ"} - ENV_BUILTINS:
        return None   # the value comes from the program: it cannot run before the imports
    body = list(t.module.body)
    index = next(i for i, s in enumerate(body) if s is stmt)
    first = next((i for i, s in enumerate(body) if _is_import(s) and not _imports_only(s, EARLY_MODULES)
                  and not is_future_import(s)), None)
    if first is None or first >= index:
        return None
    edits = Edits()
    edits.delete(stmt)
    new = [moved(stmt)]
    # `import os` (or `from os import environ`) the statement needs, when it comes later.
    earlier = body[:first]
    for name, line in (("os", "import os\n"), ("environ", "from os import environ\n")):
        if name in reads and not any(name in _bound_by(s) for s in earlier):
            new.insert(0, cst.parse_statement(line))
    edits.insert_before(body[first], take_leading(body[first], new, edits))
    out = edits.apply(t)
    keys = _keys_written(tree_) or {message_fields(finding).get("key", "")}
    between = body[first:index]
    clash = any(_keys_written(stmt_ast(t, s)) & keys for s in between)
    safe = not clash and not _reads_env(tree_)
    key = message_fields(finding).get("key") or ", ".join(sorted(keys))
    return make_fix(finding, SAFE if safe else UNSAFE, f"set `{key}` before the first import", out)


def _bound_by(stmt: cst.BaseStatement) -> set[str]:
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Import):
                out |= {(a.asname.name.value if a.asname else dotted(a.name).split(".")[0]) for a in s.names}
            elif isinstance(s, cst.ImportFrom) and not isinstance(s.names, cst.ImportStar):
                out |= {(a.asname.name.value if a.asname else a.name.value) for a in s.names}
    return out
