"""One SGD step on the whole batch of 4,096 examples at once.

The backward pass needs every layer's activations for all 4,096 examples at the same time, so the
step's temporary memory grows with the batch size.
"""
import jax
import jax.numpy as jnp

D, H, BATCH = 512, 2048, 4096


def loss_fn(params, x):
    h = jnp.tanh(x @ params["w1"])
    h = jnp.tanh(h @ params["w2"])
    return jnp.mean((h @ params["w3"]) ** 2)


@jax.jit
def step(params, x):
    grads = jax.grad(loss_fn)(params, x)              # activations of the full batch are alive
    return jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)


def example_args():
    params = {"w1": jnp.full((D, H), 1e-3), "w2": jnp.full((H, H), 1e-3), "w3": jnp.full((H, D), 1e-3)}
    return params, jnp.ones((BATCH, D))


params, x = example_args()
for _ in range(3):
    params = step(params, x)
jax.block_until_ready(params)
