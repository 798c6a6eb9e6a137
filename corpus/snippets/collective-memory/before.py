"""A layer stack whose weights are sharded over 8 devices, all gathered at once.

The whole (16, 1024, 1024) stack (64 MiB) is all-gathered before the loop, so every device
holds a full copy of every layer in temporary buffers while the forward pass runs.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("d",))
by_rows = NamedSharding(mesh, P(None, "d", None))   # each device keeps 1/8 of every layer
by_batch = NamedSharding(mesh, P("d", None))
replicated = NamedSharding(mesh, P())


@jax.jit
def forward(ws, x):
    full = jax.sharding.reshard(ws, replicated)      # one all-gather of all 16 layers
    h, _ = jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, full)
    return h.sum()


def example_args():
    ws = np.full((16, 1024, 1024), 1e-3, np.float32)
    x = np.ones((256, 1024), np.float32)
    return jax.device_put(ws, by_rows), jax.device_put(x, by_batch)


ws, x = example_args()
forward(ws, x).block_until_ready()
