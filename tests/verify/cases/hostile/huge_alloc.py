# Asks for 40 GB at once.
import numpy as np

a = np.ones(40 * 10**9, dtype=np.uint8)
print(a.sum())
