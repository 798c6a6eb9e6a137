"""JM307 model-applied-outside-jit

What it does
    Flags a neural-network forward pass run eagerly on every iteration of a Python loop: a
    Flax Linen module's `model.apply(params, x)` (or a Haiku-transformed function's `apply`), or
    a Flax NNX or Equinox module called as `model(x)`, outside any jitted function, where the
    model is a module the code builds from a framework class or from a network class of the
    reviewed tree (another file's too), or a parameter declared with such a type
    (`def generate(model: GPT, ...)`).

Why is this bad
    Outside `jit` every layer's operations are dispatched one by one from Python, and a Linen
    `apply` also rebuilds the module's scopes on each call; nothing is fused. Measured here on jax
    0.10.2 (CPU, a plain MLP forward): 0.37 ms eagerly against 0.008 ms jitted for a
    64-128-128-4 network at batch 1 (an action or a token at a time), 2.06 against 1.29 ms for a
    256-512-512-512-10 one at batch 128. In a loop that runs once per environment step, per
    generated token or per training step, that overhead is paid every time.

Example
    for t in range(max_new_tokens):
        logits = model(tokens)                # nnx.Module, not jitted
        tokens = jnp.concatenate([tokens, sample(logits)], axis=1)

Use instead
    @nnx.jit
    def next_logits(model, tokens):
        return model(tokens)

    for t in range(max_new_tokens):
        logits = next_logits(model, tokens)
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.flow import fed_back_calls
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.names import MODULE_BASES, NETWORK_BASES, pos
from jaxmem.evaluators.review.semantic.roles import enclosing_role
from jaxmem.evaluators.review.semantic.walk import statement_loop

# Layer classes of these packages (`nnx.Linear(...)`, `eqx.nn.MLP(...)`) make networks one calls.
CALL_MAKERS = ("flax.nnx.", "equinox.nn.")
# Classes of those packages that are no network: calling one runs no layer (`rngs()` draws a key,
# an optimizer or a metric is updated through its methods, a variable holds a value).
NOT_NETWORKS = frozenset({"Rngs", "RngStream", "RngKey", "RngCount", "Optimizer", "ModelAndOptimizer", "Variable",
                          "Param", "BatchStat", "Cache", "Intermediate", "State", "GraphDef", "Metric", "Average",
                          "Accuracy", "MultiMetric", "Welford", "StateIndex"})


class ModelAppliedOutsideJit(Rule):
    code = "JM307"
    name = "model-applied-outside-jit"
    topic = "jit-compilation"
    severity = "warning"
    message = ("`{what}` runs the model eagerly on every iteration: each layer's operations are dispatched one by one "
               "instead of as one compiled program")
    fix = "Jit the forward pass once, outside the loop (`jax.jit`, `nnx.jit` or `eqx.filter_jit`), and call that in the loop."
    node_types = (ast.Call,)
    only_in_host_loops = True
    # No text prefilter: a network class of another file of the tree is called without the file
    # naming its framework (`from .model import GPT`); the check runs only in host loops.
    # Its 10 wrong sure findings on 12k's first run had two causes, both fixed with a fixture
    # (JM307/clean_apply_rejitted_and_rngs): `net.apply` re-bound to its jitted version, and
    # `nnx.Rngs` read as a layer. The record restarts with the next reading.
    record_from = "unseen-2026-12l"

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body) or ctx.scope.traced:
            return
        if ctx.scope.cls is not None and getattr(ctx.scope.node, "name", "") in _BUILDERS:
            return  # a loop in a Module's `__init__`/`setup` builds the network once, it runs no step
        if ctx.scope.cls is not None and ctx.scope.cls.network:
            # A loop inside a network's own method (an Euler loop over `self.head(...)`) runs as
            # part of whatever calls that method, a jitted step as a rule; where a caller runs the
            # method eagerly per step, the finding is at that call (`model.step(...)`, above).
            return
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "apply":
            if _framework(func.value, ctx) not in ("linen", "haiku") or _method_runs_no_layer(node, ctx):
                return
        elif (_framework(func, ctx) not in ("nnx", "equinox") and not _bound_apply(func, ctx)
              and not _forward_method(func, ctx)):
            return
        if ctx.jit_info(func) is not None or _rebound_to_jit(func, ctx):
            return  # a compiled callable (`net.apply = jax.jit(net.apply)` earlier): one program
        if periodic(ctx, sync=False) or not_per_step(ctx, (), sync=False):
            return
        # Sure where the loop steps state (training, an environment, a decoder feeding its
        # output back); a loop over a data set evaluates, where one eager pass per batch may be
        # what the author chose.
        r = enclosing_role(ctx)
        ctx.report(self, node, what=ast.unparse(func)[:40], sure=r.steps and r.proven or _fed_back(node, ctx))


_BUILDERS = frozenset({"__init__", "setup", "__post_init__"})


def _framework(expr: ast.AST, ctx: Ctx) -> str | None:
    """"linen", "nnx", "equinox" or "haiku" for a module instance the code made: a name bound
    to one (`model = GPT(cfg)` of a local Module class, `net = hk.transform(f)`), or `self.x`
    set so in a method of the class."""
    a = ctx.analysis
    if isinstance(expr, ast.Call):  # `hk.without_apply_rng(hk.transform(f))`, `GPT(cfg)`, made in place
        local = a.local_class(expr.func)
        if local is not None:
            return local.framework if local.network else None
        return _class_framework(a.qualname(expr.func), ctx)
    if isinstance(expr, ast.Name) and expr.id not in ("self", "cls"):
        cls = a.class_of_receiver(expr, ctx.scope)
        if cls is None:
            # Declared, not built here: `def generate(model: GPT, ...)`, `model: nnx.Module`.
            annotation = a.annotation_of(expr, ctx.scope)
            cls = a.local_class(annotation) if annotation is not None else None
            if cls is None and annotation is not None:
                return _class_framework(a.qualname(annotation), ctx)
        if cls is not None:
            return cls.framework if cls.network else None
        return _class_framework(a.constructor_of(expr, ctx.scope), ctx)
    if isinstance(expr, ast.Attribute):
        for call in a.attr_makers(expr, ctx.scope):
            local = a.local_class(call.func)
            if local is not None:
                return local.framework if local.network else None
            found = _class_framework(a.qualname(call.func), ctx)
            if found is not None:
                return found
    return None


def _method_runs_no_layer(node: ast.Call, ctx: Ctx) -> bool:
    """`net.apply(params, method=net.get_nets)` (or `method="get_nets"`) where that method of a
    local network class runs no layer (returns submodules, reads a shape): no forward pass."""
    method = next((kw.value for kw in node.keywords if kw.arg == "method"), None)
    if method is None or not isinstance(node.func, ast.Attribute):
        return False
    name = method.attr if isinstance(method, ast.Attribute) else (
        method.value if isinstance(method, ast.Constant) and isinstance(method.value, str) else None)
    recv, a = node.func.value, ctx.analysis
    if name is None or not isinstance(recv, ast.Name):
        return False
    cls = a.class_of_receiver(recv, ctx.scope)
    if cls is not None:
        fn = cls.methods.get(name)
        return fn is not None and not helpers.runs_layers(a, cls, fn)
    # A network class of another file of the tree: its methods that run layers are recorded as
    # forward passes there (project.py); one that is not runs none.
    q = a.constructor_of(recv, ctx.scope) or a.annotated_class(recv, ctx.scope)
    owner = a.project.function(q) if q is not None and a.project is not None else None
    if owner is None or owner.network is None:
        return False
    facts = a.project.function(f"{q}.{name}")
    return facts is None or not facts.forward


def _bound_apply(func: ast.AST, ctx: Ctx) -> bool:
    """`forward(params, x)` or `self.forward(params, x)` where the name (or attribute) was bound to
    a network's `apply` (`self.forward = hk.without_apply_rng(net).apply`, `forward = model.apply`,
    `infer = partial(GPT(cfg).apply, params)`): calling it runs the forward pass."""
    a = ctx.analysis
    if isinstance(func, ast.Name):
        b = a.resolve(func.id, ctx.scope, pos(func))
        values = [b.value] if b is not None and b.how == "assign" and b.index is None else []
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = a.class_of_receiver(func.value, ctx.scope)
        values = [b.value for b in cls.attrs.get(func.attr, ()) if b.index is None] if cls is not None else []
    else:
        return False
    return bool(values) and all(_an_apply(v, ctx) for v in values)


def _an_apply(v: ast.AST | None, ctx: Ctx) -> bool:
    """`net.apply` of a Linen or Haiku network, or `functools.partial(net.apply, params, ...)`."""
    if isinstance(v, ast.Call) and ctx.qualname(v.func) == "functools.partial" and v.args:
        v = v.args[0]
    return isinstance(v, ast.Attribute) and v.attr == "apply" and _framework(v.value, ctx) in ("linen", "haiku")


def _forward_method(func: ast.AST, ctx: Ctx) -> bool:
    """`model.step(token, cache)`, `vae.decode(z)`: a method of an NNX or Equinox network that runs
    its layers (helpers.runs_layers), on a network the code built or declared, defined here or
    in another file of the reviewed tree."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id not in ("self", "cls")):
        return False
    if _framework(func.value, ctx) not in ("nnx", "equinox"):
        return False
    a, recv = ctx.analysis, func.value
    cls = a.class_of_receiver(recv, ctx.scope)
    if cls is None:
        annotation = a.annotation_of(recv, ctx.scope)
        cls = a.local_class(annotation) if annotation is not None else None
    if cls is not None:
        return helpers.runs_layers(a, cls, cls.methods.get(func.attr))
    facts = helpers.tree_facts(a, func, ctx.scope)  # a class of another file: its method's facts
    return facts is not None and facts.forward


def _rebound_to_jit(func: ast.AST, ctx: Ctx) -> bool:
    """`q_network.apply = jax.jit(q_network.apply)` in this function (or module) before the call:
    the attribute now holds a compiled callable."""
    dotted = ast.unparse(func) if isinstance(func, ast.Attribute) else None
    if dotted is None:
        return False
    memo = ctx.memo.setdefault("JM307_rebound", {})
    scope = ctx.scope
    key = (scope.node, dotted)
    if key not in memo:
        memo[key] = min((n.lineno for n in astutil.walk(scope.node)
                         if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.value, ast.Call)
                         and isinstance(n.targets[0], ast.Attribute) and n.targets[0].attr == func.attr
                         and ast.unparse(n.targets[0]) == dotted
                         and ctx.analysis.jit_from_call(n.value, scope) is not None), default=None)
    line = memo[key]
    return line is not None and line < func.lineno


def _fed_back(node: ast.Call, ctx: Ctx) -> bool:
    """The innermost loop feeds this forward's output, transformed, back as its next input (a
    decoder sampling its next token from the logits): each iteration waits on the one before,
    so the loop runs the model once per token by construction."""
    loop = statement_loop(ctx)
    return loop is not None and any(call is node for call, _ in fed_back_calls(ctx.analysis, loop, ctx.scope))


def _class_framework(q: str | None, ctx: Ctx) -> str | None:
    """A framework's layer or Module class, or a network class another file of the reviewed
    tree defines (`from .models import GPT`)."""
    if not q:
        return None
    if q in MODULE_BASES:
        return MODULE_BASES[q] if q in NETWORK_BASES else None
    found = _maker_framework(q)
    if found is None and ctx.analysis.project is not None:
        facts = ctx.analysis.project.function(q)
        found = facts.network if facts is not None else None
    return found


def _maker_framework(q: str | None) -> str | None:
    if not q:
        return None
    if q.startswith("haiku.transform") or q.startswith("haiku.without_apply_rng"):
        return "haiku"
    name = q.rpartition(".")[2]
    if not name[:1].isupper() or name in NOT_NETWORKS:
        return None  # a function of the framework (`nnx.filterlib.to_predicate`), or no layer
    if q.startswith("flax.linen."):
        return "linen"
    if q.startswith(CALL_MAKERS):
        return "nnx" if q.startswith("flax.nnx.") else "equinox"
    return None


RULE = ModelAppliedOutsideJit()
