"""A recurrent cell applied for 120 time steps with a Python loop inside `jit`.

Tracing runs the Python loop, so the compiled program contains 120 copies of the cell: the
program text, the compile time and the compiler's memory all grow with the sequence length.
"""
import numpy as np

import jax
import jax.numpy as jnp

STEPS, BATCH, HIDDEN = 120, 32, 128


@jax.jit
def run(params, xs):
    w_h, w_x = params
    h = jnp.zeros((xs.shape[1], w_h.shape[0]), xs.dtype)
    for t in range(STEPS):                      # unrolled at trace time: 120 cells in the program
        h = jnp.tanh(h @ w_h + xs[t] @ w_x)
    return h


def example_args():
    rng = np.random.default_rng(0)
    params = (rng.normal(scale=0.1, size=(HIDDEN, HIDDEN)).astype(np.float32),
              rng.normal(scale=0.1, size=(HIDDEN, HIDDEN)).astype(np.float32))
    xs = rng.normal(size=(STEPS, BATCH, HIDDEN)).astype(np.float32)
    return jax.device_put((params, xs))


run(*example_args()).block_until_ready()
