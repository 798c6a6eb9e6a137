"""How one advisor Answer looks in the chat: Markdown, cited cards, evidence, feedback."""
from __future__ import annotations

import streamlit as st

from jaxmem.app.answer import Answer
from jaxmem.app.webui import evidence, shared
from jaxmem.evaluators.verify.api import Evidence

THUMBS = {0: "down", 1: "up"}  # st.feedback("thumbs") returns 0 for down, 1 for up


def language_name(code: str) -> str:
    try:
        names = {k: v.get("name", k) for k, v in shared.advisor().layout.languages.items()}
    except Exception:  # the label is cosmetic; an unreadable languages.yaml must not hide the answer
        names = {}
    return f"{names.get(code, code)} ({code})"


def show_answer(ans: Answer, answer_id: str) -> None:
    for note in ans.notes:
        st.caption(f"Note: {note}")
    st.markdown(ans.answer)  # the part that answers this question, and the card's code
    if ans.more:
        from jaxmem.app.answer import label

        with st.expander(f":material/article: {label(ans.answer_language, 'whole_card')}"):
            st.markdown(ans.more)
    if ans.findings:
        from jaxmem.app.webui.review_view import findings_table

        with st.expander(f":material/bug_report: {len(ans.findings)} finding(s) in the pasted code"):
            findings_table(ans.findings)
    for c in ans.citations:
        with st.expander(f":material/description: {c.title} ({c.card}, {language_name(c.language)})"):
            st.markdown(c.summary)
            st.markdown(f"Card language: **{language_name(c.language)}** · relevance {c.score:.3f} · "
                        f"[open the card]({c.url})")
            if c.sources:
                st.markdown("Sources:\n" + "\n".join(f"- {s}" for s in c.sources))
            stored = Evidence({"topic": c.card, **c.evidence}) if c.evidence else None
            evidence.section(c.card, stored, key=f"verify-{answer_id}-{c.card}")
    if ans.timings_ms:
        st.caption(f"Answered in {ans.timings_ms.get('total', 0):.0f} ms · {ans.composer} composer")
    _feedback(ans, answer_id)


def _feedback(ans: Answer, answer_id: str) -> None:
    services = shared.services()
    cards = [c.card for c in ans.citations] or list(ans.closest)
    rated, saved, failed = f"fb-{answer_id}", f"fb-saved-{answer_id}", f"fb-error-{answer_id}"

    def save(comment: str) -> Exception | None:
        rating = THUMBS.get(st.session_state.get(rated))
        if rating is None:
            return None
        try:
            services.feedback(answer_id, rating, comment=comment, source="web", question=ans.question, cards=cards)
        except Exception as exc:  # shown in the page; a full disk must not end the chat
            return exc
        st.session_state[saved] = rating
        return None

    def on_rate() -> None:
        # A changed thumb keeps the comment already given.
        st.session_state[failed] = save(st.session_state.get(f"fbc-{answer_id}", ""))

    st.feedback("thumbs", key=rated, on_change=on_rate)
    error = st.session_state.pop(failed, None)
    if st.session_state.get(rated) is not None:
        with st.form(key=f"fbf-{answer_id}", border=False):
            comment = st.text_input("What was good or wrong? (optional)", key=f"fbc-{answer_id}")
            if st.form_submit_button("Send comment"):
                error = save(comment)
    if error is not None:
        shared.show_error(error, "save your feedback")
    elif st.session_state.get(saved):
        st.caption(f"Feedback saved (thumbs {st.session_state[saved]}).")
