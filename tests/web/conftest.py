"""Web tests run the real app on the small fixture corpus (2 topics, en + sv) plus one snippet pair
and its recorded evidence, with one data directory for the whole session: Streamlit's
`cache_resource` is process-wide, so the advisor is built once, from this environment."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.web.helpers import ENTRY, HERE, MINI


@pytest.fixture(scope="session")
def web_env(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("web")
    corpus = root / "corpus"
    shutil.copytree(MINI, corpus)
    shutil.copytree(HERE / "fixtures" / "snippets", corpus / "snippets", dirs_exist_ok=True)
    shutil.copytree(HERE / "fixtures" / "evidence", corpus / "evidence")
    env = {
        "JAXMEM_CORPUS_DIR": str(corpus),
        "JAXMEM_DATA_DIR": str(root / "data"),
        "JAXMEM_EMBED_CACHE": os.environ.get("JAXMEM_EMBED_CACHE") or str(tmp_path_factory.getbasetemp() / "embed-cache"),
        "JAXMEM_VERIFY_REPEATS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import ensure_index

    ensure_index(Settings(), show_progress=False)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def app(web_env):
    """A fresh session of the real app (fresh session state, shared process-wide caches)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ENTRY), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at
