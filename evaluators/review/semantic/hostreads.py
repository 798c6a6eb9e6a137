"""Whether a function copies device values to the host somewhere in its body.

A timed region that calls a helper of the reviewed tree (`results =
utils.get_from_first_device(results)`, `self._run_evaluation()`, `to_numpy(out)`) cannot be proven
to leave the device work running when that helper's body reads values on the host: which values it
reads is more data flow than the model follows (a tree mapped over the argument, a metric computed
from a step run inside it), so such a call counts as a wait in the default reading, a guess. A
timing around it is then reported as possible, never sure (regions.scan). On the sixth unseen set
(12zzzzc-12zzzzg) all 5 wrong sure JM701 findings were regions that waited this way.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil

# Calls that copy a device value to the host, or wait for it.
HOST_READ_CALLS = frozenset({"jax.device_get", "jax.block_until_ready", "numpy.asarray", "numpy.array"})
HOST_READ_METHODS = frozenset({"item", "tolist", "__array__", "block_until_ready"})
# Text the body must hold before it is walked (mentions.py: most functions hold none of it).
HOST_READ_WORDS = ("device_get(", "block_until_ready(", "asarray(", "array(", ".item(", ".tolist(", "__array__(")


def reads_host(a, fn: ast.AST) -> bool:
    """The function's body (nested helpers included: `convert_recursive` inside `to_numpy`) calls
    one of the host reads above."""
    for n in astutil.walk(fn):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in HOST_READ_METHODS and not n.args:
                return True
            if a.qualname(n.func) in HOST_READ_CALLS:
                return True
    return False
