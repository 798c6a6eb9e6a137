"""The module's imports, for a fix: what a name refers to through them (`jnp.zeros` is
`jax.numpy.zeros`), how to reach a module or a name of it, and where a new import goes.

Separate from `_cst.py` and `_edits.py` because it both reads (qualify) and writes (ensure, add):
it builds on the tree and on the edits.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.fixes._cst import Tree, fields_children, module_names
from jaxmem.evaluators.review.fixes._edits import Edits, take_leading


# ---- imports ---------------------------------------------------------------------------------
def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _record(scan: _Scan, s: cst.CSTNode) -> None:
    if isinstance(s, cst.Import):
        for a in s.names:
            full = _dotted(a.name)
            if a.asname is not None:
                scan.modules.setdefault(full, a.asname.name.value)
            else:
                top = full.split(".")[0]
                scan.modules.setdefault(top, top)
                if "." in full:
                    scan.modules.setdefault(full, full)
    elif isinstance(s, cst.ImportFrom) and s.module is not None and not s.relative and not isinstance(
            s.names, cst.ImportStar):
        mod = _dotted(s.module)
        for a in s.names:
            name = a.name.value if isinstance(a.name, cst.Name) else _dotted(a.name)
            local = a.asname.name.value if a.asname is not None else name
            scan.names.setdefault(f"{mod}.{name}", local)
            scan.modules.setdefault(f"{mod}.{name}", local)  # `from jax import numpy as jnp`


class _Scan:
    """The module's top-level imports as written, read once per source."""

    def __init__(self, t: Tree):
        self.modules: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.last_import: cst.BaseStatement | None = None
        self.first_code: cst.BaseStatement | None = None
        body = t.module.body
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                    isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                for s in stmt.body:
                    _record(self, s)
                if self.first_code is None:
                    self.last_import = stmt
            elif self.first_code is None and not (i == 0 and _is_docstring(stmt)):
                self.first_code = stmt
        # Imports later in the module (or in a try block) still bind names the fix may reuse.
        for node in _module_scope_imports(t.module):
            _record(self, node)
        self.bound = module_names(t.source)


def _module_scope_imports(module: cst.Module):
    """The imports that bind in the module's scope, in source order: in its body, in blocks of
    compound statements and class bodies, not in functions. Statements only are entered (an
    import is never inside an expression), which keeps this to a few hundred nodes."""
    stack = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            yield node
            continue
        if isinstance(node, (cst.FunctionDef, cst.BaseExpression)):
            continue
        stack.extend(reversed(fields_children(node)))


class Imports:
    """The module's top-level imports: how a module or a name of it is reachable, and where a new
    import goes (after the last import of the module's import block, or after the docstring and
    `__future__` imports)."""

    def __init__(self, t: Tree):
        self.t = t
        # The module scan is shared by every fix of one source (Tree.memo); what `ensure` adds
        # goes to this instance's own copies.
        scan = t.memo.get("imports")
        if scan is None:
            scan = t.memo["imports"] = _Scan(t)
        self.modules: dict[str, str] = dict(scan.modules)  # "jax.numpy" -> "jnp"; "jax" -> "jax"
        self.names: dict[str, str] = dict(scan.names)      # "functools.partial" -> "partial"
        self.last_import = scan.last_import
        self.first_code = scan.first_code
        self.bound = scan.bound

    def reach(self, dotted: str) -> str | None:
        """How code can name `dotted` ("jax.numpy", "functools.partial") with what is imported."""
        if dotted in self.modules:
            return self.modules[dotted]
        if dotted in self.names:
            return self.names[dotted]
        parts = dotted.split(".")
        for k in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:k])
            if head in self.modules:
                return ".".join([self.modules[head], *parts[k:]])
        return None

    def ensure(self, module: str, alias: str | None, edits: Edits, new: list[str]) -> str | None:
        """A name for `module` (importing it as `alias` when nothing reaches it yet); None when the
        alias is taken by something else. `new` collects the import lines to add."""
        have = self.reach(module)
        if have is not None:
            return have
        name = alias or module.split(".")[0]
        if name in self.bound and name not in self.modules.values():
            return None
        line = f"import {module}" + (f" as {alias}" if alias and alias != module else "")
        if line not in new:
            new.append(line)
        self.modules[module] = alias or module
        return alias or module

    def ensure_name(self, module: str, name: str, edits: Edits, new: list[str]) -> str | None:
        """`partial` from `functools`: the existing binding, `functools.partial`, or a new import."""
        have = self.reach(f"{module}.{name}")
        if have is not None:
            return have
        if name in self.bound:
            mod = self.ensure(module, None, edits, new)
            return None if mod is None else f"{mod}.{name}"
        line = f"from {module} import {name}"
        if line not in new:
            new.append(line)
        self.names[f"{module}.{name}"] = name
        return name

    def add(self, edits: Edits, new: list[str]) -> None:
        """Insert the collected import lines where the module's imports are."""
        if not new:
            return
        stmts = [cst.parse_statement(line + "\n") for line in new]
        if self.last_import is not None:
            edits.insert_after(self.last_import, stmts)
        elif self.first_code is not None:
            edits.insert_before(self.first_code, take_leading(self.first_code, stmts, edits))
        elif self.t.module.body:
            edits.insert_after(self.t.module.body[-1], stmts)
        else:
            edits.replace[id(self.t.module)] = self.t.module.with_changes(body=stmts)
            edits._keep.append(self.t.module)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def is_future_import(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and s.module is not None and _dotted(s.module) == "__future__"
        for s in stmt.body))


def qualify(imports: Imports, node: cst.CSTNode) -> str | None:
    """The dotted name a Name/Attribute refers to through the module's imports (`jnp.zeros` ->
    `jax.numpy.zeros`, `jit` -> `jax.jit` after `from jax import jit`), or None."""
    dotted = _dotted(node)
    if not dotted:
        return None
    head, _, rest = dotted.partition(".")
    for full, local in imports.modules.items():
        if local == head:
            return f"{full}.{rest}" if rest else full
    for full, local in imports.names.items():
        if local == head:
            return f"{full}.{rest}" if rest else full
    return None


dotted = _dotted
