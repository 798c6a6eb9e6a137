"""Review tests: deterministic card links, and the golden-file switch."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
UPDATE = os.environ.get("JAXMEM_UPDATE_GOLDEN") == "1"


@pytest.fixture(autouse=True)
def _default_card_links(monkeypatch):
    # Golden output holds card URLs: the user's own base URL must not change them.
    monkeypatch.delenv("JAXMEM_CARD_BASE_URL", raising=False)


def check_golden(path: Path, actual: str) -> None:
    """Compare with the golden file; JAXMEM_UPDATE_GOLDEN=1 rewrites it instead."""
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden file {path} is missing; run with JAXMEM_UPDATE_GOLDEN=1 to create it")
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from {path} (JAXMEM_UPDATE_GOLDEN=1 rewrites it after review)"
