# Switches off the line tracer that puts each cost on its line, then reads the device every step.
import sys

import jax.numpy as jnp

sys.settrace(None)
x = jnp.ones(3)
for i in range(20):
    x = x + 1
    print(float(x.sum()))
