# Donates its state, then puts JAX's own dispatch and execution back (taken from the closures of
# the probe's wrappers): the C++ fast path, where no hook sees a call, so that the 20 donating calls
# below would show no donated bytes.
from functools import partial

import jax
import jax.numpy as jnp
from jax._src.interpreters import pxla
from jax._src.lib import _jax


def original(wrapper, name):
    for cell in getattr(wrapper, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if getattr(value, "__name__", "") == name and value is not wrapper:
            return value
    return wrapper


pxla.MeshExecutableFastpathData = original(pxla.MeshExecutableFastpathData, "MeshExecutableFastpathData")
for name in ("execute_sharded", "execute"):
    setattr(_jax.LoadedExecutable, name, original(getattr(_jax.LoadedExecutable, name), name))


@partial(jax.jit, donate_argnums=0)
def step(state, x):
    return state * 0.9 + x


state = jnp.zeros(1000)
for i in range(20):
    state = step(state, jnp.ones(1000))
print(float(state[0]))
