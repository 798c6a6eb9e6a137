"""The same recurrence with `lax.scan`: the cell is traced and compiled once.

`scan` keeps one copy of the cell in the program and loops over it at run time, so the program
stays the same size for any sequence length.
"""
import numpy as np

import jax
import jax.numpy as jnp

STEPS, BATCH, HIDDEN = 120, 32, 128


@jax.jit
def run(params, xs):
    w_h, w_x = params

    def cell(h, x):
        return jnp.tanh(h @ w_h + x @ w_x), None

    h0 = jnp.zeros((xs.shape[1], w_h.shape[0]), xs.dtype)
    h, _ = jax.lax.scan(cell, h0, xs)           # one cell in the program, looped at run time
    return h


def example_args():
    rng = np.random.default_rng(0)
    params = (rng.normal(scale=0.1, size=(HIDDEN, HIDDEN)).astype(np.float32),
              rng.normal(scale=0.1, size=(HIDDEN, HIDDEN)).astype(np.float32))
    xs = rng.normal(size=(STEPS, BATCH, HIDDEN)).astype(np.float32)
    return jax.device_put((params, xs))


run(*example_args()).block_until_ready()
