"""The web chat's entry file: `jaxmem web`, or `streamlit run app/web.py`.

One navigation over small pages; the sidebar shows what the answers rest on (index, embedding
backend, JAX and devices). Heavy objects are built once per process in `app.webui.shared`.
"""
import streamlit as st

from jaxmem.app.webui import shared

st.set_page_config(page_title="jaxmem: JAX memory advisor", page_icon=":material/memory:", layout="wide")

page = st.navigation([
    st.Page("webui/pages/chat.py", title="Chat", icon=":material/chat:", url_path="chat", default=True),
    st.Page("webui/pages/review.py", title="Review code", icon=":material/code:", url_path="review"),
    st.Page("webui/pages/status.py", title="Feedback and status", icon=":material/monitoring:", url_path="status"),
    # Where answers' card links lead; reached from those links, not listed in the menu.
    st.Page("webui/pages/card.py", title="Card", icon=":material/article:", url_path="card", visibility="hidden"),
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
