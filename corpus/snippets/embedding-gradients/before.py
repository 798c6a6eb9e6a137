"""An SGD step on a donated 256 MiB embedding table through the table's dense gradient.

`jax.grad` with respect to the table returns a (V, D) array: the 4,096 looked-up rows' gradients
scatter-added into zeros of the table's shape. Because the output reuses the donated table's
buffer, that dense gradient needs a second table-sized buffer.
"""
from functools import partial

import jax
import jax.numpy as jnp

V, D, N = 262_144, 256, 4096


def loss_from_rows(rows):
    return jnp.sum(jnp.tanh(rows) ** 2)


@partial(jax.jit, donate_argnums=0)
def step(table, ids):
    grad = jax.grad(lambda t: loss_from_rows(t[ids]))(table)     # dense (V, D)
    return table - 0.1 * grad


def example_args():
    return jnp.full((V, D), 1e-3), jnp.arange(N, dtype=jnp.int32) * 7 % V


table, ids = example_args()
for _ in range(3):
    table = step(table, ids)
table.block_until_ready()
