"""What every fix shares: one parse of the source (LibCST, which keeps comments and formatting),
finding a finding's node, editing statements in place, and the imports an edit needs.

A fix never guesses: when the code is not in a shape it knows how to rewrite, it returns None and
the finding stays as it is. The rewritten source must parse (checked by the driver).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from jaxmem.evaluators.review.finding import Finding

LOOPS = (cst.For, cst.While)
SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)
BLOCKS = (cst.Module, cst.IndentedBlock)


class Tree:
    """One parse of a source, with node positions and parents (the only metadata fixes read)."""

    def __init__(self, source: str):
        self.source = source
        self.module = cst.parse_module(source)
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self._pos = wrapper.resolve(PositionProvider)
        self._parent = wrapper.resolve(ParentNodeProvider)
        self.lines = source.splitlines()

    # ---- where things are -------------------------------------------------------------------
    def pos(self, node: cst.CSTNode) -> tuple[int, int]:
        """(line, column) of the node's start, 1-based line, 0-based column in characters."""
        start = self._pos[node].start
        return start.line, start.column

    def end(self, node: cst.CSTNode) -> tuple[int, int]:
        end = self._pos[node].end
        return end.line, end.column

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parent.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        p = self.parent(node)
        while p is not None:
            yield p
            p = self.parent(p)

    def char_col(self, line: int, byte_col: int) -> int:
        """A finding's column is the ast's (UTF-8 bytes, 1-based); LibCST counts characters from 0."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text.encode("utf-8")[:max(byte_col - 1, 0)].decode("utf-8", errors="ignore"))

    def at(self, finding: Finding, types: tuple[type, ...]) -> cst.CSTNode | None:
        """The outermost node of `types` that starts exactly where the finding points."""
        where = (finding.line, self.char_col(finding.line, finding.col))
        found = None
        for node in self.walk():
            if isinstance(node, types) and node in self._pos and self.pos(node) == where:
                if found is None or self._contains(node, found):
                    found = node
        return found

    def at_all(self, finding: Finding, types: tuple[type, ...]) -> list[cst.CSTNode]:
        """Every node of `types` that starts where the finding points, outermost first."""
        where = (finding.line, self.char_col(finding.line, finding.col))
        found = [n for n in self.walk() if isinstance(n, types) and n in self._pos and self.pos(n) == where]
        return sorted(found, key=lambda n: -len(list(self.walk(n))))

    def _contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return any(a is outer for a in self.ancestors(inner))

    def walk(self, root: cst.CSTNode | None = None) -> Iterator[cst.CSTNode]:
        stack = [root or self.module]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def statement(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement (a line of simple statements, or a compound one) that holds `node`."""
        for n in [node, *self.ancestors(node)]:
            if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return n
        return None

    def body_of(self, stmt: cst.BaseStatement) -> tuple[cst.CSTNode, int] | None:
        """The block (module or indented block) that lists `stmt`, and its index there."""
        block = self.parent(stmt)
        if isinstance(block, BLOCKS):
            for i, s in enumerate(block.body):
                if s is stmt:
                    return block, i
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Loops around `node` in its own function, innermost first (its body, not its header)."""
        out = []
        child = node
        for p in self.ancestors(node):
            if isinstance(p, SCOPES):
                break
            if isinstance(p, LOOPS) and child is p.body:
                out.append(p)
            child = p
        return out

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        for p in self.ancestors(node):
            if isinstance(p, (cst.FunctionDef, cst.Module)):
                return p
        return self.module

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


@lru_cache(maxsize=16)
def tree(source: str) -> Tree:
    """Fixes are pure functions over source text; one parse serves every fix of one source."""
    return Tree(source)


# ---- names, read with the stdlib ast (what the reviewer reads too) --------------------------------
def expr_ast(t: Tree, node: cst.CSTNode) -> ast.AST | None:
    code = t.code(node).strip()
    try:
        return ast.parse(f"({code})", mode="eval").body
    except SyntaxError:
        try:
            return ast.parse(code)
        except SyntaxError:
            return None


def free_names(tree_: ast.AST | None) -> set[str]:
    """Names an expression or statement reads from outside (its own lambda parameters and
    comprehension variables excluded)."""
    if tree_ is None:
        return set()
    bound: set[str] = set()
    for n in ast.walk(tree_):
        if isinstance(n, ast.Lambda):
            a = n.args
            bound |= {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
            bound |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
        elif isinstance(n, ast.comprehension):
            bound |= {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}
    return {n.id for n in ast.walk(tree_) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def stored_names(tree_: ast.AST | None) -> set[str]:
    """Names a piece of code binds anywhere inside it (assignments, loop targets, with-as, defs,
    imports, walrus, except-as), not counting nested functions' own locals."""
    out: set[str] = set()
    if tree_ is None:
        return out
    stack = [tree_]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            stack.extend(n.decorator_list)
            continue
        elif isinstance(n, ast.Lambda):
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    return out


def stmt_ast(t: Tree, node: cst.CSTNode) -> ast.AST | None:
    import textwrap

    try:
        return ast.parse(textwrap.dedent(t.code(node)))
    except SyntaxError:
        return None


def module_names(source: str) -> set[str]:
    """Every name the source mentions anywhere: a new name must avoid all of them."""
    try:
        tree_ = ast.parse(source)
    except SyntaxError:
        return set()
    out = {n.id for n in ast.walk(tree_) if isinstance(n, ast.Name)}
    out |= {n.arg for n in ast.walk(tree_) if isinstance(n, ast.arg)}
    out |= {n.name for n in ast.walk(tree_) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    out |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree_) if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names}
    return out


def fresh_name(source: str, base: str, taken: Iterable[str] = ()) -> str:
    used = module_names(source) | set(taken)
    if base not in used:
        return base
    i = 1
    while f"{base}_{i}" in used:
        i += 1
    return f"{base}_{i}"


# ---- editing ---------------------------------------------------------------------------------
class Edits(cst.CSTTransformer):
    """Replace nodes, and insert or remove statements, by the identity of the parsed nodes.

    Replacements are computed from the original nodes, so one fix's edits must not nest (no fix
    here edits a node and something inside it at once)."""

    def __init__(self):
        super().__init__()
        self.replace: dict[int, cst.CSTNode] = {}
        self.before: dict[int, list[cst.BaseStatement]] = {}
        self.after: dict[int, list[cst.BaseStatement]] = {}
        self.remove: set[int] = set()
        self.strip: set[int] = set()     # statements whose comment lines move to an inserted one
        self._keep: list[cst.CSTNode] = []  # ids are only stable while the nodes live

    def sub(self, old: cst.CSTNode, new: cst.CSTNode) -> Edits:
        self._keep.append(old)
        self.replace[id(old)] = new
        return self

    def insert_before(self, stmt: cst.BaseStatement, new: list[cst.BaseStatement]) -> Edits:
        self._keep.append(stmt)
        self.before.setdefault(id(stmt), []).extend(new)
        return self

    def insert_after(self, stmt: cst.BaseStatement, new: list[cst.BaseStatement]) -> Edits:
        self._keep.append(stmt)
        self.after.setdefault(id(stmt), []).extend(new)
        return self

    def delete(self, stmt: cst.BaseStatement) -> Edits:
        self._keep.append(stmt)
        self.remove.add(id(stmt))
        return self

    def strip_leading(self, stmt: cst.BaseStatement) -> Edits:
        self._keep.append(stmt)
        self.strip.add(id(stmt))
        return self

    def on_leave(self, original, updated):
        if id(original) in self.replace:
            return self.replace[id(original)]
        if id(original) in self.strip:
            updated = updated.with_changes(leading_lines=())
        if isinstance(original, BLOCKS) and any(
                id(s) in self.before or id(s) in self.after or id(s) in self.remove for s in original.body):
            body: list[cst.BaseStatement] = []
            for orig, upd in zip(original.body, updated.body):
                body.extend(self.before.get(id(orig), []))
                if id(orig) not in self.remove:
                    body.append(upd)
                body.extend(self.after.get(id(orig), []))
            if isinstance(original, cst.IndentedBlock) and not body:
                body = [cst.SimpleStatementLine([cst.Pass()])]
            return updated.with_changes(body=body)
        return updated

    def apply(self, t: Tree) -> str:
        return t.module.visit(self).code


def moved(stmt: cst.BaseStatement, leading: Iterable[cst.EmptyLine] | None = None) -> cst.BaseStatement:
    """A statement to insert elsewhere: its own comment lines travel with it (or `leading`)."""
    return stmt.with_changes(leading_lines=tuple(leading) if leading is not None else stmt.leading_lines)


def parse_statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def parse_expression(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def take_leading(stmt: cst.BaseStatement, new: list[cst.BaseStatement], edits: Edits) -> list[cst.BaseStatement]:
    """Statements inserted before `stmt` take its comment lines (a notebook's cell marker, a comment
    about the block): the block keeps reading as it did, and the insertion lands where it runs."""
    if not new or not stmt.leading_lines:
        return new
    edits.strip_leading(stmt)
    return [new[0].with_changes(leading_lines=(*stmt.leading_lines, *new[0].leading_lines)), *new[1:]]


# ---- imports ---------------------------------------------------------------------------------
def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class Imports:
    """The module's top-level imports: how a module or a name of it is reachable, and where a new
    import goes (after the last import of the module's import block, or after the docstring and
    `__future__` imports)."""

    def __init__(self, t: Tree):
        self.t = t
        self.modules: dict[str, str] = {}      # "jax.numpy" -> "jnp"; "jax" -> "jax"
        self.names: dict[str, str] = {}        # "functools.partial" -> "partial"
        self.last_import: cst.BaseStatement | None = None
        self.first_code: cst.BaseStatement | None = None
        body = t.module.body
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                    isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                for s in stmt.body:
                    self._record(s)
                if self.first_code is None:
                    self.last_import = stmt
            elif self.first_code is None and not (i == 0 and _is_docstring(stmt)):
                self.first_code = stmt
        # Imports later in the module (or in a try block) still bind names the fix may reuse.
        for node in t.walk():
            if isinstance(node, (cst.Import, cst.ImportFrom)) and isinstance(t.scope_of(node), cst.Module):
                self._record(node)
        self.bound = module_names(t.source)

    def _record(self, s) -> None:
        if isinstance(s, cst.Import):
            for a in s.names:
                full = _dotted(a.name)
                if a.asname is not None:
                    self.modules.setdefault(full, a.asname.name.value)
                else:
                    top = full.split(".")[0]
                    self.modules.setdefault(top, top)
                    if "." in full:
                        self.modules.setdefault(full, full)
        elif isinstance(s, cst.ImportFrom) and s.module is not None and not s.relative and not isinstance(
                s.names, cst.ImportStar):
            mod = _dotted(s.module)
            for a in s.names:
                name = a.name.value if isinstance(a.name, cst.Name) else _dotted(a.name)
                local = a.asname.name.value if a.asname is not None else name
                self.names.setdefault(f"{mod}.{name}", local)
                self.modules.setdefault(f"{mod}.{name}", local)  # `from jax import numpy as jnp`

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
