"""The reviewer's semantic model on its own (evaluators/review/semantic): kinds and their strict
reading, loop roles from data flow, periodic branches, waits, donation semantics, other files of a
reviewed tree. Each test states one fact the rules rely on; most fail if the mechanism is removed."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from jaxmem.evaluators.review import engine, registry, semantic
from jaxmem.evaluators.review.semantic import per_step
from jaxmem.evaluators.review.semantic.branches import periodic_guard
from jaxmem.evaluators.review.semantic.flow import fed_back_calls, replaced_state_calls
from jaxmem.evaluators.review.semantic.loads import loaded
from jaxmem.evaluators.review.semantic.project import Project
from jaxmem.evaluators.review.semantic.roles import role


def model(src: str, module: str | None = None, project=None):
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    return semantic.build(tree, src.splitlines(), module=module, project=project), tree


def scope_at(a, line: int):
    """The innermost function scope containing `line` (the module's otherwise)."""
    best = a.module_scope
    for node, sc in a.scopes.items():
        if getattr(node, "lineno", 0) <= line <= getattr(node, "end_lineno", -1) and node is not a.tree:
            if best is a.module_scope or node.lineno >= best.node.lineno:
                best = sc
    return best


def expr_at(tree, line: int, text: str):
    return next(n for n in ast.walk(tree) if isinstance(n, ast.expr) and getattr(n, "lineno", 0) == line
                and ast.unparse(n) == text)


def kind(src: str, line: int, text: str, strict: bool = False):
    a, tree = model(src)
    return a.kind(expr_at(tree, line, text), scope_at(a, line), strict)


def loops_of(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]


# ---- kinds -------------------------------------------------------------------------------------

JITTED = """
import jax, jax.numpy as jnp, numpy as np

@jax.jit
def step(state, batch):
    return state, {"loss": jnp.mean(batch)}

def run(state, batches, flag):
    for batch in batches:
        state, metrics = step(state, batch)
        loss = metrics["loss"]
        maybe = loss if flag else 0.0
        host = np.asarray(loss)
        shapes = jax.tree.map(jnp.shape, metrics)
        floats = jax.tree.map(float, metrics)
        size = jax.lax.psum(1, "i")
"""


@pytest.mark.parametrize("line,text,expected", [
    (11, "loss", "jax"),                        # a subscript of a jitted call's unpacked result
    (13, "host", "np"),
    (14, "shapes", None),                       # tree.map of jnp.shape gives shapes
    (15, "floats", "scalar"),                   # tree.map of float gives Python numbers
    (16, "size", "scalar"),                     # psum of a literal is the axis size
])
def test_kinds_follow_results_through_unpacking_subscripts_and_tree_map(line, text, expected):
    assert kind(JITTED, line, text) == expected


def test_the_strict_reading_refuses_a_guess_the_default_reading_makes():
    # `loss if flag else 0.0`: a device array on one branch only.
    assert kind(JITTED, 12, "maybe") == "jax"
    assert kind(JITTED, 12, "maybe", strict=True) is None
    # A callable matched by attribute name only (another object may have a method of that name).
    src = """
    import jax
    class A:
        def __init__(self):
            self.step = jax.jit(lambda x: x)
    def go(b, x):
        y = b.step(x)
        return y
    """
    assert kind(src, 8, "y") == "jax" and kind(src, 8, "y", strict=True) is None


def test_an_unpacked_literal_tuple_gives_each_name_its_own_kind():
    src = """
    import jax.numpy as jnp, numpy as np
    def f():
        a, b = jnp.ones(3), np.ones(3)
        return a, b
    """
    assert kind(src, 5, "a") == "jax" and kind(src, 5, "b") == "np"


def test_an_elementwise_comparison_has_the_kind_of_its_array_operand():
    # `g == g` of a device array is a device array of booleans (what `.any()` then reads); `is`,
    # `in`, a chain and a string operand give Python booleans, a NumPy comparison a NumPy array.
    src = """
    import jax.numpy as jnp, numpy as np
    def f(mode):
        g, h = jnp.ones(3), np.ones(3)
        a = g == g
        b = g < 0.5
        c = g is None
        d = 0 < g < 1
        e = mode == "train"
        k = h > 0
        m = (g == g).any()
        return a, b, c, d, e, k, m
    """
    got = {n: kind(src, 12, n) for n in "abcdekm"}
    assert got == {"a": "jax", "b": "jax", "c": None, "d": None, "e": None, "k": "np", "m": "jax"}
    assert kind(src, 12, "a", strict=True) == "jax"


def test_typing_cast_returns_its_value():
    # `state = cast(TrainState, state)` after a jitted step (12zzzzzt): the same device pytree.
    src = """
    from typing import cast
    import jax, jax.numpy as jnp

    @jax.jit
    def step(state):
        return state * 2

    def run(state, n):
        for _ in range(n):
            state = step(state)
            state = cast(jax.Array, state)
        return state
    """
    assert kind(src, 13, "state") == "jax" and kind(src, 13, "state", strict=True) == "jax"


def test_an_attribute_of_self_set_earlier_in_the_method_holds_what_was_assigned():
    # `self.state = new_state`, then `self.state.step` read: as a local name would be, including
    # across the loop's back edge; read before the method sets it, or set only in another
    # method, nothing is known.
    src = """
    import jax, jax.numpy as jnp, numpy as np
    class Trainer:
        def __init__(self, fn):
            self.step_fn = jax.jit(fn)
            self.state = None
            self.table = np.zeros(3)
        def run(self, batches):
            before = self.state
            for batch in batches:
                seen = self.state
                new_state, metrics = self.step_fn(self.state, batch)
                self.state = new_state
                after = self.state.num_steps
                self.table = np.ones(3)
                host = self.table
        def other(self):
            return self.state
    """
    assert kind(src, 9, "before") is None
    assert kind(src, 14, "after") == "jax"
    assert kind(src, 11, "seen") == "jax"  # the previous iteration's assignment
    assert kind(src, 16, "host") == "np"
    assert kind(src, 18, "self.state") is None


def test_a_container_filled_by_subscript_assignment_holds_what_was_stored():
    # `metrics = {}` then `state, metrics[i] = step(state)`: an item read back is what was put
    # in, as for `append`; strict only when every store is a device value.
    src = """
    import jax, jax.numpy as jnp
    step = jax.jit(lambda s: (s, jnp.sum(s)))
    metrics, names = {}, {}
    state = jnp.ones(3)
    for i in range(10):
        state, metrics[i] = step(state)
        names[i] = "x"
        got = metrics[i]
        label = names[i]
    """
    assert kind(src, 9, "got") == "jax"
    assert kind(src, 10, "label") is None


def test_numpy_reductions_of_a_device_array_stay_on_the_device():
    # NumPy's reductions call the argument's own method (`np.mean(x)` is `x.mean()`); ufuncs and
    # asarray convert. Measured: benchmarks/claims/numpy_functions_on_jax_arrays.py.
    src = """
    import jax.numpy as jnp, numpy as np
    def f(x):
        y = jnp.tanh(x)
        m = np.mean(y)
        e = np.exp(y)
        a = np.asarray(y)
        l = np.mean([y, y])
        return m, e, a, l
    """
    assert kind(src, 9, "m") == "jax" and kind(src, 9, "m", strict=True) == "jax"
    assert kind(src, 9, "e") == "np" and kind(src, 9, "a") == "np"
    assert kind(src, 9, "l") == "np"  # a list has no `mean`: NumPy converts it


def test_the_numpy_functions_taken_to_stay_on_the_device_do_so_on_the_installed_versions():
    jax = pytest.importorskip("jax")
    np = pytest.importorskip("numpy")
    from jaxmem.evaluators.review.semantic.names import NUMPY_DEFERS

    x = jax.numpy.arange(6.0).reshape(2, 3) + 1
    extra = {"numpy.searchsorted": (1.5,), "numpy.repeat": (2,), "numpy.swapaxes": (0, 1), "numpy.reshape": ((3, 2),),
             "numpy.moveaxis": (0, 1), "numpy.round": (2,), "numpy.around": (2,)}
    for q in sorted(NUMPY_DEFERS):
        arg = x[0] if q == "numpy.searchsorted" else x
        out = getattr(np, q.split(".", 1)[1])(arg, *extra.get(q, ()))
        out = out[0] if isinstance(out, tuple) else out
        assert isinstance(out, jax.Array), q
    assert not isinstance(np.exp(x), jax.Array) and not isinstance(np.asarray(x), jax.Array)


def test_jax_configuration_options_known_to_the_reviewer_are_options_of_the_installed_jax():
    jax = pytest.importorskip("jax")
    from jaxmem.evaluators.review.semantic.jax_config import OPTIONS, config_option

    assert {"jax_" + name for name in OPTIONS} <= set(jax.config.values)
    assert config_option("JAX_PLATFORMS") == "jax_platforms" and config_option("JAX_ATTENTION_IMPL") is None


def test_a_function_the_module_differentiates_is_guessed_to_return_device_values():
    # Reduced from a continuation-method trainer (12zzi): `problem.objective` is what jit(grad(.))
    # differentiates, so calling it as it is computes a JAX scalar: the loss formatted each batch.
    src = """
    from jax import grad, jit
    import jax; from losses import loss_fn
    def run(problem, opt, params, batches, other):
        grad_fn = jit(grad(problem.objective, [0]))
        value_and_grad = jax.value_and_grad(loss_fn)
        for batch in batches:
            grads = grad_fn(params, batch)
            loss = problem.objective(params, batch)
            acc = problem.accuracy(params, batch)
            l2 = loss_fn(params, batch)
            l3 = other.objective(params, batch)
    """
    assert kind(src, 9, "loss") == "jax" and kind(src, 9, "loss", strict=True) is None  # a guess
    assert kind(src, 11, "l2") == "jax"  # an imported (or unknown) function given to value_and_grad
    assert kind(src, 10, "acc") is None  # not differentiated: unknown
    assert kind(src, 12, "l3") is None  # another receiver: another function
    # Two functions' own parameters named `fn` are two callables (12zb: a timer helper's `fn()`
    # beside `jax.jit(jax.grad(fn))` in another function).
    src = """
    import jax
    def median_time(fn):
        out = fn()
        return out
    def time_grad(fn, pos):
        grad = jax.jit(jax.grad(fn))
        return median_time(lambda: grad(pos).block_until_ready())
    """
    assert kind(src, 4, "out") is None


# ---- loop roles ----------------------------------------------------------------------------------

ROLES = """
import jax, jax.numpy as jnp, optax
tx = optax.sgd(0.1)

@jax.jit
def train_step(params, opt_state, batch):
    grads = jax.grad(lambda p: jnp.sum(batch @ p))(params)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state

@jax.jit
def advance(grid):
    return jnp.roll(grid, 1)

@jax.jit
def predict(params, x):
    return x @ params

def reshard(batch):
    return batch

def main(params, opt_state, batches, grid, n, learn, state):
    for batch in batches:                                   # train
        params, opt_state = train_step(params, opt_state, batch)
    for _ in range(n):                                      # step: replaced state, no gradients
        grid = advance(grid)
    for x in batches:                                       # eval: no state carried
        out = predict(params, x)
    for _ in range(3):                                      # setup: three literal iterations
        params, opt_state = train_step(params, opt_state, batch)
    for epoch in range(n):                                  # epochs
        for batch in batches:
            params, opt_state = train_step(params, opt_state, batch)
    for batch in batches:                                   # a fresh batch transformed: no state
        batch = reshard(batch)
        out = predict(params, batch)
"""


def test_loop_roles_are_read_from_the_state_the_loop_carries():
    a, tree = model(ROLES)
    sc = scope_at(a, 22)
    got = [role(a, loop, sc).role for loop in sorted(loops_of(tree), key=lambda n: n.lineno)]
    assert got == ["train", "step", "eval", "setup", "epoch", "train", "eval"]
    first = role(a, sorted(loops_of(tree), key=lambda n: n.lineno)[0], sc)
    assert first.proven and first.state == frozenset({"params", "opt_state"})


def test_state_replaced_through_the_results_attributes_is_state():
    src = """
    def run(learn, learner_state, n):
        for _ in range(n):
            learner_output = learn(learner_state)
            learner_state = learner_output.learner_state
    """
    a, tree = model(src)
    (loop,) = loops_of(tree)
    ((call, names),) = list(replaced_state_calls(a, loop, scope_at(a, 4)))
    assert ast.unparse(call) == "learn(learner_state)" and names == frozenset({"learner_state"})


def test_state_rebuilt_around_the_results_is_state():
    # unseen-2026-12zzzzzzq's MLLM-JAX SFT loop: the step reads `bundle.state`, and the bundle is
    # rebuilt around its result (a class of the user's package), as `state.replace(params=...)`
    # rebuilds a train state. Both replace the state the step read; a wrapper of the loop's fresh
    # data (`batch = Batch(x)`) replaces nothing.
    src = """
    from pkg.state import Bundle
    def run(step, bundle, state, batches):
        for x in batches:
            new_state, metrics = step(bundle.state, x)
            bundle = Bundle(state=new_state, sharding=bundle.sharding)
        for x in batches:
            new_params, m = step(state.params, x)
            state = state.replace(params=new_params)
        for x in batches:
            out, m = step(x)
            batch = Batch(out)
    """
    a, tree = model(src)
    first, second, third = loops_of(tree)
    ((call, names),) = list(replaced_state_calls(a, first, scope_at(a, 5)))
    assert ast.unparse(call) == "step(bundle.state, x)" and names == frozenset({"bundle.state"})
    ((call, names),) = list(replaced_state_calls(a, second, scope_at(a, 8)))
    assert ast.unparse(call) == "step(state.params, x)" and names == frozenset({"state.params"})
    assert list(replaced_state_calls(a, third, scope_at(a, 11))) == []


def test_sgd_written_inline_on_gradients_computed_in_the_loop_is_a_proven_training_loop():
    # No step function: the gradient is taken in the loop and applied by a library call. The
    # gradients' binding proves it trains; a tree map of something else carries state unproven.
    src = """
    import jax
    grad_fn = jax.value_and_grad(lambda p, x: (p * x).sum())
    def fit(params, xs, noise):
        for x in xs:
            loss, grads = grad_fn(params, x)
            params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        for x in xs:
            params = jax.tree.map(lambda p, n: p + n, params, noise)
    """
    a, tree = model(src)
    first, second = sorted(loops_of(tree), key=lambda n: n.lineno)
    r = role(a, first, scope_at(a, 5))
    assert (r.role, r.proven, r.state) == ("train", True, frozenset({"params"}))
    assert role(a, second, scope_at(a, 5)).role == "eval"  # device arithmetic, nothing trained or stepped


def test_a_method_pmapped_through_its_class_in_init_is_compiled_and_not_a_per_step_body():
    src = """
    import jax
    class Trainer:
        def __init__(self):
            self.train_step = jax.pmap(Trainer.train_step, axis_name="d")
        def train_step(self, state, batch):
            return jax.grad(lambda p: (p * batch).sum())(state)
        def train(self, state, loader):
            for batch in loader:
                state = self.train_step(state, batch)
    """
    a, tree = model(src)
    step = tree.body[1].body[1]
    assert a.scopes[step].jitted
    per_step.mark(a)
    assert a.scopes[step].per_step is None


# ---- periodic branches -----------------------------------------------------------------------------

def test_a_modulus_of_one_is_every_step_and_a_flag_bound_to_a_modulus_is_periodic():
    src = """
    import time
    log_interval = 1
    eval_every = 100
    def f(steps):
        last = time.time()
        for step in range(steps):
            should_log = step % eval_every == 0
            if step % log_interval == 0:
                pass
            if step % eval_every == 0:
                pass
            if should_log:
                pass
            if time.time() - last > 60:
                pass
    """
    a, tree = model(src)
    sc = scope_at(a, 9)
    ifs = sorted((n for n in ast.walk(tree) if isinstance(n, ast.If)), key=lambda n: n.lineno)
    assert [periodic_guard(i, None, a, sc) for i in ifs] == [False, True, True, True]


# ---- donation -------------------------------------------------------------------------------------

def test_donation_follows_jaxs_own_rules_per_maker():
    src = """
    import functools, jax
    @functools.partial(jax.pmap, donate_argnums=(0,))
    def p_step(state, batch):
        return state
    @functools.partial(jax.jit, donate_argnums=(0,))
    def j_step(state, batch):
        return state
    def f(mesh, g):
        s = jax.jit(jax.shard_map(g, mesh=mesh, in_specs=(), out_specs=()), donate_argnames=("state",))
        return s
    """
    a, tree = model(src)
    sc = a.module_scope
    p = a.jit_info(ast.Name("p_step", ast.Load(), lineno=20, col_offset=0), sc)
    j = a.jit_info(ast.Name("j_step", ast.Load(), lineno=20, col_offset=0), sc)
    assert p.pmapped and not p.donates_keyword("state")       # pmap: never by keyword
    assert j.donates_keyword("state")                           # jit maps the keyword (jax >= 0.4.14)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "jax.jit")
    info, _wrapped = a.jit_from_call(call, scope_at(a, 10))
    assert not info.donation_known                              # names through a signature it cannot see


def test_equinox_filter_jit_calls_return_ready_and_jax_jit_calls_do_not():
    # equinox >= 0.11.8 blocks on an output of the program before a filter_jit call returns.
    src = """
    import equinox as eqx, jax
    @eqx.filter_jit
    def solve(a):
        return a
    step = jax.jit(lambda a: a)
    def run(a):
        return solve(a), step(a)
    """
    a, tree = model(src)
    assert a.jit_info(expr_at(tree, 8, "solve"), scope_at(a, 8)).returns_ready
    assert not a.jit_info(expr_at(tree, 8, "step"), scope_at(a, 8)).returns_ready


def test_a_factory_returning_a_pmap_in_a_tuple_position_gives_that_name_the_jit():
    src = """
    import jax
    def setup(fn):
        learn = jax.pmap(fn, axis_name="d")
        return learn, 3
    def main(fn):
        learn, n = setup(fn)
        return learn
    """
    a, tree = model(src)
    assert a.jit_info(expr_at(tree, 8, "learn"), scope_at(a, 8)).maker == "jax.pmap"


# ---- other files of the reviewed tree -------------------------------------------------------------

def test_a_step_jitted_in_another_file_is_followed_there(tmp_path: Path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "train.py").write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        @jax.jit
        def train_step(w, x):
            return w - 0.1 * jax.grad(lambda w: jnp.sum(x @ w))(w)
    """))
    main = textwrap.dedent("""
        from .train import train_step
        def fit(w, xs):
            for x in xs:
                w = train_step(w, x)
    """)
    (pkg / "main.py").write_text(main)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "train.py"), str(pkg / "main.py")])
    assert project.module_of(str(pkg / "main.py")) == "pkg.main"
    assert project.prefilter_text(main) == " jit pmap float( .item("  # main.py never says "jit" itself
    a, tree = model(main, module="pkg.main", project=project)
    (loop,) = loops_of(tree)
    r = role(a, loop, scope_at(a, 5))
    assert (r.role, r.proven) == ("train", True)
    alone, tree = model(main)  # the same file reviewed on its own knows nothing of train.py
    assert alone.jit_info(expr_at(tree, 5, "train_step"), scope_at(alone, 5)) is None


def test_a_jitted_method_is_found_through_a_typed_receiver_of_a_package_nested_in_the_tree(tmp_path: Path):
    # The repository root is reviewed; the package lives one folder down (`launcher/agents/sac.py`
    # imported as `agents.sac`), and the agent reaches the loop as an annotated parameter that
    # each step re-binds from its own method (the functional update).
    pkg = tmp_path / "launcher" / "agents"
    pkg.mkdir(parents=True)
    (pkg / "sac.py").write_text(textwrap.dedent("""
        from functools import partial
        import jax
        class Agent:
            @partial(jax.jit, static_argnames=("n",))
            def update(self, batch, n=1):
                return self, {"loss": batch.sum()}
    """))
    loop = textwrap.dedent("""
        from agents.sac import Agent
        def learner(agent: Agent, batches):
            for batch in batches:
                agent, info = agent.update(batch)
    """)
    (tmp_path / "run.py").write_text(loop)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "sac.py"), str(tmp_path / "run.py")])
    a, tree = model(loop, module="run", project=project)
    info = a.jit_info(expr_at(tree, 5, "agent.update"), scope_at(a, 5))
    assert info is not None and info.exact is False      # known by the declared type, not proven
    assert info.static_names() == {"n"}
    alone, tree = model(loop)
    assert alone.jit_info(expr_at(tree, 5, "agent.update"), scope_at(alone, 5)) is None
    # A receiver re-bound from anything but its own method is no longer known by the annotation.
    other, tree = model(loop.replace("agent, info = agent.update(batch)", "agent = make(agent)\n        agent.update(batch)"),
                        module="run", project=project)
    assert other.jit_info(expr_at(tree, 6, "agent.update"), scope_at(other, 6)) is None
    # A forward reference (`agent: "Agent"`, the class imported only for type checking) declares
    # the same type.
    quoted = loop.replace("from agents.sac import Agent", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from agents.sac import Agent").replace("agent: Agent", 'agent: "Agent"')
    fwd, tree = model(quoted, module="run", project=project)
    info = fwd.jit_info(expr_at(tree, 7, "agent.update"), scope_at(fwd, 7))
    assert info is not None and info.static_names() == {"n"}


def test_a_network_class_of_another_file_is_known_where_it_is_built_or_declared(tmp_path: Path):
    # `model = GPT(cfg)` with GPT from models.py: the facts of the tree say it is an NNX network,
    # so its eager forward in a decoding loop is JM307's; a plain class of the same file is not.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "models.py").write_text(textwrap.dedent("""
        from flax import nnx
        class GPT(nnx.Module):
            def __init__(self, rngs):
                self.out = nnx.Linear(4, 4, rngs=rngs)
            def __call__(self, x):
                return self.out(x)
        class Tokenizer:
            def __call__(self, text):
                return text
    """))
    main = textwrap.dedent("""
        import jax.numpy as jnp
        from flax import nnx
        from .models import GPT, Tokenizer
        def generate(tokens, steps):
            model = GPT(nnx.Rngs(0))
            for _ in range(steps):
                logits = model(tokens)
                tokens = jnp.concatenate([tokens, logits[:, -1:]], axis=1)
            return tokens
        def typed(model: GPT, tok: Tokenizer, tokens, steps):
            for _ in range(steps):
                logits = model(tokens)
                tokens = jnp.concatenate([tokens, logits[:, -1:]], axis=1)
                tok(tokens)
            return tokens
    """)
    (pkg / "main.py").write_text(main)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "models.py"), str(pkg / "main.py")])
    assert project.function("pkg.models.GPT").network == "nnx"
    assert project.function("pkg.models.Tokenizer") is None
    found = engine.check_source(main, str(pkg / "main.py"), [registry.by_code()["JM307"]], lambda c: "", None, project)
    # Proven by the model (shown as sure or possible by JM307's record on unseen code: calibration's business)
    assert [(f.line, f.proven) for f in found] == [(8, True), (13, True)]
    alone = engine.check_source(main, "main.py", [registry.by_code()["JM307"]], lambda c: "", None, None)
    assert alone == []  # on its own the file does not show what GPT is


def test_a_call_whose_output_is_fed_back_through_other_work_is_found():
    src = """
        import jax, jax.numpy as jnp
        def decode(model, sample, tokens, batches):
            for _ in range(16):
                logits = model(tokens)
                nxt = sample(logits[:, -1])
                tokens = jnp.concatenate([tokens, nxt[:, None]], axis=1)
            for x in batches:
                y = model(x)
                total = jnp.sum(y)
    """
    a, tree = model(src)
    first, second = loops_of(tree)
    assert [(c.lineno, sorted(n)) for c, n in fed_back_calls(a, first, scope_at(a, 5))] == [(5, ["tokens"])]
    assert list(fed_back_calls(a, second, scope_at(a, 9))) == []   # evaluation: nothing carried


def test_values_read_from_files_are_followed_through_views_and_conversions(tmp_path: Path):
    src = """
        import numpy as np, jax.numpy as jnp, scipy.io
        def local_loader(p):
            return np.load(p)
        def main(path, n):
            data = scipy.io.loadmat(path)
            a = jnp.asarray(data["a"]).astype(jnp.float32)
            test_x = a[1000:1200]
            size = len(test_x)
            w = local_loader(path)
            z = jnp.zeros(n)
    """
    a, tree = model(src)
    s = scope_at(a, 6)
    assert [name for name in ("data", "a", "test_x", "size", "w", "z") if loaded(a, name, s)] == ["data", "a", "test_x", "w"]
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "io.py").write_text("import pickle\ndef restore(p):\n    with open(p, 'rb') as f:\n        return pickle.load(f)\n")
    (pkg / "main.py").write_text("from .io import restore\nstate = restore('ckpt')\n")
    project = Project.of_paths([str(tmp_path)], [str(pkg / "io.py"), str(pkg / "main.py")])
    assert project.function("pkg.io.restore").loads
    b, _ = model("from .io import restore\nstate = restore('ckpt')\n", module="pkg.main", project=project)
    assert loaded(b, "state", b.module_scope)
    alone, _ = model("from .io import restore\nstate = restore('ckpt')\n")
    assert not loaded(alone, "state", alone.module_scope)


def test_a_helper_of_another_file_that_reads_its_arguments_on_the_host_is_followed(tmp_path: Path):
    # `utils.update_metrics(metrics, acc)` does `.item()` on each metric; `self.log_loss(loss)` is
    # inherited from a base class of another file and does `float(loss)`: both are a per-step read
    # of the jitted step's outputs, which the file alone does not show.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "utils.py").write_text(textwrap.dedent("""
        import jax
        def update_metrics(metrics, acc):
            return {k: acc.get(k, 0.0) + v.item() for k, v in metrics.items()}
        def fetch(tree):
            return jax.device_get(jax.tree_util.tree_map(lambda x: x[0], tree))
        class Base:
            def log_loss(self, step, loss):
                self.records.append((step, float(loss)))
    """))
    main = textwrap.dedent("""
        import jax
        from . import utils
        from .utils import Base

        @jax.jit
        def train_step(w, x):
            loss, g = jax.value_and_grad(lambda w: (x @ w).sum())(w)
            return w - 0.1 * g, {"loss": loss}

        class Problem(Base):
            def fit(self, w, xs):
                acc = {}
                for x in xs:
                    w, metrics = train_step(w, x)
                    acc = utils.update_metrics(metrics, acc)
                    self.log_loss(0, metrics["loss"])
                return w, acc
    """)
    (pkg / "main.py").write_text(main)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "utils.py"), str(pkg / "main.py")])
    found = engine.check_source(main, str(pkg / "main.py"), [registry.by_code()["JM101"]], lambda c: "", None, project)
    assert [(f.line, f.proven) for f in found] == [(16, True), (17, True)]
    assert project.function("pkg.utils.fetch").converts == (("tree", "jax.device_get"),)
    alone = engine.check_source(main, "main.py", [registry.by_code()["JM101"]], lambda c: "", None, None)
    assert alone == []


def test_a_running_mean_of_another_file_that_reads_what_its_instances_are_handed(tmp_path: Path):
    # Reduced from trainers that keep running means in a helper module: `mean_loss(loss)` calls the
    # instance (its `__call__` does `val.item()`) and `logs.update(names, values)` a method that
    # does `float(value)`. The helper module neither jits nor imports JAX, and the trainer never
    # writes `float(` or `.item(`: the text prefilter must still let the rule see the trainer.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "means.py").write_text(textwrap.dedent("""
        class Mean:
            def __init__(self):
                self.total, self.count = 0.0, 0
            def __call__(self, val):
                self.total += val.item()
                self.count += 1
                return self.total / self.count
        class Logs:
            def __init__(self):
                self.values = {}
            def update(self, names, values):
                for name, value in zip(names, values):
                    self.values[name] = float(value)
    """))
    main = textwrap.dedent("""
        import jax
        from pkg.means import Logs, Mean

        @jax.jit
        def train_step(w, x):
            loss, g = jax.value_and_grad(lambda w: (x @ w).sum())(w)
            return w - 0.1 * g, loss

        def train(w, xs):
            mean_loss = Mean()
            for x in xs:
                w, loss = train_step(w, x)
                mean_loss(loss)
            logs = Logs()
            for x in xs:
                w, loss = train_step(w, x)
                logs.update(["loss"], [loss])
            return w
    """)
    (pkg / "train.py").write_text(main)
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("train.py", 14), ("train.py", 18)]
    alone = api.review_paths([str(pkg / "train.py")], select=["JM101"], show_possible=True, jobs=1)
    assert alone.findings == []


def test_each_position_of_a_tuple_a_function_of_another_file_returns_keeps_its_own_kind(tmp_path: Path):
    # Reduced from a Stokesian-dynamics simulator (12zzzf): `(..., grid_x, support, ...) =
    # utils.init_box(...)` where the setup function returns device arrays beside a NumPy grid size
    # and a Python int; `int(support)` in the time-step loop read nothing from the device, yet all
    # positions took the tuple's kind. Each position now has the kind its returns give it there.
    pkg = tmp_path / "sim"
    pkg.mkdir()
    (pkg / "utils.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp
        import numpy as np

        def check_shear(h, xisq):
            eta = h * xisq
            return eta, int(eta * eta / jnp.pi) + 1

        def grid_size(kmax):
            sizes = np.array([8, 16, 32, 64])
            return sizes[np.searchsorted(sizes, kmax)]

        def init_box(xi, box):
            eta, support = check_shear(box / 8.0, xi * xi)
            grid_x = grid_size(int(2.0 * xi) + 1)
            weights = jnp.ones((grid_x,)) * eta
            return weights, grid_x, support
    """))
    (tmp_path / "main.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        from sim import utils

        @jax.jit
        def step(x, w):
            return x + w.sum()

        def run(x, n):
            weights, grid_x, support = utils.init_box(0.5, 10.0)
            for _ in range(n):
                x = step(x, weights)
                s = int(support)
                g = int(grid_x)
                w = float(weights[0])
            return x, s, g, w
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("main.py", 16)]


def test_a_method_of_a_class_of_another_file_returns_what_it_returns_there(tmp_path: Path):
    # Reduced from a physics study script: `specter = SPECTER(compile=True)` of the repository's own
    # package, then `specter.spectralEMD(a, b)` timed without a wait. The method returns what a
    # jitted function returns, in another file: the timed region queues device work.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "emd.py").write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        @jax.jit
        def _emd(a, b):
            return jnp.abs(a - b).sum(-1)
        class EMD:
            def __init__(self, compile=True):
                self.compile = compile
            def distance(self, a, b):
                return _emd(a, b)
    """))
    main = textwrap.dedent("""
        import time
        from pkg.emd import EMD

        def study(a, b):
            emd = EMD(compile=True)
            start = time.time()
            d = emd.distance(a, b)
            print("took", time.time() - start)
            return d
    """)
    (tmp_path / "study.py").write_text(main)
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM701"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line, f.confidence) for f in result.findings] == [("study.py", 9, "possible")]
    alone = api.review_paths([str(tmp_path / "study.py")], select=["JM701"], show_possible=True, jobs=1)
    assert alone.findings == []


_STATE_CLASS = """
    import dataclasses
    import jax
    import jax.numpy as jnp

    @dataclasses.dataclass
    class State:
        params: jax.Array
        steps: jax.Array

        @staticmethod
        def setup():
            return State(params=jnp.zeros(4), steps=jnp.array(0))

        def train_step(self, x):
            return self._train_step(x)

        @jax.jit
        def _train_step(self, x):
            loss, grads = jax.value_and_grad(lambda p: jnp.sum((x @ p) ** 2))(self.params)
            return dataclasses.replace(self, params=self.params - grads, steps=self.steps + 1), loss
"""
_STATE_LOOP = """
    def main(batches):
        state = State.setup()
        for batch in batches:
            state, loss = state.train_step(batch)
            step = int(state.steps)
            print(step)
"""


def test_a_method_of_a_class_of_this_module_returns_what_its_body_returns():
    # Reduced from a diffusion trainer of the twenty-second reading (12zzzzzzzj): `state =
    # DDPMState.setup(cfg)`, then `state, log = state.train_step(x)`, a plain method returning a
    # jitted method's result, and `int(state.steps)` every step. The method's result is read as
    # a local function's would be.
    src = textwrap.dedent(_STATE_CLASS) + textwrap.dedent(_STATE_LOOP)
    found = [(f.code, f.line) for f in engine.check_source(src, "train.py", [registry.by_code()["JM101"]],
                                                          lambda c: "", None, None)]
    assert found == [("JM101", src.splitlines().index("        step = int(state.steps)") + 1)]


def test_a_class_made_by_its_own_factory_in_another_file_is_that_class(tmp_path: Path):
    # The same trainer as it is written: the class in the package, the loop in a script. `State.setup()`
    # is read as making a State (a guess: possible), so `state.train_step` is State's method there.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "state.py").write_text(textwrap.dedent(_STATE_CLASS))
    (tmp_path / "train.py").write_text("from pkg.state import State\n" + textwrap.dedent(_STATE_LOOP))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line, f.confidence) for f in result.findings + result.possible] == [
        ("train.py", 7, "possible")]
    # The same finding with every rule on: a kind worked out while a loop's cycle was cut short is
    # not kept, so no answer depends on which rule asked first (JM101 alone found nothing before).
    every = api.review_paths([str(tmp_path)], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in every.findings if f.code == "JM101"] == [("train.py", 7)]


def test_a_jitted_method_of_a_class_made_by_its_factory_elsewhere_is_the_step(tmp_path: Path):
    # Reduced from a behaviour-cloning trainer of the twenty-second reading (12zzzzzzzh): `agent =
    # BCAgent.create(...)` of the package, `agent, info = agent.update(batch)` (a jitted method) and
    # `float(info["loss"])` every step, beside a validation loop run every N steps. Unless the call
    # is known as the step, the outer loop read as an epoch loop (its nested loop runs JAX work)
    # and every read in it as once per epoch.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(textwrap.dedent("""
        import dataclasses
        import jax
        import jax.numpy as jnp

        @dataclasses.dataclass
        class Agent:
            params: jax.Array

            @classmethod
            def create(cls, seed):
                return cls(params=jax.random.normal(jax.random.PRNGKey(seed), (4,)))

            @jax.jit
            def update(self, batch):
                loss, grads = jax.value_and_grad(lambda p: jnp.sum((batch @ p) ** 2))(self.params)
                return dataclasses.replace(self, params=self.params - grads), {"loss": loss}
    """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp
        from pkg.agent import Agent

        def main(loader, val_batches, steps, eval_every):
            agent = Agent.create(0)
            losses = []
            for step in range(steps):
                agent, info = agent.update(next(loader))
                losses.append(float(info["loss"]))
                if step % eval_every == 0:
                    for val in val_batches:
                        print(jnp.sum(val @ agent.params))
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("train.py", 10)]


def test_each_jitted_step_a_factory_of_another_file_returns_in_a_tuple_is_known(tmp_path: Path):
    # Reduced from a GenCast trainer of the twenty-second reading (12zzzzzzzg): `train_step,
    # eval_step = make_jitted_steps(...)` of a helper module (two `@nnx.jit` defs returned as a
    # tuple), then `float(loss)` of the train step's loss every step.
    (tmp_path / "helpers.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        def make_steps(scale):
            @jax.jit
            def train_step(params, batch):
                loss, grads = jax.value_and_grad(lambda p: jnp.sum((batch @ p) ** 2) * scale)(params)
                return params - grads, loss

            @jax.jit
            def eval_step(params, batch):
                return jnp.sum(batch @ params)

            return train_step, eval_step
    """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        from helpers import make_steps

        def main(params, batches):
            train_step, eval_step = make_steps(0.1)
            total = 0.0
            for batch in batches:
                params, loss = train_step(params, batch)
                total += float(loss)
            return params, total
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("train.py", 9)]


def test_a_numpy_array_updated_in_place_stays_numpy():
    # NumPy's in-place operators never defer to the JAX operand: `p += g` converts g and p stays
    # NumPy, also when the loop's `p += ...` reaches itself; `q = q + g` gives a JAX array.
    src = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        def f(g, n):
            p = np.zeros(3)
            q = np.zeros(3)
            for _ in range(n):
                p += 0.5 * jnp.ones(3)
                p += g
                q = q + jnp.ones(3)
            return p, q
    """)
    a, tree = model(src)
    sc = scope_at(a, 9)
    ret = next(n for n in ast.walk(tree) if isinstance(n, ast.Return))
    p, q = ret.value.elts
    assert a.kind(p, sc, True) == "np"
    assert a.kind(q, sc) == "jax"


def test_a_logger_kept_on_self_whose_method_reads_through_another_method(tmp_path: Path):
    # Reduced from a trainer that keeps its TensorBoard logger on `self` (an `__init__` parameter
    # annotated with the logger class of another file): `log_loss` calls `self.log_scalar`, which
    # does `float(value.item())`. Two hops the file alone does not show.
    pkg = tmp_path / "training"
    pkg.mkdir()
    (pkg / "board.py").write_text(textwrap.dedent("""
        class BoardLogger:
            def log_scalar(self, tag, value, step):
                self.rows.append((tag, float(value.item()), step))
            def log_loss(self, loss, step):
                self.log_scalar("train/loss", loss, step)
    """))
    main = textwrap.dedent("""
        import jax
        from training.board import BoardLogger

        @jax.jit
        def train_step(w, x):
            loss, g = jax.value_and_grad(lambda w: (x @ w).sum())(w)
            return w - 0.1 * g, loss

        class Trainer:
            def __init__(self, reporter: BoardLogger):
                self.reporter = reporter
            def fit(self, w, xs):
                for step, x in enumerate(xs):
                    w, loss = train_step(w, x)
                    self.reporter.log_loss(loss, step)
                return w
    """)
    (pkg / "trainer.py").write_text(main)
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("trainer.py", 16)]


def test_a_step_re_exported_through_two_package_inits_is_followed(tmp_path: Path):
    # Reduced from a diffusion trainer: `from src.diffusion import make_step`, where
    # src/diffusion/__init__.py imports it from `.losses`, whose __init__.py imports it from the
    # module that defines it under `eqx.filter_jit`. The step's loss read per step is then known.
    losses = tmp_path / "src" / "diffusion" / "losses"
    losses.mkdir(parents=True)
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "diffusion" / "__init__.py").write_text("from .losses import (\n    make_step,\n)\n")
    (losses / "__init__.py").write_text("from .score_matching import make_step\n__all__ = ['make_step']\n")
    (losses / "score_matching.py").write_text(textwrap.dedent("""
        import jax

        @jax.jit  # not eqx.filter_jit: its calls wait for their work (equinox >= 0.11.8)
        def make_step(w, x):
            loss, g = jax.value_and_grad(lambda w: (x @ w).sum())(w)
            return loss, w - 0.1 * g
    """))
    main = textwrap.dedent("""
        from src.diffusion import make_step

        def train(w, xs):
            losses = []
            for x in xs:
                value, w = make_step(w, x)
                losses.append(value.item())
            return w, losses
    """)
    (tmp_path / "train.py").write_text(main)
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings] == [("train.py", 8)]


def test_item_write_into_numpy_array_is_a_proven_read_only_in_training():
    """`curve[i] = loss` in a proven training loop is a sure per-step read (NumPy converts the
    device value on the host); the same write into a results table of an analysis loop is not."""
    fixtures = Path(__file__).parent / "fixtures" / "JM101"
    rule = [registry.by_code()["JM101"]]
    bad = (fixtures / "bad_loss_written_into_numpy_array.py").read_text(encoding="utf-8")
    found = engine.check_source(bad, "bad.py", rule, lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(28, True)]
    clean = (fixtures / "clean_results_table_filled_outside_training.py").read_text(encoding="utf-8")
    assert engine.check_source(clean, "clean.py", rule, lambda c: "", None, None) == []


def test_a_stop_check_is_never_proven_and_frees_the_other_reads_of_its_loop():
    """`if float(loss) < tol: break` decides whether the loop goes on: a read the algorithm needs,
    reported but never proven; the same loop's other reads stall nothing more. A stop test that
    runs every N steps, or on the step counter the host could keep, frees nothing."""
    fixtures = Path(__file__).parent / "fixtures" / "JM101"
    rule = [registry.by_code()["JM101"]]
    bad = (fixtures / "bad_stop_check_only_every_n_steps.py").read_text(encoding="utf-8")
    found = engine.check_source(bad, "bad.py", rule, lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(24, True), (37, False)]
    clean = (fixtures / "clean_reads_beside_a_stop_check.py").read_text(encoding="utf-8")
    assert engine.check_source(clean, "clean.py", rule, lambda c: "", None, None) == []


def test_a_stop_check_follows_host_values_through_the_names_computed_from_them():
    """Reduced from a stability run: `d = jax.device_get(diag(state))`, then `ok, why = stable(d)`
    and `if not ok: return 1` every step. The read feeds the loop's stop check through a name
    computed from it: reported, never proven."""
    source = (
        "import jax\nimport jax.numpy as jnp\n\n\n"
        "@jax.jit\ndef step(state):\n    g = jax.grad(lambda s: jnp.sum(s['v'] ** 2))(state)\n"
        "    return jax.tree.map(lambda x, gx: x - 0.1 * gx, state, g)\n\n\n"
        "@jax.jit\ndef diag(state):\n    return {'vmax': jnp.max(state['v'])}\n\n\n"
        "def stable(d):\n    return d['vmax'] < 10, 'velocity'\n\n\n"
        "def run(state, steps):\n"
        "    for i in range(steps):\n"
        "        state = step(state)\n"
        "        d = jax.device_get(diag(state))\n"
        "        ok, why = stable(d)\n"
        "        if not ok:\n"
        "            return 1\n"
        "    return 0\n"
    )
    found = engine.check_source(source, "run.py", [registry.by_code()["JM103"]], lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(23, False)]


def test_forward_outputs_named_g_do_not_prove_a_training_step():
    """Reduced from an ensemble Kalman inversion: `thetas = eki_update(thetas, g, y)` where `g` holds
    the ensemble's forward outputs and the visible update takes no gradient. Named like gradients
    is not proven to be gradients: the loop's host read is reported, not proven. Handed `grads`
    that a gradient transform computed just before, the same update trains."""
    head = (
        "import jax\nimport jax.numpy as jnp\n\n\n"
        "def forward(theta):\n    return jnp.tanh(theta)\n\n\n"
        "def eki_update(thetas, g, y):\n    return thetas + 0.1 * (y - g)\n\n\n"
    )
    eki = head + (
        "def run(thetas, y, n):\n"
        "    history = []\n"
        "    for it in range(n):\n"
        "        g = jax.vmap(forward)(thetas)\n"
        "        history.append(float(jnp.mean((y - g) ** 2)))\n"
        "        thetas = eki_update(thetas, g, y)\n"
        "    return thetas, history\n"
    )
    grads = head + (
        "grad_fn = jax.jit(jax.value_and_grad(lambda t, y: jnp.sum((y - forward(t)) ** 2)))\n\n\n"
        "def run(thetas, y, n):\n"
        "    history = []\n"
        "    for it in range(n):\n"
        "        loss, g = grad_fn(thetas, y)\n"
        "        history.append(float(loss))\n"
        "        thetas = eki_update(thetas, g, y)\n"
        "    return thetas, history\n"
    )
    rule = [registry.by_code()["JM101"]]
    assert [f.proven for f in engine.check_source(eki, "eki.py", rule, lambda c: "", None, None)] == [False]
    assert [f.proven for f in engine.check_source(grads, "sgd.py", rule, lambda c: "", None, None)] == [True]


def test_an_eager_loop_offered_beside_a_compiled_one_is_not_proven():
    """Reduced from a sampler: `if jit: state = lax.fori_loop(0, n, body, state)` / `else: for _ in
    range(n): state = step(state)`. The eager loop is a debugging switch beside the compiled
    default: its eager gradient is reported, not proven. Without the compiled branch it is."""
    head = (
        "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n\n\n"
        "def energy(q):\n    return jnp.sum(q ** 2)\n\n\n"
        "def step(q):\n    g = jax.grad(energy)(q)\n    return q - 0.01 * g\n\n\n"
    )
    switch = head + (
        "def sample(q, n, jit=True):\n"
        "    if jit:\n"
        "        q = lax.fori_loop(0, n, lambda i, s: step(s), q)\n"
        "    else:\n"
        "        for _ in range(n):\n"
        "            q = step(q)\n"
        "    return q\n"
    )
    eager = head + (
        "def sample(q, n):\n"
        "    for _ in range(n):\n"
        "        q = step(q)\n"
        "    return q\n"
    )
    rule = [registry.by_code()["JM305"]]
    assert [f.proven for f in engine.check_source(switch, "s.py", rule, lambda c: "", None, None)] == [False]
    assert [f.proven for f in engine.check_source(eager, "e.py", rule, lambda c: "", None, None)] == [True]


def test_an_nnx_step_that_trains_in_place_makes_a_training_loop():
    """`loss = train_step(model, optimizer, x, y)` under `nnx.jit`, updating the model through the
    optimizer it is handed: the loop replaces no name but trains, so its per-step host reads (a
    float, an item write into a NumPy array) are proven."""
    source = (Path(__file__).parent / "fixtures" / "JM101" / "bad_nnx_step_in_place.py").read_text(encoding="utf-8")
    found = engine.check_source(source, "bad.py", [registry.by_code()["JM101"]], lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(28, True), (30, True)]


def test_a_read_in_an_eager_training_loop_is_not_proven():
    """A loop that takes its gradients eagerly and calls nothing compiled: its host read is
    reported but not proven (the device never runs far ahead); the same read after a jitted
    step is."""
    source = (Path(__file__).parent / "fixtures" / "JM101" / "bad_read_in_an_eager_training_loop.py").read_text(
        encoding="utf-8")
    found = engine.check_source(source, "bad.py", [registry.by_code()["JM101"]], lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(17, False), (32, True), (45, False)]


def test_step_made_by_a_method_factory_is_jitted_and_trains():
    """`state, step = self.state, self.get_train_step()` where the method, defined further down,
    returns one of its jitted defs: `step` is that jitted callable, and the loop around it trains."""
    fixtures = Path(__file__).parent / "fixtures" / "JM101"
    source = (fixtures / "bad_step_made_by_a_method_factory.py").read_text(encoding="utf-8")
    found = engine.check_source(source, "bad.py", [registry.by_code()["JM101"]], lambda c: "", None, None)
    assert [(f.line, f.proven) for f in found] == [(22, True)]


def test_network_of_another_file_applied_through_a_partial(tmp_path):
    """`infer = partial(GPT(cfg).apply, params)` where GPT is a Linen Module of another file of the
    tree, and this file never names its framework: JM307 still reviews it (no text prefilter)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(textwrap.dedent("""
        import flax.linen as nn

        class GPT(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(8)(x)
    """))
    infer = textwrap.dedent("""
        from functools import partial

        import jax.numpy as jnp

        from pkg.model import GPT

        def generate(cfg, params, x, n):
            infer_fn = partial(GPT(cfg).apply, params)
            for _ in range(n):
                logits = infer_fn(x)
                x = jnp.concatenate([x, jnp.argmax(logits, -1)], axis=1)
            return x
    """)
    (pkg / "infer.py").write_text(infer)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "model.py"), str(pkg / "infer.py")])
    found = engine.check_source(infer, str(pkg / "infer.py"), [registry.by_code()["JM307"]], lambda c: "", None, project)
    assert [f.line for f in found] == [11]


def test_modules_imported_through_a_utility_module_of_the_tree(tmp_path):
    """`from pkg.common import jax, functools` where pkg/common.py does `import jax`: the names are
    the modules themselves, so `functools.partial(jax.pmap)` is a pmap decorator. Names the utility
    module defines itself stay its own."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text("import functools\nimport jax\nimport jax.numpy as jnp\n\ndef helper(x):\n    return x\n")
    main = textwrap.dedent("""
        from pkg.common import functools, jax, jnp, helper

        @functools.partial(jax.pmap, axis_name="d")
        def step(x):
            return jnp.tanh(x)
    """)
    (pkg / "main.py").write_text(main)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "common.py"), str(pkg / "main.py")])
    a = semantic.build(ast.parse(main), main.splitlines(), module="pkg.main", project=project)
    assert [fn.name for fn in a.jitted_defs] == ["step"]
    assert a.aliases["jnp"] == "jax.numpy" and a.aliases["helper"] == "pkg.common.helper"


def test_a_star_import_of_a_utility_module_of_the_tree(tmp_path):
    """`from pkg.utils.imports import *` (shape of 12zo's KataCV, whose every trainer gets `jax`
    and `partial` this way): the names the utility module imports, and its own functions and
    classes, are bound here; `__all__` limits them, private names stay out, and a star import
    inside the utility module is followed too. What this file binds itself wins."""
    pkg = tmp_path / "pkg"
    (pkg / "utils").mkdir(parents=True)
    for d in (pkg, pkg / "utils"):
        (d / "__init__.py").write_text("")
    (pkg / "utils" / "base.py").write_text("import numpy as np\nimport optax\n")
    (pkg / "utils" / "imports.py").write_text(
        "from functools import partial\nimport jax\nimport jax.numpy as jnp\nfrom .base import *\n\n"
        "def helper(x):\n    return x\n\ndef _private(x):\n    return x\n\ndef step(x):\n    return x\n")
    main = textwrap.dedent("""
        from pkg.utils.imports import *

        @partial(jax.jit, static_argnames=["train"])
        def step(x, train):
            return jnp.tanh(x)
    """)
    (pkg / "main.py").write_text(main)
    files = [str(pkg / "utils" / "base.py"), str(pkg / "utils" / "imports.py"), str(pkg / "main.py")]
    project = Project.of_paths([str(tmp_path)], files)
    a = semantic.build(ast.parse(main), main.splitlines(), module="pkg.main", project=project)
    assert [fn.name for fn in a.jitted_defs] == ["step"]
    assert a.aliases["jnp"] == "jax.numpy" and a.aliases["partial"] == "functools.partial"
    assert a.aliases["np"] == "numpy" and a.aliases["helper"] == "pkg.utils.imports.helper"
    assert "_private" not in a.aliases and "step" not in a.aliases
    (pkg / "utils" / "imports.py").write_text("import jax\nimport optax\n__all__ = ['jax']\n")
    project = Project.of_paths([str(tmp_path)], files)
    a = semantic.build(ast.parse(main), main.splitlines(), module="pkg.main", project=project)
    assert a.aliases.get("jax") == "jax" and "optax" not in a.aliases


# ---- host callbacks in compiled loops (callbacks.py) ---------------------------------------------

LOOP_BODIES = """
import jax

def log(x): pass

def helper(x):
    return x

def train(state):
    def step(carry, i):
        def inner(c):
            return c
        jax.lax.cond(i > 0, lambda: helper(carry), lambda: carry)
        return inner(carry), i
    def once(c):
        return c
    return jax.lax.scan(step, state, None, 10), jax.jit(once)(state)
"""


def test_loop_iteration_follows_bodies_nesting_and_single_callers_not_cond_branches():
    from jaxmem.evaluators.review.semantic import callbacks

    a, tree = model(LOOP_BODIES)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    lams = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
    assert callbacks.loop_iteration(a, a.scopes[defs["step"]])  # the scan's body
    assert callbacks.loop_iteration(a, a.scopes[defs["inner"]])  # nested in it
    assert not callbacks.loop_iteration(a, a.scopes[defs["once"]])  # jitted, called once
    assert not callbacks.loop_iteration(a, a.scopes[lams[0]])  # a cond branch runs when taken
    assert not callbacks.loop_iteration(a, a.scopes[defs["log"]])  # never called


@pytest.mark.parametrize("test, expected", [
    ("step % every == 0", True), ("t - last >= freq", True), ("latest is None or t - latest > freq", True),
    ("len(done) > 0", False), ("flag", False), ("t - last < freq", False),
])
def test_cadence_tests(test, expected):
    from jaxmem.evaluators.review.semantic import callbacks

    assert callbacks.cadence(ast.parse(test, mode="eval").body) is expected


# ---- statements that run every iteration (iterations.py) ------------------------------------------

def test_a_block_that_ends_the_loop_runs_once_and_a_periodic_plot_is_not_every_iteration():
    from jaxmem.evaluators.review import registry

    src = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        import matplotlib.pyplot as plt

        @jax.jit
        def step(x):
            return x * 0.5, jnp.sum(x)

        def train(x, n):
            for i in range(n):
                x, loss = step(x)
                if np.isnan(loss):
                    print(f"nan at {i}: {loss}")
                    break
                if i % 100 == 0:
                    plt.plot([1, 2])
            return x
    """)
    found = engine.check_source(src, "t.py", registry.select(["JM102", "JM103"], []), lambda t: "")
    # the NaN test reads the loss every step (the periodic plot does not hide it); the print
    # in the block that breaks out runs once
    assert [(f.code, f.line) for f in found] == [("JM103", 12)]


def test_a_name_bound_to_a_transform_gives_arrays_when_called():
    src = """
import jax

def f(x):
    return x * 2

def run(x):
    batched = jax.vmap(f)
    grad_f = jax.grad(lambda v: (v ** 2).sum())
    other = len
    return batched(x), grad_f(x), other(x)
"""
    assert kind(src, 11, "batched(x)") == "jax"
    assert kind(src, 11, "grad_f(x)") == "jax"
    assert kind(src, 11, "other(x)") is None


@pytest.mark.parametrize("test, expected", [
    ("self._train_step_dbg", "debug"),
    ("args.debug and step > 0", "debug"),
    ("os.environ.get('APP_DEBUG') == '1'", "debug"),
    ("train_iter.is_freq(step_freq=config.checkpoint_freq)", "cadence"),
    ("should_save(step, cfg.save_every)", "cadence"),
    ("weights is None", "lazy-init"),
    ("self.cache is None and warm", "lazy-init"),
    ("step % 100 == 0", None),        # proven periodic elsewhere, not a guess
    ("loss > best", None),
    ("debugger_attached", None),      # a token, not a substring
    ("weights is not None", None),
])
def test_guessed_guards_name_why_a_branch_may_not_run_every_step(test, expected):
    from jaxmem.evaluators.review.semantic.branches import guessed_guard

    assert guessed_guard(ast.parse(test, mode="eval").body) == expected


def test_an_instance_of_a_class_of_another_file_beside_the_script_reaches_its_stored_jits(tmp_path: Path):
    # `from dt_model import GPT` in DT/train.py means DT/dt_model.py (a script's folder is first
    # on sys.path), even with a sibling RADT/dt_model.py; `model = GPT(cfg)` then reaches the
    # jitted callable a method of GPT stores (`self.model_step = jax.jit(...)` in `create_fns`).
    for folder in ("DT", "RADT"):
        pkg = tmp_path / folder
        pkg.mkdir()
        (pkg / "dt_model.py").write_text(textwrap.dedent("""
            import jax
            class GPT:
                def __init__(self, cfg):
                    self.cfg = cfg
                def create_fns(self):
                    def model_step(state, x, train: bool):
                        return state, x.sum()
                    self.model_step = jax.jit(model_step, static_argnames="train")
        """ if folder == "DT" else """
            class GPT:
                def model_step(self, state, x):
                    return state, x
        """))
    loop = textwrap.dedent("""
        from dt_model import GPT
        def train(state, batches):
            model = GPT(cfg=1)
            for x in batches:
                state, loss = model.model_step(state, x, train=True)
    """)
    (tmp_path / "DT" / "train.py").write_text(loop)
    files = [str(tmp_path / f / "dt_model.py") for f in ("DT", "RADT")] + [str(tmp_path / "DT" / "train.py")]
    project = Project.of_paths([str(tmp_path)], files)
    assert project.beside("dt_model", "DT.train") == "DT.dt_model"
    assert project.beside("dt_model", "RADT.train") == "RADT.dt_model"
    assert project.beside("numpy", "DT.train") == "numpy"
    a, tree = model(loop, module="DT.train", project=project)
    info = a.jit_info(expr_at(tree, 6, "model.model_step"), scope_at(a, 6))
    assert info is not None and info.exact is False and info.static_names() == {"train"}
    other, tree = model(loop, module="RADT.train", project=project)  # the sibling's GPT jits nothing
    assert other.jit_info(expr_at(tree, 6, "model.model_step"), scope_at(other, 6)) is None


def test_nested_loops_that_only_copy_end_the_search_for_an_earlier_wait():
    """Reduced from a cellular-automaton script that prints a rule table in three nested loops:
    the search for an earlier wait went from the inner loop to its parent and back again until
    Python's recursion limit, and the whole file was skipped as "too deeply nested"."""
    source = textwrap.dedent("""
        import jax.numpy as jnp

        rule_table = jnp.zeros((2, 2, 2))
        for i in range(2):
            for j in range(2):
                for k in range(2):
                    print(f"rule_table[{i},{j},{k}] = {rule_table[i, j, k]}")
    """)
    engine.check_source(source, "table.py", registry.all_rules(), lambda c: "", None, None)


def test_a_package_init_imports_relative_to_itself(tmp_path: Path):
    """Reduced from a bandits library: `pkg/__init__.py` re-exports `from .experiment import
    experiment`, a jitted function of `pkg/experiment.py`, and an example does `from pkg import
    experiment`. In a package's `__init__.py`, `.` is the package itself: the name is the
    function `pkg.experiment.experiment` (it was read as `experiment.experiment`, unknown)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "experiment.py").write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        @jax.jit
        def experiment(key, steps):
            return jnp.cumsum(jax.random.normal(key, (1000,)))
    """))
    (pkg / "__init__.py").write_text("from .experiment import experiment\n")
    files = [str(pkg / "experiment.py"), str(pkg / "__init__.py")]
    project = Project.of_paths([str(tmp_path)], files)
    assert project.is_package("pkg") and not project.is_package("pkg.experiment")
    assert project.reexport("pkg", "experiment") == "pkg.experiment.experiment"
    example = textwrap.dedent("""
        from pkg import experiment
        res = experiment(key, 10)
    """)
    a, tree = model(example, module="examples.run", project=project)
    assert a.jit_info(expr_at(tree, 3, "experiment"), a.module_scope) is not None


def test_a_loss_whose_sibling_goes_to_an_optimizer_update_is_guessed_a_device_array():
    """`loss, grads = loss_and_grad(p, data)` with the callable a parameter: its gradients go to
    the optimizer triple's update (or to `tx.update(grads, ...)`), so the call computes a loss and
    its gradients. A guess: the default reading only. A pair that goes nowhere near an optimizer
    stays unknown."""
    src = """
    from jax.example_libraries import optimizers
    def fit(loss_and_grad, solver, tx, p0, data, n):
        opt_init, opt_update, get_params = optimizers.adam(0.01)
        state = opt_init(p0)
        opt_state = tx.init(p0)
        for i in range(n):
            loss, grads = loss_and_grad(get_params(state), data)
            state = opt_update(i, grads, state)
            value, gradients = solver(p0)
            updates, opt_state = tx.update(gradients, opt_state)
            x, info = solver(p0)
        return loss, value, x, info
    """
    assert kind(src, 13, "loss") == "jax" and kind(src, 13, "loss", strict=True) is None
    assert kind(src, 13, "value") == "jax"
    assert kind(src, 13, "x") is None and kind(src, 13, "info") is None


def test_a_clock_named_in_another_file_of_the_tree_times_a_region(tmp_path: Path):
    """Reduced from a synthesizer's profiling scripts: `common.py` holds `timer = time.perf_counter`
    and the script times N dispatches of a jitted function with `t = timer()` ... `timer() - t`,
    waiting for none of them. Reviewed with its neighbour, the region is the timing rule's; alone,
    the script's clock is out of sight."""
    from jaxmem.evaluators.review.api import review_paths

    (tmp_path / "common.py").write_text("import time\n\ntimer = time.perf_counter\n")
    (tmp_path / "profile_it.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        from common import timer

        f = jax.jit(lambda k: jax.random.normal(k, (1024, 1024)) @ jnp.ones((1024, 8)))

        def main(key):
            results = []
            for k in range(5):
                t = timer()
                for i in range(100):
                    y = f(key)
                t = timer() - t
                results.append(t)
            return results
    """))
    found = review_paths([str(tmp_path)], select=["JM701"], respect_gitignore=False, jobs=1).findings
    assert [(Path(f.path).name, f.line) for f in found] == [("profile_it.py", 14)]
    alone = review_paths([str(tmp_path / "profile_it.py")], select=["JM701"], respect_gitignore=False, jobs=1)
    assert alone.findings == []


def test_importers_are_reviewed_before_the_modules_they_import(tmp_path: Path, monkeypatch):
    # pkg/main.py imports pkg/core.py (relatively) and pkg/base.py; pkg/core.py imports pkg.base;
    # a notebook is never imported. Reviewed in the given order (base, core, main), base's and
    # core's models would be built twice: once for their own reviews, once for their importers.
    from jaxmem.evaluators.review import api, semantic
    from jaxmem.evaluators.review.semantic.order import importers_first

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import jax\n\ndef to_host(x):\n    return float(x)\n")
    (pkg / "core.py").write_text("import jax\nfrom pkg.base import to_host\n\n@jax.jit\ndef step(w, x):\n    return w - x\n")
    (pkg / "main.py").write_text("from .core import step\nfrom . import base\n\ndef fit(w, xs):\n"
                                 "    for x in xs:\n        w = step(w, x)\n        print(base.to_host(w))\n")
    (tmp_path / "demo.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    files = [str(pkg / n) for n in ("__init__.py", "base.py", "core.py", "main.py")] + [str(tmp_path / "demo.ipynb")]
    project = Project.of_paths([str(tmp_path)], files)
    names = [Path(p).name for p in importers_first(files, project)]
    assert names.index("main.py") < names.index("core.py") < names.index("base.py")
    assert names.index("demo.ipynb") < names.index("base.py")
    # A cycle keeps the given order among its files and places every file once.
    (pkg / "base.py").write_text("from pkg.main import fit\n")
    assert sorted(importers_first(files, project)) == sorted(files)
    (pkg / "base.py").write_text("import jax\n\ndef to_host(x):\n    return float(x)\n")
    # Each file of the tree is modelled once in a serial review of it.
    built = []
    real_build = semantic.build
    monkeypatch.setattr(semantic, "build", lambda tree, lines, **kw: built.append(kw.get("module")) or real_build(tree, lines, **kw))
    api.review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert sorted(m for m in built if m) == sorted(set(m for m in built if m)), built


def test_reads_feeding_a_stop_check_are_kept_once_each():
    # Reduced from a Monte Carlo driver (12zzk): values re-bound from each other on every line of
    # an iteration. Each name's list of the reads that fed it used to copy the lists of the names
    # it read, doubling per statement (8 GB on the real file); now each read is kept once.
    from jaxmem.evaluators.review.semantic.stops import _host_reads_by_name, stop_checks
    from jaxmem.evaluators.review.semantic.walk import At

    body = "\n".join("        x = mix(x, y)\n        y = mix(y, x)" for _ in range(8))
    src = ("import jax\nimport numpy as np\n\ndef run(x, y, tol):\n    while True:\n"
           "        x = float(jax.numpy.sum(x))\n" + body + "\n        if x < tol:\n            break\n")
    a, tree = model(src)
    loop = loops_of(tree)[0]
    ctx = At(a, scope_at(a, 6))
    feeders = _host_reads_by_name(ctx, loop.body)
    assert len(feeders["x"]) <= len(loop.body) and len(feeders["y"]) <= len(loop.body)
    checks = stop_checks(ctx, loop)
    assert loop.body[-1].test in checks and loop.body[0] in checks  # the test and the read it needs


def test_a_dict_literal_gives_its_values_kind_to_any_key():
    """`history[m]` where `history = {"loss": np.zeros(n), ...}`: whatever the key, an item is a
    NumPy array (strict), as `metrics[m]` of a dict of device arrays is one; mixed values say
    nothing, and neither does a dict built with `**`."""
    src = """
        import jax.numpy as jnp, numpy as np

        def f(n, m, loss, extra):
            history = {"loss": np.zeros(n), "acc": np.zeros(n)}
            logs = {"loss": jnp.mean(loss), "acc": jnp.max(loss)}
            mixed = {"loss": np.zeros(n), "acc": jnp.max(loss)}
            merged = {"loss": np.zeros(n), **extra}
            return history[m], logs[m], mixed[m], merged[m]
    """
    assert kind(src, 9, "history[m]", strict=True) == "np"
    assert kind(src, 9, "logs[m]", strict=True) == "jax"
    assert kind(src, 9, "mixed[m]") is None
    assert kind(src, 9, "merged[m]") is None


def test_a_loop_that_indexes_what_it_iterates_walks_keys_inside_the_step():
    """`for m in metrics: history[m][i] = metrics[m]` walks the keys of a step's metrics (host
    strings), the fields of one record: its variable is not a device array, and the loop is not an
    evaluation loop of its own, so what it reads is read once per step of the loop around it."""
    from jaxmem.evaluators.review import astutil

    src = """
        import jax, jax.numpy as jnp, numpy as np

        @jax.jit
        def update(params, batch):
            return params - batch, {"loss": jnp.mean(batch)}

        def fit(params, batches, n):
            history = {"loss": np.zeros(n)}
            for i, batch in enumerate(batches):
                params, metrics = update(params, batch)
                for m in metrics:
                    history[m][i] = metrics[m]
                for row in metrics["loss"]:
                    print(row)
    """
    a, tree = model(src)
    outer, keys, rows = loops_of(tree)
    assert astutil.walks_keys(keys) and not astutil.walks_keys(rows) and not astutil.walks_keys(outer)
    assert kind(src, 13, "m") is None and kind(src, 15, "row") == "jax"
    scope = scope_at(a, 13)
    assert role(a, keys, scope).role == "other" and role(a, rows, scope).role == "eval"
    assert role(a, outer, scope).steps


def test_metadata_of_a_loaded_array_is_not_loaded_data():
    """`M = xs.shape[0]` after `xs = np.load(f)` is a count; `ys = xs[:100]` and `zs = xs.T` are
    still the loaded data."""
    src = """
        import numpy as np

        xs = np.load("a.npy")
        M = xs.shape[0]
        ys = xs[:100]
        zs = xs.T
    """
    a, _tree = model(src)
    assert not loaded(a, "M", a.module_scope)
    assert loaded(a, "ys", a.module_scope) and loaded(a, "zs", a.module_scope)



def test_helpers_called_only_from_compiled_code_are_compiled_down_the_whole_chain():
    """`step` is jitted and calls h1, which calls h2, ... h4: each is only ever called from
    compiled code, so each is compiled, however deep the chain and in whatever order the model
    meets them (a fixed number of rounds made the answer depend on a set's order)."""
    src = """
        import jax
        import jax.numpy as jnp

        def h4(x):
            return x * 2

        def h3(x):
            return h4(x) + 1

        def h2(x):
            return h3(x) - 1

        def h1(x):
            return h2(x) * 3

        @jax.jit
        def step(x):
            return h1(x)
    """
    a, tree = model(src)
    helpers = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("h")}
    assert all(a.scopes[fn].jitted for fn in helpers.values()), {k: a.scopes[f].jitted for k, f in helpers.items()}


def test_a_read_after_a_periodic_test_in_an_and_runs_on_those_steps_only():
    """`step % save_every == 0 and loss < best`: Python evaluates the comparison only when the
    modulo test holds, so the loss is read on save steps, not every step (12zzn's judges named
    four such findings); the same read before the periodic test is still every step."""
    src = textwrap.dedent("""
        import jax

        @jax.jit
        def train_step(state, batch):
            return state, state.sum()

        def train(state, batches, save_every, best):
            for step, batch in enumerate(batches):
                state, loss = train_step(state, batch)
                if step % save_every == 0 and loss < best:
                    best = loss
                if float(loss) > 1e9 and step % save_every == 0:
                    break
        """)
    rules = [registry.by_code()[c] for c in ("JM101", "JM104")]
    found = engine.check_source(src, "train.py", rules, lambda c: "", None, None)
    assert [(f.code, f.line) for f in found] == [("JM101", 13)], found


def test_jax_partial_is_functools_partial():
    """jax <= 0.2 re-exported functools.partial: `@jax.partial(jax.jit, static_argnums=...)` jits
    the step, so the gradient inside it is compiled, not eager (JM305 reported it on 12zzn)."""
    src = textwrap.dedent("""
        import jax
        from jax import partial, pmap

        def loss(params, batch):
            return (params * batch).sum()

        @jax.partial(jax.jit, static_argnums=(2,))
        def step(params, batch, n):
            grads = jax.grad(loss, argnums=0)(params, batch)
            return params - grads

        @partial(pmap, axis_name="i")
        def pstep(params, batch):
            grads = jax.grad(loss)(params, batch)
            return params - grads

        def train(params, batches):
            for batch in batches:
                params = step(params, batch, 3)
                params = pstep(params, batch)
        """)
    found = engine.check_source(src, "train.py", [registry.by_code()["JM305"]], lambda c: "", None, None)
    assert found == []


def test_writing_a_device_value_into_a_numpy_array_waits_for_it():
    """`train_loss[i], model, opt_state = make_step(...)` and `u_states[:, i] = u_next` inside a
    timed region: NumPy's __setitem__ converts the device value on the host, so the timer stops
    after the work (12zv's and 12zzi's judges named three such JM701 findings); into a list it
    does not wait."""
    src = textwrap.dedent("""
        import time
        import numpy as np
        import jax

        @jax.jit
        def make_step(model, batch):
            return (model * batch).sum(), model

        def run(model, batch, n):
            losses = np.zeros(n)
            kept = [None] * n
            for i in range(n):
                t0 = time.time()
                losses[i], model = make_step(model, batch)
                print(time.time() - t0)
            for i in range(n):
                t0 = time.time()
                kept[i], model = make_step(model, batch)
                print(time.time() - t0)
        """)
    found = engine.check_source(src, "run.py", [registry.by_code()["JM701"]], lambda c: "", None, None)
    assert [f.line for f in found] == [20], found


def test_gradient_ascent_written_as_arithmetic_on_the_gradient_call_is_a_training_loop():
    """`theta = eps * grad_fn(theta, y) + theta`: the step's result reaches the state through
    arithmetic, not an assignment of the call (12zzr's missed eager loop, JM305)."""
    src = """
    import jax
    import jax.numpy as jnp
    def loglik(theta, y):
        return jnp.sum((y - theta) ** 2)
    def fit(theta, y, n, eps):
        grad_fn = jax.grad(loglik)
        for i in range(n):
            theta = eps * grad_fn(theta, y) + theta
        for i in range(n):
            y = y + jnp.ones(3)
        return theta
    """
    a, tree = model(src)
    first, second = sorted(loops_of(tree), key=lambda n: n.lineno)
    r = role(a, first, scope_at(a, 9))
    assert r.steps and r.state == frozenset({"theta"}), r
    assert not role(a, second, scope_at(a, 9)).steps


def test_a_snippet_without_imports_reads_the_conventional_names():
    """Code pasted without its imports (or a notebook whose import cell is elsewhere, 12zzh) uses
    `jax`, `jnp`, `np` as everyone imports them; a name the snippet binds itself keeps its own
    meaning, and a file that imports JAX is read as written."""
    src = textwrap.dedent("""
        for x in batches:
            loss, grads = jax.value_and_grad(loss_fn)(params, x)
            params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
            print(float(loss))
        """)
    a, _tree = model(src)
    assert a.aliases.get("jax") == "jax"
    shadowed, _ = model("jnp = 3\nprint(jnp.sum)\nx = jax.numpy.ones(3)\n")
    assert "jnp" not in shadowed.aliases and shadowed.aliases.get("jax") == "jax"
    imported, _ = model("import numpy as jnp\nx = jax.numpy.ones(3)\n")
    assert imported.aliases.get("jnp") == "numpy"
    found = engine.check_source(src, "snippet.py", [registry.by_code()["JM305"]], lambda c: "", None, None)
    assert [f.code for f in found] == ["JM305"], found


def test_jax_use_follows_the_tree_imports_of_a_file_that_names_no_jax(tmp_path: Path):
    # A file with no JAX word touches JAX when a tree module it imports (through package
    # re-exports) does; a PyTorch trainer that imports PyTorch helpers of the tree does not.
    from jaxmem.evaluators.review.semantic import jax_use
    from jaxmem.evaluators.review.semantic.project import Project

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .steps import train_step\n")
    (tmp_path / "pkg" / "steps.py").write_text("import jax\n\n@jax.jit\ndef train_step(w):\n    return w\n")
    (tmp_path / "pkg" / "torch_helpers.py").write_text("import torch\n\ndef evaluate(m):\n    return float(m())\n")
    files = {"pkg": str(tmp_path / "pkg" / "__init__.py"), "pkg.steps": str(tmp_path / "pkg" / "steps.py"),
             "pkg.torch_helpers": str(tmp_path / "pkg" / "torch_helpers.py")}
    project = Project(files)
    assert jax_use.touches_jax("from pkg import train_step\n", project)
    assert not jax_use.touches_jax("import time\nfrom pkg.torch_helpers import evaluate\n", project)
    assert not jax_use.touches_jax("import torch\n", None)
    assert jax_use.touches_jax("import flax.linen as nn\n", None)


def test_what_an_out_of_sight_training_step_returns_beside_the_state_is_a_guessed_device_value():
    # guesses.steps_trained_state: the call replaces state it is handed, in a loop, and either the
    # state is named as trained or the call as a step. Never proof (strict reading), and not for
    # the same shape outside a loop (setup) or for a host environment's step.
    src = """
    class T:
        def run(self, params, env, obs):
            opt_state = self.optimizer.init(params)
            for i in range(1000):
                loss, params, opt_state = self.optimizer.step(params, opt_state)
                obs, reward = env.step(obs)
            loss0, params = self.optimizer.step(params, opt_state)
            return loss, reward, loss0
    """
    assert kind(src, 9, "loss") == "jax" and kind(src, 9, "loss", strict=True) is None
    assert kind(src, 9, "reward") is None
    assert kind(src, 9, "loss0") is None


def test_an_epoch_loop_of_a_step_from_another_file_is_a_step_loop(tmp_path):
    """`for epoch in range(n)` that calls a jitted train step imported from another file of the
    tree once per iteration takes one step per "epoch" (full-batch training): its `loss.item()`
    is a per-step read, as when the step is defined in the same file (the shape of
    unseen-2026-12zzzzzu's FBSDE trainer). A step that scans over the batches stays an epoch."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        from functools import partial
        import jax, optax

        @partial(jax.jit, static_argnums=(3,))
        def train_step(params, opt_state, batch, optimizer):
            loss, grads = jax.value_and_grad(lambda p: (p * batch).sum())(params)
            updates, opt_state = optimizer.update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state, loss

        @jax.jit
        def train_epoch(params, batches):
            def body(p, b):
                loss, g = jax.value_and_grad(lambda p: (p * b).sum())(p)
                return p - 0.1 * g, loss
            return jax.lax.scan(body, params, batches)
    """))
    (tmp_path / "main.py").write_text(textwrap.dedent("""
        import jax
        from train import train_epoch, train_step

        def main(params, opt_state, n, key, optimizer, batches):
            history = []
            for epoch in range(n):
                key, k = jax.random.split(key)
                params, opt_state, loss = train_step(params, opt_state, jax.random.normal(k, (3,)), optimizer)
                history.append(loss.item())
            for epoch in range(n):
                params, losses = train_epoch(params, batches)
                history.append(losses.mean().item())
            return history
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line, f.confidence) for f in result.findings] == [("main.py", 10, "sure")]


def test_a_call_of_a_lambda_bound_to_a_name_has_the_kind_of_its_body():
    """`unreplicate = lambda tree: jax.tree.map(lambda x: x[0], tree)` then `loss =
    unreplicate(loss)`: the body's kind, a device array (strict proves nothing through the
    lambda's unknown parameters)."""
    src = """
    import jax, jax.numpy as jnp
    def f(p):
        unrep = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
        to_host = lambda x: float(x)
        loss = unrep(jnp.ones(3))
        return loss, to_host(loss)
    """
    assert kind(src, 6, "unrep(jnp.ones(3))") == "jax"
    assert kind(src, 7, "to_host(loss)") == "scalar"
    assert kind(src, 6, "unrep(jnp.ones(3))", strict=True) is None


def test_a_factory_method_of_a_class_of_another_file_gives_its_result_the_jit(tmp_path: Path):
    # unseen-2026-12zzzzzzm's jax-peract: `builder = Builder(cfg)`, `train_step =
    # builder.make_step_fn(nets, "train")`, whose method returns `jax.jit(fn)` in builder.py; the
    # loop's `state.step.item()` then reads a result of compiled work every step.
    pkg = tmp_path / "peract"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "builder.py").write_text(textwrap.dedent("""
        import jax
        class Builder:
            def __init__(self, cfg):
                self.cfg = cfg
            def make_step_fn(self, nets, step):
                fn = make(nets, step)
                if self.cfg.jit:
                    fn = jax.jit(fn)
                return fn
    """))
    loop = textwrap.dedent("""
        from peract.builder import Builder
        def train(cfg, data):
            builder = Builder(cfg)
            train_step = builder.make_step_fn(None, "train")
            state = builder.make_state()
            for batch in data:
                state, metrics = train_step(state, batch)
                t = state.step.item()
    """)
    (tmp_path / "train.py").write_text(loop)
    project = Project.of_paths([str(tmp_path)], [str(pkg / "builder.py"), str(tmp_path / "train.py")])
    a, tree = model(loop, module="train", project=project)
    info = a.jit_info(expr_at(tree, 8, "train_step"), scope_at(a, 8))
    assert info is not None and info.maker == "jax.jit"
    assert a.jit_info(expr_at(tree, 6, "builder.make_state"), scope_at(a, 6)) is None


def test_a_switch_is_off_only_while_every_dict_it_can_read_keeps_the_key_off():
    from jaxmem.evaluators.review.semantic.switches import switched_off

    def off(src: str) -> bool:
        tree = ast.parse(src)
        a = semantic.build(tree, src.splitlines())
        test = next(n.test for n in ast.walk(tree) if isinstance(n, ast.If))
        scope = next(s for node, s in a.scopes.items() if node is not tree and test in ast.walk(node))
        return switched_off(test, a, scope)

    base = textwrap.dedent("""
        def make(config):
            def step(x):
                if config["DEBUG"]:
                    print(x)
                return x
            return step
        cfg = {"DEBUG": False, "lr": 0.1}
        f = make(cfg)
    """)
    assert off(base)
    assert not off(base + 'g = make({"DEBUG": True})\n')  # one caller turns it on
    assert not off(base + 'cfg["DEBUG"] = True\n')  # the key changed after the dict was built
    assert not off(base + "cfg.update(other)\n")  # any key may change
    assert not off(base.replace('{"DEBUG": False, "lr": 0.1}', '{**defaults, "lr": 0.1}'))
    assert off(base + 'cfg["lr"] = 0.2\n')  # another key: the switch stays off


def test_import_of_a_module_beside_the_script_means_that_file(tmp_path: Path):
    # Reduced from the twenty-second reading (12zzzzzzzf): `import data_utils` in src/icl_train.py,
    # with old_src/data_utils.py beside src/data_utils.py. The script's own folder comes first on
    # sys.path, so the import means src/data_utils.py (as `from data_utils import ...` already
    # did); before, the two candidates left it unresolved, and the data set that
    # `data_utils.construct_dataset` loads (pickle) was not known as loaded.
    for folder in ("src", "old_src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "data_utils.py").write_text(textwrap.dedent("""
            import pickle
            def construct_dataset(path):
                with open(path, "rb") as f:
                    return pickle.load(f)
        """))
    (tmp_path / "src" / "train.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        import data_utils
        import data_utils as du

        def main(path, rng):
            dataset = data_utils.construct_dataset(path)
            dataset = jax.tree.map(lambda x: jnp.array(x), dataset)

            @jax.jit
            def sample(key):
                n = jax.random.randint(key, (32,), 0, 100)
                return jax.tree.map(lambda x: x[n], dataset)

            for _ in range(1000):
                rng, key = jax.random.split(rng)
                batch = sample(key)
            return batch, du.construct_dataset
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM302"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line) for f in result.findings + result.possible] == [("train.py", 14)]
    files = [str(tmp_path / f / "data_utils.py") for f in ("src", "old_src")] + [str(tmp_path / "src" / "train.py")]
    project = Project.of_paths([str(tmp_path)], files)
    a, _tree = model((tmp_path / "src" / "train.py").read_text(), module="src.train", project=project)
    assert a.aliases["data_utils"] == "src.data_utils" and a.aliases["du"] == "src.data_utils"


def test_a_helper_of_another_file_that_converts_a_parameter_it_declares_an_array(tmp_path: Path):
    # Reduced from the twenty-second reading (12zzzzzzzj): `get_data(start, end, h, ...)` of data.py
    # declares `start: Float[Array, "D_in"]` (jaxtyping's Array is jax.Array) and reads
    # `int((end[d] - start[d]) / h[d])`; the training loop of another file hands it values whose
    # kind it cannot see. The read is reported in the helper's body, which runs on every step of
    # that loop (semantic/importers.py), where the declaration proves the parameters arrays; not
    # again at the call, where only the callee's word says so.
    (tmp_path / "grids.py").write_text(textwrap.dedent("""
        from jaxtyping import Array, Float

        def grid_size(start: Float[Array, "d"], end: Float[Array, "d"], h: Float[Array, "d"]) -> int:
            return int((end[0] - start[0]) / h[0])
    """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        import optax
        from grids import grid_size

        @jax.jit
        def train_step(params, opt_state, x):
            grads = jax.grad(lambda p: jnp.sum((x * p) ** 2))(params)
            updates, opt_state = optax.sgd(0.1).update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state

        def train(params, opt_state, start, end, h, steps):
            for step in range(steps):
                n = grid_size(start, end, h)
                params, opt_state = train_step(params, opt_state, jnp.linspace(0.0, 1.0, n))
            return params
    """))
    from jaxmem.evaluators.review import api
    result = api.review_paths([str(tmp_path)], select=["JM101"], show_possible=True, jobs=1)
    assert [(Path(f.path).name, f.line, f.confidence) for f in result.findings + result.possible] == [
        ("grids.py", 5, "sure")]


# ---- bodies that run once per step (semantic/per_step.py, importers.py) ------------------------------

_TRAIN_STEP = """
import jax
import jax.numpy as jnp
import optax

@jax.jit
def train_step(params, opt_state, batch):
    grads = jax.grad(lambda p: jnp.sum((batch * p) ** 2))(params)
    updates, opt_state = optax.sgd(0.1).update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, jnp.sum(params)
"""


def _review(tmp_path: Path, files: dict[str, str], select=("JM101", "JM103")):
    from jaxmem.evaluators.review import api

    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    result = api.review_paths([str(tmp_path)], select=list(select), show_possible=True, jobs=1)
    return sorted((Path(f.path).name, f.line, f.code, f.confidence, f.message) for f in result.findings + result.possible)


def test_a_helper_that_a_per_step_helper_calls_runs_per_step_too():
    # Two levels down from a training loop: `log_loss` runs on every step because `after_step`,
    # which the loop calls on every step, calls it from its body (not behind `if step % n`).
    a, tree = model(_TRAIN_STEP + """
def log_loss(loss):
    print(float(loss))

def log_rare(loss):
    print(float(loss))

def after_step(step, loss):
    log_loss(loss)
    if step % 100 == 0:
        log_rare(loss)

def train(params, opt_state, data):
    for step, batch in enumerate(data):
        params, opt_state, loss = train_step(params, opt_state, batch)
        after_step(step, loss)
""")
    per_step.mark(a)
    fns = {n.name: a.scopes[n] for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert fns["after_step"].per_step is not None
    assert fns["log_loss"].per_step is not None and "after_step" in fns["log_loss"].per_step_why
    assert fns["log_rare"].per_step is None  # behind a periodic test


def test_a_driver_with_steps_of_its_own_hands_no_per_step_context_down():
    # `fit` runs a whole training loop per call: what it calls once runs once per fit, even when
    # another loop calls `fit` again and again (a sweep).
    a, tree = model(_TRAIN_STEP + """
def report(params):
    print(float(jnp.sum(params)))

def fit(params, opt_state, data):
    for batch in data:
        params, opt_state, loss = train_step(params, opt_state, batch)
    report(params)
    return params

def sweep(configs, data):
    for params, opt_state in configs:
        fit(params, opt_state, data)
""")
    per_step.mark(a)
    fns = {n.name: a.scopes[n] for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert fns["report"].per_step is None


def test_framework_methods_that_run_once_per_step():
    a, tree = model("""
import gymnasium
import gymnasium as gym
import torch

class JaxEnv(gym.Env):
    def step(self, action):
        return self.obs, 0.0, False, False, {}
    def render(self):
        pass

class Wrapped(JaxEnv):
    pass

class Net(torch.nn.Module):
    def forward(self, x):
        return x

class Batched(gymnasium.vector.SyncVectorEnv):
    def step(self, actions):
        return actions
""")
    per_step.mark(a)
    methods = {(c.node.name, m): a.scopes[f] for c in a.classes.values() for m, f in c.methods.items()}
    assert methods["JaxEnv", "step"].per_step is not None
    assert methods["Batched", "step"].per_step is not None  # a vector environment (twenty-eighth reading)
    assert methods["JaxEnv", "render"].per_step is None
    assert methods["Net", "forward"].per_step is not None


def test_a_helper_another_file_calls_every_training_step_is_reviewed_as_per_step(tmp_path: Path):
    # Reduced from the twenty-fifth reading's misses: a metrics helper of its own file converts the
    # loss with float(); the training loop of another file calls it on every step.
    found = _review(tmp_path, {
        "metrics.py": """
            import jax.numpy as jnp

            def summarize(loss):
                return {"loss": float(jnp.mean(loss))}

            def summarize_eval(loss):
                return {"loss": float(jnp.mean(loss))}
        """,
        "train.py": _TRAIN_STEP + """
from metrics import summarize, summarize_eval

def train(params, opt_state, data, evals):
    for batch in data:
        params, opt_state, loss = train_step(params, opt_state, batch)
        print(summarize(loss))
    for batch in evals:
        print(summarize_eval(jnp.sum(batch)))
""",
    })
    assert [(f, line, code) for f, line, code, _c, _m in found] == [("metrics.py", 5, "JM101")]
    assert "`train.py`, line 17, calls it on every step" in found[0][4]


def test_what_a_gym_environment_step_returns_is_read_on_the_host_by_contract(tmp_path: Path):
    # Gym's API takes NumPy observations back from `step`: converting them there is its job (from
    # jumanji's Gym wrapper); reading a value it does not return is a per-step sync.
    found = _review(tmp_path, {"env.py": """
        import gym
        import jax
        import numpy as np

        class JaxToGym(gym.Env):
            def __init__(self, env):
                self._step = jax.jit(env.step)

            def step(self, action):
                state, obs, reward = self._step(self._state, action)
                self._state = state
                print(float(reward))
                return np.asarray(obs), 0.0, False, False, {}
    """})
    assert [(f, line, code) for f, line, code, _c, _m in found] == [("env.py", 13, "JM101")]
    assert "`step` runs once per step of whatever loop drives this JaxToGym" in found[0][4]


def test_a_closure_an_imported_factory_makes_gives_what_its_def_returns(tmp_path: Path):
    # `step_fn = make_train_step(model, opt)` from another file, whose factory returns a def that
    # calls a jitted step and returns its loss (from the twenty-seventh reading, after its report):
    # `float(step_fn(batch))` reads a device array every step.
    found = _review(tmp_path, {
        "steps.py": _TRAIN_STEP + """
def make_train_step(params, opt_state):
    state = [params, opt_state]

    def step(batch):
        state[0], state[1], loss = train_step(state[0], state[1], batch)
        return loss

    return step
""",
        "train.py": """
from steps import make_train_step

def train(params, opt_state, data):
    step_fn = make_train_step(params, opt_state)
    total = 0.0
    for batch in data:
        total += float(step_fn(batch))
    return total
""",
    }, select=("JM101",))
    assert [(f, line, code) for f, line, code, _c, _m in found] == [("train.py", 8, "JM101")]
