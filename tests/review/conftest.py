"""Review tests: deterministic card links; calibration set apart where a test asks for it."""
from __future__ import annotations

import pytest

from jaxmem.evaluators.review import calibration


@pytest.fixture(autouse=True)
def _default_card_links(monkeypatch):
    # Golden output holds card URLs: the user's own base URL must not change them.
    monkeypatch.delenv("JAXMEM_PUBLIC_URL", raising=False)


@pytest.fixture
def calibration_apart(monkeypatch):
    """No rule demoted. For tests of tiers, exit status and formats that use a finding the model
    proves: whether the current record on unseen code shows that rule as sure is calibration's
    business (tests/review/test_review_rules.py checks it), and the benchmark rewrites that record."""
    monkeypatch.setattr(calibration, "demoted", lambda: {})
