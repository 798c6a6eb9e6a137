"""Loading an evaluation set example by example.

Each of the 512 examples is sent to the device on its own, then stacked there: 512 small
host->device transfers, each paying the fixed cost of a transfer for a few hundred bytes.
"""
import numpy as np

import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
examples = [rng.normal(size=(64,)).astype(np.float32) for _ in range(512)]   # from a reader


@jax.jit
def predict(w, x):
    return jnp.tanh(x @ w)


w = jax.device_put(rng.normal(size=(64, 8)).astype(np.float32))
on_device = [jax.device_put(x) for x in examples]      # one transfer per example
batch = jnp.stack(on_device)
predict(w, batch).block_until_ready()
