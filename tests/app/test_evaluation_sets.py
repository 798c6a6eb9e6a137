"""Question sets are found by name in a source checkout, or given as a file; a sealed set's report
holds figures only."""
from __future__ import annotations

from pathlib import Path

import pytest

from jaxmem.app.evaluation import format_report, set_path
from jaxmem.core.errors import UsageError


def test_named_sets_live_in_the_checkouts_benchmarks_folder():
    assert set_path("real").parts[-3:] == ("benchmarks", "questions", "real.yaml")
    assert set_path("real").is_file()


def test_an_unknown_set_names_the_valid_ones(tmp_path):
    with pytest.raises(UsageError) as err:
        set_path(str(tmp_path / "nope.yaml"))
    assert "main, heldout, fresh, real" in err.value.message


def test_a_sealed_report_prints_no_question():
    from jaxmem.app.evaluation import score_runs

    rows = [{"lang": "en", "topics": ["buffer-donation"], "ranked": ["gpu-preallocation", "buffer-donation"],
             "abstained": False, "answer_language": "en", "card_langs": {"en"}, "answer": "use donate_argnums",
             "key_facts": ["donate_argnums"], "q": "SECRET QUESTION TEXT", "split": "sealed"}]
    report = {"questions": 1, "systems": {"jaxmem": score_runs(rows)}, "sealed": True,
              "misses": [], "language_detection_accuracy": 1.0, "score_distribution": {}}
    text = format_report(report)
    assert "sealed set: aggregates only" in text and "SECRET QUESTION TEXT" not in text


def test_memory_questions_no_card_covers_are_not_counted_as_out_of_scope():
    from jaxmem.app.evaluation import score_runs

    base = {"lang": "en", "ranked": ["buffer-donation"], "answer_language": "en", "card_langs": {"en"}}
    rows = [{**base, "topics": [], "area": "uncovered-memory", "abstained": False},
            {**base, "topics": [], "area": "autodiff", "abstained": True},
            {**base, "topics": ["buffer-donation"], "area": None, "abstained": False}]
    a = score_runs(rows)["abstention"]
    assert a["recall"] == 0.5  # every question without a card, as before
    assert (a["out_of_scope"], a["out_of_scope_declined"], a["uncovered"], a["uncovered_declined"]) == (1, 1.0, 1, 0.0)


def test_the_naive_baseline_ranks_topics_by_their_best_card_file(tmp_path):
    """One vector per card file, a topic ranked by its best language version, nothing declined; the
    vectors are kept until a card changes."""
    from types import SimpleNamespace

    import numpy as np

    from jaxmem.app.evaluation import naive_rows
    from jaxmem.core.layout import CorpusLayout

    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "mini_corpus"
    words = ("preallocat", "donat")

    class Words:  # a stand-in model: a text's vector counts two word stems
        name, calls = "words", 0

        def embed_documents(self, texts):
            Words.calls += 1
            return [[t.lower().count(w) + 0.01 for w in words] for t in texts]

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    advisor = SimpleNamespace(layout=CorpusLayout(corpus), embeddings=Words(),
                              settings=SimpleNamespace(corpus_dir=corpus, data_dir=tmp_path))
    questions = [{"q": "how do I donate buffers?", "lang": "en", "topics": ["buffer-donation"]},
                 {"q": "turn preallocation off", "lang": "en", "topics": ["gpu-preallocation"]}]
    rows = naive_rows(advisor, questions)
    assert [r["ranked"][0] for r in rows] == ["buffer-donation", "gpu-preallocation"]
    assert not any(r["abstained"] for r in rows) and all(np.isfinite(r["top_dense"]) for r in rows)
    naive_rows(advisor, questions)
    assert Words.calls == 1 + 2 * len(questions)  # the card files were embedded once
