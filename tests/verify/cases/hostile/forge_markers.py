# Finds the probe's nonce in memory and writes sync markers with it through the probe's own saved
# os.write (not the wrapped one), to put 30 made-up host syncs on line 1 and none where they are.
import gc

import jax.numpy as jnp

guard = next(o for o in gc.get_objects() if type(o).__name__ == "Guard")
for _ in range(30):
    guard._write(2, f"@@jaxmem:{guard._nonce}:s:1:1.1|:item:4:@@\n".encode())
x = jnp.ones(3)
for i in range(5):
    x = x + 1
print(float(x.sum()))
