"""The same loop, accumulating the loss on the device and reading it once at the end.

The running sum stays a device array, so no step waits for the host; the single `float()` at
the end is the only device->host read.
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
total = jnp.zeros((), jnp.float32)
for xb, yb in batches:
    w, loss = step(w, xb, yb)
    total = total + loss                 # stays on the device: no wait
print(f"mean loss {float(total) / len(batches):.4f}")   # one read, after the loop
