import jax
import jax.numpy as jnp

step = jax.jit(lambda w: (w * 0.5, jnp.sum(w)))
w = jnp.ones((4,))
total = jnp.zeros(())
for _ in range(7):
    w, loss = step(w)
    total = total + loss
print(float(total))
