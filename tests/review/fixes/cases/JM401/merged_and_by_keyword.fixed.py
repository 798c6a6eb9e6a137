"""An existing donate_argnums is merged; a state passed by keyword is donated by name; a jitted
method counts `self` as position 0; an assignment's jit gets the keyword."""
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, donate_argnums=(0, 1))
def step(opt_state, params, x):
    grads = jax.grad(lambda p: jnp.sum((x @ p) ** 2))(params)
    return opt_state, params - 0.1 * grads


def fit(params, opt_state, xs):
    for x in xs:
        opt_state, params = step(opt_state, params, x)
    return params


def apply_grads(state, x):
    return state - 0.1 * jax.grad(lambda s: jnp.sum((x @ s) ** 2))(state)


apply_jit = jax.jit(apply_grads, donate_argnames="state")


def fit_kw(state, xs):
    for x in xs:
        state = apply_jit(x=x, state=state)
    return state


class Trainer:
    @partial(jax.jit, static_argnums=0, donate_argnums=1)
    def update(self, params, x):
        return params - 0.1 * jax.grad(lambda p: jnp.sum((x @ p) ** 2))(params)

    def fit(self, params, xs):
        for x in xs:
            params = self.update(params, x)
        return params
