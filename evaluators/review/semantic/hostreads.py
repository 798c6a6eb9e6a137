"""Calls that copy device values to the host, and whether a function makes one somewhere in its body.

`host_conversion` is what a host environment's step is handed (envs.py) and what eager code reads
(eager.py, syncs.py). `reads_host` serves timed regions: a region that calls a helper of the
reviewed tree (`results = utils.get_from_first_device(results)`, `self._run_evaluation()`,
`to_numpy(out)`) cannot be proven to leave the device work running when that helper's body reads
values on the host: which values it reads is more data flow than the model follows (a tree mapped
over the argument, a metric computed from a step run inside it), so such a call counts as a wait in
the default reading, a guess. A timing around it is then reported as possible, never sure
(regions.scan). On the sixth unseen set (12zzzzc-12zzzzg) all 5 wrong sure JM701 findings were
regions that waited this way.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil

# Calls that copy a device value to the host as a whole: what a host environment's step is handed.
HOST_CONVERSIONS = frozenset({"jax.device_get", "numpy.asarray", "numpy.array"})
_WAIT_METHODS = frozenset({"__array__", "block_until_ready"})


def host_conversion(a, expr: ast.AST) -> bool:
    """`device_get(x)`, `np.asarray(x)`, `x.item()`, `x.tolist()`."""
    return isinstance(expr, ast.Call) and (a.qualname(expr.func) in HOST_CONVERSIONS or (
        isinstance(expr.func, ast.Attribute) and expr.func.attr in ("item", "tolist") and not expr.args))


def reads_host(a, fn: ast.AST) -> bool:
    """The function's body (nested helpers included: `convert_recursive` inside `to_numpy`) copies
    a value to the host (`host_conversion`) or waits for one (`jax.block_until_ready`,
    `x.block_until_ready()`, `x.__array__()`)."""
    return any(host_conversion(a, n) or isinstance(n, ast.Call) and (
        a.qualname(n.func) == "jax.block_until_ready"
        or isinstance(n.func, ast.Attribute) and n.func.attr in _WAIT_METHODS and not n.args)
        for n in astutil.walk(fn))
