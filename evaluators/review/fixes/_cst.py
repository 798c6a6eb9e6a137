"""What every fix shares: one parse of the source (LibCST, which keeps comments and formatting),
finding a finding's node and the statements and loops around it, and the names code reads and binds.
Editing statements is in `_edits.py`, the module's imports (reading and adding them) in `_imports.py`.

A fix never guesses: when the code is not in a shape it knows how to rewrite, it returns None and
the finding stays as it is. The rewritten source must parse (checked by the driver).
"""
from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

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
        # One pass over the nodes' fields gives each node's parent and indexes the nodes by where
        # they start (a finding's node is looked up there): LibCST's ParentNodeProvider gives the
        # same parents through a visitor that rebuilds every node, ten times slower.
        self._parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self._starts: dict[tuple[int, int], list[cst.CSTNode]] = {}
        stack = [self.module]
        while stack:  # pre-order: an ancestor is indexed before the nodes inside it
            node = stack.pop()
            if node in self._pos:
                start = self._pos[node].start
                self._starts.setdefault((start.line, start.column), []).append(node)
            kids = fields_children(node)
            for child in kids:
                self._parent[child] = node
            stack.extend(reversed(kids))
        self.lines = source.splitlines()
        self.memo: dict = {}  # what the fixes read of the whole module, computed once per source

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

    def _starting(self, finding: Finding) -> list[cst.CSTNode]:
        """The nodes that start where the finding points, outermost first."""
        return self._starts.get((finding.line, self.char_col(finding.line, finding.col)), [])

    def at(self, finding: Finding, types: tuple[type, ...]) -> cst.CSTNode | None:
        """The outermost node of `types` that starts exactly where the finding points."""
        return next((n for n in self._starting(finding) if isinstance(n, types)), None)

    def at_all(self, finding: Finding, types: tuple[type, ...]) -> list[cst.CSTNode]:
        """Every node of `types` that starts where the finding points, outermost first."""
        return [n for n in self._starting(finding) if isinstance(n, types)]

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


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def fields_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children read from its dataclass fields (field order, not always source order):
    LibCST's `children` property gets them by running a visitor that rebuilds the node."""
    names = _FIELD_NAMES.get(node.__class__)
    if names is None:
        names = _FIELD_NAMES[node.__class__] = tuple(f.name for f in dataclasses.fields(node))
    out = []
    for name in names:
        v = getattr(node, name)
        if isinstance(v, cst.CSTNode):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, cst.CSTNode))
    return out


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


def target_names(node: cst.CSTNode) -> list[str]:
    """The plain names an assignment target (or a returned tuple) binds or names: `a`, `a, (b, *c)`."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in target_names(e.value)]
    if isinstance(node, cst.StarredElement):
        return target_names(node.value)
    return []


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
