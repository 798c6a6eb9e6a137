"""Augmented assignment on a NumPy array: `p += grad` updates `p` in place and keeps it NumPy.

`p = p + grad` with a device array `grad` gives a JAX array (NumPy defers to the JAX operand's
reflected operator), but NumPy's in-place operators never defer: `p += grad` converts `grad` on the
host (a device->host copy that waits) and `p` stays the same NumPy array. Kinds follow that: a name
updated in place keeps the kind of the array it was made as.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.names import pos
from jaxmem.evaluators.review.semantic.scopes import Binding, Scope


def inplace_on_numpy(a, b: Binding, scope: Scope, strict: bool) -> bool:
    """The array an augmented assignment updates was made as NumPy: every binding it goes back to,
    through earlier augmented assignments (a loop's `p += ...` reaches itself), is NumPy."""
    seen: set[int] = set()
    stack, origins = [b], []
    while stack:
        x = stack.pop()
        if id(x.node) in seen:
            continue
        seen.add(id(x.node))
        if isinstance(x.node, ast.AugAssign):
            stack.extend(a.reaching_bindings(x.name, scope, pos(x.node)))
        else:
            origins.append(x)
    return bool(origins) and all(a.binding_kind(o, scope, strict) == "np" for o in origins)
