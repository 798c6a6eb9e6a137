"""Where a statement may start in a cell of IPython input: a small scanner of brackets, strings and
continuations, tolerant of the non-Python lines (magics, shell escapes) a cell holds."""
from __future__ import annotations

from collections.abc import Callable


def statement_starts(lines: list[str], escape: Callable[[str], bool]) -> list[bool]:
    """For each line, whether a statement may start there: not inside an open bracket, a
    triple-quoted string or a backslash continuation of a Python line. IPython's input transformers
    look for `%`, `!` and `?` escapes on such lines only (they group the cell's tokens by logical
    line), so a `%` that opens a line inside `print("..." ...` is the modulo operator. A line taken
    for an escape (`escape(line)`) is not scanned: its text is not Python (`!echo it's`)."""
    starts = []
    depth = 0
    quote = ""  # the open triple quote, if any
    backslash = False
    for line in lines:
        start = depth == 0 and not quote and not backslash
        starts.append(start)
        stripped = line.lstrip()
        if start and escape(line):
            backslash = stripped.rstrip().endswith("\\")
            continue
        i, n = 0, len(line)
        while i < n:
            if quote:
                end = line.find(quote, i)
                if end < 0:
                    break
                quote, i = "", end + 3
                continue
            ch = line[i]
            if ch == "#":
                break
            if ch in "\"'":
                if line.startswith(ch * 3, i):
                    quote, i = ch * 3, i + 3
                    continue
                j = i + 1  # a one-line string: to its closing quote (escapes skipped) or the line's end
                while j < n and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(depth - 1, 0)
            i += 1
        backslash = not quote and line.rstrip().endswith("\\") and "#" not in line
    return starts
