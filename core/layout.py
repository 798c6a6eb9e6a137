"""Where the corpus lives and how it is laid out: the one place that knows both.

The corpus is package data (`jaxmem.corpus`), found through importlib.resources, so an installed
wheel and a source checkout read the same files the same way. Writers (`jaxmem corpus embed`,
`jaxmem verify --all --record`) change the corpus itself: they write into a source checkout's
`corpus/` or into a folder the user named (JAXMEM_CORPUS_DIR, --path), never into an installed
package, where the next upgrade would silently drop what they wrote.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

import yaml

from jaxmem.core.errors import UsageError


def bundled_corpus() -> Path:
    """The corpus that ships with jaxmem (a folder: pip installs packages unzipped)."""
    return Path(str(resources.files("jaxmem.corpus")))


def source_checkout(corpus_dir: Path) -> Path | None:
    """The repository root when `corpus_dir` is the `corpus/` of a jaxmem source checkout."""
    root = corpus_dir.resolve().parent
    if (root / "pyproject.toml").is_file() and (root / "app").is_dir() and (root / "benchmarks").is_dir():
        return root
    return None


def benchmarks_dir() -> Path | None:
    """The checkout's benchmarks/ (vendored inputs, question sets): not part of an installed wheel."""
    root = source_checkout(bundled_corpus())
    return root / "benchmarks" if root else None


def writable_corpus(corpus_dir: Path, what: str) -> Path:
    """`corpus_dir` when `what` may be written there; otherwise a UsageError that says where to."""
    installed = corpus_dir.resolve() == bundled_corpus().resolve() and source_checkout(corpus_dir) is None
    if installed:
        raise UsageError(
            f"{what} writes into the corpus, and the corpus at {corpus_dir} is installed package data.",
            "Copy it to a folder of your own and point at it: cp -r " f"{corpus_dir} ./corpus && "
            "JAXMEM_CORPUS_DIR=./corpus (or --path ./corpus), or run from a source checkout.")
    return corpus_dir


@dataclass(frozen=True)
class CorpusLayout:
    """The corpus's folders and its two index files (topics, languages with their headings)."""

    root: Path

    @cached_property
    def topics(self) -> dict[str, str]:
        return yaml.safe_load((self.root / "topics.yaml").read_text(encoding="utf-8"))

    @cached_property
    def _languages(self) -> dict:
        return yaml.safe_load((self.root / "languages.yaml").read_text(encoding="utf-8"))

    @property
    def section_keys(self) -> list[str]:
        return self._languages["sections"]

    @property
    def languages(self) -> dict[str, dict]:
        return self._languages["languages"]

    def headings(self, lang: str) -> list[str]:
        return self.languages[lang]["headings"]

    def card_path(self, topic: str, lang: str) -> Path:
        return self.root / "cards" / topic / f"{lang}.md"

    def summary(self, topic: str, lang: str = "en") -> str:
        """A card's one-line summary from its front matter ("" for a topic without that card)."""
        path = self.card_path(topic, lang)
        if not path.is_file():
            return ""
        text = path.read_text(encoding="utf-8")
        end = text.find("\n---\n", 4)
        try:
            meta = yaml.safe_load(text[4:end]) if text.startswith("---\n") and end > 0 else None
        except yaml.YAMLError:
            return ""  # `jaxmem corpus check` names the broken card; a report just goes without
        return str(meta.get("summary") or "") if isinstance(meta, dict) else ""
