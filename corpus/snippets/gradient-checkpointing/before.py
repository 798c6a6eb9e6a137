"""Gradient of a 32-layer residual MLP written with `lax.scan`, storing every activation.

Reverse-mode differentiation keeps each layer's intermediate values for the backward pass:
memory for activations grows with depth (32 layers x batch x width).
"""
import numpy as np

import jax
import jax.numpy as jnp

DEPTH, BATCH, WIDTH = 32, 512, 512


def layer(h, w):
    return h + jnp.tanh(h @ w), None


def loss(weights, x):
    h, _ = jax.lax.scan(layer, x, weights)
    return jnp.mean(h ** 2)


grad_fn = jax.jit(jax.grad(loss))


def example_args():
    rng = np.random.default_rng(0)
    weights = rng.normal(scale=0.02, size=(DEPTH, WIDTH, WIDTH)).astype(np.float32)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return jax.device_put((weights, x))


grads = grad_fn(*example_args())
grads.block_until_ready()
