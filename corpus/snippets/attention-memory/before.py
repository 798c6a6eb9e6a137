"""The gradient of causal self-attention through jax.nn.dot_product_attention's default path.

`implementation=None` means "xla" (jax 0.10.2): the full 2048 x 2048 score and probability
matrices are built for each of the 8 heads and kept for the backward pass, so memory grows with the
square of the sequence length.
"""
import jax
import jax.numpy as jnp

B, T, N, H = 1, 2048, 8, 64


def loss(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True).sum()


grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def example_args():
    q = jax.random.normal(jax.random.key(0), (B, T, N, H))
    return q, q, q


out = grads(*example_args())
jax.block_until_ready(out)
