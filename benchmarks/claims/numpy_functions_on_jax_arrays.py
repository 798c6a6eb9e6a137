"""Which NumPy functions copy a JAX array to the host, and which hand it back to JAX.

NumPy's reductions and several shape functions (numpy/_core/fromnumeric.py) call the argument's
own method when it is not a NumPy array: `np.sum(x)` is `x.sum()`, `np.mean(x)` is `x.mean()`.
Given a JAX array they therefore return a JAX array, computed on the device, with no copy to the
host and no wait. Ufuncs (`np.abs`, `np.log`) and the other functions convert the argument with
`np.asarray` first: a device->host copy that waits for the array.

    python benchmarks/claims/numpy_functions_on_jax_arrays.py

Output on NumPy 2.4.6, jax 0.10.2, CPU (the reviewer's NUMPY_DEFERS is the first line):

    device (the array's own method): sum prod mean std var max min amax amin any all argmax argmin
      cumsum cumprod round around reshape repeat swapaxes transpose squeeze nonzero searchsorted
      flip moveaxis
    host (converted with np.asarray): clip argsort compress ravel trace diagonal sort argpartition
      partition ptp matmul dot concatenate stack abs log square nansum average median cov
      linalg.norm isnan isfinite allclose array_equal copy count_nonzero expand_dims
"""
from __future__ import annotations

import warnings


def main() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    warnings.simplefilter("ignore")
    x = jnp.arange(6.0).reshape(2, 3) + 1
    calls = {
        "sum": lambda: np.sum(x), "prod": lambda: np.prod(x), "mean": lambda: np.mean(x),
        "std": lambda: np.std(x), "var": lambda: np.var(x), "max": lambda: np.max(x), "min": lambda: np.min(x),
        "amax": lambda: np.amax(x), "amin": lambda: np.amin(x), "any": lambda: np.any(x), "all": lambda: np.all(x),
        "argmax": lambda: np.argmax(x), "argmin": lambda: np.argmin(x), "cumsum": lambda: np.cumsum(x),
        "cumprod": lambda: np.cumprod(x), "round": lambda: np.round(x, 2), "around": lambda: np.around(x, 2),
        "reshape": lambda: np.reshape(x, (3, 2)), "repeat": lambda: np.repeat(x, 2),
        "swapaxes": lambda: np.swapaxes(x, 0, 1), "transpose": lambda: np.transpose(x),
        "squeeze": lambda: np.squeeze(x), "nonzero": lambda: np.nonzero(x)[0],
        "searchsorted": lambda: np.searchsorted(x[0], 1.5), "flip": lambda: np.flip(x),
        "moveaxis": lambda: np.moveaxis(x, 0, 1),
        "clip": lambda: np.clip(x, 0, 3), "argsort": lambda: np.argsort(x),
        "compress": lambda: np.compress([True, False], x, axis=0), "ravel": lambda: np.ravel(x),
        "trace": lambda: np.trace(x), "diagonal": lambda: np.diagonal(x), "sort": lambda: np.sort(x),
        "argpartition": lambda: np.argpartition(x[0], 1), "partition": lambda: np.partition(x[0], 1),
        "ptp": lambda: np.ptp(x), "matmul": lambda: np.matmul(x, x.T), "dot": lambda: np.dot(x, x.T),
        "concatenate": lambda: np.concatenate([x, x]), "stack": lambda: np.stack([x, x]),
        "abs": lambda: np.abs(x), "log": lambda: np.log(x), "square": lambda: np.square(x),
        "nansum": lambda: np.nansum(x), "average": lambda: np.average(x), "median": lambda: np.median(x),
        "cov": lambda: np.cov(x), "linalg.norm": lambda: np.linalg.norm(x), "isnan": lambda: np.isnan(x),
        "isfinite": lambda: np.isfinite(x), "allclose": lambda: np.allclose(x, x),
        "array_equal": lambda: np.array_equal(x, x), "copy": lambda: np.copy(x),
        "count_nonzero": lambda: np.count_nonzero(x), "expand_dims": lambda: np.expand_dims(x, 0),
    }
    device, host = [], []
    for name, call in calls.items():
        (device if isinstance(call(), jax.Array) else host).append(name)
    print(f"NumPy {np.__version__}, jax {jax.__version__}, {jax.default_backend()}")
    print("device (the array's own method):", " ".join(device))
    print("host (converted with np.asarray):", " ".join(host))


if __name__ == "__main__":
    main()
