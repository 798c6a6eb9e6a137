"""What every page shares: the service layer (built once per process) and the error box.

Pages call the advisor, the reviewer and the verifier through `services()` (app/services.py,
the layer the Slack bot uses too) and nothing else; they never open the store themselves.
"""
from __future__ import annotations

import logging
import os

import streamlit as st

from jaxmem.core.errors import JaxmemError

log = logging.getLogger("jaxmem.web")


@st.cache_resource(show_spinner="Loading the knowledge base (first start only)...")
def services():
    """One service layer per process, from the settings read once here: the embedder, the store,
    the BM25 index and the language models load once, before the first user's question."""
    from jaxmem.app.services import Services
    from jaxmem.core.settings import Settings

    svc = Services(Settings())
    svc.warm()
    return svc


def advisor():
    return services().advisor


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
    return services().index_status()


def review_api():
    """The reviewer's library surface, or None (with the reason shown) when it is unavailable."""
    try:
        from jaxmem.evaluators.review import api  # the door itself, imported when the page needs it
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
