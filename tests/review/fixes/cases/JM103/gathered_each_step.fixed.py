"""NumPy copies of a device value on every step: the list keeps the device value."""
import numpy as np

import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * grad, loss


def fit(w, batches):
    history = []
    for x in batches:
        w, loss = step(w, x)
        history.append(loss)
    return w, np.stack(history)
