"""Allocator and flag variables set after the backend started: moved before the first import."""
import jax
import jax.numpy as jnp
import os

print(jax.devices())                      # starts the backend: it reads the settings now
# no preallocation
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
os.environ.update({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})


def setup():
    return jnp.zeros(3)


state = setup()
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
