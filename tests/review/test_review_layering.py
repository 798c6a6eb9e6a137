"""The reviewer's place in the layers: never a front end, and only Settings from ingest."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evaluators" / "review"
ALLOWED_INGEST = {"ingest.config"}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def test_review_imports_no_front_end_and_only_settings_from_ingest():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    for path in files:
        for mod in _imports(path):
            top = mod.split(".")[0]
            assert top != "app", f"{path.name} imports {mod}: evaluators never import app"
            if top == "ingest":
                assert mod in ALLOWED_INGEST, f"{path.name} imports {mod}; only {ALLOWED_INGEST} is allowed"
