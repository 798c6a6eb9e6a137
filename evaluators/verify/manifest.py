"""Snippet pairs on disk: `corpus/snippets/<id>/{before.py, after.py, manifest.yaml}`."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evaluators.verify.metrics import BACKENDS, EXPECTATIONS, METRICS
from evaluators.verify.sandbox import is_denied

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


def load_pair(directory: Path, topics: set[str] | None = None) -> Pair:
    where = directory / "manifest.yaml"
    for name in ("before.py", "after.py", "manifest.yaml"):
        if not (directory / name).is_file():
            raise ManifestError(f"{directory}: missing {name} (a pair needs before.py, after.py, manifest.yaml)")
    raw = yaml.safe_load(where.read_text()) or {}
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: expected a mapping, got {type(raw).__name__}")
    known = {"id", "topic", "title", "entry", "env", "metrics"}
    unknown = set(raw) - known
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(known)}")
    pid = raw.get("id")
    if pid != directory.name:
        raise ManifestError(f"{where}: id {pid!r} must equal the folder name {directory.name!r}")
    topic = raw.get("topic")
    if topics is not None and topic not in topics:
        raise ManifestError(f"{where}: topic {topic!r} is not in topics.yaml; valid: {sorted(topics)}")
    entry = raw.get("entry")
    if entry is not None and (not isinstance(entry, dict) or set(entry) != {"function", "args"}):
        raise ManifestError(f"{where}: entry {entry!r} must be {{function: NAME, args: NAME}}")
    env = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    for name in env:
        if is_denied(name):
            raise ManifestError(f"{where}: env variable {name!r} is never passed to a snippet")
    metrics = tuple(_metric(m, where, entry) for m in raw.get("metrics") or [])
    if not metrics:
        raise ManifestError(f"{where}: declares no metrics; valid metrics: {sorted(METRICS)}")
    return Pair(id=pid, topic=topic, title=str(raw.get("title") or pid), directory=directory,
                metrics=metrics, entry=entry, env=env)


def _metric(raw: dict, where: Path, entry: dict | None) -> MetricSpec:
    name = raw.get("metric")
    if name not in METRICS:
        raise ManifestError(f"{where}: unknown metric {name!r}; valid: {sorted(METRICS)}")
    metric = METRICS[name]
    if metric.noise == "info":
        raise ManifestError(f"{where}: {name} is information only (always reported); "
                            "declare a metric that can decide a verdict")
    if metric.needs_entry and entry is None:
        raise ManifestError(f"{where}: {name} reads the compiled entry point; add entry: {{function, args}}")
    expect = raw.get("expect")
    if expect not in EXPECTATIONS:
        raise ManifestError(f"{where}: {name}: expect {expect!r}; valid: {list(EXPECTATIONS)}")
    backends = tuple(raw.get("backends") or BACKENDS)
    for b in backends:
        if b not in BACKENDS:
            raise ManifestError(f"{where}: {name}: backend {b!r}; valid: {list(BACKENDS)}")
        if b not in metric.measurable_on:
            raise ManifestError(f"{where}: {name} cannot be measured on {b}; "
                                f"it exists on {list(metric.measurable_on)} only")
    return MetricSpec(metric=name, expect=expect, backends=backends)


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
