"""Jupyter notebooks: code cells joined into one module so names flow between cells.

Magics (`%time`, `!pip`) and cell magics (`%%bash`) are blanked, keeping line numbers, so a
finding maps back to (cell, line) exactly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass


class NotebookError(ValueError):
    """The file is not a readable notebook (broken JSON or not the nbformat layout)."""


@dataclass
class NotebookSource:
    source: str
    # For each line of `source` (0-based): (cell number as Jupyter counts it, 1-based, line in cell)
    line_map: list[tuple[int, int]]

    def locate(self, line: int) -> tuple[int, int]:
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return (self.line_map[-1][0] if self.line_map else 1, line)


def _cell_lines(cell: dict) -> list[str]:
    src = cell.get("source", "")
    text = "".join(src) if isinstance(src, list) else str(src)
    return text.splitlines()


def _blank_magics(lines: list[str]) -> list[str]:
    if lines and lines[0].lstrip().startswith("%%"):
        # `%%time` and friends run the rest as Python; others (%%bash, %%writefile) are not Python.
        magic = lines[0].strip().split()[0]
        if magic in ("%%time", "%%timeit", "%%capture", "%%prun"):
            return ["", *lines[1:]]
        return ["" for _ in lines]
    out = []
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            # Inside a block (`if ...:` then `!pip ...`) a blank line would leave the block
            # empty, a syntax error; `pass` at the same indentation keeps it valid.
            indent = line[:len(line) - len(stripped)]
            out.append(f"{indent}pass" if indent else "")
        else:
            out.append(line)
    return out


def load(text: str) -> NotebookSource:
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid notebook JSON ({exc.msg} at line {exc.lineno})") from exc
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no 'cells' list: not an nbformat 4 notebook")
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        for i, line in enumerate(_blank_magics(_cell_lines(cell)), 1):
            lines.append(line)
            line_map.append((number, i))
    return NotebookSource("\n".join(lines) + "\n", line_map)
