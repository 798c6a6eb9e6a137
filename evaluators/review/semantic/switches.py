"""Configuration switches that are off: `if config.get("DEBUG"):` where every dict the name can
hold sets that key to a false constant.

PureJaxRL-style trainers put host callbacks and prints under `if config["DEBUG"]:` inside the
function that `make_train(config)` builds. The test runs in Python, when the step is traced: with
the key off, the guarded code is never traced, compiled or run. What the name holds is followed to
the dict literals it is bound to, through this module's calls of the function whose parameter it
is (two levels at most). A dict changed after it is built (`config["DEBUG"] = True`, `.update`),
a `**` entry, or any value the source does not spell out leaves the switch unknown: the branch
counts as code that runs.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.names import passed_argument, pos
from jaxmem.evaluators.review.semantic.waited import calls_by_name

_MISSING = object()  # `config["K"]` with no such key raises: not a switch that is off
_MUTATORS = frozenset({"update", "setdefault", "__setitem__", "pop", "clear"})


def switched_off(test: ast.AST, a, scope) -> bool:
    """`test` reads one key of a dict-valued name, and every dict the name can hold there sets
    that key to False, 0, None or "" (for `.get`, a missing key reads its false default)."""
    read = _key_read(test)
    if read is None:
        return False
    memo = a.memo.setdefault("switched_off", {})
    if test not in memo:
        memo[test] = _off(a, read[0], scope, read[1], read[2], 0)
    return memo[test]


def _key_read(test: ast.AST):
    if isinstance(test, ast.Subscript) and isinstance(test.value, ast.Name) and _text(test.slice):
        return test.value, test.slice.value, _MISSING
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "get"
            and isinstance(test.func.value, ast.Name) and not test.keywords and 1 <= len(test.args) <= 2
            and _text(test.args[0])):
        default = test.args[1] if len(test.args) == 2 else ast.Constant(None)
        if isinstance(default, ast.Constant):
            return test.func.value, test.args[0].value, default.value
    return None


def _text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _off(a, name: ast.Name, scope, key: str, default, depth: int) -> bool:
    changed = _changed(a)
    if (name.id, key) in changed or (name.id, None) in changed:
        return False
    bindings = a.reaching_bindings(name.id, scope, pos(name))
    if not bindings:
        return False
    for b in bindings:
        if b.how == "assign" and b.index is None and isinstance(b.value, ast.Dict):
            if not _dict_off(b.value, key, default):
                return False
        elif b.how == "param" and isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and depth < 2:
            if not _passed_off(a, b, key, default, depth):
                return False
        else:
            return False
    return True


def _passed_off(a, b, key: str, default, depth: int) -> bool:
    """Every call of the function in this module passes, for this parameter, a dict that is off."""
    fn = b.node
    calls = calls_by_name(a).get(fn.name)
    if not calls:
        return False
    for call, caller in calls:
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
            return False  # what a splat passes is not read here
        arg = passed_argument(call, fn, b.name)
        if isinstance(arg, ast.Dict):
            if not _dict_off(arg, key, default):
                return False
        elif not (isinstance(arg, ast.Name) and _off(a, arg, caller, key, default, depth + 1)):
            return False
    return True


def _dict_off(d: ast.Dict, key: str, default) -> bool:
    if any(k is None for k in d.keys):
        return False  # `{**base, ...}`: what `base` holds is not read here
    for k, v in zip(d.keys, d.values):
        if _text(k) and k.value == key:
            return isinstance(v, ast.Constant) and v.value in (False, 0, None, "")
    return default is not _MISSING and not default


def _changed(a) -> frozenset[tuple[str, str | None]]:
    """(name, key) for each item the module stores into a name's dict after building it
    (`config["DEBUG"] = True`); (name, None) where any key may change (a computed key, `.update`)."""
    memo = a.memo
    if "switch_changed" not in memo:
        out = set()
        for n in astutil.walk(a.tree):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.add((t.value.id, t.slice.value if _text(t.slice) else None))
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MUTATORS
                    and isinstance(n.func.value, ast.Name)):
                out.add((n.func.value.id, None))
        memo["switch_changed"] = frozenset(out)
    return memo["switch_changed"]
