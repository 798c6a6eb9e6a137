"""The layers, checked on the import graph (one test module for all of them):

  front ends (app/web.py, app/pages, app/webui, app/slack, app/cli.py)
      -> app/services.py, app/advisor.py -> ingest (read side), evaluators (review, verify)
  ingest never imports app or evaluators; only ingest/store.py talks to Chroma; the reviewer is
  pure functions over source (no jax, from ingest only settings and errors); nothing imports a
  front end. Vendored third-party code (benchmarks/review/realcode/<owner>__<repo>/) is data.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import imports

ROOT = Path(__file__).resolve().parent.parent
FRONT_ENDS = ("jaxmem.app.pages", "jaxmem.app.webui", "jaxmem.app.slack", "jaxmem.app.web", "jaxmem.app.web_cli")


def sources() -> list[tuple[str, set[str]]]:
    out = []
    for top in ("app", "ingest", "evaluators"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("benchmarks/review/realcode/") and "__" in rel.split("/")[3]:
                continue  # vendored repositories
            out.append((rel, imports(path)))
    return out


SOURCES = sources()


def tops(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


@pytest.mark.parametrize("rel, mods", SOURCES, ids=[s[0] for s in SOURCES])
def test_layers(rel: str, mods: set[str]):
    if rel != "ingest/store.py":
        assert not tops(mods) & {"chromadb", "langchain_chroma"}, f"{rel}: only ingest/store.py talks to Chroma"
    if rel.startswith("ingest/"):
        assert not tops(mods) & {"app", "evaluators"}, f"{rel}: ingest is the lowest layer"
    if rel.startswith("evaluators/") and not rel.startswith(("benchmarks/questions/", "benchmarks/")):
        assert "app" not in tops(mods), f"{rel}: evaluators never import app (retrieval eval and benchmarks may)"
    if rel.startswith("evaluators/review/") and not rel.startswith("benchmarks/claims/"):
        # (claims/ holds the measurements behind rule messages: scripts that run JAX, not the reviewer)
        assert "jax" not in tops(mods), f"{rel}: the reviewer reads source, it never runs JAX"
        assert {m for m in mods if m.startswith("ingest")} <= {"jaxmem.core.settings", "jaxmem.core.errors"}, rel
    front_end = rel.startswith(("app/pages/", "app/webui/", "app/slack/")) or rel in ("app/web.py", "app/web_cli.py")
    if front_end:
        assert "jaxmem.ingest.store" not in mods, f"{rel}: front ends reach the index through the services"
    else:
        assert not {m for m in mods if m.startswith(FRONT_ENDS)}, f"{rel}: nothing imports a front end"


def test_there_is_something_to_check():
    assert len(SOURCES) > 80
