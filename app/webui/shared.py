"""What every page shares: the heavy objects (built once per process) and the error box.

Pages call the advisor, the reviewer and the verifier through here and nothing else; they never
open the store themselves. Optional parts (reviewer, verifier) are imported when first used, so a
missing one disables its feature with a message instead of breaking the app.
"""
from __future__ import annotations

import logging
import os

import streamlit as st

from ingest.config import Settings
from ingest.errors import JaxmemError

log = logging.getLogger("jaxmem.web")


@st.cache_resource(show_spinner="Loading the knowledge base (first start only)...")
def advisor():
    """One advisor per process: the embedder, the store and the BM25 index load once."""
    from app.advisor import Advisor
    from ingest.pipeline import ensure_index

    settings = Settings()
    ensure_index(settings, show_progress=False)
    adv = Advisor(settings)
    adv.warm()
    # warm() builds lingua's detector, but lingua loads its n-gram models on the first detection
    # (about 10 s on 2 cores): one real question here keeps that wait off the first user.
    adv.ask("How do I stop JAX preallocating memory?")
    return adv


@st.cache_resource
def feedback_store():
    from app.feedback import FeedbackStore

    return FeedbackStore.default(Settings())


_RUNTIME_PROBE = ("import json, jax; print(json.dumps({'jax': jax.__version__, 'backend': jax.default_backend(), "
                  "'devices': [f'{d.platform}:{d.id} ({d.device_kind})' for d in jax.devices()]}))")


@st.cache_resource(show_spinner=False)
def runtime() -> dict:
    """JAX version, backend and devices as a fresh JAX process sees them (what a user's script
    gets), read once in a child: initialising a backend here would hold an accelerator's memory
    for the server's whole life."""
    import json
    import subprocess
    import sys

    try:
        # Listing devices must not grab 75% of a GPU that training jobs may be using.
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        out = subprocess.run([sys.executable, "-c", _RUNTIME_PROBE], capture_output=True, text=True,
                             timeout=120, check=True, env=env)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as exc:  # a broken accelerator plugin must not take the app down
        why = getattr(exc, "stderr", None) or str(exc)
        log.warning("reading JAX devices failed: %s", why)
        return {"jax": "?", "backend": "?", "devices": [], "error": f"{type(exc).__name__}: {why}"[-300:]}


@st.cache_data(ttl=30, show_spinner=False)
def index_status() -> dict | None:
    # Through the advisor's store, so the app holds a single Chroma client.
    return advisor().store.info()


def verify_options() -> dict:
    """Verifier limits from the environment (one definition, in the verifier's API)."""
    from evaluators.verify.api import options_from_env

    return options_from_env()


def review_api():
    """The reviewer's library surface, or None (with the reason shown) when it is unavailable."""
    try:
        from evaluators.review import api
    except ImportError as exc:
        st.error(f"The code reviewer is not available in this installation ({exc}).")
        return None
    return api


def show_error(exc: BaseException, doing: str) -> None:
    """A clear message in the page, never a traceback; the app keeps running."""
    if isinstance(exc, JaxmemError):
        st.error(f"Could not {doing}: {exc.message}" + (f"\n\n{exc.hint}" if exc.hint else ""))
        return
    log.exception("while trying to %s", doing)
    st.error(f"Could not {doing}: {type(exc).__name__}: {str(exc)[:300]}\n\n"
             "The app still works; the details are in the server log.")
