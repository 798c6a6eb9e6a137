"""Cards and seed claims -> LangChain Documents (pure: no I/O beyond what it is given).

Every chunk carries card id, language and section so retrieval can collapse chunks to cards and
prefer the version in the question's language. Each chunk starts with the card title: a section
alone ("Caveats ...") says little about its topic, and the title makes it findable.
"""
from __future__ import annotations

import re

from langchain_core.documents import Document
from langchain_text_splitters import Language, MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from jaxmem.core.fences import MARKDOWN_FENCE
from jaxmem.core.layout import CorpusLayout
from jaxmem.ingest.cards import Card

CHUNK_CHARS = 1200

_header_splitter = MarkdownHeaderTextSplitter(headers_to_split_on=[("##", "heading")], strip_headers=True)
_size_splitter = RecursiveCharacterTextSplitter.from_language(
    Language.MARKDOWN, chunk_size=CHUNK_CHARS, chunk_overlap=120
)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_]+_[A-Za-z0-9_]+|[A-Z][A-Z0-9_]{3,}")


def code_keywords(block: str) -> str:
    """A code block reduced to the API names it uses. Code is identical in all ten languages, so
    embedding it ten times costs a third of ingest time and adds nothing; the names still help
    lexical matching ("donate_argnums", "jax.device_put")."""
    names = dict.fromkeys(_IDENT.findall(block))
    return "`" + " ".join(names) + "`" if names else ""


def card_documents(card: Card, layout: CorpusLayout, source: str) -> list[Document]:
    keys = dict(zip(layout.headings(card.lang), layout.section_keys))
    base = {"card": card.id, "lang": card.lang, "title": card.meta.title, "kind": "card", "source": source}
    docs = [Document(page_content=f"{card.meta.title}\n\n{card.meta.summary}", metadata={**base, "section": "summary"})]
    # Each user-style question alone, embedded the way a user's question is (`embed: query`):
    # question-to-question similarity finds the symptoms that the card's prose does not name.
    docs += [Document(page_content=q, metadata={**base, "section": "question", "part": i, "embed": "query"})
             for i, q in enumerate(card.meta.questions)]
    body = MARKDOWN_FENCE.sub(lambda m: code_keywords(m.group(0)), card.body)
    for part in _header_splitter.split_text(body):
        heading = part.metadata.get("heading")
        if heading not in keys:
            continue  # text before the first section (none in valid cards)
        for i, piece in enumerate(_size_splitter.split_text(part.page_content)):
            docs.append(Document(
                page_content=f"{card.meta.title} - {heading}\n\n{piece}",
                metadata={**base, "section": keys[heading], "part": i},
            ))
    return docs


def seed_documents(seed_id: str, lang: str, text: str, audit: list[dict], source: str) -> list[Document]:
    """One chunk per audited claim of a community seed, carrying the audit verdict.

    Claims are found by their quoted first sentence; a claim whose quote is not in the text is
    still indexed from the quote, so the audit never silently drops one.
    """
    docs = []
    for item in audit:
        if item.get("seed") != seed_id:
            continue
        quote = (item.get("quote") or "").strip()
        paragraph = next((line for line in text.splitlines() if quote and quote[:40] in line), quote)
        docs.append(Document(
            page_content=paragraph,
            metadata={
                "card": item["card"], "lang": lang, "kind": "seed", "section": "seed",
                "seed": seed_id, "claim": str(item.get("claim")), "verdict": item.get("verdict", ""),
                "title": f"{seed_id} #{item.get('claim')}", "source": source,
            },
        ))
    return docs


def scope_documents(entries: list, source: str) -> list[Document]:
    """Out-of-scope areas: a description per language (an anchor), and for JAX-adjacent areas the
    questions users ask about them, embedded as queries like a card's questions. A question closer
    to these than to any card is declined, with the area named."""
    docs = []
    for e in entries:
        # only named areas' questions train the question classifier (see app/retrieval.py _fit_intent)
        base = {"card": f"scope:{e.id}", "kind": "scope", "title": e.id, "source": source, "classify": bool(e.name)}
        docs += [Document(page_content=text.strip(), metadata={**base, "lang": lang, "section": "scope"})
                 for lang, text in e.text.items()]
        docs += [Document(page_content=q, metadata={**base, "lang": lang, "section": "question", "part": i,
                                                    "embed": "query"})
                 for lang, qs in e.questions.items() for i, q in enumerate(qs)]
    return docs
