"""Fast child iteration for the two tree passes (the analysis build and the rule walk).

`ast.NodeVisitor` and `ast.iter_child_nodes` go through generators and visit every `Load`,
`Store` and operator node; skipping those fields and the leaf types halves the walk, which is
most of the time a review takes after parsing.
"""
from __future__ import annotations

import ast
import warnings

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
    out = []
    for name in fields(node.__class__):
        v = getattr(node, name, None)
        if v is None:
            continue
        if v.__class__ is list:
            out.extend(x for x in v if isinstance(x, ast.AST))
        elif isinstance(v, ast.AST):
            out.append(v)
    return out


def parse(source: str, path: str = "<unknown>") -> ast.Module:
    """ast.parse without the compiler's SyntaxWarnings ("invalid escape sequence", "is" with a
    literal): they are about the reviewed code, would go to the reviewer's stderr, and are not
    what the user asked for. Every parse of reviewed code (files, notebook cells) goes through here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source, filename=path)
