"""Typed views of what the verifier produces, so front ends read fields, not dict keys.

The stored form stays the JSON record (cache files, committed evidence, the database); `Evidence`
and `ScriptRun` wrap it and carry their own one-line summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from jaxmem.evaluators.verify.report import summary as _summary
from jaxmem.evaluators.verify.report import where as _where


@dataclass(frozen=True)
class MetricResult:
    metric: str
    label: str
    verdict: str
    expect: str | None = None
    before: float | None = None
    after: float | None = None
    reason: str | None = None
    backends: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, m: dict) -> MetricResult:
        return cls(metric=m["metric"], label=m.get("label") or m["metric"], verdict=m["verdict"],
                   expect=m.get("expect"), before=m.get("before"), after=m.get("after"), reason=m.get("reason"),
                   backends=tuple(m.get("backends") or ()))


@dataclass(frozen=True)
class Evidence:
    """One verification of a card's snippet pair on one machine kind."""

    record: dict = field(repr=False)

    @property
    def topic(self) -> str:
        return self.record["topic"]

    @property
    def verdict(self) -> str:
        return self.record.get("verdict", "")

    @property
    def backend(self) -> str | None:
        return self.record.get("backend")

    @property
    def device_kind(self) -> str | None:
        return self.record.get("device_kind")

    @property
    def date(self) -> str:
        return str(self.record.get("date") or "")

    @property
    def origin(self) -> str:
        """Where the caller found it: "measured run", "cache", "recorded evidence (cpu.json)", ..."""
        return self.record.get("origin") or "run in this session"

    @property
    def node(self) -> str | None:
        """The machine (Ray node id or host name) the runs happened on, when known."""
        return self.record.get("node")

    @property
    def repeats(self) -> int | None:
        return self.record.get("repeats")

    @property
    def metrics(self) -> list[MetricResult]:
        return [MetricResult.from_dict(m) for m in self.record.get("metrics", [])]

    @property
    def errors(self) -> list[dict]:
        return list(self.record.get("errors") or [])

    @property
    def all_machines(self) -> list[str]:
        return list(self.record.get("all_machines") or [])

    @property
    def where(self) -> str:
        return _where(self.record)

    @property
    def summary(self) -> str:
        return _summary(self.record)


@dataclass(frozen=True)
class ScriptRun:
    """One run of a user's script in the sandbox: what it transferred, synced and compiled."""

    result: dict = field(repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def error(self) -> str | None:
        return self.result.get("error")

    @property
    def isolation(self) -> str:
        return self.result.get("isolation", "")

    @property
    def node(self) -> str | None:
        return self.result.get("node")

    def value(self, metric: str):
        return self.result.get(metric)

    @property
    def host_sync_lines(self) -> list[dict]:
        return list(self.result.get("host_sync_lines") or [])

    @property
    def summary(self) -> str:
        r = self.result
        where = f"{r.get('backend') or '?'}, jax {r.get('jax') or '?'}"
        if not self.ok:
            return f"the script failed on {where}: {self.error}"
        parts = [f"{r.get('h2d_transfers')} host->device transfers", f"{r.get('host_syncs')} host sync points",
                 f"{r.get('compile_count')} compiles"]
        return f"ran on {where} ({self.isolation} isolation): " + ", ".join(parts)
