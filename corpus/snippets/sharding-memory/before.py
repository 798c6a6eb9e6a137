"""A 2-layer MLP whose 64 MiB of weights are replicated on each of 8 devices.

Data-parallel training with replicated parameters: every device holds a full copy of every
weight, so per-device memory does not shrink as devices are added.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",))
replicated = NamedSharding(mesh, P())
by_batch = NamedSharding(mesh, P("data"))


@jax.jit
def forward(params, x):
    w1, w2 = params
    return jnp.tanh(x @ w1) @ w2


def example_args():
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(2048, 4096)).astype(np.float32),      # 32 MiB
              rng.normal(size=(4096, 2048)).astype(np.float32))      # 32 MiB
    x = rng.normal(size=(256, 2048)).astype(np.float32)
    return jax.device_put(params, replicated), jax.device_put(x, by_batch)


params, x = example_args()
forward(params, x).block_until_ready()
