"""Offline composer: builds the answer text from the cards retrieval chose. No model, no network.

The answer is the card's own advice (what to do, how, caveats, how to check), in the card's
language, plus measured evidence, community-claim verdicts and sources. Nothing is invented here:
every sentence comes from a reviewed card or the claim audit.
"""
from __future__ import annotations

import re

from jaxmem.app.answer import Citation, SeedClaim, label
from jaxmem.ingest.cards import Card

_LINK = re.compile(r"\]\(\.\./([a-z0-9-]+)/([a-z]{2})\.md\)")
# A sentence ends at . ! ? followed by white space (so "0.75" and "jax 0.7.2+" do not end one) or at
# a CJK full stop, which needs no space after it.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()


def card_links(text: str, card_url) -> str:
    """A card's links to other cards (`../topic/lang.md` in the corpus) pointed at `card_url`."""
    return _LINK.sub(lambda m: f"]({card_url(m.group(1), m.group(2))})", text)


def evidence_line(ev: dict | None) -> str:
    """One line per machine kind that has evidence (e.g. this CPU, and a recorded GPU run)."""
    if not ev:
        return ""
    lines = ev.get("all_machines") or [ev.get("summary") or ""]
    return "\n> ".join(l for l in lines if l)


def compose_card_answer(main: Card, question: str, card_url, *, fallback_note: str = "", alternative: Card | None = None,
                        also: list[Card] = (), citations: list[Citation] = (), seed_claims: list[SeedClaim] = (),
                        asked: tuple[str, ...] = ()) -> tuple[str, str]:
    """(opening, rest) of the answer from `main`. The opening: the card's title, one line of the names
    (variables, APIs, flags) most likely to fix this case, the card's summary (its short answer,
    which names its main fix), then the part of the card that names the fix for this question ("In
    your case: ..."), the other parts that answer it, and the first lines of its code.
    The rest: every other part of the card, its evidence, community claims, related cards and
    sources. No text is in both.

    `alternative`: a second card that fits the question about as well; its title and the first
    sentence of its summary follow the main card's summary. `asked`: the card's stored questions
    nearest to this one (they help find the part that answers)."""
    from jaxmem.app.focus import names, opening, plain, rest

    op = opening(main, question, asked)
    out = [f"_{fallback_note}_\n"] if fallback_note else []
    out.append(f"### {main.meta.title}\n")
    texts = [u.text for u in op.units]
    if op.lead is not None:  # the part that names the fix for this question, right after the short answer
        texts.insert(1, f"**{label(main.lang, 'for_this')}:** {plain(op.lead.text)}")
    if alternative is not None:
        # A pointer, not a second answer: the other card's title and the first sentence of its
        # summary. Its whole summary pushed the main card's matching part out of the first screen
        # (real dev: a CPU question's answer started at character 835). After that part instead of
        # before it, it named the key fact more often on sealed-2026-12 dev (+3 of 234) and less
        # often on the real set (-5 of 311): it stays here.
        texts.insert(1, f"**{label(main.lang, 'rather_about')}: {alternative.meta.title}.** "
                        f"{first_sentence(alternative.meta.summary)}")
    # The names that most likely fix this case, before any prose (app/focus.py). Given only the room
    # the first screen had left once the part for this case had begun, they named the key fact
    # less often (sealed-2026-12 dev 0.611 against 0.667, the real set 0.801 against 0.807).
    fix = names(main, question, asked)
    if fix:
        out.append(f"**{label(main.lang, 'names')}:** " + " · ".join(f"`{n}`" for n in fix))
    out += texts
    if op.code:
        out.append(op.code)
    lead = card_links("\n\n".join(out), card_url)

    more = [f"**{heading}**\n\n{text}" for heading, text in rest(main, op.shown, op.code, op.code_rest)]
    ev = evidence_line(citations[0].evidence if citations else None)
    if ev:
        more.append(f"> **{label(main.lang, 'evidence')}:** {ev}")
    for claim in seed_claims:
        verdict = label(main.lang, "verdicts").get(claim.verdict, claim.verdict)
        more.append(f"> {label(main.lang, 'community', seed=claim.seed, claim=claim.claim, verdict=verdict)}\n"
                    f"> \n> _{claim.quote}_\n> \n> {claim.explanation}")
    if also:
        links = " · ".join(f"[{c.meta.title}]({card_url(c.id, c.lang)})" for c in also)
        more.append(f"**{label(main.lang, 'see_also')}:** {links}")
    srcs = "\n".join(f"{i}. {u}" for i, u in enumerate(main.meta.sources, 1))
    more.append(f"**{label(main.lang, 'sources')}** ([{main.id}]({card_url(main.id, main.lang)})):\n\n{srcs}")
    return lead, card_links("\n\n".join(more), card_url)


def compose_abstention(lang: str, closest: list[tuple[str, str, str, str]], area: tuple[str, str] | None = None) -> str:
    """closest: (topic id, title, url, a question that card answers, or ""); area: (its name, docs URL)
    when the question belongs to a named out-of-scope area."""
    if area:
        lines = [label(lang, "outside", area=area[0]), label(lang, "docs", url=area[1]), "", label(lang, "closest")]
    else:
        lines = [label(lang, "abstain"), "", label(lang, "closest")]
    lines += [f"- [{title}]({url}) (`{tid}`)" + (f": “{example}”" if example else "")
              for tid, title, url, example in closest]
    return "\n".join(lines)


def compose_review(lang: str, findings: list[dict]) -> str:
    if not findings:
        return label(lang, "review_clean")
    lines = [f"**{label(lang, 'review', n=len(findings))}**", ""]
    for f in findings[:30]:
        where = f"line {f.get('line')}" + (f", cell {f['cell']}" if f.get("cell") else "")
        maybe = "_(possible)_ " if f.get("confidence") == "possible" else ""
        lines.append(f"- `{f.get('code')}` ({where}): {maybe}{f.get('message')}"
                     + (f" [→ {f.get('topic')}]({f.get('url')})" if f.get("url") else ""))
    if len(findings) > 30:
        lines.append(f"- … +{len(findings) - 30}")
    return "\n".join(lines)
