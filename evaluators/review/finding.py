"""The one result type every rule produces and every output format consumes."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")
# How sure the reviewer is. "sure": the semantic model proved the rule's premises (a device
# array, read on every step of a loop that trains); "possible": it had to guess one of them.
# Default output, exit status, SARIF and the pre-commit hook show the sure ones.
CONFIDENCES = ("sure", "possible")


@dataclass(slots=True)
class Finding:
    path: str
    line: int
    col: int  # 1-based, like ruff and compilers, so editors jump to the right place
    code: str
    name: str
    message: str
    severity: str
    topic: str
    fix: str
    url: str
    source_line: str = ""
    cell: int | None = None  # notebooks: 1-based index among all cells, as Jupyter shows them
    measured: dict[str, Any] = field(default_factory=dict)
    confidence: str = "sure"
    # The semantic model proved the rule's premises. Usually the same as confidence == "sure";
    # false where it guessed. A rule whose proven findings did not hold on unseen code
    # (calibration.py) reports them as possible but proven: not shown by default, yet its fix
    # stays as safe as the edit is.
    proven: bool = True
    # What a run of the code showed on this line (`--run`): {"status": "confirmed" | "not-seen",
    # "per_step": {...}, "first_step": {...}}; None when nothing was run.
    runtime: dict[str, Any] | None = None
    # Whether `jaxmem review --fix` can rewrite this finding's code: "safe" (keeps what the code
    # computes and prints: --fix applies it), "unsafe" (may change it: --unsafe-fixes), None (no fix).
    fix_applicability: str | None = None
    # That fix as edits of the file (SARIF `fixes`): (title, [(char offset, chars deleted, text
    # inserted)]); not part of the JSON contract, which carries the applicability only.
    fix_edits: tuple[str, list[tuple[int, int, str]]] | None = None

    @property
    def location(self) -> str:
        if self.cell is not None:
            return f"{self.path}:cell {self.cell}:{self.line}:{self.col}"
        return f"{self.path}:{self.line}:{self.col}"

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["fix_edits"]
        return out


@dataclass(slots=True)
class Note:
    """Something the batch skipped or could not read: reported, never fatal."""

    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}
