"""The web front end holds no store access of its own and builds its heavy objects once."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.web.helpers import SWEDISH_QUESTION, ask

APP = Path(__file__).resolve().parents[2] / "app"
FRONT_END = [APP / "web.py", APP / "web_cli.py", *sorted((APP / "pages").glob("*.py")), *sorted((APP / "webui").glob("*.py"))]
# The advisor is the front end's only way to the index; Chroma stays behind ingest.store.
FORBIDDEN = ("chromadb", "langchain_chroma", "langchain_core.vectorstores")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_front_end_never_imports_the_vector_store():
    for path in FRONT_END:
        bad = {n for n in imported(path) if n.startswith(FORBIDDEN) or n == "ingest.store"}
        assert not bad, f"{path.relative_to(APP.parent)} imports {sorted(bad)}; go through the advisor"


@pytest.mark.slow  # rebuilds the advisor once
def test_heavy_objects_are_built_once_per_process(web_env, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.advisor import Advisor
    from app.webui import shared
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
