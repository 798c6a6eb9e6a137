"""Feedback and status: what users said about answers (exportable), and what this server runs on."""
import streamlit as st

from jaxmem.app.webui import shared

st.title("Feedback and status")

st.subheader("Feedback")
try:
    rows = shared.services().feedback_store.export()
except Exception as exc:
    rows = []
    shared.show_error(exc, "read the feedback")
up = sum(r["rating"] == "up" for r in rows)
st.markdown(f"{len(rows)} rated answer(s): {up} :material/thumb_up:, {len(rows) - up} :material/thumb_down:")
if rows:
    st.dataframe([{**r, "cards": ", ".join(r["cards"])} for r in rows], hide_index=True,
                 column_order=["updated", "rating", "comment", "question", "cards", "source", "answer_id"])
    st.download_button("Export CSV", shared.services().feedback_store.export_csv(), "jaxmem-feedback.csv", "text/csv",
                       on_click="ignore", icon=":material/download:")

st.subheader("Index")
try:
    info = shared.index_status()
except Exception as exc:
    info = False  # shown as an error below, not as "no index yet"
    shared.show_error(exc, "read the index status")
if info:
    cols = st.columns(4)
    for col, (label, key) in zip(cols, (("Cards", "cards"), ("Topics", "topics"), ("Chunks", "chunks"),
                                        ("Languages", "languages"))):
        value = info.get(key)
        col.metric(label, len(value) if isinstance(value, list) else value)
    st.markdown(f"Languages: {', '.join(info['languages'])}  \nEmbeddings: `{info.get('embedding_backend')}` "
                f"(dim {info.get('embedding_dim')})  \nLast ingest: {info.get('last_ingest') or 'unknown'}  \n"
                f"Store: {info.get('location')} (collection `{info.get('collection')}`)")
elif info is None:
    st.warning("No index yet: it is built on the first question.")
st.subheader("Verification queue")
try:
    for q in shared.services().queues():
        st.markdown(f"`{q['queue']}` on {q['where']}: {q['waiting_or_running']} waiting or running "
                    f"({q.get('slots', '?')} at a time)" + (f" · {q['note']}" if q.get("note") else ""))
except Exception as exc:
    shared.show_error(exc, "read the verification queue")
st.caption("Running your own code: " + ("on (in the sandbox)" if shared.services().user_code
                                        else "off (JAXMEM_USER_CODE=false); static review always works"))
st.subheader("JAX on this server")
rt = shared.runtime()
st.markdown(f"JAX {rt['jax']} · backend `{rt['backend']}` · devices: {', '.join(rt['devices']) or 'none'}")
if rt.get("error"):
    st.error(f"Reading the devices failed: {rt['error']}")
