"""Jupyter notebooks: code cells joined into one module so names flow between cells.

IPython syntax is blanked, keeping line numbers, so a finding maps back to (cell, line) exactly:
line magics (`%time`), shell lines (`!pip ...`, with `\\` continuations), assignments from them
(`x = %pwd`, `files = !ls` keep the name bound), help (`jax.jit?`), automagics written without
`%` (`timeit f(x)`), and cell magics (`%%bash`; `%%time` and friends run the rest as Python).
A cell that still does not parse is left out with a note; the other cells are reviewed.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.astutil import parse
from jaxmem.evaluators.review.logical_lines import statement_starts


class NotebookError(ValueError):
    """The file is not a readable notebook (broken JSON or not the nbformat layout)."""


@dataclass
class NotebookSource:
    source: str
    # For each line of `source` (0-based): (cell number as Jupyter counts it, 1-based, line in cell)
    line_map: list[tuple[int, int]]
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (cell, why) left out
    # The parse of `source` when load() made one: the review takes it instead of parsing the
    # whole notebook a second time (notebooks are the largest files a review reads).
    tree: ast.Module | None = field(default=None, repr=False)
    # Each code cell's lines as written (magics included), for the source line a finding shows.
    original: dict[int, list[str]] = field(default_factory=dict, repr=False)

    def source_line(self, cell: int, line: int) -> str | None:
        lines = self.original.get(cell)
        return lines[line - 1] if lines is not None and 1 <= line <= len(lines) else None

    def locate(self, line: int) -> tuple[int, int]:
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return (self.line_map[-1][0] if self.line_map else 1, line)


def mark_displayed(nb: NotebookSource) -> None:
    """Each top-level statement is marked with its cell (astutil.cell_of). Jupyter shows the value
    of a cell whose last statement is an expression not ended by `;`:
    that statement's result is displayed, not thrown away (astutil.displayed). Only notebooks:
    the same line in a script run by `python` is discarded."""
    if nb.tree is None:
        return
    last: dict[int, ast.stmt] = {}
    for stmt in nb.tree.body:
        cell = nb.locate(stmt.lineno)[0]
        last[cell] = stmt
        astutil.mark_cell(stmt, cell)
    for stmt in last.values():
        if not isinstance(stmt, ast.Expr):
            continue
        written = nb.source_line(*nb.locate(stmt.end_lineno or stmt.lineno))
        if written is not None and written.split("#", 1)[0].rstrip().endswith(";"):
            continue  # `plt.plot(x);`: the semicolon hides the value
        astutil.mark_displayed(stmt)


PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun", "%%debug")
# IPython line magics that automagic lets users write without `%` (`timeit -n 5 f(x)`).
AUTOMAGICS = frozenset({
    "timeit", "time", "prun", "pip", "conda", "cd", "ls", "pwd", "env", "load_ext", "reload_ext", "matplotlib",
    "run", "who", "whos", "reset", "debug", "history", "config", "autoreload", "aimport", "load", "pdb",
    "xmode", "precision", "store", "alias", "unalias", "bookmark", "mkdir", "rm", "cp", "mv", "cat",
})
_ASSIGN_MAGIC = re.compile(r"^(\s*)([\w.\[\], ]+?)\s*=\s*[%!]")
_AUTOMAGIC = re.compile(r"^(\s*)([A-Za-z_]\w*)(\s+\S.*)?$")
_HELP = re.compile(r"^(\s*)[\w.\[\]()]+\?{1,2}\s*$")


def _cell_lines(cell: dict, number: int) -> list[str]:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(part, str) for part in src):
        return "".join(src).splitlines()
    if isinstance(src, str):
        return src.splitlines()
    raise NotebookError(f"cell {number}: 'source' is neither text nor a list of lines: not an nbformat 4 notebook")


def _blank_magics(lines: list[str]) -> list[str]:
    if lines and lines[0].lstrip().startswith("%%"):
        # `%%time` and friends run the rest as Python; others (%%bash, %%writefile) are not Python.
        magic = lines[0].strip().split()[0]
        if magic == "%%timeit":
            return ["", *_timed_cell(lines[1:], _calls(lines[0].strip()))]
        if magic == "%%time":
            return ["", *_timed_once_cell(lines[1:])]
        if magic in PYTHON_CELL_MAGICS:
            # The rest is run as a cell of its own, so another cell magic may open it
            # (`%%capture cap` then `%%time`: the rest is timed, its output captured).
            return ["", *_blank_magics(lines[1:])]
        return ["" for _ in lines]
    if not any("%" in line or "!" in line or "?" in line for line in lines):
        return lines  # no magic, shell escape or help line can be in this cell: most cells
    out = []
    continued = False
    starts = statement_starts(lines, lambda line: line.lstrip().startswith(("%", "!")) or bool(_HELP.match(line)))
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if continued:
            # The rest of a `!cmd \` or `%magic \` line continued onto this one.
            out.append("")
            continued = stripped.rstrip().endswith("\\")
            continue
        if not starts[i]:
            # Inside a bracket or a string: `% (i, loss)` continuing a `print("..."` is Python's
            # modulo, not a magic (IPython looks for escapes only where a statement starts).
            out.append(line)
            continue
        if stripped.startswith("%time") and stripped.rstrip().endswith("\\"):
            # `%timeit f(\` over several lines: IPython hands the magic the lines joined (each
            # trailing backslash dropped); the marker call takes this line, the rest are blank.
            stripped = _joined_magic(lines, i)
            continued = True
        timed = _timed_expression(stripped)
        if timed is not None:
            # `%timeit f(x)`: kept as a call the reviewer can read (JM704: what it times), with
            # the same line; anything that is not one expression is blanked like other magics.
            out.append(f"{indent}{TIMEIT_MARKER}({timed}{_calls(stripped)})")
            continue
        timed_once = _timed_statement(stripped)
        if timed_once is not None:
            out.append(indent + timed_once)  # `%time y = f(x)`: `y = _time_magic_(f(x))`, y kept bound
            continue
        timed_into = _timed_assignment(stripped)
        if timed_into is not None:
            out.append(indent + timed_into)  # `t = %timeit -o f(x)`: `t = _timeit_magic_(f(x))`
            continue
        if stripped.startswith(("%", "!")) or _HELP.match(line):
            # Inside a block (`if ...:` then `!pip ...`) a blank line would leave the block
            # empty, a syntax error; `pass` at the same indentation keeps it valid.
            out.append(f"{indent}pass" if indent else "")
            continued = continued or stripped.rstrip().endswith("\\")
            continue
        m = _ASSIGN_MAGIC.match(line)
        if m and not _parses(stripped):
            out.append(f"{indent}{m.group(2).strip()} = None")  # `x = %pwd`: keep `x` bound
            continued = stripped.rstrip().endswith("\\")
            continue
        out.append(line)
    return out


def _joined_magic(lines: list[str], start: int) -> str:
    """A line magic continued with trailing backslashes, as IPython assembles it
    (inputtransformer2.assemble_continued_line: each backslash dropped, the parts joined by spaces)."""
    parts = [lines[start].lstrip()]
    end = start
    while parts[-1].rstrip().endswith("\\") and end + 1 < len(lines):
        end += 1
        parts.append(lines[end])
    return " ".join([p.rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])


# What a `%timeit EXPR` line becomes in the reviewed source: a call of this name around EXPR.
TIMEIT_MARKER = "_timeit_magic_"
TIMEIT_CELL_MARKER = "_timeit_cell_magic_"  # the same for the last statement of a `%%timeit` cell
# `%time STATEMENT` runs it once and prints the wall time: the same question as `%timeit` (what
# has the statement waited for when the clock stops?).
TIME_MARKER = "_time_magic_"
# A `%%time` cell of several statements is not marked: it runs once, and what its earlier
# statements waited for (a training loop that reads its loss) is most of what it times; its last
# statement is a detail. A `%%time` cell of one statement is `%time` of it (_timed_once_cell).
TIME_CELL_MARKER = "_time_cell_magic_"  # a `%%time` cell of one statement
TIMING_MAGICS = {TIMEIT_MARKER: "%timeit", TIMEIT_CELL_MARKER: "%%timeit", TIME_MARKER: "%time",
                 TIME_CELL_MARKER: "%%time"}
_TIMEIT = re.compile(r"^%timeit\s+((?:-[A-Za-z]+(?:\s+\d+)?\s+)*)(.+)$")
_TIME = re.compile(r"^%time\s+(.+)$")
_ASSIGN_TIMING = re.compile(r"^([A-Za-z_][\w.]*)\s*=\s*(%time(?:it)?\s.+)$")


def _timed_expression(stripped: str) -> str | None:
    """The expression `%timeit [-n N -r R ...] EXPR` times, when EXPR is one expression; for
    `%timeit y = f(x)` (one assignment), the assigned value: the timer stops once it is bound.
    The name is not kept bound: %timeit runs the statement in a namespace of its own."""
    m = _TIMEIT.match(stripped)
    if m is None:
        return None
    expr = m.group(2).strip()
    try:
        ast.parse(expr, mode="eval")
        return expr
    except SyntaxError:
        pass
    tree = _tree(expr)
    stmt = tree.body[0] if tree is not None and len(tree.body) == 1 else None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return ast.unparse(stmt.value)
    return None


_LOOPS = re.compile(r"(?:^|\s)-n\s*(\d+)")
_RUNS = re.compile(r"(?:^|\s)-r\s*(\d+)")


def _calls(magic_line: str) -> str:
    """`, calls=N` for a `%timeit`/`%%timeit` that fixes its loop count (`-n 10 -r 3`: 30 calls
    in all; 7 runs unless `-r` says otherwise); "" when %timeit chooses the count itself (JM704
    reads how many calls are timed: JAX lets only so many run ahead of the device)."""
    options = "".join(magic_line.split(None, 1)[1:])  # what follows the magic's name
    loops, runs = _LOOPS.search(options), _RUNS.search(options)
    if loops is None:
        return ""
    return f", calls={int(loops.group(1)) * (int(runs.group(1)) if runs else 7)}"


def _timed_assignment(stripped: str) -> str | None:
    """`t = %timeit -o f(x)` (the TimeitResult kept to compare timings) or `y = %time f(x)` (the
    value kept): the same timed expression as the bare magic, bound to the same name."""
    m = _ASSIGN_TIMING.match(stripped)
    if m is None:
        return None
    target, magic = m.group(1).strip(), m.group(2)
    if magic.startswith("%timeit"):
        timed = _timed_expression(magic)
        return f"{target} = {TIMEIT_MARKER}({timed}{_calls(magic)})" if timed is not None else None
    timed = _timed_statement(magic)  # `%time f(x)` is `_time_magic_(f(x))`; a statement is not a value
    return f"{target} = {timed}" if timed is not None and timed.startswith(f"{TIME_MARKER}(") else None


def _timed_statement(stripped: str) -> str | None:
    """`%time f(x)` or `%time y = f(x)` (one target) as the marked statement; None for anything
    else (blanked like other magics)."""
    m = _TIME.match(stripped)
    tree = _tree(m.group(1).strip()) if m else None
    if tree is None or len(tree.body) != 1:
        return None
    return _marked(tree.body[0], TIME_MARKER)


def _marked(stmt: ast.stmt, marker: str, calls: str = "") -> str | None:
    """One timed statement as the line the reviewer reads: `f(x)` as `marker(f(x))`; `y = f(x)`
    (one target) kept as it is (later cells read the name with its kind) with the marker naming
    what it bound, so JM704 reads the value through the name. None for anything else."""
    if isinstance(stmt, ast.Expr):
        return f"{marker}({ast.unparse(stmt.value)}{calls})"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = ast.unparse(stmt.targets[0])
        return f"{target} = {ast.unparse(stmt.value)}; {marker}(({target}){calls})"
    return None


def _replace_statement(body: list[str], stmt: ast.stmt, line: str) -> list[str]:
    """`body` with `stmt` written as `line` on its first line and its other lines blank: no line
    of the cell moves."""
    out = list(body)
    out[stmt.lineno - 1] = line
    for k in range(stmt.lineno, stmt.end_lineno):
        out[k] = ""
    return out


def _timed_cell(body: list[str], calls: str = "") -> list[str]:
    """A `%%timeit` cell times its whole body, which ends with its last statement:
    when that is a call (`C = loop(A, B)`, `f(x)`, also written over several lines, one argument a
    line), it is marked like a `%timeit` line so JM704 can read what the timer stops after;
    anything else is left as it is. A statement of several lines is marked on its first and the
    rest left blank: nothing follows the last statement, so no line moves."""
    tree = _tree("\n".join(body))
    last = tree.body[-1] if tree is not None and tree.body else None
    if last is None or last.col_offset != 0:
        return body
    timed = isinstance(last, ast.Expr) or isinstance(last, ast.Assign) and len(last.targets) == 1
    if not timed or not isinstance(last.value, (ast.Call, ast.Subscript)):
        return body
    return _replace_statement(body, last, _marked(last, TIMEIT_CELL_MARKER, calls))


def _timed_once_cell(body: list[str]) -> list[str]:
    """A `%%time` cell whose body is one statement (comments aside) is `%time` of that statement:
    marked like one (a statement of several lines on its first, the rest blank), so JM704 reads
    what the clock stops after. A cell of several statements is left as it is (see TIME_MARKER)."""
    tree = _tree("\n".join(body))
    if tree is None or len(tree.body) != 1 or tree.body[0].col_offset != 0:
        return body
    marked = _marked(tree.body[0], TIME_CELL_MARKER)
    if marked is None or "\n" in marked:
        return body
    return _replace_statement(body, tree.body[0], marked)


def _automagics(lines: list[str]) -> list[str]:
    """`timeit -n 5 f(x)` with automagic on: blank lines that start with a magic's name and are
    not Python (only called when the cell does not parse as it is)."""
    out = []
    for line in lines:
        m = _AUTOMAGIC.match(line)
        if m and m.group(2) in AUTOMAGICS and not _parses(line.strip()):
            out.append(f"{m.group(1)}pass" if m.group(1) else "")
        else:
            out.append(line)
    return out


def _parses(text: str) -> bool:
    return _tree(text) is not None


def _tree(text: str) -> ast.Module | None:
    try:
        return parse(text)
    except (SyntaxError, ValueError):
        return None


def blank_script(text: str) -> tuple[str, int] | None:
    """A `.py` file exported from a notebook or written as one (`# %%` cells, Colab scripts) may
    hold IPython syntax: `!pip install ...`, `%matplotlib inline`, `x = !ls`. Those lines blanked
    (line for line, so every position stays where it is), with how many were; None when the text
    has no such line. Cell magics are only recognised on a cell's first line, so a `%%` line here
    is blanked alone, not the rest of the file; a `%%timeit` line marks the last statement of its
    cell (up to the next `# %%`) as a notebook's would be."""
    lines = text.split("\n")
    prepared = [line if not line.lstrip().startswith("%%") else "" for line in lines]
    for i, line in enumerate(lines):
        if line.strip().split()[:1] == ["%%timeit"]:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("# %%")), len(lines))
            prepared[i + 1:end] = _timed_cell(lines[i + 1:end], _calls(line.strip()))
    out = _blank_magics(prepared)
    changed = sum(1 for a, b in zip(lines, out) if a != b)
    if not changed:
        return None
    return "\n".join(out), changed


def load(text: str) -> NotebookSource:
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid notebook JSON ({exc.msg} at line {exc.lineno})") from exc
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no 'cells' list: not an nbformat 4 notebook")
    original = {number: _cell_lines(cell, number) for number, cell in enumerate(cells, 1)
                if isinstance(cell, dict) and cell.get("cell_type") == "code"}
    blanked = [(number, _blank_magics(code)) for number, code in original.items()]
    whole = "\n".join(line for _n, code in blanked for line in code) + "\n"
    line_map = [(number, i) for number, code in blanked for i in range(1, len(code) + 1)]
    tree = _tree(whole)
    if tree is not None:  # the usual case: one parse, no cell needs a closer look
        return NotebookSource(whole, line_map, tree=tree, original=original)
    lines: list[str] = []
    line_map = []
    skipped: list[tuple[int, str]] = []
    for number, code in blanked:
        text_ = "\n".join(code)
        if text_.strip() and not _parses(text_):
            code = _automagics(code)
            text_ = "\n".join(code)
            if not _parses(text_):
                try:
                    parse(text_)
                except (SyntaxError, ValueError) as exc:
                    where = f"line {exc.lineno}: " if getattr(exc, "lineno", None) else ""
                    skipped.append((number, f"{where}{getattr(exc, 'msg', None) or exc}"))
                code = ["" for _ in code]
        for i, line in enumerate(code, 1):
            lines.append(line)
            line_map.append((number, i))
    # The cells that parse, joined: parsed here too, so that their statements carry their cells
    # and display marks (mark_displayed) as they do when every cell parses.
    joined = "\n".join(lines) + "\n"
    return NotebookSource(joined, line_map, skipped, tree=_tree(joined), original=original)
