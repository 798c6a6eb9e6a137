"""The real corpus, the real model, the real store: answers in every card language, and the
retrieval quality floors on the held-out question set."""
from __future__ import annotations

import pytest

# The session fixture ingests the whole corpus from its shipped vectors (seconds); the questions
# are embedded by the real model.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

QUESTIONS = {
    "en": ("Why does my process show 75% of the GPU used right after importing jax?", "gpu-preallocation"),
    "sv": ("Hur undviker jag att träningsloopen väntar på värden varje steg när jag loggar förlusten?", "implicit-host-sync"),
    "uk": ("Як повторно використати буфер вхідного масиву у jax.jit, щоб не тримати дві копії параметрів?", "buffer-donation"),
    # Both cards answer this one: memory-profiling and live-arrays-cleanup each show jax.live_arrays().
    "it": ("Come posso vedere quali array occupano la memoria della GPU in questo momento?",
           ("memory-profiling", "live-arrays-cleanup")),
    "de": ("Wie verhindere ich, dass meine jit-Funktion bei jeder neuen Sequenzlänge neu kompiliert wird?", "jit-compilation"),
    "fr": ("Comment répartir les paramètres d'un modèle trop grand sur plusieurs GPU pour réduire la mémoire par appareil ?", "sharding-memory"),
    "es": ("¿Cómo detecto transferencias implícitas de NumPy al dispositivo y hago que fallen con un error?", "transfer-guard"),
    "pt": ("Como reduzir a memória de ativações no backward usando jax.checkpoint?", "gradient-checkpointing"),
    "ja": ("bfloat16 を使うとメモリはどれくらい減りますか？jax_enable_x64 を有効にすると倍になりますか？", "mixed-precision"),
    "zh": ("RESOURCE_EXHAUSTED 显存不足的错误信息怎么看？如何找出是谁占满了显存？", "oom-debugging"),
}


# Known misses, each strict: the test fails once the card is back in the top 3 (then drop the entry).
KNOWN_MISSES: dict[str, str] = {}  # lang -> why its anchor question misses (a strict xfail: it must keep missing)


@pytest.mark.parametrize("lang", [pytest.param(lang, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[lang]))
                                  if lang in KNOWN_MISSES else lang for lang in sorted(QUESTIONS)])
def test_answers_in_the_question_language_with_the_right_card(full_advisor, lang):
    question, topic = QUESTIONS[lang]
    ans = full_advisor.ask(question)
    assert ans.language == lang and ans.answer_language == lang and not ans.abstained
    accepted = {topic} if isinstance(topic, str) else set(topic)
    assert accepted & {c.card for c in ans.citations[:3]}, [c.card for c in ans.citations]
    assert ans.citations[0].language == lang and ans.citations[0].sources


def test_the_full_index_is_served_from_the_shipped_vectors(full_index):
    settings, stats = full_index
    assert stats["from_artifact"] == stats["chunks"] > 3900 and stats["embedded"] == 0


def test_searches_are_exact(full_advisor):
    """Each kind's search returns what a brute-force ranking over all its vectors returns."""
    import numpy as np

    store = full_advisor.store
    questions = ["Why does JAX take 75% of my GPU memory?", "Hur undviker jag att loopen väntar på värden?",
                 "What's the best way to cook risotto?", "donate_argnums invalid buffer error"]
    for kind in ("text", "questions", "seeds", "scope"):
        chunks = store.all_chunks(kinds=(kind,), embeddings=True)
        ids, matrix = [c.id for c in chunks], np.array([c.embedding for c in chunks])
        for q in questions:
            v = np.array(full_advisor.embeddings.embed_query(q))
            k = min(40, len(ids))
            exact = [ids[i] for i in np.argsort(-(matrix @ v), kind="stable")[:k]]
            got = [h.id for h in store.query(v.tolist(), k, kind, documents=False)]
            assert set(got) == set(exact), (kind, q)


def test_off_topic_questions_abstain(full_advisor):
    for q in ("What's the best way to cook risotto?", "Wie installiere ich CUDA-Treiber unter Ubuntu?",
              "Qual è la differenza tra vmap e pmap?"):
        assert full_advisor.ask(q).abstained, q


def test_everyday_areas_teach_the_nearest_question_rule_not_the_classifier(full_advisor):
    # Their questions are stored and searched (a question about them is declined), but the
    # classifier knows only the cards and the named JAX-adjacent areas: as extra classes they moved
    # its card ranking (README, Measured).
    classes = set(full_advisor.retriever.intent.classes)
    assert "scope:jax-installation" in classes and "gpu-preallocation" in classes
    assert not classes & {"scope:cooking-recipes", "scope:personal-finance", "scope:plotting-visualisation"}
    asked = full_advisor.retriever.store.all_chunks(kinds=("questions",))
    assert any(h.metadata.get("card") == "scope:cooking-recipes" for h in asked)


def test_retrieval_quality_carries_over_to_the_held_out_set(full_advisor):
    """Floors a little under what was measured on a set never tuned on (2026-11-30: held-out R@3
    1.0, abstention 0.925 / 3.3% declined). One whole set in the suite guards retrieval; the main
    and fresh sets (a minute each) are measurements: `jaxmem eval --set main|fresh` reports them
    with the naive baselines (docs/measurements.md has the history)."""
    from jaxmem.app.evaluation import load_questions, run_advisor, score_runs, set_path

    s = score_runs(run_advisor(full_advisor, load_questions(set_path("heldout"))))
    assert s["overall"]["recall@3"] >= 0.93, s
    assert s["card_languages"]["recall@3"] >= 0.93 and s["other_languages"]["recall@3"] >= 0.90, s
    assert s["abstention"]["recall"] >= 0.85 and s["abstention"]["on_topic_abstained"] <= 0.08, s
    assert s["answer_language_accuracy"] >= 0.95, s


def test_answers_show_the_recorded_verifier_evidence(full_advisor):
    ans = full_advisor.ask("How do I make jax.jit reuse the input buffer so my parameters are not held twice?")
    assert ans.citations[0].card == "buffer-donation"
    ev = ans.citations[0].evidence
    assert ev and ev["backend"] and ev["summary"].startswith(f"verified on {ev['backend']}, jax ")
    assert ev["summary"] in ans.more


@pytest.mark.parametrize("gap", [0.0, 1.0])
def test_two_cards_that_fit_alike_both_open_the_answer(full_advisor, monkeypatch, gap):
    """When the classifier scores the first two cards about equally, the second card's short
    answer follows the first one's summary inside the opening; otherwise it stays in the citations."""
    from dataclasses import replace

    from jaxmem.app.advisor import AMBIGUOUS_INTENT_GAP

    search = full_advisor.retriever.search
    monkeypatch.setattr(full_advisor.retriever, "search",
                        lambda *a, **kw: replace(search(*a, **kw), intent_gap=gap))
    ans = full_advisor.ask("How do I free GPU memory that JAX still holds after my loop?")
    assert not ans.abstained and len(ans.citations) > 1
    second = ans.citations[1]
    shown = f"If it is rather about: {second.title}." in ans.answer
    assert shown == (gap <= AMBIGUOUS_INTENT_GAP), ans.answer[:600]
    if shown:
        assert ans.answer.index(ans.citations[0].summary.strip()[:60]) < ans.answer.index(second.title)
