"""A loop that names no counter: the fix names it, and its title says so (not `enumerate`)."""
import jax
import jax.numpy as jnp


@jax.jit
def step(p, x):
    return p - 0.1 * x, jnp.sum(p * p)


p = jnp.ones(3)
for _ in range(50):
    p, loss = step(p, p)
    print(float(loss))
