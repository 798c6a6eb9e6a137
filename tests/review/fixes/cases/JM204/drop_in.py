"""Removed device_put_sharded / device_put_replicated: JAX's drop-in replacements."""
import jax
import numpy as np


def place(shards):
    xs = jax.device_put_sharded(list(shards), jax.devices())
    ys = jax.device_put_replicated(shards[0], jax.devices())
    return xs, ys
