"""Removed device_put_sharded / device_put_replicated: JAX's drop-in replacements."""
import jax
import numpy as np


def place(shards):
    xs = jax.tree.map(lambda *xs: jax.device_put(jax.numpy.stack(xs), jax.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()), ("x",)), jax.P("x"))), *list(shards))
    ys = jax.tree.map(lambda y: jax.device_put(jax.numpy.stack([y] * len(jax.devices())), jax.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()), ("x",)), jax.P("x"))), shards[0])
    return xs, ys
