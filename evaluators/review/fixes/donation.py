"""JM401 fix: donate the replaced train state where the jitted function is made.

    @jax.jit                                  @partial(jax.jit, donate_argnums=0)
    def update(params, grads): ...      ->    def update(params, grads): ...
    for g in grads:                           for g in grads:
        params = update(params, g)                params = update(params, g)

The argument positions come from the call the finding points at (a keyword argument is donated by
name, `donate_argnames`; pmap donates no keyword argument, so there is no fix for one); a method
jitted with its `self` counts `self` as position 0; existing `donate_argnums` are kept and merged.
Supported makers: `jax.jit`, `jax.pmap`, `pjit`, `nnx.jit`, as a decorator (`@jax.jit`,
`@jax.jit(...)`, `@partial(jax.jit, ...)`) or an assignment (`step = jax.jit(f, ...)`,
`self.step = jax.jit(self._step)`).

Safe only where no donated value can be read after the call: every use of the jitted function in
the file is a call that rebinds what it donates (`x = f(x, ...)`), and the first step donates a
value made for this loop (an array constructor, a jitted call, literal-only arguments), not a
parameter the caller still holds, nor another name's array; otherwise unsafe.

Where the jitted function is made is found in `jit_makers.py` (the JM301 fix reads it too), and
whether the donation is safe is decided in `donation_safety.py`; this module builds the edit.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import tree
from jaxmem.evaluators.review.fixes._edits import Edits
from jaxmem.evaluators.review.fixes._imports import Imports, dotted
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix, message_fields
from jaxmem.evaluators.review.fixes.donation_safety import _aliased, _exported, _fresh_start, _uses_rebind
from jaxmem.evaluators.review.fixes.jit_makers import JIT_MAKERS, _find_maker


# ---- the keywords -----------------------------------------------------------------------------
def _literal_ints(node: cst.BaseExpression) -> list[int] | None:
    if isinstance(node, cst.Integer):
        return [int(node.value)]
    if isinstance(node, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Integer) for e in node.elements):
        return [int(e.value.value) for e in node.elements]
    return None


def _literal_strs(node: cst.BaseExpression) -> list[str] | None:
    if isinstance(node, cst.SimpleString):
        return [node.evaluated_value]
    if isinstance(node, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.SimpleString) for e in node.elements):
        return [e.value.evaluated_value for e in node.elements]
    return None


def _value(items: list, strings: bool) -> str:
    shown = [f"\"{x}\"" if strings else str(x) for x in items]
    return shown[0] if len(shown) == 1 else f"({', '.join(shown)})"


def _with_keywords(call: cst.Call, want: dict[str, list], strings: dict[str, bool]) -> cst.Call | None:
    """`call` with `donate_argnums`/`donate_argnames` holding `want` (merged with what is there);
    None where an existing value is not a literal the fix can merge."""
    args = list(call.args)
    for kw, items in want.items():
        if not items:
            continue
        existing = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == kw), None)
        if existing is not None:
            have = (_literal_strs if strings[kw] else _literal_ints)(args[existing].value)
            if have is None:
                return None
            merged = sorted(set(have) | set(items), key=lambda x: (str(type(x)), x))
            if merged == sorted(set(have), key=lambda x: (str(type(x)), x)):
                continue
            args[existing] = args[existing].with_changes(value=cst.parse_expression(_value(merged, strings[kw])))
        else:
            if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(keyword=cst.Name(kw), value=cst.parse_expression(_value(sorted(set(items)), strings[kw])),
                                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                      whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


# ---- the fix -------------------------------------------------------------------------------------
def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    t = tree(source)
    imports = Imports(t)
    name_node = t.at(finding, (cst.Name,))
    if name_node is None:
        return None
    arg = t.parent(name_node)
    call = t.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call):
        return None   # the method's own receiver (`model, s = model.update(...)`): not handled
    named = message_fields(finding).get("arg")
    wanted = [n.strip() for n in named.split(",")] if named else [name_node.value]
    maker = _find_maker(t, imports, call)
    if maker is None:
        return None
    positions: list[int] = []
    argnames: list[str] = []
    i = maker.offset
    for a in call.args:
        if a.star:
            break
        is_wanted = isinstance(a.value, cst.Name) and a.value.value in wanted
        if a.keyword is None:
            if is_wanted:
                positions.append(i)
            i += 1
        elif is_wanted:
            argnames.append(a.keyword.value)
    if not positions and not argnames:
        return None
    kind = JIT_MAKERS[maker.maker]
    if argnames and kind == "pmap":
        return None   # pmap donates no argument passed by keyword
    want = {"donate_argnums": positions, "donate_argnames": argnames}
    strings = {"donate_argnums": False, "donate_argnames": True}
    edits = Edits()
    new_imports: list[str] = []
    if maker.kind == "bare":
        partial = imports.ensure_name("functools", "partial", edits, new_imports)
        if partial is None:
            return None
        made = cst.parse_expression(f"{partial}({t.code(maker.node).strip()})")
        new = _with_keywords(made, want, strings)
    else:
        new = _with_keywords(maker.node, want, strings)
    if new is None:
        return None
    if new.deep_equals(maker.node):
        return None   # already donated
    edits.sub(maker.node, new)
    imports.add(edits, new_imports)
    out = edits.apply(t)
    # Safe only where nothing can read a donated buffer after the call.
    safe = (_uses_rebind(t, call, positions, argnames, maker.offset)
            and all(_fresh_start(t, imports, call, n) and not _aliased(t, call, n) for n in wanted)
            and not _exported(t, dotted(call.func)))
    spelled = ", ".join(f"{k}={_value(sorted(set(v)), strings[k])}" for k, v in want.items() if v)
    title = f"donate `{', '.join(wanted)}` to `{t.code(call.func)}` ({spelled})"
    return make_fix(finding, SAFE if safe else UNSAFE, title, out)
