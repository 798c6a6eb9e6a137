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
        apply_jit = jax.jit(self.apply)
        for x in xs:
            out.append(apply_jit(x))   # a new bound method each time
        return out


def scale_all(xs, factor):
    ys = []
    f = partial(jax.jit, static_argnums=1)(lambda a, n: a * n * factor)
    for x in xs:
        ys.append(f(x, 2))
    return ys
