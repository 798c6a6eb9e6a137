"""Reaching bindings through branches (semantic/reach.py), container items, loop sizes the source computes."""
from __future__ import annotations

import ast

from tests.review.test_semantic import kind

# Each function reads `x` on its last line; the comments say which bindings reach that read.
BRANCHES = """
import jax, jax.numpy as jnp, numpy as np
step = jax.jit(lambda s: s)
def both_arms(flag, s):
    if flag:
        x = step(s)
    else:
        x = jnp.zeros(3)
    return x
def mixed_arms(flag, s):
    if flag:
        x = step(s)
    else:
        x = np.zeros(3)
    return x
def arm_that_leaves(flag, s, other):
    x = step(s)
    if flag:
        x = other(s)
        return x
    return x
def arm_that_binds_nothing(flag, s):
    x = np.zeros(3)
    if flag:
        x = step(s)
    return x
def other_arm(flag, s):
    if flag:
        x = step(s)
    else:
        x = np.zeros(3)
        return x
def handler(s):
    try:
        x = step(s)
    except ValueError:
        x = np.zeros(3)
    return x
def loop_body_runs(batches, s):
    x = np.zeros(3)
    for b in batches:
        x = step(s)
    return x
"""


def test_both_arms_of_an_if_reach_the_read_after_it():
    assert kind(BRANCHES, 9, "x", strict=True) == "jax"  # both device arrays: proven
    assert kind(BRANCHES, 15, "x", strict=True) is None  # a device array or a NumPy one
    assert kind(BRANCHES, 15, "x") == "jax"  # the default reading: one path gives one


def test_an_arm_that_returns_reaches_nothing_after_the_if():
    # Read last-written-first, `x = other(s)` (unknown) would hide the jitted result.
    assert kind(BRANCHES, 21, "x", strict=True) == "jax"


def test_an_arm_that_binds_nothing_lets_the_binding_before_the_if_through():
    assert kind(BRANCHES, 26, "x", strict=True) is None
    assert kind(BRANCHES, 26, "x") == "jax"


def test_a_read_in_one_arm_does_not_see_the_other_arm():
    assert kind(BRANCHES, 32, "x", strict=True) == "np"


def test_a_handler_and_the_try_body_both_reach_the_read_after_the_try():
    assert kind(BRANCHES, 38, "x", strict=True) is None
    assert kind(BRANCHES, 38, "x") == "jax"


def test_a_loop_body_is_read_as_running_at_least_once():
    assert kind(BRANCHES, 43, "x", strict=True) == "jax"


def test_an_item_added_to_in_place_holds_a_device_array_when_the_addend_is_one():
    src = """
    import jax, jax.numpy as jnp
    step = jax.jit(lambda s: (s, s.sum()))
    def run(state, batches):
        totals = {"loss": 0.0, "steps": 0}
        for b in batches:
            state, loss = step(state)
            totals["loss"] += loss
            totals["steps"] += 1
            shown = totals["loss"]
    """
    assert kind(src, 10, "totals['loss']") == "jax"
    assert kind(src, 10, "totals['loss']", strict=True) is None  # 0.0 before the first step


def test_a_loop_size_the_source_computes_through_int_of_a_division_is_known():
    import ast as _ast

    from jaxmem.evaluators.review.semantic import sizes
    from tests.review.test_semantic import model

    a, tree = model("""
    dt = 900
    steps_per_hour = int(3600 / dt)
    for step in range(steps_per_hour - 1):
        pass
    half = 7 / 2
    for i in range(half):
        pass
    """)
    loops = [n for n in _ast.walk(tree) if isinstance(n, _ast.For)]
    assert sizes.trip_count(loops[0].iter, a, a.module_scope) == 3
    assert sizes.trip_count(loops[1].iter, a, a.module_scope) is None  # range() of a float: no count


def test_a_factory_that_returns_a_jitted_callable_on_one_path_only_is_not_proven_jitted():
    from tests.review.test_semantic import model, scope_at

    a, tree = model("""
    import jax
    def build(name):
        def circuit(p):
            return p
        if "lightning" in name:
            return circuit
        return jax.jit(circuit)
    def build_jitted(flag):
        def step(p):
            return p
        if flag:
            return jax.pmap(step)
        return jax.jit(step)
    f = build("lightning.qubit")
    g = build_jitted(True)
    """)
    f, g = (next(n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name) for name in ("f", "g"))
    scope = scope_at(a, 16)
    assert a.jit_info(f, scope) is not None and not a.jit_info(f, scope).exact
    assert a.jit_info(g, scope) is not None and a.jit_info(g, scope).exact


def test_jax_tree_util_partial_decorates_as_functools_partial():
    from tests.review.test_semantic import model

    a, tree = model("""
    from jax import jit
    from jax.tree_util import Partial
    @Partial(jit, static_argnums=(1,))
    def fit_step(params, n):
        return params
    """)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert fn in a.jitted_defs and a.jitted_defs[fn].static_argnums == frozenset({1})
