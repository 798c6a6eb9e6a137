"""The JAX versions a reviewed project declares it runs on, read from its requirement files.

Some claims hold only from a JAX version on (`jax.device_put_replicated` raises from 0.10): a
project that pins an older JAX is not hit by them, as ruff reads `requires-python` before it
reports syntax an older Python lacks. The files nearest to the reviewed file are read
(pyproject.toml, requirements*.txt, setup.py, setup.cfg, environment.yml), walking up to the
folder that holds `.git` or at most six levels; the first folder with a JAX requirement decides.
"""
from __future__ import annotations

import ast
import functools
import os
import re

_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
# `jax==0.4.25`, `jax[cuda12]<=0.4.30`, `"jax<0.5"`, `jax~=0.4.20`; not `jaxlib`, `jaxtyping`, `flax`.
_PATTERN = r"(?<![\w.-]){}(?:\[[^\]]*\])?\s*(==|<=|<|~=)\s*v?(\d+(?:\.\d+)*)"
_REQUIREMENTS = {name: re.compile(_PATTERN.format(re.escape(name))) for name in ("jax", "equinox")}
_MAX_LEVELS = 6


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _bound(op: str, version: tuple[int, ...]) -> tuple[tuple[int, ...], bool]:
    """The highest version allowed, and whether it is allowed itself (`<` excludes it)."""
    if op == "~=":  # ~=0.4.25 allows 0.4.x from 0.4.25; ~=0.4 allows 0.x from 0.4
        return (*version[:-2], version[-2] + 1) if len(version) > 1 else version, False
    return version, op != "<"


@functools.lru_cache(maxsize=256)
def _declared(folder: str, package: str = "jax") -> tuple[tuple[int, ...], bool] | None:
    """The tightest upper bound on `package` that the requirement files of `folder` or the folders
    above it declare, as (version, inclusive); None when none declares one."""
    for _ in range(_MAX_LEVELS):
        listing = _listing(folder)
        # `requirements.txt`, `requirements-dev.txt`, and the `gpu_requirements.txt` /
        # `tpu-requirements.txt` that projects keep one per accelerator
        names = [n for n in listing if n in _FILES or ("requirements" in n and n.endswith(".txt"))]
        bounds = []
        for name in names:
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
                    text = fh.read(200_000)
            except OSError:
                continue
            bounds += [_bound(op, _version(v)) for op, v in _REQUIREMENTS[package].findall(text)]
        if bounds:
            return min(bounds)
        if ".git" in listing:
            return None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def jax_below(path: str, version: tuple[int, ...], package: str = "jax") -> bool:
    """The project around `path` declares a JAX (or `package`) requirement that excludes `version`
    and every later one (`jax==0.4.25` is below (0, 9)). False for pasted code, or without a
    declaration."""
    if not path or path.startswith("<") or not os.path.exists(path):
        return False
    found = _declared(os.path.dirname(os.path.abspath(path)), package)
    if found is None:
        return False
    bound, inclusive = found
    return bound < version if inclusive else bound <= version


# Names JAX removed, and the release that removed them (its changelog; each absent on jax 0.10.2):
# code that uses one was written for a JAX before that release, whatever its requirements say.
REMOVED_IN = {
    "jax.xla": (0, 4, 14), "jax.pxla": (0, 4, 14), "jax.partial_eval": (0, 4, 14),
    "jax.interpreters.pxla.ShardedDeviceArray": (0, 4, 14),
    "jax.tree_multimap": (0, 3, 16), "jax.tree_util.tree_multimap": (0, 3, 16),
    "jax.experimental.optimizers": (0, 3, 16), "jax.experimental.stax": (0, 3, 16),
    "jax.ops.index_update": (0, 3, 2), "jax.ops.index_add": (0, 3, 2),
}
_REMOVED_WORDS = ("xla", "pxla", "partial_eval", "ShardedDeviceArray", "tree_multimap", "optimizers", "stax",
                  "index_update", "index_add")


def written_for(a) -> tuple[str, tuple[int, ...]] | None:
    """The earliest-removed JAX name the module (`a`, its model) uses, and the release that removed
    it (`jax.xla.Device` annotations: code for a JAX before 0.4.14). None when it uses none."""
    if "written_for" not in a.memo:
        found = None
        if any(w in line for line in a.lines for w in _REMOVED_WORDS):
            for n in ast.walk(a.tree):
                if not isinstance(n, (ast.Name, ast.Attribute)):
                    continue
                q = a.qualname(n)
                hit = next((name for name in REMOVED_IN if q is not None and (q == name or q.startswith(name + "."))),
                           None)
                if hit is not None and (found is None or REMOVED_IN[hit] < REMOVED_IN[found]):
                    found = hit
        a.memo["written_for"] = (found, REMOVED_IN[found]) if found is not None else None
    return a.memo["written_for"]


def returns_ready(info, path: str) -> bool:
    """A call of the jitted callable `info` waits for its own work before it returns: an
    `eqx.filter_jit` callable (semantic/jit.RETURNS_READY), unless the project pins an equinox
    before 0.11.8, whose filter_jit dispatched asynchronously like `jax.jit`."""
    return info.returns_ready and not jax_below(path, (0, 11, 8), "equinox")
