"""Shared paths and the golden-file switch for the review tests."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"


def check_golden(path: Path, actual: str) -> None:
    """Compare with the golden file; JAXMEM_UPDATE_GOLDEN=1 rewrites it instead."""
    update = os.environ.get("JAXMEM_UPDATE_GOLDEN") == "1"
    if update:
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run with JAXMEM_UPDATE_GOLDEN=1 to create it")
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from {path} (JAXMEM_UPDATE_GOLDEN=1 rewrites it after review)"
