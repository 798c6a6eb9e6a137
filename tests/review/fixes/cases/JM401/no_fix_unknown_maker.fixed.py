"""The jitted function is a parameter (every caller jits it): no place to add the donation."""
import jax
import jax.numpy as jnp


def epoch(train_step_fn, state, batches):
    for batch in batches:
        state = train_step_fn(state, batch)
    return state


def main(state, batches):
    train_step_fn = jax.jit(lambda s, b: s - 0.1 * jax.grad(lambda t: jnp.sum((t - b) ** 2))(s))
    return epoch(train_step_fn, state, batches)
