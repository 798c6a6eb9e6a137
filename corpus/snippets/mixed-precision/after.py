"""The same training step with bfloat16 storage and float32 where precision matters.

Inputs and weights are stored in bfloat16 (2 bytes per value); the matrix product accumulates in
float32 and the loss is computed in float32, then the update is cast back to the storage type.
"""
import numpy as np

import jax
import jax.numpy as jnp

BATCH, FEATURES, CLASSES = 256, 2048, 1024


@jax.jit
def train_step(w, x, labels):
    def loss(w):
        logits = jnp.dot(x, w, preferred_element_type=jnp.float32)   # accumulate in float32
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(x.shape[0]), labels])
    grad = jax.grad(loss)(w)
    return (w - 0.1 * grad).astype(jnp.bfloat16)


def example_args():
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.01, size=(FEATURES, CLASSES)).astype(jnp.bfloat16)
    x = rng.normal(size=(BATCH, FEATURES)).astype(jnp.bfloat16)
    labels = rng.integers(0, CLASSES, size=(BATCH,)).astype(np.int32)
    return jax.device_put((w, x, labels))


w, x, labels = example_args()
for _ in range(5):
    w = train_step(w, x, labels)
w.block_until_ready()
