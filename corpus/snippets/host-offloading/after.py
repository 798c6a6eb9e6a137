"""The same scan with the tagged activations offloaded to pinned host memory.

The offload policy moves each saved "hidden" activation to host memory in the forward pass and
brings it back for the backward pass: device memory is traded for host<->device traffic.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

DEPTH, BATCH, WIDTH = 16, 256, 512
policy = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"],
    offload_src="device", offload_dst="pinned_host")


def layer(h, w):
    hidden = checkpoint_name(jnp.tanh(h @ w), "hidden")
    return h + hidden, None


def loss(weights, x):
    h, _ = jax.lax.scan(jax.checkpoint(layer, policy=policy), x, weights)
    return jnp.mean(h ** 2)


grad_fn = jax.jit(jax.grad(loss))


def example_args():
    rng = np.random.default_rng(0)
    weights = rng.normal(scale=0.02, size=(DEPTH, WIDTH, WIDTH)).astype(np.float32)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return jax.device_put((weights, x))


grad_fn(*example_args()).block_until_ready()
