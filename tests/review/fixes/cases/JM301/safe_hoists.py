"""Jitted functions made anew on every iteration, reading nothing the loop changes: made once,
before the loop (a jit used in place gets a name)."""
from functools import partial

import jax
import jax.numpy as jnp


class Model:
    def apply(self, x):
        return jnp.tanh(x)

    def run(self, xs):
        out = []
        # one output per input
        for x in xs:
            out.append(jax.jit(self.apply)(x))   # a new bound method each time
        return out


def scale_all(xs, factor):
    ys = []
    for x in xs:
        f = partial(jax.jit, static_argnums=1)(lambda a, n: a * n * factor)
        ys.append(f(x, 2))
    return ys
