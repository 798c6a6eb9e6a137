"""Optional LLM composer (off by default): rewrites the grounded answer with a chat model.

Chosen by one setting, JAXMEM_LLM=`openai/<model>` (any OpenAI-compatible endpoint: OPENAI_BASE_URL,
OPENAI_API_KEY) or `ollama/<model>` (OLLAMA_HOST). The model sees only the cards retrieval chose and
must cite them as [topic-id]; an answer citing anything else, citing nothing, failing or timing out
is discarded and the offline answer stands.
"""
from __future__ import annotations

import logging
import re

from jaxmem.app.answer import Answer
from jaxmem.core.errors import UsageError
from jaxmem.core.settings import Settings
from jaxmem.ingest.cards import Card

log = logging.getLogger(__name__)
PROVIDERS = ("openai", "ollama")
_CITE = re.compile(r"\[([a-z0-9]+(?:-[a-z0-9]+)+)\]")


def make_chat_model(settings: Settings):
    """The chat model JAXMEM_LLM names (the settings model has checked the provider)."""
    provider, _, model = (settings.llm or "").partition("/")
    if provider not in PROVIDERS or not model:
        raise UsageError(f"unknown LLM setting {settings.llm!r}; valid: openai/<model>, ollama/<model> (or unset for offline).")
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=model, base_url=settings.openai_base_url,
                          api_key=settings.secret("openai_api_key") or "not-needed", timeout=settings.llm_timeout,
                          max_retries=0, temperature=0)
    from langchain_ollama import ChatOllama

    return ChatOllama(model=model, base_url=settings.ollama_host, temperature=0,
                      client_kwargs={"timeout": settings.llm_timeout})


def build_messages(ans: Answer, cards: list[Card]) -> list[tuple[str, str]]:
    context = "\n\n".join(f"<card id=\"{c.id}\" lang=\"{c.lang}\">\n# {c.meta.title}\n{c.meta.summary}\n{c.body}\n</card>"
                          for c in cards)
    system = (
        "You are jaxmem, an advisor on JAX memory and host<->device transfers. Answer ONLY from the cards given. "
        f"Write in the language with ISO code '{ans.answer_language}'. Keep code, API names and environment "
        "variables unchanged. Cite the cards you use as [topic-id], e.g. [" + cards[0].id + "]. "
        "If the cards do not answer the question, say so. Never invent APIs, defaults or versions."
    )
    user = f"Cards:\n{context}\n\nQuestion: {ans.question}"
    return [("system", system), ("user", user)]


def llm_answer(settings: Settings, ans: Answer, cards: list[Card], model=None) -> Answer:
    if not cards:
        return ans
    try:
        model = model or make_chat_model(settings)
        reply = model.invoke(build_messages(ans, cards))
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
    except UsageError:
        raise
    except Exception as exc:  # any transport or model failure: the offline answer stands
        log.warning("LLM composer failed: %s", exc)
        ans.notes.append(f"LLM composer unavailable ({type(exc).__name__}); showing the offline answer")
        return ans
    allowed = {c.id for c in cards}
    cited = set(_CITE.findall(text))
    if not cited or not cited <= allowed:
        ans.notes.append("LLM answer discarded (it cited cards retrieval did not return); showing the offline answer"
                         if cited else "LLM answer discarded (no citations); showing the offline answer")
        return ans
    sources = "\n".join(f"- [{c.meta.title}]({settings.card_url(c.id, c.lang)})" for c in cards if c.id in cited)
    # The model's answer opens; the offline answer (the card's opening, then its rest) is folded.
    ans.more = f"{ans.answer}\n\n---\n\n{ans.more}" if ans.more else ans.answer
    ans.answer = f"{text.strip()}\n\n{sources}"
    ans.citations = [c for c in ans.citations if c.card in cited] or ans.citations
    ans.composer = f"llm:{settings.llm}"
    return ans
