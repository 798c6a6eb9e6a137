"""The advisor on the small fixture corpus: language, citations, abstention, follow-ups, bad input."""
from __future__ import annotations

import pytest

from jaxmem.app.advisor import Advisor
from jaxmem.app.answer import Turn
from jaxmem.core.errors import UsageError
from jaxmem.ingest.pipeline import ingest


@pytest.fixture
def advisor(mini_settings, nano):
    ingest(mini_settings, embeddings=nano, show_progress=False)
    return Advisor(mini_settings, embeddings=nano)


def test_swedish_question_gets_a_swedish_answer_with_citations(advisor):
    ans = advisor.ask("Varför reserverar JAX 75 procent av grafikkortets minne direkt när programmet startar?")
    assert ans.language == "sv" and ans.answer_language == "sv" and not ans.abstained
    assert ans.citations[0].card == "gpu-preallocation" and ans.citations[0].language == "sv"
    assert ans.citations[0].sources == ["https://docs.jax.dev/en/latest/gpu_memory_allocation.html"]
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in ans.answer and "Källor" in ans.more  # sources: in the folded rest


def test_question_in_a_language_without_cards_falls_back_to_english_and_says_so(advisor):
    ans = advisor.ask("Dlaczego JAX rezerwuje 75% pamięci karty graficznej zaraz po uruchomieniu programu?")
    assert ans.language == "pl" and ans.answer_language == "en" and ans.fallback
    assert ans.citations[0].card == "gpu-preallocation"
    assert "No Polish (pl) version of this card yet" in ans.answer


def test_off_topic_question_abstains_and_offers_closest_topics(advisor):
    ans = advisor.ask("What is a good recipe for sourdough bread with a crispy crust?")
    assert ans.abstained and ans.citations == []
    assert set(ans.closest) <= {"buffer-donation", "gpu-preallocation"} and ans.closest
    assert "don't have grounded advice" in ans.answer
    # each closest topic comes with a question it answers, from the English card version offered
    card = advisor.card(ans.closest[0], "en")
    assert any(f"“{q}”" in ans.answer for q in card.meta.questions), ans.answer


def test_stored_questions_rank_cards_but_do_not_decide_abstention(advisor):
    """A card's user-style questions are a ranking of their own; the similarity used to abstain
    comes from card text only (any two questions look alike to E5, off-topic ones included)."""
    stored = "Varningen säger att donerade buffertar inte kunde användas, vad betyder det?"
    result = advisor.retriever.search(stored, "sv", k=2)
    top = result.cards[0]
    assert top.card == "buffer-donation"
    asked = [h for h in top.chunks if h.metadata["section"] == "question"]
    # searches return metadata only; the hit points at the card's own question
    assert asked and advisor.card("buffer-donation", "sv").meta.questions[asked[0].metadata["part"]] == stored
    assert asked[0].score > 0.99  # embedded as a query: a self-match
    assert result.similarity == top.dense < 0.97  # from the card's text, not the stored question
    prose = [h.score for c in result.cards for h in c.chunks if h.metadata["section"] != "question"]
    assert result.similarity == pytest.approx(max(prose))


def test_follow_up_is_answered_in_the_context_of_the_previous_turn(advisor):
    first = advisor.ask("Hur donerar jag buffertar med jax.jit så att uppdateringen inte har två kopior?")
    history = [Turn("user", first.question, first.language), Turn("assistant", first.answer, first.answer_language,
                                                                   [c.card for c in first.citations])]
    follow = advisor.ask("och med nyckelordsargument?", history=history)
    assert follow.language == "sv"
    assert follow.citations and follow.citations[0].card == "buffer-donation"


def test_seed_claim_is_shown_with_its_audit_verdict(advisor):
    ans = advisor.ask("Återanvänder JAX alltid minnet automatiskt när jag donerar buffertar?")
    assert ans.citations[0].card == "buffer-donation"
    assert [c.verdict for c in ans.seed_claims] == ["inaccurate"]
    assert "felaktigt" in ans.more


@pytest.mark.parametrize("question", ["", "   \n\t "])
def test_empty_question_is_a_usage_error(advisor, question):
    with pytest.raises(UsageError) as err:
        advisor.ask(question)
    assert "empty" in err.value.message


def test_huge_question_is_truncated_and_says_so(advisor):
    ans = advisor.ask("Why does JAX preallocate GPU memory? " + "x" * (1 << 20))
    assert any("truncated from 1,048,613 to 20,000 characters" in n for n in ans.notes)


def test_answer_contract_fields(advisor):
    d = advisor.ask("How do I donate buffers in jax.jit?").to_dict()
    assert d["version"] == 2 and "lead" not in d  # version 2: `lead` is gone, `answer` is the opening
    assert {"question", "language", "answer", "more", "citations", "abstained"} <= set(d)
    c = d["citations"][0]
    assert {"card", "title", "language", "score", "sources"} <= set(c)
    assert isinstance(c["score"], float) and c["card"] == "buffer-donation"


@pytest.mark.parametrize("question", [
    "How do I donate buffers in jax.jit?",
    "Varför reserverar JAX 75 procent av grafikkortets minne direkt när programmet startar?",
    "Återanvänder JAX alltid minnet automatiskt när jag donerar buffertar?",
])
def test_answer_and_more_repeat_no_paragraph(advisor, question):
    """`answer` is read first and `more` after it (the CLI prints both): no paragraph is in both."""
    ans = advisor.ask(question)
    paragraphs = lambda text: {p.strip() for p in text.split("\n\n") if len(p.strip()) > 40}  # noqa: E731
    assert ans.more and not paragraphs(ans.answer) & paragraphs(ans.more)
    assert not any(p in ans.more for p in paragraphs(ans.answer))
