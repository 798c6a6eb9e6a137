"""Definitions nothing in the reviewed files uses: what is found in them is not proven to run.

A module-level function or class of a script whose name no reviewed file writes but in a `def`
or `class` line, or writes only in files that do not import the script (it is not called,
passed, imported or instantiated anywhere), runs only if code outside the review calls it. A
finding in it may still be right about the code, but the premise "this runs on every step" is
not proven, so it is shown as possible. On the unseen readings restored here, the sure findings
this moves were all judged wrong or debatable on their first run (three wrong: eager updates in a
leftover `meta_test` and in a script's function that only copies of the script call; two
debatable), and no right one moves.

Left alone: a library module (only definitions, imports and settings: its functions are its API,
called from outside the review); decorated definitions (a decorator may register them: a CLI
command, a route, a test fixture), `main`, dunders and tests; and a review of one file or a
snippet, which is often a function pasted on its own. A script (a `__main__` block, a call or a
loop among its own statements) and a notebook run what they call, and nothing else. Names are
counted as words over the raw text of every reviewed file (notebooks too), once per process and
only when a finding asks: a word in a comment or a string counts as a use, which errs on the
side of "used".
"""
from __future__ import annotations

import ast
import re
from collections import Counter

_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_DEFINED = re.compile(rb"\b(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
# Import statements (also inside a notebook's JSON strings): the modules they name.
_IMPORT = re.compile(rb"\b(?:from[ \t]+([.\w]+)[ \t]+import[ \t]*(?:\(([^)]*)\)|([\w, \t*]*))|import[ \t]+([.\w, \t]+))")
_MAX_BYTES = 2_000_000  # of one file: larger ones are data, not code that calls anything


def unused_definition(analysis, scope, path: str) -> str | None:
    """The name of the module-level function or class around `scope` (in the file at `path`), when
    nothing in the reviewed files uses it; else None. Worked out once per definition (rules ask at
    every sure finding)."""
    project = analysis.project
    top = _outermost(analysis, scope) if project is not None else None
    if top is None:
        return None
    memo = analysis.memo.setdefault("unused_definition", {})
    if top not in memo:
        memo[top] = _unused(analysis, top, path)
    return memo[top]


def _unused(analysis, top, path: str) -> str | None:
    project, name = analysis.project, top.name
    if top.decorator_list or name == "main" or name.startswith(("__", "test", "Test")):
        return None
    if len(project.reviewed_paths()) < 2:
        return None
    if not path.endswith(".ipynb") and not _runs_as_script(analysis.tree):
        return None  # a library module: its functions are its API, called from outside the review
    here = project.real(path)
    # The word an importer writes for this module (`utils` for `pkg/utils.py`); none for a
    # notebook, which no file imports.
    module = analysis.module_name.rpartition(".")[2].encode() if analysis.module_name else None
    word = name.encode()
    for other, (words, defined) in _words(project).items():
        if words[word] <= defined[word]:
            continue  # only definitions of the name there (a script copied beside this one)
        if other == here or (module is not None and words[b"@" + module]):
            return None  # used here, or in a file that imports this module (`import utils`, `from utils import *`)
    return name


def _runs_as_script(tree: ast.Module) -> bool:
    """The module does something when run: a `__main__` block, a call or a loop among its own
    statements (`main()`, `train(cfg)`, `for epoch in ...`). A module of only definitions, imports
    and settings is a library."""
    for s in tree.body:
        if isinstance(s, (ast.For, ast.While, ast.AsyncFor)):
            return True
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            return True
        if isinstance(s, ast.If) and "__main__" in ast.unparse(s.test):
            return True
    return False


def _outermost(analysis, scope) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    """The module-level def or class whose body holds `scope` (None for the module's own code)."""
    s = scope
    while s is not None and s.parent is not None and s.parent is not analysis.module_scope:
        s = s.parent
    node = s.node if s is not None and s.parent is analysis.module_scope else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None


def _words(project) -> dict[str, tuple[Counter, Counter]]:
    """Per reviewed file: how often each word occurs, and how often it names a `def` or `class`
    (a definition is no use); `@utils` counts the imports that name a module `utils`. Built once
    per process."""
    got = project.memo.get("words")
    if got is None:
        got = project.memo["words"] = {}
        for path in project.reviewed_paths():
            try:
                with open(path, "rb") as fh:
                    raw = fh.read(_MAX_BYTES)
            except OSError:
                continue
            words = Counter(_WORD.findall(raw))
            words.update(b"@" + m for m in _imported(raw))
            got[path] = (words, Counter(_DEFINED.findall(raw)))
    return got


def _imported(raw: bytes) -> set[bytes]:
    """Every word of the modules import statements name: `from pkg.utils import a, b` gives pkg,
    utils, a and b (a name imported may be a module), `import pkg.utils as u` pkg, utils, u."""
    out: set[bytes] = set()
    for m in _IMPORT.finditer(raw):
        for part in m.groups():
            if part:
                out.update(_WORD.findall(part))
    return out
