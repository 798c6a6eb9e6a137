"""Logging a NumPy statistic of every weight matrix by reading each one in full to the host.

Eight 32 MiB weights, sharded over the devices and kept for the whole run. `np.asarray(w)`
assembles a host copy of the whole matrix, and the array keeps that copy for as long as it
lives (the cache that makes a second read free). The NumPy result is dropped at once, but the
cached copies stay: host memory grows by the size of every weight that was read.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("model",))
rows = NamedSharding(mesh, P("model"))
init = jax.jit(lambda v: jnp.full((2048, 4096), v, jnp.float32), out_shardings=rows)
weights = [init(float(i)) for i in range(8)]      # 8 x 32 MiB, alive for the whole run

norms = [float(np.linalg.norm(np.asarray(w))) for w in weights]   # a cached host copy each
print(f"mean weight norm {sum(norms) / len(norms):.1f}")
