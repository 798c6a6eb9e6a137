"""The one schema of the corpus's data files besides cards: snippet manifests, the seed claim
audit, out-of-scope entries. `jaxmem corpus check` and `jaxmem verify` both read through these
models, so a manifest that passes the check is one the verifier runs (they used to disagree:
`expect: same` passed the check and failed verify, a manifest without `backends` the reverse).

The verifier's metric vocabulary lives here too (what each metric is, where it can be measured),
because a manifest is valid only in its terms; `evaluators.verify.metrics` adds how values are
judged and shown.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# One line per question, cards' and scope areas' alike. A question condensed from a real thread keeps
# its error text, and its German or Spanish version runs up to a third longer than the English.
QUESTION_CHARS = (10, 320)
BACKENDS = ("cpu", "gpu", "tpu")
Backend = Literal["cpu", "gpu", "tpu"]


class SchemaError(ValueError):
    """One problem in a data file: the file, the field and what is wrong."""

    def __init__(self, path: Path | str, field_: str, problem: str):
        self.path, self.field, self.problem = str(path), field_, problem
        super().__init__(f"{self.path}: {field_}: {problem}")


# ---- the metric vocabulary ------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    name: str
    label: str                 # words for summaries: "host->device transfers"
    unit: str                  # "count", "bytes", "chars", "seconds"
    measurable_on: tuple[str, ...] = BACKENDS
    noise: str = "exact"       # "exact", "rss" (needs a margin) or "info" (shown, never decides)
    needs_entry: bool = False  # read from memory_analysis of the manifest's entry point


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("h2d_transfers", "host->device transfers", "count"),
    Metric("implicit_h2d_transfers", "implicit host->device transfers", "count"),
    Metric("host_syncs", "host sync points", "count"),
    Metric("compile_count", "compilations", "count"),
    Metric("temp_bytes", "compiled temp memory", "bytes", needs_entry=True),
    Metric("argument_bytes", "compiled argument memory", "bytes", needs_entry=True),
    Metric("output_bytes", "compiled output memory", "bytes", needs_entry=True),
    Metric("alias_bytes", "donated (aliased) bytes", "bytes", needs_entry=True),
    Metric("hlo_chars", "compiled program size", "chars", needs_entry=True),
    Metric("per_device_bytes", "largest per-device live memory", "bytes"),
    Metric("live_bytes", "live array memory at exit", "bytes"),
    Metric("peak_rss", "peak RSS", "bytes", noise="rss"),
    Metric("wall_time", "wall time", "seconds", noise="info"),
    Metric("device_peak_bytes", "device peak memory", "bytes", measurable_on=("gpu", "tpu")),
    Metric("device_reserved_bytes", "device memory reserved", "bytes", measurable_on=("gpu", "tpu")),
    # The transfer guard never fires for device->host on CPU: fetching from CPU is always allowed.
    Metric("d2h_transfers", "device->host transfers", "count", measurable_on=("gpu", "tpu")),
)}
EXPECTATIONS = ("increase", "decrease")

# Names a snippet never receives, even when its manifest asks: secrets, and the variables that
# silence the C++ log the transfer count is read from (TF_CPP_MIN_LOG_LEVEL>=2, JAX_LOGGING_LEVEL=ERROR).
DENIED_SUBSTRINGS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE")
DENIED_PREFIXES = ("SLACK_", "OPENAI_", "AWS_", "ANTHROPIC_", "AZURE_", "GOOGLE_", "HF_TOKEN", "GITHUB_")
LOG_HIDING = frozenset({"TF_CPP_MIN_LOG_LEVEL", "JAX_LOGGING_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE"})


def is_denied(name: str) -> bool:
    upper = name.upper()
    return upper in LOG_HIDING or upper.startswith(DENIED_PREFIXES) or any(p in upper for p in DENIED_SUBSTRINGS)


# ---- snippet manifests ----------------------------------------------------------------------------
class EntryPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    function: str = Field(min_length=1)  # a module-level jitted function of the snippet
    args: str = Field(min_length=1)      # a zero-argument function returning its example arguments


class MetricClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str
    expect: Literal["increase", "decrease"]
    backends: list[Backend] = Field(min_length=1)  # where the claim is made (say it: no default)

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in METRICS:
            raise ValueError(f"unknown metric {v!r}; valid: {', '.join(sorted(METRICS))}")
        if METRICS[v].noise == "info":
            raise ValueError(f"{v} is information only (always reported); declare a metric that can decide a verdict")
        return v

    @model_validator(mode="after")
    def _measurable(self) -> MetricClaim:
        where = METRICS[self.metric].measurable_on
        bad = [b for b in self.backends if b not in where]
        if bad:
            raise ValueError(f"{self.metric} cannot be measured on {', '.join(bad)}; it exists on {', '.join(where)} only")
        return self


class SnippetManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    topic: str
    title: str = ""
    entry: EntryPoint | None = None
    env: dict[str, str] = Field(default_factory=dict)
    metrics: list[MetricClaim] = Field(min_length=1)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v):
        v = v or {}
        if not isinstance(v, dict):
            raise ValueError("must be a mapping of variable names to values")
        for name in v:
            if is_denied(str(name)):
                raise ValueError(f"variable {name!r} is never passed to a snippet (secrets and log-hiding variables)")
        return {str(k): str(val) for k, val in v.items()}

    @model_validator(mode="after")
    def _entry(self) -> SnippetManifest:
        needs = [m.metric for m in self.metrics if METRICS[m.metric].needs_entry]
        if needs and self.entry is None:
            raise ValueError(f"{', '.join(needs)} read(s) the compiled entry point; add entry: {{function, args}}")
        return self


def _validated(model, data, path: Path, prefix: str = ""):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = prefix + ".".join(str(p) for p in err["loc"]) if err["loc"] else prefix.rstrip(".") or "file"
        problem = err["msg"].removeprefix("Value error, ")
        if err["type"] != "value_error" and isinstance(err.get("input"), (str, int, float)):
            problem += f" (got {err['input']!r})"  # the bad value, next to the valid choices
        raise SchemaError(path, where or "file", problem) from None


def safe_load(text: str):
    """yaml.safe_load, with libyaml's C parser where PyYAML has it: the pure-Python one took 1.1 s
    for the out-of-scope areas and 5 ms per card, on the path of a first answer."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _yaml(path: Path):
    try:
        return safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SchemaError(path, "yaml", str(exc).splitlines()[0]) from None
    except UnicodeDecodeError:
        raise SchemaError(path, "file", "not UTF-8") from None


def load_manifest(directory: Path, topics: set[str]) -> SnippetManifest:
    """The manifest of a snippet pair folder, checked: files present, schema, id = folder, topic known."""
    for name in ("before.py", "after.py", "manifest.yaml"):
        if not (directory / name).is_file():
            raise SchemaError(directory / name, "file", "missing (a pair needs before.py, after.py, manifest.yaml)")
    path = directory / "manifest.yaml"
    raw = _yaml(path)
    if not isinstance(raw, dict):
        raise SchemaError(path, "file", f"expected a mapping, got {type(raw).__name__}")
    manifest = _validated(SnippetManifest, raw, path)
    if manifest.id != directory.name:
        raise SchemaError(path, "id", f"{manifest.id!r} must equal the folder name {directory.name!r}")
    if manifest.topic not in topics:
        raise SchemaError(path, "topic", f"unknown topic id {manifest.topic!r}; see corpus/topics.yaml")
    return manifest


# ---- the seed claim audit -------------------------------------------------------------------------
class AuditClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: str
    claim: str
    quote: str = Field(min_length=3)
    verdict: Literal["accurate", "needs-caveat", "inaccurate", "not-verifiable"]
    card: str
    explanation: dict[str, str]

    @field_validator("claim", "seed", mode="before")
    @classmethod
    def _text(cls, v):
        return str(v)

    @field_validator("explanation")
    @classmethod
    def _english(cls, v: dict[str, str]) -> dict[str, str]:
        if not str(v.get("en", "")).strip():
            raise ValueError("needs an English explanation (en)")
        return v


def _each(items, check, problems: list | None):
    """Apply `check` to every item; with `problems`, collect the errors and go on (corpus check),
    without it, raise the first (loading for use)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(check(i, item))
        except SchemaError as exc:
            if problems is None:
                raise
            problems.append(exc)
    return out


def load_audit(path: Path, seeds: set[str], topics: set[str], problems: list | None = None) -> list[AuditClaim]:
    raw = _yaml(path) or []
    if isinstance(raw, dict):
        raw = raw.get("claims", [])
    if not isinstance(raw, list):
        raise SchemaError(path, "file", "expected a list of claims")

    def check(i, item):
        claim = _validated(AuditClaim, item, path, f"claims[{i}].")
        if claim.seed not in seeds:
            raise SchemaError(path, f"claims[{i}].seed", f"unknown seed {claim.seed!r}; seeds: {', '.join(sorted(seeds))}")
        if claim.card not in topics:
            raise SchemaError(path, f"claims[{i}].card", f"unknown topic id {claim.card!r}")
        return claim

    return _each(raw, check, problems)


# ---- out-of-scope entries -------------------------------------------------------------------------
class ScopeEntry(BaseModel):
    """An area outside jaxmem's scope: a description per card language (an anchor retrieval compares
    questions with), for JAX-adjacent areas a name per language and the documentation that covers
    it (the refusal names the area and links its docs), and questions users ask about it in every
    language (matched like a card's questions, so a question that belongs to the area is recognised
    and declined; everyday areas carry questions without a name)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    text: dict[str, str]
    name: dict[str, str] = Field(default_factory=dict)
    docs: str | None = None
    questions: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("docs")
    @classmethod
    def _docs(cls, v):
        if v is not None and not v.startswith("https://"):
            raise ValueError(f"not an https URL: {v!r}")
        return v

    @field_validator("questions")
    @classmethod
    def _questions(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for lang, qs in v.items():
            for q in qs:
                if not isinstance(q, str) or not QUESTION_CHARS[0] <= len(q.strip()) <= QUESTION_CHARS[1] \
                        or "\n" in q.strip():
                    raise ValueError(f"{lang}: each question is one line of {QUESTION_CHARS[0]}-{QUESTION_CHARS[1]} "
                                     f"characters: {q!r}")
        return {lang: [q.strip() for q in qs] for lang, qs in v.items()}


def _missing_languages(per_language: dict, languages: list[str]) -> list[str]:
    """The languages with no value, or only a blank one, in a per-language field."""
    return [lang for lang in languages if not str(per_language.get(lang) or "").strip()]


def load_scope(path: Path, languages: list[str], topics: set[str], problems: list | None = None) -> list[ScopeEntry]:
    raw = _yaml(path) or []
    if not isinstance(raw, list):
        raise SchemaError(path, "file", "expected a list of entries")
    seen = set()

    def check(i, item):
        entry = _validated(ScopeEntry, item, path, f"[{i}].")
        if entry.id in seen or entry.id in topics:
            raise SchemaError(path, f"[{i}].id", f"duplicate or topic id {entry.id!r}")
        seen.add(entry.id)
        missing = _missing_languages(entry.text, languages)
        if missing:
            raise SchemaError(path, f"[{i}].text", f"missing languages: {', '.join(missing)}")
        if entry.name or entry.docs:  # an area users are told about: a name in every language and its docs
            gaps = _missing_languages(entry.name, languages)
            if gaps or not entry.docs:
                raise SchemaError(path, f"[{i}]", f"an area with a name needs docs and a name in every language "
                                                  f"(missing: {', '.join(gaps) or 'docs'})")
        if entry.questions:
            # Questions show retrieval what the area looks like in each language (the nearest-question
            # rule; named areas' also train the classifier); in some languages only, it would be
            # recognised in those alone.
            gaps = _missing_languages(entry.questions, languages)
            if gaps:
                raise SchemaError(path, f"[{i}].questions", f"missing languages: {', '.join(gaps)}")
        return entry

    return _each(raw, check, problems)
