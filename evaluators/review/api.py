"""The library surface: what the CLI, the advisor, the web app and Slack call.

    review_source(code)            -> list[Finding]       (pasted code)
    review_paths(["src/"])         -> ReviewResult         (files, directories, notebooks)
    review_question(text)          -> list[Finding]       (fenced code blocks in a question)
    format_text/json/sarif/markdown(findings, notes, ...)
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jaxmem.core.fences import chat_code_blocks
from jaxmem.evaluators.review import collector, dynamic, engine, inputs, notebook, parse_errors, registry, workers
from jaxmem.evaluators.review.config import DEFAULT_MAX_BYTES
from jaxmem.evaluators.review.finding import Finding, Note
from jaxmem.evaluators.review.formats import FORMATS, format_json, format_markdown, format_sarif, format_text
from jaxmem.evaluators.review.rule import Rule
from jaxmem.evaluators.review.semantic.order import importers_first
from jaxmem.evaluators.review.semantic.project import Project

__all__ = ["Finding", "Note", "ReviewError", "ReviewResult", "review_source", "review_paths", "review_question",
           "extract_code_blocks", "format_text", "format_json", "format_sarif", "format_markdown", "FORMATS"]

PARALLEL_MIN_FILES = 200  # below this, starting workers costs more than it saves


def default_rules() -> list[Rule]:
    """The rules a review runs with no --select/--ignore (what the web page and SARIF list)."""
    return registry.select([], [])


def attach_run(findings: Sequence[Finding], path: str, result: dict, *, select: Sequence[str] | None = None,
               ignore: Sequence[str] | None = None, card_url: Callable[[str], str] | None = None) -> list[Finding]:
    """Put a run's measurements on the findings they explain (`Finding.runtime`: confirmed, not seen,
    not run, not measurable) and return the measured findings it adds (JM011-JM014: per-step syncs,
    transfers and recompiles no rule flagged), which the caller adds to its list. `path`: how the
    findings name the run's script (`<pasted>`, a file given to --run)."""
    keep = {r.code for r in registry.select_measured(list(select or []), list(ignore or []))}
    return dynamic.attach(findings, path, result, card_url=card_url or card_url_factory(), keep=keep.__contains__)


def card_url_factory() -> Callable[[str], str]:
    from jaxmem.core.settings import Settings

    settings = Settings()
    # Outside the web app a card link works only under its public URL; without one, findings carry
    # the rule's fix and SARIF the card's summary (card_help), never a link that leads nowhere.
    return lambda topic: settings.public_card_url(topic) or ""


def card_help_factory() -> Callable[[str], str]:
    """The card's one-line summary per topic (English), for SARIF help and Markdown reports."""
    from jaxmem.core.layout import CorpusLayout
    from jaxmem.core.settings import Settings

    layout = CorpusLayout(Settings().corpus_dir)
    return layout.summary


class ReviewError(RuntimeError):
    """The reviewer itself failed on this source (a bug in jaxmem, not in the user's code)."""


@dataclass
class ReviewResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    files: int = 0  # files actually reviewed (parsed or attempted)
    errors: int = 0  # files the reviewer crashed on (reported as notes; the batch went on)
    hidden: int = 0  # "possible" findings left out (shown with show_possible)
    possible: list[Finding] = field(default_factory=list)  # those findings (a run may confirm them)

    @property
    def exit_code(self) -> int:
        """0 no findings, 1 findings, 2 when the reviewer failed on any file."""
        if self.errors:
            return 2
        return 1 if self.findings else 0


def shown(findings: Sequence[Finding], show_possible: bool) -> list[Finding]:
    """The findings a report shows: the sure ones, and the possible ones only on request."""
    return list(findings) if show_possible else [f for f in findings if f.confidence == "sure"]


def review_source(source: str, filename: str = "<pasted>", *, select: Sequence[str] | None = None,
                  ignore: Sequence[str] | None = None, rules: Sequence[Rule] | None = None,
                  card_url: Callable[[str], str] | None = None, show_possible: bool = False) -> list[Finding]:
    """Findings for one piece of Python source (a pasted snippet or a file's text)."""
    rules = list(rules) if rules is not None else registry.select(list(select or []), list(ignore or []))
    try:
        return shown(engine.check_source(source, filename, rules, card_url or card_url_factory()), show_possible)
    except RecursionError as exc:
        raise ReviewError(f"{filename}: too deeply nested to review") from exc
    except Exception as exc:  # a rule bug must surface as one clear error, not a stack
        raise ReviewError(f"{filename}: internal error while reviewing: {type(exc).__name__}: {exc}") from exc


def review_notebook(text: str, path: str, rules: Sequence[Rule], card_url: Callable[[str], str],
                    notes: list[Note] | None = None, project=None, max_bytes: int | None = None) -> list[Finding]:
    """Findings for a notebook's code cells; cells that are not Python become notes. `max_bytes`
    limits the code, not the file (outputs such as embedded plots do not count)."""
    try:
        nb = notebook.load(text)
    except notebook.NotebookError as exc:
        return [parse_errors.parse_error(path, SyntaxError(f"notebook {exc}"), [], card_url)]
    code_bytes = len(nb.source.encode("utf-8"))
    if max_bytes is not None and code_bytes > max_bytes:
        if notes is not None:
            notes.append(Note(path, f"{code_bytes / 1e6:.1f} MB of code cells is over the {max_bytes / 1e6:.1f} MB "
                                    f"limit (max-file-size); skipped"))
        return []
    if notes is not None:
        notes.extend(Note(path, f"cell {cell}: not Python ({why}); that cell was skipped, the others reviewed")
                     for cell, why in nb.skipped)
    notebook.mark_displayed(nb)
    findings = engine.check_source(nb.source, path, rules, card_url, notes, project, tree=nb.tree)
    for f in findings:
        f.cell, f.line = nb.locate(f.line)
        f.message = _cell_line_refs(f.message, nb, f.cell)
        written = nb.source_line(f.cell, f.line)
        if written is not None:
            f.source_line = written.strip()  # as written (`%timeit f(x)`), not as reviewed
    return findings


_LINE_REF = re.compile(r"\bline (\d+)\b")


def _cell_line_refs(message: str, nb, cell: int) -> str:
    """A message names other lines (`the loop that calls it on line 1556`) in the joined cells'
    numbering, which the user never sees: name them as the notebook does, by cell and line."""
    def sub(m: re.Match) -> str:
        c, line = nb.locate(int(m.group(1)))
        return f"line {line}" if c == cell else f"line {line} of cell {c}"
    return _LINE_REF.sub(sub, message)


def _review_one(path: str, rules: Sequence[Rule], card_url, max_bytes: int,
                project=None) -> tuple[list[Finding], list[Note]]:
    loaded = inputs.read(path, max_bytes)
    notes = [loaded.note] if loaded.note else []
    if loaded.text is None or not loaded.text.strip():
        return [], notes
    try:
        if path.endswith(".ipynb"):
            return review_notebook(loaded.text, path, rules, card_url, notes, project, max_bytes), notes
        return engine.check_source(loaded.text, path, rules, card_url, notes, project), notes
    except RecursionError:
        return [], [*notes, Note(path, INTERNAL + "too deeply nested to review; skipped")]
    except Exception as exc:  # one file must not end the batch; the exit status still says so
        return [], [*notes, Note(path, INTERNAL + f"{type(exc).__name__}: {exc}; skipped (please report)")]


INTERNAL = "internal error: "


# Worker state for the process pool: rules and the card base are sent once per worker.
_W: dict = {}
_LATER = "\0card link: set by the parent"  # a worker's findings' url, until the parent sets it


def _link_later(topic: str) -> str:
    return _LATER


def _init_worker(codes: list[str], card_url: Callable[[str], str], max_bytes: int, project) -> None:
    by_code = registry.by_code()
    _W["rules"] = [by_code[c] for c in codes]
    _W["card_url"] = card_url
    _W["max_bytes"] = max_bytes
    _W["project"] = project
    collector.settle()


def _work(paths: list[str]) -> list[tuple[list[Finding], list[Note]]]:
    if _W["project"] is not None:
        paths = importers_first(paths, _W["project"])
        _W["project"].expect(paths)
    out = []
    with collector.per_file(settled=True) as done:
        for p in paths:
            out.append(_review_one(p, _W["rules"], _W["card_url"], _W["max_bytes"], _W["project"]))
            done()
    return out


def review_paths(paths: Sequence[str], *, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
                 exclude: Sequence[str] = (), max_file_size: int = DEFAULT_MAX_BYTES, respect_gitignore: bool = True,
                 jobs: int | None = None, progress: bool | None = None, include_tests: bool = False,
                 show_possible: bool = False) -> ReviewResult:
    """Review files, directories (recursive) and notebooks; `-` reads standard input. Test files
    inside directories are skipped unless `include_tests` (files named explicitly never are).
    Possible findings are counted in `hidden` unless `show_possible`."""
    rules = registry.select(list(select or []), list(ignore or []))
    card_url = None  # built where first needed: the settings model's import is a tenth of a second
    result = ReviewResult()
    file_paths: list[str] = []
    disk = [p for p in paths if p != "-"]
    found, notes = inputs.discover(disk, list(exclude), respect_gitignore, include_tests)
    result.notes.extend(notes)
    if "-" in paths:
        loaded = inputs.decode("<stdin>", sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode())
        if loaded.note:
            result.notes.append(loaded.note)
        if loaded.text is not None and loaded.text.strip():
            card_url = card_url_factory()
            try:
                result.findings.extend(engine.check_source(loaded.text, "<stdin>", rules, card_url, result.notes))
            except Exception as exc:  # same contract as a file: a note, exit status 2
                result.notes.append(Note("<stdin>", INTERNAL + f"{type(exc).__name__}: {exc}"))
                result.errors += 1
        result.files += 1
    file_paths.extend(found)
    result.files += len(file_paths)
    # The reviewed files' module names: a call into another file of the tree is followed there.
    project = Project.of_paths(disk, file_paths)
    jobs = jobs if jobs is not None else workers.default_jobs()
    show = progress if progress is not None else (sys.stderr.isatty() and len(file_paths) >= 50)
    bar = _progress(len(file_paths), show)
    if jobs > 1 and len(file_paths) >= PARALLEL_MIN_FILES:
        batches = _batches(file_paths, jobs)
        from concurrent.futures import ProcessPoolExecutor  # only batches big enough to share

        with ProcessPoolExecutor(jobs, mp_context=workers.context(), initializer=_init_worker,
                                 initargs=([r.code for r in rules], _link_later, max_file_size, project)) as pool:
            outcomes = pool.map(_work, batches)
            # The workers have started (all at the first submit): read the card links' setting now,
            # beside them, rather than before them; their findings get their links here.
            card_url = card_url or card_url_factory()
            for outcome in outcomes:
                for findings, notes in outcome:
                    for f in findings:
                        if f.url == _LATER:
                            f.url = card_url(f.topic)
                    result.findings.extend(findings)
                    result.notes.extend(notes)
                    result.errors += sum(n.message.startswith(INTERNAL) for n in notes)
                bar.update(len(outcome))
    else:
        card_url = card_url or card_url_factory()
        file_paths = importers_first(file_paths, project)
        project.expect(file_paths)
        with collector.per_file() as done:
            for path in file_paths:
                findings, notes = _review_one(path, rules, card_url, max_file_size, project)
                result.findings.extend(findings)
                result.notes.extend(notes)
                result.errors += sum(n.message.startswith(INTERNAL) for n in notes)
                bar.update(1)
                done()
    bar.close()
    result.notes.sort(key=lambda n: n.path)  # the same report whatever the number of workers
    kept = shown(result.findings, show_possible)
    result.hidden = len(result.findings) - len(kept)
    shown_ids = {id(f) for f in kept}
    result.possible = sorted((f for f in result.findings if id(f) not in shown_ids), key=Finding.sort_key)
    result.findings = sorted(kept, key=Finding.sort_key)
    return result


def _batches(file_paths: list[str], jobs: int) -> list[list[str]]:
    """Work for the pool: the files of one folder stay together (a module and the modules it
    imports are usually neighbours, and each worker models an imported module once for itself),
    largest batches first so the last ones to finish are small."""
    chunk = max(16, len(file_paths) // (jobs * 4))
    groups: dict[str, list[str]] = {}
    for p in file_paths:
        groups.setdefault(os.path.dirname(p), []).append(p)
    batches: list[list[str]] = []
    current: list[str] = []
    for files in groups.values():  # discovery order: neighbouring folders stay neighbours
        if current and len(current) + len(files) > chunk:
            batches.append(current)
            current = []
        for i in range(0, len(files), chunk):
            part = files[i:i + chunk]
            if len(part) == chunk:
                batches.append(part)
            else:
                current.extend(part)
    if current:
        batches.append(current)
    sizes = {id(b): sum(workers.file_size(p) for p in b) for b in batches}
    return sorted(batches, key=lambda b: -sizes[id(b)])


def _progress(total: int, show: bool):
    if show:
        from tqdm import tqdm

        return tqdm(total=total, unit="file", file=sys.stderr, desc="jaxmem review", leave=False)
    return _NoBar()


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def extract_code_blocks(text: str) -> list[str]:
    """Python from a chat message: fenced blocks; else the whole text if it parses and uses jax."""
    blocks = chat_code_blocks(text)
    if blocks:
        return blocks
    stripped = text.strip()
    if ("import jax" in stripped or "from jax" in stripped) and _parses(stripped):
        return [stripped]
    return []


def _parses(src: str) -> bool:
    from jaxmem.evaluators.review.astutil import parse

    try:
        parse(src)
    except (SyntaxError, ValueError):
        return False
    return True


def review_blocks(blocks: Sequence[str], *, notes: list[str] | None = None, **kwargs) -> list[Finding]:
    """Findings for code pasted in a chat message, one block at a time (`block N` names each one).
    With `notes`, a block the reviewer fails on is a note there and the other blocks still count
    (a reviewer bug must not cost the user the answer); without, the ReviewError is raised.
    Possible findings are included, marked as such: a pasted fragment rarely shows the whole loop
    the reviewer would need to prove a premise, and the reader is there to judge them."""
    kwargs.setdefault("show_possible", True)
    findings: list[Finding] = []
    for i, block in enumerate(blocks, 1):
        name = "<pasted>" if len(blocks) == 1 else f"<pasted block {i}>"
        try:
            findings.extend(review_source(block, name, **kwargs))
        except ReviewError as exc:
            if notes is None:
                raise
            notes.append(f"code review failed for {name}: {exc}")
    return findings


def review_question(question: str, **kwargs) -> list[Finding]:
    """Findings for the code blocks pasted in a question: the one path every chat front end uses."""
    return review_blocks(extract_code_blocks(question), **kwargs)


# ---- fixes (`--fix`, the web page's "Fix and measure") ----------------------------------------------
def fix_code(source: str, name: str = "<pasted>", *, unsafe: bool = False, interval: int = 100,
             select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
             show_possible: bool = True, notebook_file: bool = False) -> dict:
    """Every fix of one piece of code (a pasted snippet, an uploaded file or notebook), nothing
    written: {"before", "after", "changed", "diff", "applied": [...], "remaining": [Finding],
    "unsafe_available", "notes", "codes"}. Pasted code shows possible findings, so they are fixed
    too (their fixes are never safe)."""
    from jaxmem.evaluators.review.fixes import session
    from jaxmem.evaluators.review.fixes.apply import NotebookFixError, Outcome, fix_notebook, fix_source
    from jaxmem.evaluators.review.fixes.base import Options

    rules = registry.select(list(select or []), list(ignore or []))
    options = Options(interval)
    try:
        if notebook_file:
            out = fix_notebook(source, name, rules, unsafe=unsafe, options=options, show_possible=show_possible)
        else:
            out = fix_source(source, name, rules, unsafe=unsafe, options=options, show_possible=show_possible)
    except NotebookFixError as exc:
        out = Outcome(name, source, source, notes=[f"not fixed: {exc}"])
    except RecursionError as exc:
        raise ReviewError(f"{name}: too deeply nested to fix") from exc
    return {"path": name, "before": out.before, "after": out.after, "changed": out.changed,
            "diff": session.diff_text([out]), "applied": [a.to_dict() for a in out.applied],
            "remaining": out.remaining, "unsafe_available": out.skipped_unsafe, "notes": out.notes,
            "codes": sorted({a.finding.code for a in out.applied})}


def measure_fix(run_before: Callable[[], dict], run_after: Callable[[], dict], codes: Sequence[str], *,
                repeats: int = 3, progress: Callable[[str], None] | None = None):
    """Run the code before and after its fixes (the callers pass the verifier's sandboxed runs: the
    reviewer never runs code) and judge what the fixes should move; returns a `FixRun`
    (`.to_dict()`, `.verdict`, and `fix_table` for its rows)."""
    from jaxmem.evaluators.review.fixes import measure

    return measure.measure(run_before, run_after, codes, repeats=repeats, progress=progress)


def fix_table(run, markdown: bool | None = None):
    """A measured fix as rows ([metric, before, after, per step, verdict], the header first), or as
    text (`markdown=False`) or Markdown (`markdown=True`)."""
    from jaxmem.evaluators.review.fixes import measure_table

    if markdown is None:
        return measure_table.table_rows(run)
    return measure_table.format_table(run, markdown=markdown)
