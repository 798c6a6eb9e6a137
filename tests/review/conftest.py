"""Review tests: deterministic card links."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _default_card_links(monkeypatch):
    # Golden output holds card URLs: the user's own base URL must not change them.
    monkeypatch.delenv("JAXMEM_PUBLIC_URL", raising=False)
