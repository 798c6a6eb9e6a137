"""Values read from files: data sets and weights, the arrays that are large without a literal shape.

A jitted function that closes over an array compiles it into its program as a constant (JM302).
Whether that matters depends on the array's size, which the source rarely spells out; what it does
show is where the value came from. An array loaded from a file (`np.load`, `scipy.io.loadmat`,
`pickle.load`, a restored checkpoint) is a data set or a set of weights, not a handful of
coefficients. A helper is a loader when its own body calls one, or a local function that does (one
call deep), wherever it is defined: in this module, or in another file of the reviewed tree
(project.py records it there). Configuration formats (JSON, YAML, TOML) are not loaders: what they
hold is settings.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.semantic.helpers import calls_one_deep
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import HOST_ATTRS
from jaxmem.evaluators.review.semantic.scopes import Scope

LOADERS = frozenset({
    "numpy.load", "numpy.loadtxt", "numpy.fromfile", "numpy.genfromtxt", "numpy.memmap", "jax.numpy.load",
    "scipy.io.loadmat", "pickle.load", "torch.load", "joblib.load", "h5py.File", "safetensors.numpy.load_file",
    "safetensors.flax.load_file", "flax.training.checkpoints.restore_checkpoint", "flax.serialization.from_bytes",
    "flax.serialization.msgpack_restore", "tensorflow_datasets.as_numpy", "tensorflow_datasets.load",
})
LOADER_PREFIXES = ("orbax.checkpoint.",)  # `ocp.StandardCheckpointer().restore(...)`, `ocp.PyTreeCheckpointer()`
# How far a value's origin is followed through the names it is computed from (`x = np.load(p)`,
# `x = jnp.asarray(x)`, `train_x = x[:1000]`).
MAX_HOPS = 4


def _library_loader(q: str | None) -> bool:
    return q is not None and (q in LOADERS or q.startswith(LOADER_PREFIXES) or _pretrained_weights(q))


def _pretrained_weights(q: str) -> bool:
    """`FlaxAutoModelForMaskedLM.from_pretrained(name)`: a Transformers Flax model with its
    weights read from the checkpoint files (`model.params`). Only the Flax model classes: a
    config's or a tokenizer's `from_pretrained` reads settings and vocabularies."""
    return q.startswith("transformers.Flax") and q.endswith(".from_pretrained")


def is_loader_call(a: Analysis, call: ast.Call, scope: Scope) -> bool:
    """A library loader, or a function of this module or the reviewed tree that loads."""
    q = a.qualname(call.func)
    if _library_loader(q):
        return True
    if isinstance(call.func, ast.Attribute) and call.func.attr == "restore":
        receiver = call.func.value.func if isinstance(call.func.value, ast.Call) else call.func.value
        rq = a.qualname(receiver)
        if rq is not None and rq.startswith(LOADER_PREFIXES):
            return True
    fn = a.resolve_def(call.func, scope)
    if fn is not None:
        return loads(a, fn)
    if q is not None and a.project is not None:
        facts = a.project.function(q)
        return facts is not None and facts.loads
    return False


def loads(a: Analysis, fn: ast.AST) -> bool:
    """The function's own statements call a loader, or a local function that does."""
    return calls_one_deep(a, fn, _library_loader, "loads")


def loaded(a: Analysis, name: str, scope: Scope, hops: int = 0) -> bool:
    """Some binding of `name` in `scope` (or the scope it is read from) holds a loader's result:
    the loader's call itself, an element of what it returned, or that value indexed, converted or
    reshaped (`x = np.load(p)["a"]`, `train_x = x[:1000]`, `x = jnp.asarray(x)`, `p = ckpt.params`).
    Not any value computed from one: a count or a function built from a loaded array is no array."""
    s: Scope | None = scope
    while s is not None and name not in s.bindings:
        s = s.parent
    if s is None or hops > MAX_HOPS:
        return False
    memo = a.memo.setdefault("loaded", {})
    key = (s.node, name)
    if key not in memo:
        memo[key] = False  # recursion guard: `x = x[...]` chains
        memo[key] = _loaded(a, name, s, hops)
    return memo[key]


def _loaded(a: Analysis, name: str, s: Scope, hops: int) -> bool:
    for b in s.bindings[name]:
        if b.how not in ("assign", "iter") or b.value is None:
            continue
        source = _source(a, b.value, s)
        if source is True or (isinstance(source, str) and source != name and loaded(a, source, s, hops + 1)):
            return True
    return False


def _source(a: Analysis, value: ast.AST, scope: Scope) -> bool | str | None:
    """True for a loader's call; the name a value is a view or conversion of; None otherwise."""
    while True:
        if isinstance(value, ast.Name):
            return value.id
        if isinstance(value, ast.Attribute) and value.attr in HOST_ATTRS:
            return None  # `n = xs.shape[0]`: metadata of the loaded array, a number, not the array
        if isinstance(value, (ast.Subscript, ast.Attribute)):
            value = value.value
            continue
        if isinstance(value, ast.Call):
            if is_loader_call(a, value, scope):
                return True
            q = a.qualname(value.func) or ""
            if q in CONVERSIONS and value.args:
                value = value.args[0]
                continue
            if q == "jax.tree.map" and len(value.args) == 2 and _converts(a, value.args[0]):
                value = value.args[1]  # `ds = jax.tree.map(lambda x: jnp.array(x), ds)`: each leaf converted
                continue
            if isinstance(value.func, ast.Name) and value.func.id == "dict" and len(value.args) == 1 \
                    and a.is_builtin(value.func, scope):
                value = value.args[0]  # `dict(np.load(path))`: the archive's arrays in a dict
                continue
            if isinstance(value.func, ast.Attribute) and value.func.attr in ARRAY_METHODS:
                value = value.func.value
                continue
        return None


def _converts(a: Analysis, fn: ast.AST) -> bool:
    """`jnp.array`, or `lambda x: jnp.asarray(x)`: a function that returns its argument's data
    in another type or place."""
    if isinstance(fn, ast.Lambda):
        body, params = fn.body, [p.arg for p in fn.args.args]
        return (isinstance(body, ast.Call) and a.qualname(body.func) in CONVERSIONS and len(params) == 1
                and bool(body.args) and isinstance(body.args[0], ast.Name) and body.args[0].id == params[0])
    return a.qualname(fn) in CONVERSIONS


# Calls that return their argument's data in another type or place.
CONVERSIONS = frozenset({"jax.numpy.array", "jax.numpy.asarray", "numpy.array", "numpy.asarray", "jax.device_put",
                         "jax.numpy.float32", "jax.numpy.float16", "jax.numpy.bfloat16", "numpy.float32"})
ARRAY_METHODS = frozenset({"astype", "reshape", "squeeze", "transpose", "copy"})
