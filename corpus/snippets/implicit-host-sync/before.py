"""A training loop that logs the loss as a Python float after every step.

`float(loss)` makes the host wait for the step to finish and copy the value back: one
device->host sync per step, which stops JAX from queuing the next step while this one runs.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
batches = jax.device_put([(rng.normal(size=(128, 64)).astype(np.float32),
                           rng.normal(size=(128, 1)).astype(np.float32)) for _ in range(200)])


@jax.jit
def step(w, x, y):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.01 * grad, loss


w = jnp.zeros((64, 1), jnp.float32)
total = 0.0
for xb, yb in batches:
    w, loss = step(w, xb, yb)
    total += float(loss)                 # host waits here, every step
print(f"mean loss {total / len(batches):.4f}")
