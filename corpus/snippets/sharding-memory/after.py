"""The same MLP with its weights sharded over the 8 devices (FSDP-style).

Each weight is split along one axis, so every device stores an eighth of it; XLA gathers what a
device needs during the computation, and per-device parameter memory drops by the mesh size.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",))
sharded_rows = NamedSharding(mesh, P("data", None))   # each device keeps 1/8 of the rows
by_batch = NamedSharding(mesh, P("data"))


@jax.jit
def forward(params, x):
    w1, w2 = params
    return jnp.tanh(x @ w1) @ w2


def example_args():
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(2048, 4096)).astype(np.float32),
              rng.normal(size=(4096, 2048)).astype(np.float32))
    x = rng.normal(size=(256, 2048)).astype(np.float32)
    return jax.device_put(params, sharded_rows), jax.device_put(x, by_batch)


params, x = example_args()
forward(params, x).block_until_ready()
