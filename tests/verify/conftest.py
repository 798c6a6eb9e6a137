"""Fixtures for the verifier's tests: real child processes, a private data dir, small corpora."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jaxmem.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"


@pytest.fixture
def case():
    """Path of a snippet under tests/verify/cases/."""
    def get(name: str) -> Path:
        path = CASES / f"{name}.py"
        assert path.is_file(), path
        return path
    return get


@pytest.fixture(scope="session")
def baseline():
    from jaxmem.evaluators.verify.runner import run_baseline
    run = run_baseline()
    assert run.ok, run.error
    return run


@pytest.fixture
def pair_corpus(tmp_path):
    """A corpus holding only topics.yaml and the snippet folders a test writes into it."""
    corpus = tmp_path / "corpus"
    (corpus / "snippets").mkdir(parents=True)
    shutil.copy(ROOT / "corpus" / "topics.yaml", corpus / "topics.yaml")
    return corpus


@pytest.fixture
def pair_settings(tmp_path, pair_corpus):
    return Settings(data_dir=tmp_path / "data", corpus_dir=pair_corpus)


def write_pair(corpus: Path, pair_id: str, before: str, after: str, manifest: str) -> Path:
    d = corpus / "snippets" / pair_id
    d.mkdir(parents=True)
    (d / "before.py").write_text(before)
    (d / "after.py").write_text(after)
    (d / "manifest.yaml").write_text(manifest)
    return d
