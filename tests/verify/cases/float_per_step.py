import jax
import jax.numpy as jnp

step = jax.jit(lambda w: (w * 0.5, jnp.sum(w)))
w = jnp.ones((4,))
total = 0.0
for _ in range(7):
    w, loss = step(w)
    total += float(loss)
print(total)
