"""Verification as jobs: what front ends ask for, and the verifier that runs it.

A `Request` names a card's snippet pair or carries a user's script, with limits and the kind of
hardware wanted. `LocalVerifier` runs it on this machine, in the sandboxed child processes of
`evaluators.verify.runner`, one job per free slot of the machine-wide queue (`queue.RunQueue`);
`evaluators.verify.ray_jobs.RayVerifier` runs the same job on a Ray worker that has the hardware.
Progress comes back as `JobProgress` values; results as `Evidence` or `ScriptRun`.
"""
from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from jaxmem.core.settings import Settings
from jaxmem.evaluators.verify import api
from jaxmem.evaluators.verify.queue import RunQueue
from jaxmem.evaluators.verify.records import Evidence, ScriptRun
from jaxmem.evaluators.verify.sandbox import Limits


@dataclass(frozen=True)
class Request:
    kind: Literal["card", "script"]
    topic: str | None = None          # kind "card": the topic whose snippet pair runs
    source: str | None = None         # kind "script": the user's code
    repeats: int = 3
    limits: Limits = field(default_factory=Limits)
    fresh: bool = True                # "card": measure again rather than reuse a cached record
    accelerator: str | None = None    # the hardware kind wanted ("cpu", "gpu", "tpu", or a Ray resource)

    def describe(self) -> str:
        return f"the {self.topic} pair" if self.kind == "card" else "your script"


@dataclass(frozen=True)
class JobProgress:
    stage: Literal["queued", "running", "done"]
    message: str
    done: int = 0                     # child runs finished
    total: int = 0                    # child runs in all (0: not known yet)
    position: int | None = None       # place in the queue while queued (1 = next)
    where: str | None = None          # the machine or queue the job is in

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 0.0


OnProgress = Callable[[JobProgress], None]


def run_request(request: Request, settings: Settings, on_progress: OnProgress | None = None) -> dict:
    """Run one job here (no queue) and return the stored form of its result: a record or a script result.
    The same function runs on a Ray worker."""
    report = on_progress or (lambda p: None)
    where = platform.node()
    if request.kind == "card":
        record = api.verify_topic(request.topic, repeats=request.repeats, fresh=request.fresh, limits=request.limits,
                                  settings=settings, progress=lambda step: report(
                                      JobProgress("running", str(step), step.done, step.total, where=where)))
        return record
    report(JobProgress("running", "running your script in the sandbox", 0, 1, where=where))
    return api.verify_script(request.source, limits=request.limits, sandbox=settings.sandbox,
                             python=settings.run_python, hidden=[settings.data_dir])


def as_result(request: Request, stored: dict) -> Evidence | ScriptRun:
    return Evidence(stored) if request.kind == "card" else ScriptRun(stored)


class LocalVerifier:
    """Jobs run on this machine, `JAXMEM_VERIFY_SLOTS` at a time across all its processes."""

    name = "local"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.queue = RunQueue(settings.data_dir / "verify-queue", settings.verify_slots)

    def run(self, request: Request, on_progress: OnProgress | None = None) -> Evidence | ScriptRun:
        report = on_progress or (lambda p: None)
        where = f"this machine ({platform.node()})"

        def waiting(position: int) -> None:
            report(JobProgress("queued", f"waiting for a free slot: {position} ahead", position=position, where=where))

        with self.queue.slot(on_wait=waiting):
            stored = run_request(request, self.settings, report)
        report(JobProgress("done", "done", 1, 1, where=where))
        return as_result(request, stored)

    def queues(self) -> list[dict]:
        """What is waiting where: one queue, this machine's."""
        return [{"queue": "local", "where": platform.node(), "slots": self.queue.slots,
                 "waiting_or_running": self.queue.waiting()}]
