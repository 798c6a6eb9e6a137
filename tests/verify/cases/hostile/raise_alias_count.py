# Donates nothing, then raises the probe's own count of donated (aliased) bytes, found through the
# garbage collector, as if 20 calls had each donated 1 GiB.
import gc

import jax
import jax.numpy as jnp


@jax.jit
def step(state, x):
    return state * 0.9 + x


state = jnp.zeros(1000)
for i in range(20):
    state = step(state, jnp.ones(1000))
print(float(state[0]))
for o in gc.get_objects():
    if type(o).__name__ == "Hooks":
        o.aliased.update(calls=20, bytes=20 << 30, max_call_bytes=1 << 30)
    elif type(o).__name__ == "Attribution":
        o.counts["a"], o.counts["ab"] = 20, 20 << 30
