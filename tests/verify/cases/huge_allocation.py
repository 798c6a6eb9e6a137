import numpy as np

big = np.ones((64 * 1024 ** 3) // 8)          # 64 GiB of float64: far beyond any ceiling here
print(big.sum())
