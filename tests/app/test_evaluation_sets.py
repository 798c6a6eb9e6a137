"""Question sets are found by name in a source checkout, or given as a file; a sealed set's report
holds figures only."""
from __future__ import annotations

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
