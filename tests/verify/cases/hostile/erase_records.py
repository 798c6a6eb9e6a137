# Reads the device 20 times, then empties the probe's own records of those reads (found through the
# garbage collector), hoping the per-line counts come out as zero.
import gc

import jax.numpy as jnp

x = jnp.ones(3)
for i in range(20):
    x = x + 1
    print(float(x.sum()))
for o in gc.get_objects():
    if type(o).__name__ == "Hooks":
        o.syncs.clear()
    elif type(o).__name__ == "Attribution":
        o.counts["s"] = 0
