"""The web chat's entry file: `jaxmem web`, or `streamlit run app/web.py`.

One navigation over small pages; the sidebar shows what the answers rest on (index, embedding
backend, JAX and devices). Heavy objects are built once per process in `app.webui.shared`.
"""
import sys
from pathlib import Path

# `streamlit run app/web.py` puts app/ on sys.path, not the checkout: without an installed
# package, `import app` would fail.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from app.webui import shared  # noqa: E402

st.set_page_config(page_title="jaxmem: JAX memory advisor", page_icon=":material/memory:", layout="wide")

page = st.navigation([
    st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/review.py", title="Review code", icon=":material/code:"),
    st.Page("pages/status.py", title="Feedback and status", icon=":material/monitoring:"),
])

with st.sidebar:
    st.markdown("**Knowledge base**")
    try:
        info = shared.index_status()
        if info is None:
            st.warning("No index yet.")
        else:
            st.caption(f"{info['cards']} cards on {info['topics']} topics · {len(info['languages'])} languages "
                       f"({', '.join(info['languages'])})  \nlast ingest {info.get('last_ingest') or 'unknown'}  \n"
                       f"embeddings: {info.get('embedding_backend')}")
    except Exception as exc:
        shared.show_error(exc, "open the knowledge base")
    rt = shared.runtime()
    st.caption(f"JAX {rt['jax']} · backend {rt['backend']}  \ndevices: {', '.join(rt['devices']) or 'none'}")

page.run()
