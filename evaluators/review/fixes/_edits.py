"""Editing a parsed source in place: replacing nodes and inserting, moving or removing statements
by the identity of the parsed nodes (LibCST keeps the comments and formatting around them).

Separate from `_cst.py` (reading the tree) because only a fix's last step writes; the imports an
edit needs are added through `_imports.py`.
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from jaxmem.evaluators.review.fixes._cst import BLOCKS, Tree


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
        self._path: set[int] | None = None  # the edited nodes and their ancestors (apply)

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

    def on_visit(self, node) -> bool:
        # Only the edited nodes and their ancestors are rebuilt: in a long file, a visit of every
        # node per fix cost seconds (a 425 KB module: about 1 s per finding).
        return self._path is None or id(node) in self._path

    def apply(self, t: Tree) -> str:
        self._path = {id(t.module)}
        for node in self._keep:
            n = node
            while n is not None and id(n) not in self._path:
                self._path.add(id(n))
                n = t.parent(n)
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
