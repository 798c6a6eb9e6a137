"""JM204 fix: `jax.device_put_sharded` / `jax.device_put_replicated` to their drop-in replacements.

Both raise AttributeError on jax 0.10 (deprecated in 0.8.1). The replacements are the ones JAX's
own migration guide gives (docs/migrate_pmap.md, "Drop-in replacements for device_put_sharded and
device_put_replicated"): the same values, stacked along a new leading axis that is sharded over
the given devices with a `NamedSharding` on a one-axis `Mesh`, leaf by leaf of a pytree:

    jax.device_put_sharded(shards, devices)
    -> jax.tree.map(lambda *xs: jax.device_put(jnp.stack(xs), jax.NamedSharding(
           jax.sharding.Mesh(np.array(devices), ("x",)), jax.P("x"))), *shards)
    jax.device_put_replicated(x, devices)
    -> jax.tree.map(lambda y: jax.device_put(jnp.stack([y] * len(devices)), jax.NamedSharding(
           jax.sharding.Mesh(np.array(devices), ("x",)), jax.P("x"))), x)

Checked on jax 0.10.2 with 4 CPU devices against the removed functions' own code (still inside
jax._src.api there): equal values, shapes and shardings (tests/review/fixes/test_fixes.py).
`jnp.stack` puts the stack on the default device before `device_put` reshards it (the guide's
choice: no copy back to the host for device arrays). Safe, since the old call can only raise now,
unless the call sits in a `try` that catches AttributeError (code written for both JAX versions)
or `devices` is an expression the replacement would evaluate more than once.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import Tree, tree
from jaxmem.evaluators.review.fixes._edits import Edits
from jaxmem.evaluators.review.fixes._imports import Imports, qualify
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix

REMOVED = {"jax.device_put_sharded": ("shards", "devices"), "jax.device_put_replicated": ("x", "devices")}
SIMPLE_DEVICES = frozenset({"jax.devices", "jax.local_devices"})


def _arguments(call: cst.Call, names: tuple[str, str]) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    got: dict[str, cst.BaseExpression] = {}
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(call.args) != 2:
        return None
    for name, a in zip(names, positional):
        got[name] = a.value
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value not in names or a.keyword.value in got:
                return None
            got[a.keyword.value] = a.value
    if set(got) != set(names):
        return None
    return got[names[0]], got[names[1]]


def _simple(node: cst.CSTNode, imports: Imports) -> bool:
    """Evaluating it twice is the same as once: a name, an attribute, `jax.devices()`, a slice of those."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return True
    if isinstance(node, cst.Call):
        return qualify(imports, node.func) in SIMPLE_DEVICES and all(
            isinstance(a.value, (cst.SimpleString, cst.Integer, cst.Name)) for a in node.args)
    if isinstance(node, cst.Subscript):
        return _simple(node.value, imports)
    return False


def _guarded(t: Tree, call: cst.Call) -> bool:
    """Inside a `try` whose handlers catch AttributeError (or everything)."""
    for p in t.ancestors(call):
        if isinstance(p, cst.Try):
            for h in p.handlers:
                if h.type is None or any(isinstance(n, cst.Name) and n.value in ("AttributeError", "Exception",
                                                                                  "BaseException", "ImportError")
                                         for n in t.walk(h.type)):
                    return True
    return False


def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    t = tree(source)
    imports = Imports(t)
    call = next((c for c in t.at_all(finding, (cst.Call,)) if qualify(imports, c.func) in REMOVED), None)
    if call is None:
        return None
    removed = qualify(imports, call.func)
    args = _arguments(call, REMOVED[removed])
    if args is None:
        return None
    first, devices = (t.code(a).strip() for a in args)
    edits = Edits()
    new: list[str] = []
    jax = imports.ensure("jax", None, edits, new)
    jnp = imports.ensure("jax.numpy", "jnp", edits, new)
    np = imports.ensure("numpy", "np", edits, new)
    if None in (jax, jnp, np):
        return None
    sharding = f'{jax}.NamedSharding({jax}.sharding.Mesh({np}.array({devices}), ("x",)), {jax}.P("x"))'
    if removed == "jax.device_put_sharded":
        code = f"{jax}.tree.map(lambda *xs: {jax}.device_put({jnp}.stack(xs), {sharding}), *{first})"
    else:
        code = f"{jax}.tree.map(lambda y: {jax}.device_put({jnp}.stack([y] * len({devices})), {sharding}), {first})"
    edits.sub(call, cst.parse_expression(code))
    _drop_from_import(t, call, edits)
    imports.add(edits, new)
    safe = not _guarded(t, call) and _simple(args[1], imports)
    short = removed.split(".")[-1]
    return make_fix(finding, SAFE if safe else UNSAFE,
                    f"replace `{short}` with `jax.device_put` and a `NamedSharding` (JAX's drop-in)", edits.apply(t))


def _drop_from_import(t: Tree, call: cst.Call, edits: Edits) -> None:
    """`from jax import device_put_sharded`: the import itself fails on jax 0.10; drop the name when
    this call was its only use."""
    if not isinstance(call.func, cst.Name):
        return
    local = call.func.value
    uses = [n for n in t.walk() if isinstance(n, cst.Name) and n.value == local
            and not isinstance(t.parent(n), (cst.ImportAlias, cst.AsName))]
    if len(uses) != 1:
        return
    for node in t.walk():
        if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            keep = [a for a in node.names if (a.asname.name.value if a.asname else a.name.value) != local]
            if len(keep) == len(node.names):
                continue
            stmt = t.statement(node)
            if not keep and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                edits.delete(stmt)
            elif keep:
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                edits.sub(node, node.with_changes(names=keep))
