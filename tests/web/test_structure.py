"""The web front end builds its heavy objects once per process (its imports: tests/test_layers.py)."""
from __future__ import annotations

import pytest

from tests.web.helpers import SWEDISH_QUESTION, ask


@pytest.mark.slow  # rebuilds the advisor once
def test_heavy_objects_are_built_once_per_process(web_env, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from jaxmem.app.advisor import Advisor
    from jaxmem.app.webui import shared
    from tests.web.helpers import ENTRY

    built = []
    real_init = Advisor.__init__

    def counting_init(self, *args, **kwargs):
        built.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Advisor, "__init__", counting_init)
    shared.services.clear()
    for _ in range(2):  # two browser sessions, several reruns each
        at = AppTest.from_file(str(ENTRY), default_timeout=180)
        at.run()
        ask(at, SWEDISH_QUESTION)
        ask(at, "och på TPU?")
        assert not at.exception
    assert len(built) == 1
