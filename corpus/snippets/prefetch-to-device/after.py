"""The same loop with the next two batches already on their way to the device.

`jax.device_put` is asynchronous, so queuing batch n+1 and n+2 while step n runs lets the copies
overlap with compute. Two batches of look-ahead is the usual choice: each one costs device memory.
"""
import collections
import itertools

import numpy as np

import jax
import jax.numpy as jnp


def loader(n_batches, rng=np.random.default_rng(0)):
    for _ in range(n_batches):
        yield (rng.normal(size=(128, 256)).astype(np.float32),
               rng.normal(size=(128, 1)).astype(np.float32))


def prefetch_to_device(batches, size=2):
    """Yield device batches while the next `size` are already being copied."""
    queue = collections.deque()
    for batch in itertools.islice(batches, size):
        queue.append(jax.device_put(batch))          # starts the copy, returns at once
    while queue:
        yield queue.popleft()
        for batch in itertools.islice(batches, 1):
            queue.append(jax.device_put(batch))


@jax.jit
def step(w, x, y):
    grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.01 * grad


w = jnp.zeros((256, 1), jnp.float32)
for x, y in prefetch_to_device(loader(100)):
    w = step(w, x, y)                     # x, y are already device arrays
w.block_until_ready()
