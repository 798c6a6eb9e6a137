"""Feedback and status: what users said about answers (exportable), and what this server runs on."""
import streamlit as st

from app.pages import shared

st.title("Feedback and status")

st.subheader("Feedback")
try:
    rows = shared.feedback_store().export()
except Exception as exc:
    rows = []
    shared.show_error(exc, "read the feedback")
up = sum(r["rating"] == "up" for r in rows)
st.markdown(f"{len(rows)} rated answer(s): {up} :material/thumb_up:, {len(rows) - up} :material/thumb_down:")
if rows:
    st.dataframe([{**r, "cards": ", ".join(r["cards"])} for r in rows], hide_index=True,
                 column_order=["updated", "rating", "comment", "question", "cards", "source", "answer_id"])
    st.download_button("Export CSV", shared.feedback_store().export_csv(), "jaxmem-feedback.csv", "text/csv",
                       on_click="ignore", icon=":material/download:")

st.subheader("Index")
try:
    info = shared.index_status()
except Exception as exc:
    info = None
    shared.show_error(exc, "read the index status")
if info:
    st.json(info)
st.subheader("JAX on this server")
st.json(shared.runtime())
