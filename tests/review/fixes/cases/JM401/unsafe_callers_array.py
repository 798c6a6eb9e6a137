"""The loop starts from the caller's array (a parameter): donating it on the first step would
delete the array the caller still holds, so the fix is unsafe."""
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnums=2)
def train_step(params, opt_state, lr, x):
    grads = jax.grad(lambda p: jnp.sum((x @ p) ** 2))(params)
    return params - lr * grads, opt_state


def fit(params, opt_state, batches):
    for x in batches:
        params, opt_state = train_step(params, opt_state, 0.1, x)
    return params, opt_state
