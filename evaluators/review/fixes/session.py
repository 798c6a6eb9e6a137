"""What `jaxmem review --fix / --diff` does with the files of a review: fix each file that has a
fixable finding, show the diff, write the files, and copy the run's folder with the fixed files in
it for the after-run of `--fix --run`. File work only; running code is the caller's (the CLI passes
the verifier's sandboxed run)."""
from __future__ import annotations

import difflib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from jaxmem.evaluators.review import inputs, workers
from jaxmem.evaluators.review.config import DEFAULT_MAX_BYTES
from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes import REGISTRY
from jaxmem.evaluators.review.fixes.apply import NotebookFixError, Outcome, annotate, fix_notebook, fix_source
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Options
from jaxmem.evaluators.review.rule import Rule

# The after-run copies the run's folder; past these it says so instead of copying a whole disk.
COPY_MAX_BYTES = 512 << 20
COPY_MAX_FILE = 128 << 20


class FixError(ValueError):
    """Something about the request that the user can change (said in one line)."""


def fixable_paths(findings: Sequence[Finding]) -> list[str]:
    """Files with at least one finding a fix is registered for, in report order."""
    return list(dict.fromkeys(f.path for f in findings if f.code in REGISTRY and f.path not in ("<stdin>", "-")))


def plan(findings: Sequence[Finding], rules: Sequence[Rule], *, unsafe: bool, options: Options,
         show_possible: bool, max_bytes: int = DEFAULT_MAX_BYTES,
         keep: Callable[[list[Finding]], list[Finding]] | None = None) -> list[Outcome]:
    """Fix every file that has fixable findings (nothing is written here). `keep` filters each
    re-review as the report does (a baseline)."""
    outcomes = []
    for path in fixable_paths(findings):
        loaded = inputs.read(path, max_bytes)
        if loaded.text is None:
            continue
        if path.endswith(".ipynb"):
            try:
                out = fix_notebook(loaded.text, path, rules, unsafe=unsafe, options=options,
                                   show_possible=show_possible)
            except NotebookFixError as exc:
                out = Outcome(path, loaded.text, loaded.text, notes=[f"not fixed: {exc}"])
        else:
            review = None
            if keep is not None:
                from jaxmem.evaluators.review.fixes.apply import _review

                review = (lambda p: (lambda src: keep(_review(src, p, rules, show_possible))))(path)
            out = fix_source(loaded.text, path, rules, unsafe=unsafe, options=options, show_possible=show_possible,
                             review=review)
        outcomes.append(out)
    return _links_fixed_once(outcomes)


def _links_fixed_once(outcomes: list[Outcome]) -> list[Outcome]:
    """A symbolic link to a file that is reviewed under its own name too is one file: its fixes are
    made (and counted) there, the link keeps no change of its own."""
    own = {os.path.realpath(o.path) for o in outcomes if o.changed and not os.path.islink(o.path)}
    out = []
    for o in outcomes:
        target = os.path.realpath(o.path)
        if o.changed and os.path.islink(o.path) and target in own:
            o = Outcome(o.path, o.before, o.before, notes=[f"a link to {target}, which is fixed under its own name"])
        out.append(o)
    return out


def annotate_findings(findings: Sequence[Finding], *, options: Options = Options(),
                      max_bytes: int = DEFAULT_MAX_BYTES, jobs: int = 1) -> None:
    """Mark each finding that has a fix (`fix_applicability`) on its file as it is now. Computing a
    fix parses the file again with LibCST (comments and layout kept), which costs more than the
    review itself on large files: with `jobs` > 1 the files are shared among worker processes."""
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if f.code in REGISTRY:
            by_path.setdefault(f.path, []).append(f)
    todo = [(path, mine) for path, mine in by_path.items() if path not in ("<stdin>", "-") and Path(path).is_file()]
    if jobs > 1 and len(todo) >= ANNOTATE_PARALLEL_MIN_FILES:
        from concurrent.futures import ProcessPoolExecutor

        todo.sort(key=lambda item: -workers.file_size(item[0]))  # largest first: the last to finish are small
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=workers.context()) as pool:
            marks = pool.map(_annotate_file, [(p, mine, options, max_bytes) for p, mine in todo])
            for (_path, mine), got in zip(todo, marks):
                for f, (applicability, edits) in zip(mine, got):
                    f.fix_applicability, f.fix_edits = applicability, edits
        return
    for item in todo:
        _annotate_file((*item, options, max_bytes), in_place=True)


# Below this many files a worker pool costs more to start than it saves.
ANNOTATE_PARALLEL_MIN_FILES = 4


def _annotate_file(args, in_place: bool = False) -> list[tuple]:
    path, mine, options, max_bytes = args
    loaded = inputs.read(path, max_bytes)
    if loaded.text is not None:
        annotate(mine, loaded.text, options=options, notebook_file=path.endswith(".ipynb"))
    return [] if in_place else [(f.fix_applicability, f.fix_edits) for f in mine]


def diff_text(outcomes: Sequence[Outcome]) -> str:
    """Unified diffs of what the fixes change: a notebook's per changed code cell."""
    out: list[str] = []
    for o in outcomes:
        if not o.changed:
            continue
        if o.path.endswith(".ipynb"):
            out.extend(_notebook_diff(o))
        else:
            out.extend(difflib.unified_diff(o.before.splitlines(keepends=True), o.after.splitlines(keepends=True),
                                            f"a/{os.path.normpath(o.path)}", f"b/{os.path.normpath(o.path)}"))
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
    return "".join(out)


def _notebook_diff(o: Outcome) -> list[str]:
    before, after = json.loads(o.before), json.loads(o.after)
    out: list[str] = []
    for n, (b, a) in enumerate(zip(before.get("cells", []), after.get("cells", [])), 1):
        bs, as_ = _cell_text(b), _cell_text(a)
        if bs != as_:
            out.extend(difflib.unified_diff(bs.splitlines(keepends=True), as_.splitlines(keepends=True),
                                            f"a/{o.path}:cell {n}", f"b/{o.path}:cell {n}"))
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
    return out


def _cell_text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def write(outcomes: Sequence[Outcome], max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """Write the fixed files (only those that changed); returns the problems, one line each (a file
    that cannot be written keeps its old text and says why).

    Only the reviewed files themselves are written, never another file through them: the files
    come from the review (the paths named, and the files found under the folders named, whose walk
    follows no link to a folder), and here a file that is a symbolic link is not written through
    (its target may lie anywhere; where the target is reviewed too, it is fixed under its own name),
    nor one with other hard links (they would change too), nor one that changed since it was
    reviewed (the fix was computed on the old text)."""
    problems = []
    changed = [o for o in outcomes if o.changed]
    own = {os.path.realpath(o.path) for o in changed if not os.path.islink(o.path)}
    for o in changed:
        why = _not_writable(o, own, max_bytes)
        if why == "":
            continue        # a link to a file fixed under its own name
        if why:
            problems.append(f"{o.path}: not written ({why}); its fixes are not applied")
            continue
        try:
            Path(o.path).write_text(o.after, encoding="utf-8")
        except OSError as exc:
            problems.append(f"{o.path}: not written ({exc.strerror or exc}); its fixes are not applied")
    return problems


def _not_writable(o: Outcome, own: set[str], max_bytes: int) -> str | None:
    """Why `o` must not be written (None: write it; "": skip it, nothing to say)."""
    path = o.path
    if os.path.islink(path):
        target = os.path.realpath(path)
        if target in own:
            return ""
        return (f"it is a symbolic link to {target}; a fix writes the reviewed file itself, never through a link: "
                "review and fix the target instead")
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    if st.st_nlink > 1:
        return (f"it has {st.st_nlink - 1} other hard link{'s' if st.st_nlink > 2 else ''}, which writing it would "
                "change too")
    if inputs.read(path, max(max_bytes, st.st_size)).text != o.before:
        return "it changed since it was reviewed; review it again"
    return None


def summary(outcomes: Sequence[Outcome], *, written: bool, unsafe: bool) -> str:
    applied = [a for o in outcomes for a in o.applied]
    files = sum(o.changed for o in outcomes)
    more = sum(o.skipped_unsafe for o in outcomes)
    kinds = {SAFE: sum(a.fix.applicability == SAFE for a in applied),
             UNSAFE: sum(a.fix.applicability == UNSAFE for a in applied)}
    what = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
    if applied:
        line = (f"{'Fixed' if written else 'Would fix'} {len(applied)} finding{'s' if len(applied) != 1 else ''} "
                f"({what}) in {files} file{'s' if files != 1 else ''}.")
    else:
        line = "Nothing fixed." if written else "Nothing to fix."
    if more and not unsafe:
        line += (f" {more} more fix{'es' if more != 1 else ''} available with --unsafe-fixes (they may change "
                 "what the code prints or computes: read the diff first, `--diff --unsafe-fixes`).")
    return line


def fix_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """One line per applied fix: where, the code, safe or unsafe, what it did."""
    out = []
    for o in outcomes:
        for a in o.applied:
            f = a.finding
            where = f"{f.path}:cell {f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"
            out.append(f"{where}: {f.code} [{a.fix.applicability}] {a.fix.title}")
        out.extend(f"note: {o.path}: {n}" for n in o.notes)
    return out


# ---- the after-run's folder ---------------------------------------------------------------------
def _ignore(directory: str, names: list[str]) -> list[str]:
    out = []
    for name in names:
        full = os.path.join(directory, name)
        if name in inputs.SKIP_DIRS and os.path.isdir(full):
            out.append(name)
        elif os.path.islink(full) or (os.path.isfile(full) and os.path.getsize(full) > COPY_MAX_FILE):
            out.append(name)
    return out


def folder_size(root: Path) -> int:
    total = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _ignore(directory, dirs)]
        for name in files:
            full = os.path.join(directory, name)
            if not os.path.islink(full):
                size = os.path.getsize(full)
                if size <= COPY_MAX_FILE:
                    total += size
                    if total > COPY_MAX_BYTES:
                        return total
    return total


def fixed_copy(root: Path, outcomes: Sequence[Outcome], dest: Path) -> tuple[Path, list[str]]:
    """Copy the run's folder `root` to `dest` with every fixed file under it replaced; returns the
    copy and the fixed files that lie outside the folder (the after-run does not see those)."""
    root = root.resolve()
    size = folder_size(root)
    if size > COPY_MAX_BYTES:
        raise FixError(f"{root} holds more than {COPY_MAX_BYTES >> 20} MiB; the after-run copies the run's folder "
                       "with the fixed files in it. Run it on a smaller folder, or write the fixes (--fix) and run "
                       "the fixed code yourself")
    copy = dest / root.name
    shutil.copytree(root, copy, ignore=_ignore, symlinks=False)
    outside = []
    for o in outcomes:
        if not o.changed:
            continue
        p = Path(o.path).resolve()
        if p.is_relative_to(root):
            (copy / p.relative_to(root)).write_text(o.after, encoding="utf-8")
        else:
            outside.append(o.path)
    return copy, outside
