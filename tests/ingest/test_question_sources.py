"""Card questions name the thread they came from, and no card question shares a thread (or ten
words of wording) with an evaluation question (benchmarks/questions/card_overlap.py)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from jaxmem.ingest.cards import check_corpus, load_cards

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "questions" / "card_overlap.py"
THREAD = "https://github.com/jax-ml/jax/issues/123456"


def overlap_module():
    if not SCRIPT.is_file():
        pytest.skip("benchmarks/questions/ is not in this checkout")
    spec = importlib.util.spec_from_file_location("card_overlap", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["card_overlap"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def with_sourced_question(corpus: Path, lang: str, url: str, question: str) -> None:
    path = corpus / "cards" / "buffer-donation" / f"{lang}.md"
    text = path.read_text(encoding="utf-8")
    line = "questions:\n"
    path.write_text(text.replace(line, f"{line}  - {{q: {question!r}, source: {url!r}}}\n", 1), encoding="utf-8")


def test_a_question_may_carry_its_thread_and_plain_questions_stay_valid(mini_corpus):
    with_sourced_question(mini_corpus, "en", THREAD, "Why does my donated state stay alive after the step?")
    with_sourced_question(mini_corpus, "sv", THREAD, "Varför lever mitt donerade tillstånd kvar efter steget?")
    assert [str(p) for p in check_corpus(mini_corpus)] == []
    card = next(c for c in load_cards(mini_corpus) if (c.id, c.lang) == ("buffer-donation", "en"))
    assert card.meta.questions[0] == "Why does my donated state stay alive after the step?"  # plain text for retrieval
    assert card.meta.question_sources[0] == THREAD
    assert card.meta.question_sources[1:] == [None] * (len(card.meta.questions) - 1)


@pytest.mark.parametrize("item,expected", [
    ("{q: 'Why does my donated state stay alive?', src: 'https://x.org/1'}", "questions: Value error, a question is a string or a mapping"),
    ("{q: 'Why does my donated state stay alive?', source: 'http://x.org/1'}", "question_sources: Value error, a question's source is the https URL"),
])
def test_a_malformed_question_mapping_is_reported(mini_corpus, item, expected):
    path = mini_corpus / "cards" / "buffer-donation" / "en.md"
    path.write_text(path.read_text(encoding="utf-8").replace("questions:\n", f"questions:\n  - {item}\n", 1), encoding="utf-8")
    found = [str(p) for p in check_corpus(mini_corpus)]
    assert any("en.md: " + expected in m for m in found), found


def test_every_language_names_the_english_cards_threads(mini_corpus):
    with_sourced_question(mini_corpus, "en", THREAD, "Why does my donated state stay alive after the step?")
    found = [str(p) for p in check_corpus(mini_corpus)]
    assert any("sv.md: questions: question sources differ from the English version" in m for m in found), found


def test_thread_keys_treat_one_thread_alike():
    key = overlap_module().thread_key
    assert key("https://github.com/google/jax/issues/42#issuecomment-1") == key("https://github.com/jax-ml/jax/pull/42/")
    assert key("https://github.com/Jax-ML/JAX/issues/42") == key("https://github.com/jax-ml/jax/issues/42")
    assert key("https://github.com/jax-ml/jax/issues/42") != key("https://github.com/jax-ml/jax/issues/421")


def test_the_check_finds_a_shared_thread_and_shared_wording(tmp_path):
    mod = overlap_module()
    real = yaml.safe_load((ROOT / "benchmarks/questions/real.yaml").read_text(encoding="utf-8"))
    item = next(i for i in real if i.get("url") and len(mod.words(i["q"])) >= 12)
    (tmp_path / "benchmarks" / "questions").mkdir(parents=True)
    (tmp_path / "benchmarks" / "questions" / "real.yaml").write_text(yaml.safe_dump([item]), encoding="utf-8")
    # A sealed file is read for its urls only; its questions never count.
    sealed = {"id": "s1", "q": "A sealed question about preallocation that a card happens to word exactly alike.",
              "url": "https://github.com/example/sealed/issues/7"}
    (tmp_path / "benchmarks" / "questions" / "sealed.yaml").write_text(yaml.safe_dump([sealed]), encoding="utf-8")
    card = tmp_path / "corpus" / "cards" / "buffer-donation" / "en.md"
    card.parent.mkdir(parents=True)
    card.write_text("---\n" + yaml.safe_dump({"questions": [
        {"q": "Written for the card, about donation.", "source": item["url"].replace("jax-ml/jax", "google/jax")},
        item["q"],
        {"q": sealed["q"], "source": "https://github.com/example/other/issues/1"},
        {"q": "Another one.", "source": sealed["url"] + "#issuecomment-9"},
    ]}) + "---\n", encoding="utf-8")
    overlaps, _ = mod.find_overlaps(tmp_path)
    got = {(o.kind, o.number, o.eval_file) for o in overlaps}
    assert got == {("thread", 0, "real.yaml"), ("wording", 1, "real.yaml"), ("thread", 3, "sealed.yaml")}
    assert all(o.eval_id is None for o in overlaps if o.eval_file == "sealed.yaml")


def test_no_card_question_shares_a_thread_or_wording_with_an_evaluation_question():
    overlaps, stats = overlap_module().find_overlaps(ROOT)
    assert stats["evaluation threads"] > 0
    assert [f"{o.kind}: {o.card}/{o.lang} question {o.number} ~ {o.eval_file}" for o in overlaps] == []
