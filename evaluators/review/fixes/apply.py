"""Applying fixes to a whole file: one fix at a time, reviewing the result again after each (line
numbers move, and a fix may make another finding go away), until no fix applies; as ruff does.

Every intermediate source must parse, or that fix is dropped and noted. A finding whose fix did not
make it go away is not tried twice, so the loop ends, and fixing a fixed file changes nothing.
Notebooks are fixed on their code cells joined (names flow between cells, as the review reads
them), with IPython syntax held in place by placeholders and each cell written back on its own:
outputs, metadata and the other cells stay byte for byte.
"""
from __future__ import annotations

import ast
import difflib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from jaxmem.evaluators.review import engine, notebook
from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes import REGISTRY, fix_for
from jaxmem.evaluators.review.fixes.base import UNSAFE, Fix, Options
from jaxmem.evaluators.review.rule import Rule

MAX_ROUNDS = 64


@dataclass
class Applied:
    """A fix that went into the file: the finding as it was reported where the fix applied."""

    finding: Finding
    fix: Fix

    def to_dict(self) -> dict:
        f = self.finding
        return {"path": f.path, "line": f.line, "cell": f.cell, "code": f.code,
                "applicability": self.fix.applicability, "title": self.fix.title}


@dataclass
class Outcome:
    path: str
    before: str
    after: str
    applied: list[Applied] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)   # findings left in the fixed source
    skipped_unsafe: int = 0       # fixes that exist but were not applied (unsafe, not asked for)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.after != self.before


def _no_url(_topic: str) -> str:
    return ""


def _review(source: str, path: str, rules: Sequence[Rule], show_possible: bool) -> list[Finding]:
    found = engine.check_source(source, path, list(rules), _no_url)
    return [f for f in found if show_possible or f.confidence == "sure"]


def _key(f: Finding, counts: Counter) -> tuple:
    """The same finding across rounds (its line number moves, its text does not)."""
    text = " ".join(f.source_line.split())
    counts[(f.code, text)] += 1
    return f.code, text, counts[(f.code, text)]


def parses(source: str) -> str | None:
    """None when the source parses, else the syntax error in words."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return None


def fix_source(source: str, path: str, rules: Sequence[Rule], *, unsafe: bool = False,
               options: Options = Options(), show_possible: bool = False,
               review: Callable[[str], list[Finding]] | None = None) -> Outcome:
    """Apply every fix that applies (safe ones; unsafe ones too with `unsafe`), re-reviewing after
    each. `review`: how to review an intermediate source (defaults to the rules given)."""
    review = review or (lambda src: _review(src, path, rules, show_possible))
    out = Outcome(path, source, source)
    tried: set[tuple] = set()       # findings whose fix failed or was not wanted (code, text, occurrence)
    stuck: set[tuple] = set()       # (code, text) a fix applied to without the finding going away
    unsafe_seen: set[tuple] = set()
    current = source
    findings = review(current)
    for _ in range(MAX_ROUNDS):
        counts: Counter = Counter()
        chosen = None
        for f in sorted(findings, key=Finding.sort_key):
            key = _key(f, counts)
            if f.code not in REGISTRY or key in tried or key[:2] in stuck:
                continue
            fx = fix_for(current, f, options)
            if fx is None or fx.source == current:
                tried.add(key)
                continue
            if fx.applicability == UNSAFE and not unsafe:
                tried.add(key)
                unsafe_seen.add(key)
                continue
            problem = parses(fx.source)
            if problem is not None:
                tried.add(key)
                out.notes.append(f"the {f.code} fix at line {f.line} did not parse ({problem}); not applied")
                continue
            chosen = (f, fx, key)
            break
        if chosen is None:
            break
        f, fx, key = chosen
        out.applied.append(Applied(f, fx))
        before = sum(_same(g, key) for g in findings)
        current = fx.source
        findings = review(current)
        if sum(_same(g, key) for g in findings) >= before:
            stuck.add(key[:2])   # the fix did not make its finding go away: never apply it again
    out.after = current
    out.remaining = findings
    out.skipped_unsafe = len(unsafe_seen)
    return out


def _same(f: Finding, key: tuple) -> bool:
    return f.code == key[0] and " ".join(f.source_line.split()) == key[1]


# ---- notebooks --------------------------------------------------------------------------------
CELL = "# jaxmem-cell {n}"
KEEP = "# jaxmem-keep {n}:{i}"
_CELL = re.compile(r"^# jaxmem-cell (\d+)$")
_KEEP = re.compile(r"# jaxmem-keep (\d+):(\d+)$")


class NotebookFixError(ValueError):
    """The notebook cannot be fixed as it is (not readable, or a placeholder was lost)."""


@dataclass
class Marked:
    """A notebook's code cells as one Python source: a marker line before each cell, IPython lines
    replaced by placeholders that keep the code valid and say which line they stand for."""

    nb: dict
    source: str
    originals: dict[int, list[str]]   # cell number -> its lines as written

    def locate(self, source: str) -> list[tuple[int, int]]:
        """(cell, line in cell) for each line of a marked source (0, n before the first marker)."""
        out, cell, i = [], 0, 0
        for line in source.splitlines():
            m = _CELL.match(line)
            if m:
                cell, i = int(m.group(1)), 0
                out.append((cell, 0))
                continue
            i += 1
            out.append((cell, i))
        return out


def mark(text: str) -> Marked:
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookFixError(f"not valid notebook JSON ({exc.msg} at line {exc.lineno})") from exc
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookFixError("no 'cells' list: not an nbformat 4 notebook")
    lines: list[str] = []
    originals: dict[int, list[str]] = {}
    for number, cell in enumerate(cells, 1):
        if not (isinstance(cell, dict) and cell.get("cell_type") == "code"):
            continue
        try:
            code = notebook._cell_lines(cell, number)
        except notebook.NotebookError as exc:
            raise NotebookFixError(str(exc)) from exc
        originals[number] = code
        blanked = notebook._blank_magics(code)
        if not _ok("\n".join(blanked)):
            blanked = notebook._automagics(blanked)
        if not _ok("\n".join(blanked)):
            blanked = ["" for _ in code]   # a cell that is not Python: held in place, never edited
            kept = [KEEP.format(n=number, i=i) for i in range(1, len(code) + 1)]
        else:
            kept = []
            for i, (orig, new) in enumerate(zip(code, blanked), 1):
                if orig == new:
                    kept.append(orig)
                elif new.strip() == "":
                    kept.append(KEEP.format(n=number, i=i))
                else:   # `pass` or `x = None` at the line's indentation
                    kept.append(f"{new}  {KEEP.format(n=number, i=i)}")
        lines.append(CELL.format(n=number))
        lines.extend(kept)
    return Marked(nb, "\n".join(lines) + "\n", originals)


def _ok(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _kept(source: str) -> set[tuple[int, int]]:
    return {(int(k.group(1)), int(k.group(2))) for line in source.splitlines() for k in [_KEEP.search(line)] if k}


def unmark(marked: Marked, source: str, original_text: str) -> str:
    """The notebook JSON with each changed code cell's source replaced; the rest as it was."""
    cells: dict[int, list[str]] = {}
    current: list[str] = []
    head: list[str] = []
    order: list[int] = []
    for line in source.splitlines():
        m = _CELL.match(line)
        if m:
            n = int(m.group(1))
            if n in cells:
                raise NotebookFixError(f"cell {n} appears twice after fixing")
            current = cells.setdefault(n, [])
            order.append(n)
            continue
        (current if order else head).append(line)
    if sorted(order) != sorted(marked.originals) or order != sorted(order):
        raise NotebookFixError("the cells' order changed while fixing")
    if head:
        cells[order[0]][:0] = head   # inserted above the first cell (an import): it belongs there
    restored: dict[int, list[str]] = {}
    for n, lines in cells.items():
        out = []
        for line in lines:
            k = _KEEP.search(line)
            if k:
                cell, i = int(k.group(1)), int(k.group(2))
                out.append(marked.originals[cell][i - 1])
            else:
                out.append(line)
        restored[n] = out
    wanted = _kept(marked.source)
    found = _kept(source)
    if wanted - found:
        raise NotebookFixError("a fix moved or removed a line of IPython syntax")
    nb = marked.nb
    changed = False
    for number, cell in enumerate(nb["cells"], 1):
        if number not in restored or restored[number] == marked.originals[number]:
            continue
        changed = True
        lines = restored[number]
        src = cell.get("source", "")
        ends = ("".join(src) if isinstance(src, list) else src).endswith("\n")
        text = "\n".join(lines) + ("\n" if ends else "")
        cell["source"] = text.splitlines(keepends=True) if isinstance(src, list) else text
    if not changed:
        return original_text
    return dump_like(nb, original_text)


def dump_like(nb: dict, original_text: str) -> str:
    """JSON in the original file's layout when it is one of the usual ones (nbformat's: indent 1,
    keys sorted, or keys as they were), so the diff shows only the cells that changed."""
    original = json.loads(original_text)
    for indent in (1, 2, 4, None):
        for sort in (True, False):
            text = json.dumps(original, indent=indent, sort_keys=sort, ensure_ascii=False)
            if text + "\n" == original_text or text == original_text:
                end = "\n" if original_text.endswith("\n") else ""
                return json.dumps(nb, indent=indent, sort_keys=sort, ensure_ascii=False) + end
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def fix_notebook(text: str, path: str, rules: Sequence[Rule], *, unsafe: bool = False,
                 options: Options = Options(), show_possible: bool = False) -> Outcome:
    """Fix a notebook's code cells; findings and applied fixes name their cell and line in it."""
    marked = mark(text)
    outcome = fix_source(marked.source, path, rules, unsafe=unsafe, options=options, show_possible=show_possible)
    locate_in = {"before": marked.locate(marked.source)}
    result = Outcome(path, text, text, skipped_unsafe=outcome.skipped_unsafe, notes=list(outcome.notes))
    if outcome.changed:
        try:
            result.after = unmark(marked, outcome.after, text)
        except NotebookFixError as exc:
            result.notes.append(f"fixes not applied: {exc}")
            result.remaining = _to_cells(_review(marked.source, path, rules, show_possible), locate_in["before"])
            return result
    # Each applied fix is reported where its finding was in the source it applied to.
    source = marked.source
    for a in outcome.applied:
        where = marked.locate(source)
        result.applied.append(Applied(_to_cells([a.finding], where)[0], a.fix))
        source = a.fix.source
    result.remaining = _to_cells(outcome.remaining, marked.locate(outcome.after))
    return result


def _to_cells(findings: list[Finding], where: list[tuple[int, int]]) -> list[Finding]:
    out = []
    for f in findings:
        cell, line = where[f.line - 1] if 0 < f.line <= len(where) else (None, f.line)
        out.append(replace(f, cell=cell, line=line))
    return out


def locate_notebook_finding(marked: Marked, finding: Finding) -> Finding | None:
    """A reviewed notebook finding (cell, line in cell) moved onto the marked source's lines."""
    where = marked.locate(marked.source)
    for n, (cell, line) in enumerate(where, 1):
        if cell == finding.cell and line == finding.line:
            return replace(finding, line=n, cell=None)
    return None


def annotate(findings: Sequence[Finding], text: str, *, options: Options = Options(),
             notebook_file: bool = False) -> None:
    """Set `fix_applicability` on each finding of one file that has a fix (on the file as it is)."""
    todo = [f for f in findings if f.code in REGISTRY]
    if not todo:
        return
    if notebook_file:
        try:
            marked = mark(text)
        except NotebookFixError:
            return
        for f in todo:
            g = locate_notebook_finding(marked, f)
            fx = fix_for(marked.source, g, options) if g is not None else None
            if fx is not None and fx.source != marked.source and parses(fx.source) is None:
                f.fix_applicability = fx.applicability
        return
    for f in todo:
        fx = fix_for(text, f, options)
        if fx is not None and fx.source != text and parses(fx.source) is None:
            f.fix_applicability = fx.applicability
            f.fix_edits = (fx.title, edits_between(text, fx.source))


def edits_between(before: str, after: str) -> list[tuple[int, int, str]]:
    """Whole-line edits turning `before` into `after`: (character offset, characters deleted, text
    inserted), offsets into `before` (what SARIF's replacements address)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    starts = [0]
    for line in old:
        starts.append(starts[-1] + len(line))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((starts[i1], starts[i2] - starts[i1], "".join(new[j1:j2])))
    return out
