"""A jitted training step that reports its loss through host callbacks on every step.

`jax.debug.print` and `jax.debug.callback` inside `jit` hand the value to Python on the host
during execution: a device->host copy and a host round trip per call, on every step.
"""
import numpy as np

import jax
import jax.numpy as jnp

STEPS = 50
rng = np.random.default_rng(0)
batches = jax.device_put([(rng.normal(size=(128, 64)).astype(np.float32),
                           rng.normal(size=(128, 1)).astype(np.float32)) for _ in range(STEPS)])
history = []


def log_loss(loss):
    history.append(float(loss))          # runs on the host, once per step


@jax.jit
def step(w, x, y):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    jax.debug.print("loss {l:.4f}", l=loss)   # host callback inside the program
    jax.debug.callback(log_loss, loss)        # another one
    return w - 0.01 * grad, loss


w = jnp.zeros((64, 1), jnp.float32)
for xb, yb in batches:
    w, _ = step(w, xb, yb)
w.block_until_ready()
jax.effects_barrier()                    # wait for callbacks still in flight
print(f"last loss {history[-1]:.4f}")
