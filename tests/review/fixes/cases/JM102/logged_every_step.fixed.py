"""The loss logged on every step: logged every N steps instead (two log lines, one guard)."""
import logging

import jax
import jax.numpy as jnp

log = logging.getLogger(__name__)


@jax.jit
def step(w, x):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * grad, loss


def fit(w, batches):
    for i, x in enumerate(batches):
        w, loss = step(w, x)
        if i % 10 == 0:
            log.info("step %d loss %s", i, loss)
            print(f"step {i}: {loss:.3f}")
    return w


def fit_while(w, batches):
    i = 0
    while i < len(batches):
        w, loss = step(w, batches[i])
        print(loss)
        i += 1
    return w
