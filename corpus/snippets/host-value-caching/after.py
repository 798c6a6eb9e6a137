"""The same statistic reduced on the device, so only a scalar per weight reaches the host.

Each read now fetches a 0-d result, a new small array whose cached host value is 4 bytes;
the weights themselves are never read, so they carry no host copy.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("model",))
rows = NamedSharding(mesh, P("model"))
init = jax.jit(lambda v: jnp.full((2048, 4096), v, jnp.float32), out_shardings=rows)
weights = [init(float(i)) for i in range(8)]      # 8 x 32 MiB, alive for the whole run

norms = [float(jnp.linalg.norm(w)) for w in weights]   # reduced on the device: one scalar each
print(f"mean weight norm {sum(norms) / len(norms):.1f}")
