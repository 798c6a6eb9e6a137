"""Set inside a function, or from a value the program computes: no fix."""
import os

import jax
import jax.numpy as jnp

jnp.ones(3)
flags = " ".join(["--xla_force_host_platform_device_count=4"])
os.environ["XLA_FLAGS"] = flags


def run(params, profile):
    out = jax.jit(lambda p: p * 2)(params)
    if profile:
        os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
    return out
