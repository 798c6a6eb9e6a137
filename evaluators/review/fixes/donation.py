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
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import Edits, Imports, Tree, dotted, qualify, tree
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix, message_fields

JIT_MAKERS = {"jax.jit": "jit", "jax.experimental.pjit.pjit": "jit", "jax.pjit": "jit", "flax.nnx.jit": "jit",
              "jax.pmap": "pmap", "flax.nnx.pmap": "pmap"}
PARTIAL = "functools.partial"
# Calls whose result may be the very array they were given: donating it deletes the caller's.
ALIASING = frozenset({"jax.numpy.asarray", "jax.device_put", "jax.numpy.array", "numpy.asarray", "jax.tree.map",
                      "jax.tree_util.tree_map", "copy.copy"})
FRESH_PREFIXES = ("jax.numpy.", "numpy.", "jax.random.", "jax.nn.initializers.")


class Maker:
    """Where the jitted callable is made, and how to add keywords to it."""

    def __init__(self, kind: str, maker: str, node: cst.CSTNode, *, offset: int = 0, decorator=None):
        self.kind = kind          # "bare" (@jax.jit), "call" (jax.jit(f, ...) / @jax.jit(...)), "partial"
        self.maker = maker        # "jax.jit", "jax.pmap", ...
        self.node = node          # the decorator expression or call to edit
        self.offset = offset      # 1 when the jitted function takes `self` and the call is a method call
        self.decorator = decorator


def _maker_of(expr: cst.CSTNode, imports: Imports) -> tuple[str, str] | None:
    """(kind, maker) when `expr` makes a jitted function: `jax.jit`, `jax.jit(...)`, `partial(jax.jit, ...)`."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        q = qualify(imports, expr)
        return ("bare", q) if q in JIT_MAKERS else None
    if isinstance(expr, cst.Call):
        q = qualify(imports, expr.func)
        if q in JIT_MAKERS:
            return "call", q
        if q == PARTIAL and expr.args and expr.args[0].keyword is None:
            inner = qualify(imports, expr.args[0].value)
            if inner in JIT_MAKERS:
                return "partial", inner
        if isinstance(expr.func, cst.Call):  # partial(jax.jit, ...)(f)
            made = _maker_of(expr.func, imports)
            if made and made[0] == "partial":
                return "partial", made[1]
    return None


def _decorated(fn: cst.FunctionDef, imports: Imports, offset: int) -> Maker | None:
    if not fn.decorators:
        return None
    made = _maker_of(fn.decorators[0].decorator, imports)   # the outermost decorator sees the call
    if made is None:
        return None
    return Maker(made[0], made[1], fn.decorators[0].decorator, offset=offset, decorator=fn.decorators[0])


def _assigned(value: cst.CSTNode, imports: Imports) -> Maker | None:
    made = _maker_of(value, imports)
    if made is None or made[0] == "bare":
        return None
    node = value.func if made[0] == "partial" and isinstance(value.func, cst.Call) else value
    return Maker(made[0], made[1], node)


def _scope_statements(t: Tree, scope: cst.CSTNode):
    """Statements of a scope's own code (not of functions or classes inside it), in order."""
    stack = list(reversed(scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            continue
        inner = []
        for block_owner in (s, getattr(s, "orelse", None), getattr(s, "finalbody", None)):
            body = getattr(block_owner, "body", None)
            if isinstance(body, cst.IndentedBlock):
                inner.extend(body.body)
        for h in getattr(s, "handlers", ()) or ():
            if isinstance(h.body, cst.IndentedBlock):
                inner.extend(h.body.body)
        if isinstance(getattr(s, "orelse", None), cst.Else) and isinstance(s.orelse.body, cst.IndentedBlock):
            inner.extend(s.orelse.body.body)
        stack.extend(reversed(inner))


def _definitions(t: Tree, scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """`def name` and `name = <expr>` statements of one scope."""
    out = []
    for s in _scope_statements(t, scope):
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            out.append(s)
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                        small.targets[0].target, cst.Name) and small.targets[0].target.value == name:
                    out.append(small)
    return out


def _scopes_out(t: Tree, node: cst.CSTNode) -> list[cst.CSTNode]:
    return [p for p in t.ancestors(node) if isinstance(p, (cst.FunctionDef, cst.Module))]


def _find_maker(t: Tree, imports: Imports, call: cst.Call) -> Maker | None:
    func = call.func
    if isinstance(func, cst.Call):   # `jax.jit(step)(state, batch)`: made where it is called
        return _assigned(func, imports)
    if isinstance(func, cst.Name):
        for scope in _scopes_out(t, call):
            defs = _definitions(t, scope, func.value)
            if not defs:
                continue
            if len(defs) != 1:
                return None
            d = defs[0]
            if isinstance(d, cst.FunctionDef):
                return _decorated(d, imports, 0)
            return _assigned(d.value, imports)
        return None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        recv, attr = func.value.value, func.attr.value
        cls = next((p for p in t.ancestors(call) if isinstance(p, cst.ClassDef)), None)
        if recv == "self" and cls is not None:
            return _in_class(t, imports, cls, attr)
        # `gan = GAN()` then `gan.update(...)`: a module class with a jitted method.
        for scope in _scopes_out(t, call):
            defs = _definitions(t, scope, recv)
            if not defs:
                continue
            d = defs[0]
            if len(defs) == 1 and isinstance(d, cst.Assign) and isinstance(d.value, cst.Call) and isinstance(
                    d.value.func, cst.Name):
                klass = next((s for s in t.module.body if isinstance(s, cst.ClassDef)
                              and s.name.value == d.value.func.value), None)
                if klass is not None:
                    return _in_class(t, imports, klass, attr)
            return None
    return None


def _in_class(t: Tree, imports: Imports, cls: cst.ClassDef, attr: str) -> Maker | None:
    found: list[Maker | None] = []
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == attr:
            params = s.params.params
            offset = 1 if params and params[0].name.value in ("self", "cls") else 0
            if any(dotted(d.decorator) in ("staticmethod", "classmethod") for d in s.decorators[1:]):
                offset = 0
            found.append(_decorated(s, imports, offset))
    for node in t.walk(cls):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Attribute) and dotted(target) == f"self.{attr}":
                found.append(_assigned(node.value, imports))
    return found[0] if len(found) == 1 else None


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


# ---- safety ------------------------------------------------------------------------------------
def _targets(stmt: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    if isinstance(stmt, cst.Assign):
        for t_ in stmt.targets:
            for n in _names_in(t_.target):
                out.add(n)
    return out


def _names_in(node: cst.CSTNode) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names_in(e.value)]
    if isinstance(node, cst.StarredElement):
        return _names_in(node.value)
    return []


def _call_rebinds(t: Tree, call: cst.Call, positions: list[int], names: list[str], offset: int) -> bool:
    """Every donated argument of this call is a name the same statement rebinds."""
    parent = t.parent(call)
    targets = _targets(parent) if isinstance(parent, cst.Assign) and parent.value is call else set()
    i = offset
    for a in call.args:
        if a.star:
            return False
        if a.keyword is None:
            if i in positions and not (isinstance(a.value, cst.Name) and a.value.value in targets):
                return False
            i += 1
        elif a.keyword.value in names and not (isinstance(a.value, cst.Name) and a.value.value in targets):
            return False
    return True


def _uses_rebind(t: Tree, call: cst.Call, positions: list[int], names: list[str], offset: int) -> bool:
    func = call.func
    key = t.code(func)
    for node in t.walk():
        if isinstance(node, (cst.Name, cst.Attribute)) and node is not func and t.code(node) == key:
            parent = t.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is not node:
                continue   # `x.update` where `update` is only the attribute's name
            if isinstance(parent, (cst.FunctionDef, cst.AssignTarget, cst.ImportAlias, cst.Param)):
                continue   # its definition
            if isinstance(parent, cst.Call) and parent.func is node:
                if not _call_rebinds(t, parent, positions, names, offset):
                    return False
                continue
            if isinstance(node, cst.Name) and isinstance(parent, cst.Attribute):
                continue   # `self.step` counted as the attribute
            return False   # passed around, stored, returned: its other callers are unknown
    return True


def _fresh_start(t: Tree, imports: Imports, call: cst.Call, name: str) -> bool:
    """The value the first step donates was made for this loop: the last binding of `name` before
    the loop is an array constructor, a jitted call, or a call with literal-only arguments."""
    loops = t.enclosing_loops(call)
    if not loops:
        return False
    loop = loops[-1]
    scope = t.scope_of(call)
    start = t.pos(loop)
    last = None
    for s in _scope_statements(t, scope):
        if t.pos(s) >= start:
            break
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and name in _bound(small):
                    last = small
        elif isinstance(s, (cst.For, cst.While, cst.If, cst.With, cst.Try)) and name in _bound_anywhere(t, s):
            last = s   # bound in a block: which value reaches the loop is not plain
    if last is None or not isinstance(last, (cst.Assign, cst.AnnAssign)) or last.value is None:
        return False
    if isinstance(last, cst.Assign) and (len(last.targets) != 1 or not isinstance(last.targets[0].target, cst.Name)):
        return _fresh_value(t, imports, last.value, tuple_ok=True)
    return _fresh_value(t, imports, last.value)


def _bound(small) -> set[str]:
    if isinstance(small, cst.Assign):
        return _targets(small)
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        return set(_names_in(small.target))
    return set()


def _bound_anywhere(t: Tree, node: cst.CSTNode) -> set[str]:
    out = set()
    for n in t.walk(node):
        if isinstance(n, cst.AssignTarget):
            out |= set(_names_in(n.target))
        elif isinstance(n, cst.For):
            out |= set(_names_in(n.target))
    return out


def _fresh_value(t: Tree, imports: Imports, value: cst.CSTNode, tuple_ok: bool = False) -> bool:
    if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
        return True   # arithmetic makes a new array
    if not isinstance(value, cst.Call):
        return False
    q = qualify(imports, value.func)
    if q in ALIASING:
        return False
    if q is not None and q.startswith(FRESH_PREFIXES):
        return True
    if isinstance(value.func, (cst.Name, cst.Attribute)):
        made = _find_maker(t, imports, value)
        if made is not None:
            return True   # a jitted call: its outputs are new buffers
    # A call of code the fix cannot see: fresh only when given nothing it could hand back.
    return all(_literalish(a.value) for a in value.args)


def _literalish(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)):
        return True
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_literalish(e.value) for e in node.elements)
    if isinstance(node, cst.Call):
        return all(_literalish(a.value) for a in node.args)
    return False


def _aliased(t: Tree, call: cst.Call, name: str) -> bool:
    """Another name holds the value, or a nested function reads it: donating would delete an
    array that is still reachable."""
    scope = t.scope_of(call)
    for node in t.walk(scope):
        if node is not scope and isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if name in _reads_from_outside(t, node):
                return True
            continue
        if isinstance(node, cst.Assign) and node.value is not call and name in _names_in(node.value):
            return True
        if isinstance(node, (cst.Yield, cst.Return)) and node.value is not None and name in _names_in(node.value):
            parent_loop = t.enclosing_loops(node)
            if parent_loop:
                return True
    return False


def _reads_from_outside(t: Tree, fn: cst.CSTNode) -> set[str]:
    """Names a nested function or lambda reads from the scope around it (a closure)."""
    import ast
    import textwrap

    try:
        tree_ = ast.parse(textwrap.dedent(t.code(fn)).strip() if isinstance(fn, cst.FunctionDef)
                          else f"({t.code(fn).strip()})")
    except SyntaxError:
        return {"?"}
    out: set[str] = set()
    for node in ast.walk(tree_):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            local = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(y for y in (a.vararg, a.kwarg) if y)]}
            body = node.body if isinstance(node.body, list) else [node.body]
            for stmt in body:
                local |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            for stmt in body:
                out |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                        and n.id not in local}
    return out


def _exported(t: Tree, name: str) -> bool:
    for s in t.module.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and "__all__" in _targets(small):
                    return name in t.code(small.value)
    return False


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
