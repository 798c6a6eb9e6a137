"""Snippet pairs on disk: `corpus/snippets/<id>/{before.py, after.py, manifest.yaml}`."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from jaxmem.ingest.schema import SchemaError, load_manifest

# Part of every snippet hash: bump it when a change in measurement makes old results stale.
PROBE_VERSION = "2"  # 2: peak RSS from the child's VmHWM, not wait4


class ManifestError(ValueError):
    """A snippet pair that cannot be verified as written."""


@dataclass(frozen=True)
class MetricSpec:
    metric: str
    expect: str
    backends: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    id: str
    topic: str
    title: str
    directory: Path
    metrics: tuple[MetricSpec, ...]
    entry: dict | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def before(self) -> Path:
        return self.directory / "before.py"

    @property
    def after(self) -> Path:
        return self.directory / "after.py"

    def snippet_hash(self) -> str:
        h = hashlib.sha256(PROBE_VERSION.encode())
        for name in ("manifest.yaml", "before.py", "after.py"):
            h.update(name.encode() + b"\0" + (self.directory / name).read_bytes() + b"\0")
        return h.hexdigest()


def _topic_ids(corpus_dir: Path) -> set[str]:
    return set(yaml.safe_load((corpus_dir / "topics.yaml").read_text()) or {})


def load_pair(directory: Path, topics: set[str]) -> Pair:
    """A pair through the corpus's one manifest schema (`ingest.schema`), so what `jaxmem corpus
    check` accepts is what runs here."""
    try:
        m = load_manifest(directory, topics)
    except SchemaError as exc:
        raise ManifestError(str(exc)) from None
    metrics = tuple(MetricSpec(c.metric, c.expect, tuple(c.backends)) for c in m.metrics)
    entry = m.entry.model_dump() if m.entry else None
    return Pair(id=m.id, topic=m.topic, title=m.title or m.id, directory=directory, metrics=metrics, entry=entry,
                env=dict(m.env))


def snippets_dir(corpus_dir: Path) -> Path:
    return corpus_dir / "snippets"


def load_pairs(corpus_dir: Path) -> dict[str, Pair]:
    """Every pair under the corpus, by id; raises on the first invalid one."""
    topics = _topic_ids(corpus_dir)
    root = snippets_dir(corpus_dir)
    if not root.is_dir():
        return {}
    return {d.name: load_pair(d, topics) for d in sorted(root.iterdir())
            if d.is_dir() and not d.name.startswith((".", "_"))}
