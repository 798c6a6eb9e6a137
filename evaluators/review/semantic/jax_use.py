"""Whether a file has anything to do with JAX: its own text names JAX or a JAX library, or it
imports a module of the reviewed tree whose text does.

Every rule but the environment-variable ones (JM6xx, about the process's settings) is about JAX
work, and a file that neither names JAX nor imports a module that does has none: a PyTorch
trainer timed with `time.time()` in a repository that also holds JAX trainers, a plotting script
of NumPy values. On the 56 unseen readings up to 12zzzl this removed 10 findings, all judged
wrong (9) or debatable (1): JM701 timings of PyTorch loops, JM201/JM206 on a NumPy script.
"""
from __future__ import annotations

import re
import weakref

from jaxmem.evaluators.review.semantic.project import IMPORT_LINES, MAX_BYTES

# Libraries built on JAX that code imports without writing `jax` (framework names).
LIBRARIES = ("flax", "optax", "equinox", "haiku", "numpyro", "objax", "brainstate", "brainpy", "evosax", "gymnax",
             "brax", "chex", "distrax", "rlax", "jraph", "elegy", "treex", "diffrax", "lineax", "optimistix",
             "blackjax", "dynamax")
JAX_WORDS = re.compile(rf"\b(jax\w*|jnp|{'|'.join(LIBRARIES)})\b")
# In a module the file imports, only an import of JAX or a JAX library counts (a config module's
# `BACKENDS = ("torch", "jax")` names JAX without using it).
_JAX_IMPORT = re.compile(rf"^[ \t]*(?:import|from)[ \t]+(?:jax\w*|{'|'.join(LIBRARIES)})\b".encode(), re.MULTILINE)
# Per reviewed tree (a Project): module path -> (it imports JAX, its text when it does not).
_facts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def touches_jax(source: str, project=None, module: str | None = None) -> bool:
    """The file's text names JAX, or a module of the tree it imports imports JAX, itself or through
    the modules a package's `__init__` imports (`from src.diffusion import make_step`, re-exported
    by two package `__init__`s from the module that jits it). `module`: the file's own module name
    (its imports resolve as the model resolves them: a module beside the file comes first)."""
    if JAX_WORDS.search(source):
        return True
    if project is None or not project.files:
        return False
    seen: set[str] = set()
    todo = [m for m in (tree_module(name, module, project) for name in _imported(source)) if m is not None]
    while todo and len(seen) < 64:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        names, text = _file_facts(project, project.files[module])
        if names:
            return True
        if project.is_package(module):  # a package re-exports what its `__init__` imports
            todo.extend(m for m in (tree_module(n, module, project) for n in _imported(text)) if m is not None)
    return False


def _imported(text: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in IMPORT_LINES.finditer(text)]


def tree_module(name: str, importer: str | None, project) -> str | None:
    """The tree's module an import line names (`.train`, `pkg.steps`); a relative one from its
    importer's package, an absolute one beside the importer first (also importers.py)."""
    level = len(name) - len(name.lstrip("."))
    rest = name[level:]
    if level and importer is not None:
        package = importer if project.is_package(importer) else importer.rpartition(".")[0]
        for _ in range(level - 1):
            package = package.rpartition(".")[0]
        name = f"{package}.{rest}" if package and rest else (package or rest)
    else:
        # `from model import *` in `demos/a/main.py`: the script's folder comes first on sys.path,
        # so `demos/a/model.py` when it exists, whatever other folders hold a `model.py` (beside).
        name = project.beside(rest, importer) if rest else rest
    return project._module_for(name) if name else None


def _file_facts(project, path: str) -> tuple[bool, str]:
    """(it imports JAX or a JAX library, its text), read once per reviewed tree."""
    cache = _facts.setdefault(project, {})
    hit = cache.get(path)
    if hit is None:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_BYTES)
        except OSError:
            raw = b""
        names = _JAX_IMPORT.search(raw) is not None
        # Only a module that does not import JAX is read further (for its imports): keep its text.
        hit = cache[path] = (names, "" if names else raw.decode("utf-8", "replace"))
    return hit
