"""Chat: ask in any language, get a cited answer in that language; follow-ups use the conversation."""
import uuid

import streamlit as st

from jaxmem.app.answer import Turn
from jaxmem.app.webui import answer_view, shared

SHOWN_QUESTION_CHARS = 3_000  # a pasted megabyte stays in the history, not on the screen

st.title("Ask about JAX memory")
st.caption("Any language. Paste code in a ``` block to have it reviewed too.")
turns: list[dict] = st.session_state.setdefault("turns", [])


def show_question(text: str) -> None:
    if len(text) <= SHOWN_QUESTION_CHARS:
        st.markdown(text)
    else:
        st.text(text[:SHOWN_QUESTION_CHARS])
        st.caption(f"... and {len(text) - SHOWN_QUESTION_CHARS:,} more characters")


def history() -> list[Turn]:
    out = []
    for t in turns:
        if t["role"] == "user":
            out.append(Turn("user", t["content"], t.get("language")))
        else:
            a = t["answer"]
            out.append(Turn("assistant", a.answer, a.answer_language, [c.card for c in a.citations]))
    return out


for t in turns:
    with st.chat_message(t["role"]):
        if t["role"] == "user":
            show_question(t["content"])
        else:
            answer_view.show_answer(t["answer"], t["id"])

question = st.chat_input("Why does JAX take 75% of my GPU memory?")
if question is not None:
    with st.chat_message("user"):
        show_question(question)
    with st.chat_message("assistant"):
        try:
            with st.spinner("Looking through the cards..."):
                ans = shared.services().ask(question, history=history())
        except Exception as exc:
            # Nothing is added to the history, so the failed question does not steer follow-ups.
            shared.show_error(exc, "answer that")
        else:
            turns.append({"role": "user", "content": question, "language": ans.language})
            turns.append({"role": "assistant", "answer": ans, "id": uuid.uuid4().hex[:12]})
            answer_view.show_answer(ans, turns[-1]["id"])

if turns and st.sidebar.button("New conversation", icon=":material/refresh:"):
    st.session_state["turns"] = []
    st.rerun()
