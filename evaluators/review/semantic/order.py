"""The order a process reviews its files in: importers before the modules of the tree they import.

A module's facts are built from its own tree and model the first time another file's review asks
for them. When the module's own review is still to come in this process, that tree and model are
kept for it (Project.take); when the module was reviewed first, both are built a second time for
the importer. Reviewing importers first turns most of the second kind into the first. Only the
order changes: the findings are the same in any order (the report is sorted), and the imports are
read with a regular expression, so a missed or extra edge costs time, never a finding.
"""
from __future__ import annotations

import heapq
import re

# `from .train import step`, `from pkg.steps import update`, `import pkg.steps as steps`.
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import|import[ \t]+([\w.]+))", re.MULTILINE)
_READ = 200_000  # imports sit near the top; a long file's tail adds nothing here


def importers_first(paths: list[str], project) -> list[str]:
    """`paths` in an order where a file comes before the files of `paths` it imports (a stable
    topological order; a cycle keeps the given order among its files). Notebooks are never
    imported, so they come first."""
    index = {project.real(p): i for i, p in enumerate(paths)}
    if len(index) < 2:
        return list(paths)
    by_module = {m: index[p] for m, p in project.files.items() if p in index}
    if not by_module:
        return list(paths)
    edges: list[set[int]] = [set() for _ in paths]  # importer -> the files of `paths` it imports
    for real, i in index.items():
        for module in _imported(real, project):
            j = by_module.get(module)
            if j is not None and j != i:
                edges[i].add(j)
    importers = [0] * len(paths)
    for targets in edges:
        for j in targets:
            importers[j] += 1
    # Files outside the module map (notebooks) import and are never imported: theirs go first.
    rank = [(1 if project.module_of(p) is not None else 0, i) for i, p in enumerate(paths)]
    ready = [rank[i] for i in range(len(paths)) if not importers[i]]
    heapq.heapify(ready)
    out: list[int] = []
    placed = [False] * len(paths)
    first_free = 0
    while len(out) < len(paths):
        if not ready:  # a cycle: release the earliest file not yet placed
            while placed[first_free]:
                first_free += 1
            heapq.heappush(ready, rank[first_free])
        i = heapq.heappop(ready)[1]
        if placed[i]:
            continue
        placed[i] = True
        out.append(i)
        for j in edges[i]:
            importers[j] -= 1
            if importers[j] == 0 and not placed[j]:
                heapq.heappush(ready, rank[j])
    return [paths[i] for i in out]


def _imported(path: str, project) -> set[str]:
    """Modules of the tree that the file at `path` names in an import statement."""
    module = project.module_of(path)
    if module is None:  # a notebook, or a file outside the module map
        return set()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_READ)
    except OSError:
        return set()
    package = project.is_package(module)
    found: set[str] = set()
    for m in _import_lines(raw):
        dots, name, plain = m.group(1), m.group(2), m.group(3)
        if plain is not None:
            dotted = plain.decode("ascii", "replace")
        elif dots:
            parts = module.split(".")
            level = len(dots) - 1 if package else len(dots)
            if level > len(parts):
                continue
            dotted = ".".join([*parts[:len(parts) - level], *([name.decode("ascii", "replace")] if name else [])])
        else:
            dotted = name.decode("ascii", "replace")
        if not dotted:
            continue
        target = project._module_for(project.beside(dotted, module))
        if target is not None:
            found.add(target)
    return found


def _import_lines(raw: bytes):
    """`_IMPORT.finditer(raw)`: the same matches, as each lies on one line, from its start, and holds
    `import`. Found by searching for that word rather than trying the pattern at every byte of the
    file (a fifth of the time: most lines import nothing)."""
    at = raw.find(b"import")
    while at != -1:
        m = _IMPORT.match(raw, raw.rfind(b"\n", 0, at) + 1)
        if m is not None:
            yield m
        end = raw.find(b"\n", at)
        if end == -1:
            return
        at = raw.find(b"import", end)
