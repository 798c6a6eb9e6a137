"""The same SGD step with the batch split into 8 microbatches of 512 inside one jitted step.

`jax.grad` runs inside the body of a `lax.scan`, so each iteration builds and frees one
microbatch's activations; only a params-shaped gradient accumulator is carried. The averaged
gradient equals the full-batch one up to float rounding.
"""
import jax
import jax.numpy as jnp

D, H, BATCH, MICRO = 512, 2048, 4096, 8


def loss_fn(params, x):
    h = jnp.tanh(x @ params["w1"])
    h = jnp.tanh(h @ params["w2"])
    return jnp.mean((h @ params["w3"]) ** 2)


@jax.jit
def step(params, x):
    xs = x.reshape(MICRO, BATCH // MICRO, D)

    def body(acc, xb):                                # grad inside the loop, not around it
        return jax.tree.map(jnp.add, acc, jax.grad(loss_fn)(params, xb)), None

    acc, _ = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, params), xs)
    return jax.tree.map(lambda p, a: p - 1e-2 * a / MICRO, params, acc)


def example_args():
    params = {"w1": jnp.full((D, H), 1e-3), "w2": jnp.full((H, H), 1e-3), "w3": jnp.full((H, D), 1e-3)}
    return params, jnp.ones((BATCH, D))


params, x = example_args()
for _ in range(3):
    params = step(params, x)
jax.block_until_ready(params)
