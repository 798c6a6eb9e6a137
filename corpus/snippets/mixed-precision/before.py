"""Training a classifier head with 64-bit floats switched on globally.

`jax_enable_x64` makes NumPy's default float64 flow into JAX unchanged: weights, activations and
gradients all take 8 bytes per value, twice float32 and four times bfloat16.
"""
import numpy as np

import jax

jax.config.update("jax_enable_x64", True)      # every default float is now 64-bit
import jax.numpy as jnp  # noqa: E402

BATCH, FEATURES, CLASSES = 256, 2048, 1024


@jax.jit
def train_step(w, x, labels):
    def loss(w):
        logits = x @ w
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(x.shape[0]), labels])
    return w - 0.1 * jax.grad(loss)(w)


def example_args():
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.01, size=(FEATURES, CLASSES))          # float64
    x = rng.normal(size=(BATCH, FEATURES))                        # float64
    labels = rng.integers(0, CLASSES, size=(BATCH,))
    return jax.device_put((w, x, labels))


w, x, labels = example_args()
for _ in range(5):
    w = train_step(w, x, labels)
w.block_until_ready()
