"""The vocabulary: what JAX and its frameworks call things, and small readers of source.

Tables of qualified names (`jax.jit`, `flax.nnx.scan`, ...) that the rest of the model matches
resolved names against, and helpers that read a literal or a position off a node. No state.
"""
from __future__ import annotations

import ast
import sys

# ---- what the frameworks call things -----------------------------------------------------
JIT_NAMES = frozenset({
    "jax.jit", "jax.pmap", "jax.experimental.pjit.pjit", "jax.pjit",
    "flax.nnx.jit", "flax.nnx.pmap", "equinox.filter_jit", "equinox.filter_pmap", "haliax.named_jit",
    # Objax: `objax.Jit(f, vars)` and `objax.Parallel(f, vars)` compile `f` (jit / pmap) and return
    # a module whose calls give device arrays; neither takes a donation argument.
    "objax.Jit", "objax.Parallel",
    # BrainState (brain simulation on JAX): `brainstate.transform.jit` (`brainstate.compile.jit`
    # before 0.2) wraps jax.jit over functions that read and write its State objects.
    "brainstate.transform.jit", "brainstate.compile.jit",
    # BrainPy 2.x (brainstate's predecessor): `brainpy.math.jit` builds a JITTransform over jax.jit
    # (brainpy/_src/math/object_transform/jit.py); `cls_jit` does the same for a method.
    "brainpy.math.jit", "brainpy.math.cls_jit",
})
# Makers through which a caller cannot donate as `jax.jit` does: Objax's take no donation argument,
# and BrainPy's `jit` hands `donate_argnums` to a jax.jit whose first argument it inserted itself
# (its static_argnums are shifted by one, its donate_argnums are not), so no fix can be written.
NO_DONATION = frozenset({"objax.Jit", "objax.Parallel", "brainpy.math.jit", "brainpy.math.cls_jit"})
# Control flow and staging primitives whose function arguments are compiled into one program,
# called inside or outside jit. Values: the positions of the function arguments.
COMPILED_BODIES: dict[str, tuple[int, ...]] = {
    "jax.lax.scan": (0,), "jax.lax.fori_loop": (2,), "jax.lax.while_loop": (0, 1), "jax.lax.cond": (1, 2),
    "jax.lax.switch": (1,), "jax.lax.map": (0,), "jax.lax.associative_scan": (0,),
    "jax.shard_map": (0,), "jax.experimental.pallas.pallas_call": (0,),
    "flax.nnx.scan": (0,), "flax.nnx.fori_loop": (2,), "flax.nnx.while_loop": (0, 1), "flax.nnx.cond": (1, 2),
    "flax.nnx.switch": (1,), "flax.nnx.shard_map": (0,),
    "flax.linen.scan": (0,), "flax.linen.while_loop": (0, 1), "flax.linen.cond": (1, 2), "flax.linen.switch": (1,),
    "haliax.scan": (0,), "haliax.fold": (0,), "haliax.map": (0,),
    "equinox.internal.while_loop": (0, 1), "equinox.internal.scan": (0,),
    "brainstate.transform.for_loop": (0,), "brainstate.transform.scan": (0,), "brainstate.compile.for_loop": (0,),
    "brainstate.compile.scan": (0,),
}
# Compiled loops run eagerly: each call compiles the whole loop and dispatches it asynchronously,
# so one call runs many steps on the device.
EAGER_LOOPS = frozenset({"jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.map",
                         "flax.nnx.scan", "flax.nnx.fori_loop", "flax.nnx.while_loop",
                         "brainstate.transform.for_loop", "brainstate.transform.scan",
                         "brainstate.compile.for_loop", "brainstate.compile.scan"})
CONTROL_FLOW = frozenset(k for k in COMPILED_BODIES if not k.endswith(("shard_map", "pallas_call")))
# Called outside jit, these trace their function arguments and compile the result on every call
# whose function is a new object (a lambda, a `functools.partial`, a def made per iteration); the
# same function object compiles once. Values: the function arguments' keyword names, by position
# as in COMPILED_BODIES. Measured on jax 0.10.2 (benchmarks/claims/jm301_eager_control_flow.py).
EAGER_TRACED: dict[str, tuple[str, ...]] = {
    "jax.lax.scan": ("f",), "jax.lax.fori_loop": ("body_fun",), "jax.lax.while_loop": ("cond_fun", "body_fun"),
    "jax.lax.cond": ("true_fun", "false_fun"), "jax.lax.switch": ("branches",), "jax.lax.map": ("f",),
}
# Solvers that make their loop bodies anew inside every call: called outside jit they compile on
# every call, whatever function they are given (same measurement).
EAGER_SOLVERS = frozenset({"jax.scipy.sparse.linalg.cg", "jax.scipy.sparse.linalg.gmres",
                           "jax.scipy.sparse.linalg.bicgstab", "jax.scipy.optimize.minimize"})
PALLAS = "jax.experimental.pallas.pallas_call"
# Transforms whose function argument is traced (values are tracers), without being compiled on
# their own.
TRACING_NAMES = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.checkpoint", "jax.jacfwd", "jax.jacrev",
    "jax.hessian", "jax.linearize", "jax.jvp", "jax.vjp", "jax.eval_shape", "jax.make_jaxpr",
    "jax.custom_jvp", "jax.custom_vjp", "jax.named_call",
    "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.nnx.vmap", "flax.nnx.remat", "flax.nnx.checkpoint",
    "flax.nnx.eval_shape", "flax.nnx.custom_vjp", "flax.nnx.jvp", "flax.nnx.vjp",
    "flax.linen.jit", "flax.linen.vmap", "flax.linen.remat", "flax.linen.checkpoint", "flax.linen.named_call",
    "flax.linen.custom_vjp", "flax.linen.map_variables", "flax.linen.compact", "flax.linen.nowrap",
    "equinox.filter_grad", "equinox.filter_value_and_grad", "equinox.filter_vmap", "equinox.filter_eval_shape",
    "equinox.filter_checkpoint", "equinox.filter_custom_vjp", "equinox.filter_custom_jvp",
    "equinox.filter_make_jaxpr", "equinox.filter_shard_map",
    "haliax.vmap", "haliax.named_call",
    "haiku.transform", "haiku.transform_with_state", "haiku.without_apply_rng", "haiku.vmap", "haiku.remat",
    "objax.Vectorize", "objax.GradValues", "objax.Grad",
}) | JIT_NAMES | frozenset(COMPILED_BODIES)
# Transforms that return gradients when their result is called.
GRADIENT_TRANSFORMS = frozenset({
    "jax.grad", "jax.value_and_grad", "flax.nnx.grad", "flax.nnx.value_and_grad",
    "equinox.filter_grad", "equinox.filter_value_and_grad",
})
# Library calls that apply gradients handed to them: inline SGD over a pytree, optax's update.
GRADIENT_APPLIERS = frozenset({"jax.tree.map", "optax.apply_updates", "equinox.apply_updates"})
UPDATE_APPLIERS = frozenset({"optax.apply_updates", "equinox.apply_updates"})  # applied updates, by name
CUSTOM_RULES = frozenset({"jax.custom_jvp", "jax.custom_vjp", "flax.nnx.custom_vjp", "flax.linen.custom_vjp",
                          "equinox.filter_custom_vjp", "equinox.filter_custom_jvp"})
# Transforms whose result, when called, is arrays (make_jaxpr gives a jaxpr, eval_shape shapes).
RETURNS_ARRAYS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.checkpoint",
    "jax.shard_map", "jax.pmap", "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.nnx.vmap", "flax.nnx.remat",
    "equinox.filter_grad", "equinox.filter_value_and_grad", "equinox.filter_vmap",
})
# JAX's own optimizer triples (`opt_init, opt_update, get_params = optimizers.adam(lr)`): each of
# the three functions returns a pytree of device arrays.
OPTIMIZER_TRIPLES = ("jax.example_libraries.optimizers.", "jax.experimental.optimizers.")
# Of those, the networks (an NNX `Object` is a framework object but not a layer: a random stream).
NETWORK_BASES = frozenset({"flax.linen.Module", "flax.nnx.Module", "equinox.Module", "haiku.Module"})
MODULE_BASES = {"flax.linen.Module": "linen", "flax.nnx.Module": "nnx", "equinox.Module": "equinox",
                "haiku.Module": "linen", "flax.nnx.Object": "nnx"}
CANONICAL = {
    "jax.remat": "jax.checkpoint",
    "jax.ad_checkpoint.checkpoint": "jax.checkpoint",
    "jax.ad_checkpoint.remat": "jax.checkpoint",
    "jax.experimental.shard_map.shard_map": "jax.shard_map",
    "jax.experimental.pjit": "jax.experimental.pjit.pjit",
    "jax.tree_util.tree_map": "jax.tree.map",
    "jax.tree_map": "jax.tree.map",
    "jax.tree_util.tree_map_with_path": "jax.tree.map_with_path",
    # jax <= 0.2.x re-exported functools.partial (`@jax.partial(jax.jit, static_argnums=...)`);
    # code written then still uses it.
    "jax.partial": "functools.partial",
    # A functools.partial subclass that is also a pytree: `@Partial(jax.jit, static_argnames=...)`
    # decorates as functools.partial does.
    "jax.tree_util.Partial": "functools.partial",
    "jax.config.config.update": "jax.config.update",
    "haliax.partitioning.named_jit": "haliax.named_jit",
    "flax.linen.module.Module": "flax.linen.Module",
    "flax.nnx.module.Module": "flax.nnx.Module",
    "flax.nnx.transforms.compilation.jit": "flax.nnx.jit",
    "jax.experimental.pallas.core.pallas_call": PALLAS,
}
# Collectives over a named mapped axis: they run only inside pmap, shard_map or a vmap that names
# the axis, so a function that calls one is traced wherever it is transformed (another file too).
AXIS_COLLECTIVES = frozenset({"jax.lax.psum", "jax.lax.pmean", "jax.lax.pmax", "jax.lax.pmin", "jax.lax.all_gather",
                              "jax.lax.ppermute", "jax.lax.all_to_all", "jax.lax.psum_scatter", "jax.lax.axis_index"})
# Tree maps that call a function on every leaf, by how many parameters come before the leaves
# (`map_with_path` passes each leaf's key path first).
TREE_MAPS = {"jax.tree.map": 0, "jax.tree.map_with_path": 1}
JAX_ARRAY_PREFIXES = ("jax.numpy.", "jax.random.", "jax.lax.", "jax.nn.", "jax.scipy.", "jax.image.")
# Top-level packages the model knows by name: JAX, NumPy and the standard library (which returns
# no device arrays), and JAX's own libraries of transforms, optimizers and layers.
KNOWN_BY_NAME = frozenset({"jax", "numpy"}) | frozenset(sys.stdlib_module_names)
JAX_LIBRARIES = frozenset({"jaxlib", "flax", "optax", "equinox", "haiku", "chex"})
JAX_ARRAY_FUNCS = frozenset({
    "jax.device_put", "jax.device_put_replicated", "jax.device_put_sharded", "jax.tree.map",
    "jax.block_until_ready", "jax.make_array_from_callback", "jax.make_array_from_process_local_data",
    "jax.make_array_from_single_device_arrays",
})
# Calls that read a clock: a timing starts or stops at one. `datetime.now()` pairs time scripts
# too (`datetime.now() - start`).
TIMERS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time",
                    "time.perf_counter_ns", "time.time_ns", "time.monotonic_ns", "timeit.default_timer",
                    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today"})
# Flax's helpers that move a tree to every local device and back (flax/jax_utils.py).
REPLICATION = frozenset({"flax.jax_utils.replicate", "flax.jax_utils.unreplicate"})
JAX_NON_ARRAY = frozenset({
    "jax.numpy.shape", "jax.numpy.ndim", "jax.numpy.size", "jax.numpy.dtype", "jax.numpy.result_type",
    "jax.numpy.issubdtype", "jax.numpy.iinfo", "jax.numpy.finfo", "jax.numpy.promote_types",
    "jax.numpy.can_cast", "jax.lax.axis_index", "jax.lax.broadcast_shapes", "jax.numpy.broadcast_shapes",
    # dtype and type predicates: a Python bool from metadata (measured on jax 0.10.2)
    "jax.numpy.iscomplexobj", "jax.numpy.isrealobj", "jax.numpy.isscalar", "jax.numpy.isdtype",
    # print settings (NumPy's, wrapped) and NumPy's own `iterable`: they start no backend either
    # (measured on jax 0.10.2: no backend after `jnp.set_printoptions(precision=3)`)
    "jax.numpy.set_printoptions", "jax.numpy.get_printoptions", "jax.numpy.printoptions", "jax.numpy.iterable",
})
# Array attributes that live on the host (metadata): reading them never syncs.
HOST_ATTRS = frozenset({
    "shape", "dtype", "ndim", "size", "nbytes", "itemsize", "sharding", "device", "devices",
    "weak_type", "aval", "committed", "is_fully_addressable", "is_fully_replicated", "format",
})
# Methods that give device arrays back when called on one (`jax.Array`'s own, as of jax 0.10.2, and
# the `.at[...]` updaters), and on the pytrees of arrays that training code carries (Flax's
# `TrainState.apply_gradients`/`replace`, a NamedTuple's `_replace`). Any other method called on
# something the model reads as device values (`result.to_dict()`, `stats.summary()`) is the
# object's own code: what it returns is not proven (kinds._call_kind, strict reading).
ARRAY_RESULT_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "choose", "clip", "compress", "conj",
    "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "flatten", "max", "mean", "min", "nonzero", "prod",
    "ptp", "ravel", "repeat", "reshape", "round", "searchsorted", "sort", "squeeze", "std", "sum", "swapaxes", "take",
    "to_device", "trace", "transpose", "var", "view", "block_until_ready",
    "add", "apply", "divide", "get", "mul", "multiply", "power", "set", "subtract",
    "replace", "_replace", "apply_gradients",
})
HOST_METHODS = {"item": "scalar", "tolist": "list", "is_deleted": "scalar", "devices": None,
                "on_device_size_in_bytes": "scalar", "addressable_data": "jax", "copy_to_host_async": None}
# NumPy functions that call their argument's own method when it is not a NumPy array
# (numpy/_core/fromnumeric.py): `np.mean(loss)` on a JAX array is `loss.mean()`, a JAX array
# computed on the device, with no host copy and no wait (measured on NumPy 2.4.6 and jax 0.10.2:
# benchmarks/claims/numpy_functions_on_jax_arrays.py). Ufuncs and the rest convert with asarray.
NUMPY_DEFERS = frozenset("numpy." + n for n in (
    "sum", "prod", "mean", "std", "var", "max", "min", "amax", "amin", "any", "all", "argmax", "argmin", "cumsum",
    "cumprod", "round", "around", "reshape", "repeat", "swapaxes", "transpose", "squeeze", "nonzero",
    "searchsorted", "flip", "moveaxis"))


def defers_to_array(q: str | None, call: ast.Call, kind) -> bool:
    """`np.mean(x)` with `x` a JAX array (`kind(expr)` reads it): JAX computes it on the device.
    Not a list of arrays (`np.mean([a, b])`): a list has no such method, NumPy converts it."""
    if q not in NUMPY_DEFERS or not call.args:
        return False
    first = call.args[0]
    return not isinstance(first, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)) and kind(first) == "jax"


NUMPY_NON_ARRAY = frozenset({"numpy.shape", "numpy.ndim", "numpy.size", "numpy.dtype", "numpy.prod",
                             "numpy.iinfo", "numpy.finfo", "numpy.issubdtype"})
# SciPy's array families return NumPy arrays (device inputs are converted first), and a frozen
# distribution's or a distribution's `rvs` draws NumPy samples: `p = stats.norm.rvs(size=d)`.
SCIPY_ARRAY_PREFIXES = ("scipy.linalg.", "scipy.special.", "scipy.signal.", "scipy.ndimage.", "scipy.fft.")


def numpy_returning(q: str) -> bool:
    """A SciPy function that returns a NumPy array (a family above, or random variates)."""
    return q.startswith(SCIPY_ARRAY_PREFIXES) or (q.startswith("scipy.stats.") and q.endswith(".rvs"))


SCALAR_BUILTINS = frozenset({"float", "int", "bool", "complex", "len", "sum", "max", "min", "abs", "round"})
# Not ArrayLike: that admits NumPy. jaxtyping's `Array` is `jax.Array` itself (its __init__:
# `from jax import Array as Array`), the base of `Float[Array, "b n"]` annotations.
ARRAY_TYPES = frozenset({"jax.Array", "jax.numpy.ndarray", "jaxtyping.Array"})
HOST_KINDS = frozenset({"np", "scalar", "list", "hostlist", "scalars"})
# Iterating a device array yields device arrays; a NumPy array or a list of host values, host
# data; a list of Python numbers ("scalars"), Python numbers.
ELEMENT_KIND = {"jax": "jax", "np": "np", "hostlist": "np", "scalars": "scalar"}
# Containers that start empty and are filled with `.append(x)`: reading an item gives what was put in.
EMPTY_CONTAINERS = frozenset({"collections.deque"})
APPENDERS = frozenset({"append", "appendleft", "insert"})
LIST_BUILTINS = frozenset({"list", "tuple", "sorted", "range", "zip", "enumerate", "reversed"})
PROPERTY_DECORATORS = frozenset({"property", "functools.cached_property", "cached_property"})
_END = (10**9, 0)  # position of a synthetic node: after everything


def dotted(expr: ast.AST) -> str | None:
    """`self.step` -> "self.step": the raw name, for matching call sites to assignments."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def pos(node: ast.AST) -> tuple[int, int]:
    line = getattr(node, "lineno", None)
    return _END if line is None else (line, node.col_offset)


def end_pos(node: ast.AST) -> tuple[int, int]:
    line = getattr(node, "end_lineno", None)
    return _END if line is None else (line, node.end_col_offset)


def literal_ints(node: ast.AST | None) -> frozenset[int] | None:
    """`0`, `(0, 1)`, `[2]` -> the ints; None when not a literal (then rules must not guess)."""
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List)):
        out = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, int)):
                return None
            out.add(elt.value)
        return frozenset(out)
    return None


def literal_strs(node: ast.AST | None) -> frozenset[str] | None:
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List)):
        out = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            out.add(elt.value)
        return frozenset(out)
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
TRY_TYPES = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)  # TryStar: 3.11+
# Comparisons Python answers itself, whatever the operands: identity and membership.
IDENTITY_OPS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)


def elementwise_compare(expr: ast.Compare) -> bool:
    """One comparison an array answers element by element (`g == g`, `loss < 0.5`): not `is` or `in`,
    not a chain (`a < b < c` reads the first result as a Python bool)."""
    return len(expr.ops) == 1 and not isinstance(expr.ops[0], IDENTITY_OPS)


def object_literal(expr: ast.AST) -> bool:
    """A dict or string literal: compared with it (`stats != {}`, `mode == "train"`), Python compares
    the objects, and no array operand is read."""
    return isinstance(expr, ast.Dict) or (isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes)))
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def absolute_module(node: ast.ImportFrom, module: str | None, package: bool = False) -> str | None:
    """`from .train import step` in `pkg.main` imports from `pkg.train`; None when the module's
    own name is unknown (a file reviewed alone) or the import climbs above its package.
    `package`: the module is a package's `__init__.py`, whose `.` is the package itself
    (`from .experiment import experiment` in `pkg/__init__.py` imports from `pkg.experiment`)."""
    if not node.level:
        return node.module
    if module is None:
        return None
    parts = module.split(".")
    level = node.level - 1 if package else node.level
    if level > len(parts):
        return None
    base = parts[:len(parts) - level]
    if node.module:
        base.append(node.module)
    return ".".join(base) or None


def import_bindings(node: ast.AST, module: str | None, resolve=None, package: bool = False):
    """(name, absolute name) for each name an `import` or `from ... import` statement binds;
    `resolve(base, name)` gives the target of `from base import name` (default `base.name`);
    `package`: the module is a package's `__init__.py` (absolute_module)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            yield alias.asname or top, alias.name if alias.asname else top
    elif isinstance(node, ast.ImportFrom):
        base = absolute_module(node, module, package)
        for alias in node.names if base else ():
            yield alias.asname or alias.name, resolve(base, alias.name) if resolve else f"{base}.{alias.name}"


# Names that say "training": read by training.py (trained state), roles.py, the donation and
# accumulation rules, and guesses.py (kinds of a step's results), kept here, below the model.
TRAINING_STEP_HINTS = ("train", "update", "fit", "learn", "sgd", "optim")
TRAINED_HINTS = ("param", "opt", "train", "model", "weight", "svi", "solver", "learner")


def named_trained(name: str) -> bool:
    """`params`, `opt_state`, `train_state`, `model`: named as trained state."""
    return any(h in name.lower() for h in TRAINED_HINTS)


def last_name(func: ast.AST) -> str:
    """`update` of `update`, `gan.update` and `self.tx.update`; "" for anything else."""
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def named_for_training(func: ast.AST) -> bool:
    """`train_step`, `train_epoch`, `update`, `gan.update`, `fit_batch`: named as a training step."""
    name = last_name(func).lower()
    return any(h in name for h in TRAINING_STEP_HINTS)


def passed_argument(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                    receiver: bool = False) -> ast.AST | None:
    """The expression `call` passes for parameter `name` of `fn`: by position, else by keyword;
    None where it passes none (after a `*` splat, positions are not known: keywords only).
    `receiver`: the call is `obj.method(...)`, which does not pass `self`/`cls` itself."""
    positional = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args]]
    if receiver and positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]
    args = [] if any(isinstance(a, ast.Starred) for a in call.args) else call.args
    at = positional.index(name) if name in positional else None
    if at is not None and at < len(args):
        return args[at]
    return next((k.value for k in call.keywords if k.arg == name), None)
