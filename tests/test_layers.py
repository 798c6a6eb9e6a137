"""The layer contract, checked on the import graph (imports inside functions count too).

  front ends  jaxmem.app.{cli, web_cli, web, webui, slack}
  services    jaxmem.app.{services, evaluation}
  advisor     jaxmem.app.advisor
  its parts   the other jaxmem.app modules (answer, compose, retrieval, ...)
  subsystems  jaxmem.evaluators.{review, verify}
  index       jaxmem.ingest
  core        jaxmem.core (settings, errors, database, corpus layout)

A module imports only its own layer or those below; no two modules import each other, directly or
round a cycle; front ends reach a subsystem only through its `api` (the CLI's lazy commands load
each subsystem's `cli` by name); only jaxmem.ingest.store talks to Chroma; the reviewer is pure
functions over source and the verifier reviews nothing. Written as a test over the source files,
not with import-linter: the package-dir mapping (app/ -> jaxmem.app) leaves an editable install
with no folder called jaxmem for a graph builder to walk.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import imports

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"app": "jaxmem.app", "core": "jaxmem.core", "ingest": "jaxmem.ingest", "evaluators": "jaxmem.evaluators"}
FRONT_ENDS = ("jaxmem.app.cli", "jaxmem.app.web_cli", "jaxmem.app.web", "jaxmem.app.webui", "jaxmem.app.slack",
              "jaxmem.evaluators.review.cli", "jaxmem.evaluators.verify.cli")
LAYERS = [
    FRONT_ENDS,
    ("jaxmem.app.services", "jaxmem.app.evaluation"),
    ("jaxmem.app.advisor",),
    ("jaxmem.app",),
    ("jaxmem.evaluators",),
    ("jaxmem.ingest",),
    ("jaxmem.core",),
]
# What a front end may import of the layers below: the doors, and plain view types.
DOORS = ("jaxmem.core", "jaxmem.app.services", "jaxmem.app.advisor", "jaxmem.app.answer", "jaxmem.app.evaluation",
         "jaxmem.ingest.api", "jaxmem.evaluators.review.api", "jaxmem.evaluators.verify.api")


# `from jaxmem.evaluators.review import api` names the package too; its empty __init__ is no way in.
PACKAGES = {"jaxmem.app", "jaxmem.evaluators", "jaxmem.evaluators.review", "jaxmem.evaluators.verify", "jaxmem.ingest",
            "jaxmem.core"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph() -> dict[str, set[str]]:
    """Every product module and the modules it imports (ours resolved to modules, others as written)."""
    files = {module_name(p): p for top in FOLDERS for p in sorted((ROOT / top).rglob("*.py"))}
    out = {}
    for name, path in files.items():
        mods = set()
        for m in imports(path, names=True):
            # `from jaxmem.core import db` imports the module jaxmem.core.db, not a name of jaxmem.core.
            while m not in files and m.startswith("jaxmem.") and "." in m and m.rsplit(".", 1)[0] != "jaxmem":
                if m.rsplit(".", 1)[0] in files:
                    m = m.rsplit(".", 1)[0]
                    break
                m = m.rsplit(".", 1)[0]
            mods.add(m)
        out[name] = mods - {name}
    return out


GRAPH = graph()
OURS = sorted(GRAPH)


def within(mod: str, prefixes) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def layer(mod: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if within(mod, prefixes):
            return i
    raise AssertionError(f"{mod} is in no layer: add it to tests/test_layers.py LAYERS")


@pytest.mark.parametrize("mod", OURS)
def test_imports_only_its_own_layer_or_below(mod: str):
    up = sorted(m for m in GRAPH[mod] & set(GRAPH) if layer(m) < layer(mod))
    assert not up, f"{mod} (layer {layer(mod)}) imports a higher layer: {up}"


def own_subsystem(mod: str) -> tuple[str, ...]:
    """A subsystem's own command (jaxmem.evaluators.review.cli) may use its package's insides."""
    parts = mod.split(".")
    return (".".join(parts[:3]),) if parts[1] == "evaluators" else ()


@pytest.mark.parametrize("mod", [m for m in OURS if within(m, FRONT_ENDS)])
def test_front_ends_use_the_doors(mod: str):
    allowed = (*FRONT_ENDS, *DOORS, *own_subsystem(mod))
    deeper = sorted(m for m in GRAPH[mod] & set(GRAPH) if not within(m, allowed) and m not in PACKAGES)
    assert not deeper, f"{mod} reaches past the services and the subsystems' api: {deeper}"


def test_no_import_cycles():
    """Tarjan's strongly connected components over our modules: each must be a single module."""
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v] & set(GRAPH):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in OURS:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def tops(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


@pytest.mark.parametrize("mod", OURS)
def test_boundaries(mod: str):
    mods = GRAPH[mod]
    if mod != "jaxmem.ingest.store":
        assert not tops(mods) & {"chromadb", "langchain_chroma"}, f"{mod}: only jaxmem.ingest.store talks to Chroma"
    if within(mod, ["jaxmem.evaluators.review"]) and mod != "jaxmem.evaluators.review.cli":
        assert not tops(mods) & {"jax", "jaxlib", "numpy", "chromadb", "sqlalchemy", "streamlit"}, \
            f"{mod}: the reviewer reads source, it never runs JAX or touches a store"
        assert not {m for m in mods if within(m, ["jaxmem.ingest", "jaxmem.evaluators.verify", "jaxmem.app"])}, mod
    if within(mod, ["jaxmem.evaluators.verify"]):
        assert not {m for m in mods if within(m, ["jaxmem.evaluators.review", "jaxmem.ingest.store", "jaxmem.app"])}, mod
    if within(mod, ["jaxmem.core"]):
        assert not tops(mods) & {"chromadb", "langchain_core", "streamlit", "jax", "torch"}, \
            f"{mod}: core is what every install has (the reviewer's light one too)"


def test_there_is_something_to_check():
    assert len(GRAPH) > 80
    assert any(GRAPH.values())


REVIEWER_MODULE_LINES = 400  # issue 22: small modules, one concern each; split a module, never raise this


def test_no_reviewer_module_is_over_the_line_limit():
    """The reviewer keeps to small modules (issue 22: no module over 400 lines): a concern that grows
    past it moves to a module of its own (semantic/parts.py, semantic/shapes.py)."""
    long = {p.relative_to(ROOT).as_posix(): n for p in (ROOT / "evaluators" / "review").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > REVIEWER_MODULE_LINES}
    assert not long, f"split these modules (over {REVIEWER_MODULE_LINES} lines): {long}"
