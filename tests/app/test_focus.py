"""The answer's opening (app/focus.py, pure functions) on a real card of the corpus."""
from __future__ import annotations

from pathlib import Path

from jaxmem.app.focus import opening
from jaxmem.ingest.cards import CorpusLayout, load_card

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def card(topic: str, lang: str = "en"):
    layout = CorpusLayout(CORPUS)
    return load_card(layout.card_path(topic, lang), layout)


def test_the_closest_section_alone_does_not_pull_its_units_into_the_opening():
    # Retrieval found the caveats closest; the caveats that share nothing with the question
    # (fragmentation, CPU and TPU) stay out, and the card's advice opens the answer.
    units, block = opening(card("gpu-preallocation"), "Why does JAX take 75% of my GPU memory?", {"caveats": 2.0})
    texts = [u.text for u in units]
    assert units[0].section in ("summary", "what"), texts
    assert not any("fragmentation; it makes it more likely" in t or "No effect on CPU" in t for t in texts), texts
    assert block and "XLA_PYTHON_CLIENT_PREALLOCATE" in block


def test_a_unit_that_names_the_questions_identifier_leads():
    units, _ = opening(card("gpu-preallocation"), "does XLA_PYTHON_CLIENT_PREALLOCATE work on TPU?", {})
    assert any("XLA_PYTHON_CLIENT_PREALLOCATE" in u.text for u in units)


def test_the_summary_opens_even_when_other_parts_match_the_question_better():
    # The error text matches a caveat about non-memory causes best; the card's short answer, which
    # names the fix (the memory fraction, preallocation), must still open the answer.
    q = "`FAILED_PRECONDITION: DNN library initialization failed. Look at the errors above` at my first PRNGKey call"
    units, _ = opening(card("cuda-init-failures"), q, {"caveats": 1.0})
    assert units[0].section == "summary"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" in units[0].text
    assert len(units) > 1, "the parts that match the question follow the summary"


def test_a_short_unit_that_answers_outranks_a_long_one_that_shares_common_words():
    # "Do the allocator variables work on CPU?": the answer is the short caveat saying they have
    # no effect there. A long caveat on misspelt allocator values shares more words with the
    # question ("allocator", "platform", ...) only because it is long and those words are in
    # every unit of this card; by length and word weight within the card the short one leads.
    q = ("Memory allocation with CPU-only: are there configuration options like the GPU memory environment "
         "variables when using only CPUs? Setting `XLA_PYTHON_CLIENT_ALLOCATOR=platform` doesn't help.")
    units, _ = opening(card("gpu-allocator"), q, {"caveats": 2.0})
    opening_text = "\n\n".join(u.text for u in units).lower()
    assert "no effect on cpu" in opening_text, opening_text


def test_a_second_cards_pointer_is_one_sentence_and_leaves_room_for_the_answer():
    # When two cards fit alike the other card is named with the first sentence of its summary;
    # its whole summary pushed the CPU paragraph that answers this question past the first screen.
    from jaxmem.app.compose import compose_lead

    q = ("Memory allocation with CPU-only: are there configuration options like the GPU memory environment "
         "variables? `XLA_PYTHON_CLIENT_ALLOCATOR=platform` doesn't get rid of `Resource exhausted` errors.")
    other = card("gpu-memory-fraction")
    lead = compose_lead(card("gpu-allocator"), q, {}, lambda topic, lang: f"{topic}/{lang}", alternative=other)
    summary = other.meta.summary.strip()
    first = summary.split(". ")[0] + "."
    assert first != summary, "the test needs a summary of several sentences"
    assert f"{other.meta.title}.** {first}\n" in lead
    assert summary not in lead
    assert "On CPU none of this applies" in lead[:800], lead[:900]


def test_first_sentence_ends_at_a_full_stop_not_inside_a_number_or_version():
    from jaxmem.app.compose import first_sentence

    assert first_sentence("It reserves 0.75 by default (jax 0.4.32+). Lower it.") == \
        "It reserves 0.75 by default (jax 0.4.32+)."
    assert first_sentence("默认预留 0.75。调低它。") == "默认预留 0.75。"
    assert first_sentence("One sentence only") == "One sentence only"
