"""The answer's opening and its rest (app/focus.py, app/compose.py: pure functions) on real cards."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxmem.app.compose import compose_card_answer
from jaxmem.app.focus import cut, names, opening, plain, scores
from jaxmem.ingest.cards import CorpusLayout, load_card

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
LAYOUT = CorpusLayout(CORPUS)


def card(topic: str, lang: str = "en"):
    return load_card(LAYOUT.card_path(topic, lang), LAYOUT)


def url(topic, lang):
    return f"card?topic={topic}&lang={lang}"


def paragraphs(text: str) -> list[str]:
    """Blocks of text between blank lines, as a reader sees them (code blocks whole, short labels
    such as a section's heading left out)."""
    blocks, current, fenced = [], [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current).strip())
    return [b for b in blocks if len(b) > 40 and not re.fullmatch(r"```\w*\n# \.\.\. \(continued.*", b)]


def all_cards():
    return sorted((CORPUS / "cards").glob("*/*.md"))


@pytest.mark.parametrize("path", all_cards()[::7], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_cutting_a_card_loses_nothing(path):
    """Every section's pieces join back into its text: what the opening does not show is in the rest."""
    c = load_card(path, LAYOUT)
    pieces = cut(c).pieces
    for sec in c.sections:
        assert "".join(text for _, text in pieces[sec.key]) == sec.text, sec.key


QUESTIONS = [
    ("oom-debugging", "I get RESOURCE_EXHAUSTED on 2 GPUs although there is enough free memory on the cards."),
    ("gpu-preallocation", "Why does JAX take 75% of my GPU memory?"),
    ("gpu-allocator", "Do the XLA_PYTHON_CLIENT_ALLOCATOR variables work on CPU?"),
    ("host-callbacks", "Does jax.pure_callback keep jit's fast dispatch path?"),
    ("pallas-vmem", "TPUCompilerParams is gone after upgrading jax, what replaced it?"),
]


@pytest.mark.parametrize("topic,question", QUESTIONS)
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_opening_and_the_rest_repeat_nothing_and_lose_nothing(topic, question, lang):
    c = card(topic, lang)
    answer, more = compose_card_answer(c, question, url, citations=[], seed_claims=[])
    shown, rest = paragraphs(answer), paragraphs(more)
    assert shown and rest
    repeated = [p for p in shown if any(p in r or r in p for r in rest)]
    assert not repeated, repeated[:2]
    # every part of the card is in one of the two, exactly once
    both = answer + "\n" + more
    for u in cut(c).units:
        line = plain(u.text).split("\n")[0]
        line = re.sub(r"\]\(\.\./([a-z0-9-]+)/([a-z]{2})\.md\)", lambda m: f"]({url(m.group(1), m.group(2))})", line)
        assert both.count(line) == 1, (u.section, line[:80], both.count(line))


def test_the_names_line_and_the_summary_open_and_the_part_naming_the_asked_identifier_follows():
    c = card("gpu-preallocation")
    answer, _ = compose_card_answer(c, "does XLA_PYTHON_CLIENT_PREALLOCATE work on TPU?", url)
    line, body = answer.split("\n\n", 1)[1].lstrip().split("\n\n", 1)
    assert line.startswith("**Key settings and APIs:** `")
    assert body.lstrip().startswith(c.meta.summary.strip()[:60])
    case = answer.index("**In your case:**")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in answer[case:case + 400]


def test_the_names_a_summary_speaks_of_in_words_lead_even_when_the_question_names_none():
    # The question describes a symptom; the summary says in words which fix the card is about
    # (preallocation), and the line spells out the variable that does it.
    c = card("multi-process-gpu")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in c.meta.title + c.meta.summary
    q = "Two training scripts on one card: the second one dies with out of memory right away."
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in names(c, q)
    answer, _ = compose_card_answer(c, q, url)
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in answer[:800]


@pytest.mark.parametrize("lang", ["en", "ja", "sv"])
def test_the_names_line_is_in_the_first_screen_in_every_language(lang):
    c = card("buffer-donation", lang)
    answer, more = compose_card_answer(c, "jit keeps two copies of my parameters in memory during the update", url)
    assert "donate_argnums" in answer[:800]
    line = next(l for l in answer.split("\n") if l.startswith("**") and "`" in l)
    assert line not in more


def test_names_are_fixes_one_variant_each_and_not_what_the_opening_already_shows():
    for topic in ("oom-debugging", "vmap-memory", "gpu-allocator", "xla-rematerialization", "cuda-init-failures"):
        c = card(topic)
        got = names(c, "out of memory", n=50)
        assert got, topic
        bases = [re.split(r"[=(\[]", n)[0].rsplit(".", 1)[-1].lower() for n in got]
        assert len(bases) == len(set(bases)), (topic, got)  # batch_size=1, batch_size=8: one of them
        assert not [n for n in got if "/" in n or re.search(r"\.(cc|py|h)$", n) or " " in n], (topic, got)
        heads = [re.split(r"[=(\[]", n)[0] for n in got]
        assert not [h for h in heads if re.search(rf"(?<![\w.]){re.escape(h)}(?!\w)", c.meta.title + c.meta.summary)]


def test_the_part_for_this_case_is_labelled_in_the_cards_language():
    answer, _ = compose_card_answer(card("gpu-preallocation", "sv"), "Fungerar XLA_PYTHON_CLIENT_PREALLOCATE på TPU?", url)
    assert "**I ditt fall:**" in answer


def test_an_identifier_in_one_part_of_the_card_picks_that_part():
    # Every unit of this card speaks of allocators; the one naming the asked variable's value wins.
    op = opening(card("gpu-allocator"), "What does TF_GPU_ALLOCATOR=cuda_malloc_async change?")
    assert op.lead is not None and "cuda_malloc_async" in op.lead.text, op.lead


def test_a_word_every_part_has_counts_less_than_a_rare_one():
    c = card("gpu-allocator")
    found = cut(c).units[1:]
    common = scores(found, "allocator allocator allocator")
    rare = scores(found, "cuda_malloc_async")
    assert max(rare.values()) > max(common.values())


def test_the_stored_question_retrieval_found_counts_as_part_of_the_question():
    # The user's words barely meet the card's; the card's nearest stored question says it in the
    # card's own words, and the part that answers it scores higher with it.
    c = card("gpu-preallocation")
    found = cut(c).units[1:]
    asked = next(q for q in c.meta.questions if "after `import jax`" in q)
    right = next(u for u in found if "before `import jax`" in u.text)
    q = "I changed the variable but nothing happened"
    assert scores(found, q, (asked,))[right.order] > scores(found, q)[right.order]


def test_a_long_code_block_is_split_between_the_opening_and_the_rest():
    c = card("pallas-vmem")  # its first code block is longer than the opening shows
    answer, more = compose_card_answer(c, "How much VMEM does a Pallas kernel get?", url)
    block = re.search(r"```python\n.*?```", answer, re.S).group(0)
    assert "# ... (continued in the rest of the card)" in block
    continued = more.index("# ... (continued)")
    head_lines = set(block.split("\n")[1:-2]) - {""}
    tail = more[continued:more.index("```", continued)]
    assert not head_lines & set(tail.split("\n")) - {""}


def test_a_second_cards_pointer_is_one_sentence_and_leaves_room_for_the_answer():
    # When two cards fit alike the other card is named with the first sentence of its summary;
    # its whole summary pushed the CPU paragraph that answers this question past the first screen.
    q = ("Memory allocation with CPU-only: are there configuration options like the GPU memory environment "
         "variables? `XLA_PYTHON_CLIENT_ALLOCATOR=platform` doesn't get rid of `Resource exhausted` errors.")
    other = card("gpu-memory-fraction")
    answer, _ = compose_card_answer(card("gpu-allocator"), q, url, alternative=other)
    summary = other.meta.summary.strip()
    first = summary.split(". ")[0] + "."
    assert first != summary, "the test needs a summary of several sentences"
    assert f"{other.meta.title}.** {first}\n" in answer
    assert summary not in answer
    # the part for this case follows the pointer at once (it began at character 835 after the whole
    # summary; the line of names before the summary now takes about 190 of the first 800)
    after = answer[answer.index(f"{first}\n") + len(first):].lstrip()
    assert after.startswith("**In your case:** On CPU none of this applies"), answer[:1000]
    assert answer.index("On CPU none of this applies") < 900


def test_first_sentence_ends_at_a_full_stop_not_inside_a_number_or_version():
    from jaxmem.app.compose import first_sentence

    assert first_sentence("It reserves 0.75 by default (jax 0.4.32+). Lower it.") == \
        "It reserves 0.75 by default (jax 0.4.32+)."
    assert first_sentence("默认预留 0.75。调低它。") == "默认预留 0.75。"
    assert first_sentence("One sentence only") == "One sentence only"
