"""Fast child iteration for the two tree passes (the analysis build and the rule walk).

`ast.NodeVisitor` and `ast.iter_child_nodes` go through generators and visit every `Load`,
`Store` and operator node; skipping those fields and the leaf types halves the walk, which is
most of the time a review takes after parsing.
"""
from __future__ import annotations

import ast
import sys
import warnings
from collections import deque
from collections.abc import Iterator

# Fields that never hold a node a rule looks at: expression contexts and operators.
_SKIP = frozenset({"ctx", "op", "ops", "type_comment", "type_ignores"})
# Nodes without children worth visiting (rules still see them; nothing below them exists).
LEAVES = frozenset({ast.Name, ast.Constant, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.alias})
_FIELDS: dict[type, tuple[str, ...]] = {}


def fields(cls: type) -> tuple[str, ...]:
    f = _FIELDS.get(cls)
    if f is None:
        f = _FIELDS[cls] = tuple(n for n in cls._fields if n not in _SKIP)
    return f


def children(node: ast.AST) -> list[ast.AST]:
    """The node's children that can hold something a rule reads (no contexts or operators), in
    field order. Kept on the node: the model and the rules walk the same subtrees many times (a
    function's body once per question asked of it), and the reviewer never changes a tree. Callers
    must not change the list."""
    # The instance dict directly: a missing attribute raised and caught (the first visit of every
    # node) cost more than the lookups it saves.
    d = node.__dict__
    out = d.get("_jm_children")
    if out is not None:
        return out
    out = []
    for name in fields(node.__class__):
        v = d.get(name)
        if v is None:
            continue
        if v.__class__ is list:
            out += [x for x in v if isinstance(x, ast.AST)]
        elif isinstance(v, ast.AST):
            out.append(v)
    d["_jm_children"] = out
    return out


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk` (breadth first, the same order) without contexts and operators: `Load`, `Store`,
    `Add`, `Eq` nodes, which no question the reviewer asks is about."""
    todo = deque([node])
    while todo:
        n = todo.popleft()
        todo.extend(children(n))
        yield n


def displayed(stmt: ast.AST) -> bool:
    """A notebook cell's last statement, an expression Jupyter shows the value of (marked by
    notebook.mark_displayed through mark_displayed): `arr.at[3].set(10)` there is looked at, not
    thrown away."""
    return stmt.__dict__.get("_jm_displayed", False)


def mark_displayed(stmt: ast.AST) -> None:
    stmt.__dict__["_jm_displayed"] = True


def cell_of(stmt: ast.AST) -> int | None:
    """The notebook cell a top-level statement was written in (notebook.mark_displayed marks
    them); None outside notebooks. Cells run when the user runs them, not back to back."""
    return stmt.__dict__.get("_jm_cell")


def mark_cell(stmt: ast.AST, cell: int) -> None:
    stmt.__dict__["_jm_cell"] = cell


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def walk_running(node: ast.AST) -> Iterator[ast.AST]:
    """`walk`, but not into functions or classes defined below `node`: what running `node`
    runs (defining `def J(z): return loss(z)` in a branch calls nothing)."""
    todo = deque([node])
    while todo:
        n = todo.popleft()
        if n is node or not isinstance(n, _DEFINITIONS):
            todo.extend(children(n))
        yield n


def parse(source: str, path: str = "<unknown>") -> ast.Module:
    """ast.parse without the compiler's SyntaxWarnings ("invalid escape sequence", "is" with a
    literal): they are about the reviewed code, would go to the reviewer's stderr, and are not
    what the user asked for. Every parse of reviewed code (files, notebook cells) goes through here.
    On Python 3.11, source that only 3.12 parses is read through `newer_syntax.downlevel`: the
    tree's lines and columns are those of `source`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return ast.parse(source, filename=path)
        except SyntaxError as exc:
            if sys.version_info >= (3, 12):
                raise
            # Python 3.12 syntax (PEP 701 f-strings, PEP 695 type parameters) on an older
            # parser: read a same-position rewrite (newer_syntax), or report the original error.
            from jaxmem.evaluators.review.newer_syntax import downlevel

            rewritten = downlevel(source)
            if rewritten is None:
                raise
            try:
                return ast.parse(rewritten, filename=path)
            except SyntaxError:
                raise exc from None


def walks_keys(loop: ast.AST) -> bool:
    """`for m in metrics: history[m][i] = metrics[m]`: the loop variable indexes what is iterated,
    so it walks the keys of a dict of device values (host strings), not elements of an array."""
    if not (isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name)):
        return False
    name, it = loop.target.id, None
    for st in loop.body:
        for n in walk(st):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id == name:
                it = it or ast.dump(loop.iter)
                if ast.dump(n.value) == it:
                    return True
    return False


def statements(node: ast.AST | None) -> list:
    """The statements of a def's (or a module's) body; a lambda's one expression as a list of
    itself (a mapped lambda is a scope of its own); nothing for anything else."""
    body = getattr(node, "body", [])
    return body if isinstance(body, list) else [body]


def own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The function's own return statements (not those of nested functions or classes)."""
    out = []
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            out.append(n)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(c for c in children(n) if isinstance(c, (ast.stmt, ast.excepthandler)))
    return out


def number_list(value: ast.AST | None) -> bool:
    """A list literal of numbers (`[0.0]`, `[np.inf]` is not one): a history seeded on the host."""
    return isinstance(value, ast.List) and bool(value.elts) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        for e in value.elts)
