"""Verification on a Ray cluster (JAXMEM_RAY_ADDRESS): each request is a Ray task, scheduled by
resources on a worker that has the hardware (JAXMEM_RAY_ACCELERATOR: `GPU`, `CPU`, or a custom
resource such as `accel_h100` that those workers advertise), running the same sandboxed runner.

A card's job carries its snippet pair's files, so the worker verifies exactly what the front end's
corpus holds, whatever version the worker has installed. The record comes back with the worker's
Ray node id and is stored in the database (JAXMEM_DATABASE_URL): shared by the replicas, every
replica's answers show it.

A detached actor, the board, is where jobs report progress and where queues are counted (waiting
and running per resource kind, and on which nodes). A worker lost mid-run is retried once by Ray;
a second loss, or no worker with the resource within JAXMEM_RAY_TIMEOUT, is a clear error: never
a hang.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path

import ray

from jaxmem.core.errors import JaxmemError
from jaxmem.core.settings import Settings
from jaxmem.evaluators.verify.jobs import JobProgress, OnProgress, Request, as_result, run_request
from jaxmem.evaluators.verify.records import Evidence, ScriptRun
from jaxmem.evaluators.verify.sandbox import Limits

NAMESPACE = "jaxmem"
BOARD = "jaxmem-verify-board"
RETRIES = 1  # a worker lost mid-run: one more attempt, on any worker with the resource


@ray.remote(num_cpus=0)
class Board:
    """Progress and queues of the cluster's verification jobs (one per cluster, detached)."""

    def __init__(self):
        self.jobs: dict[str, dict] = {}

    def submitted(self, job_id: str, kind: str, what: str) -> None:
        self.jobs[job_id] = {"kind": kind, "what": what, "state": "waiting", "submitted": time.time(),
                             "attempts": 0, "node": None, "pid": None, "progress": None}

    def started(self, job_id: str, node: str, pid: int) -> None:
        job = self.jobs.setdefault(job_id, {"kind": "?", "what": "?", "submitted": time.time(), "attempts": 0})
        job.update(state="running", node=node, pid=pid, attempts=job["attempts"] + 1, progress=None)

    def progress(self, job_id: str, progress: dict) -> None:
        if job_id in self.jobs:
            self.jobs[job_id]["progress"] = progress

    def finished(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)

    def get(self, job_id: str) -> dict | None:
        job = self.jobs.get(job_id)
        if job is None:
            return None
        ahead = sum(1 for j in self.jobs.values()
                    if j["kind"] == job["kind"] and j["state"] == "waiting" and j["submitted"] < job["submitted"])
        return {**job, "ahead": ahead}

    def all(self) -> dict[str, dict]:
        """Every job on the board now: kind, state, node, worker pid, attempts, progress."""
        return dict(self.jobs)

    def queues(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for job in self.jobs.values():
            q = out.setdefault(job["kind"], {"waiting": 0, "running": 0, "nodes": []})
            q[job["state"]] += 1
            if job["node"] and job["node"] not in q["nodes"]:
                q["nodes"].append(job["node"])
        return out


def _board():
    return Board.options(name=BOARD, namespace=NAMESPACE, get_if_exists=True, lifetime="detached").remote()


@ray.remote(max_retries=RETRIES, retry_exceptions=False)
def _verify_on_worker(request: dict, pair_files: dict[str, str] | None, overrides: dict, job_id: str) -> dict:
    """Runs on the worker: the same job as on one machine, its record stored in the shared database."""
    board = ray.get_actor(BOARD, namespace=NAMESPACE)
    node = ray.get_runtime_context().get_node_id()
    board.started.remote(job_id, node, os.getpid())
    settings = Settings(**overrides)
    req = Request(**{**request, "limits": Limits(**request["limits"])})
    with tempfile.TemporaryDirectory(prefix="jaxmem-ray-") as tmp:
        if pair_files is not None:  # a corpus of one pair: exactly the files the front end has
            corpus = Path(tmp) / "corpus"
            (corpus / "snippets" / req.topic).mkdir(parents=True)
            (corpus / "topics.yaml").write_text(f"{req.topic}: verified on a Ray worker\n")
            for name, text in pair_files.items():
                (corpus / "snippets" / req.topic / name).write_text(text)
            settings = settings.model_copy(update={"corpus_dir": corpus})
        if not settings.database_url:
            settings = settings.model_copy(update={"data_dir": Path(tmp) / "data"})

        def report(p: JobProgress) -> None:
            board.progress.remote(job_id, asdict(p))

        stored = run_request(req, settings, report)
    stored["node"] = node
    return stored


def resources_for(accelerator: str) -> dict:
    """Ray task options asking for one unit of what the job needs."""
    if accelerator.upper() == "GPU":
        return {"num_gpus": 1, "num_cpus": 1}
    if accelerator.upper() == "CPU":
        return {"num_cpus": 1}
    return {"num_cpus": 1, "resources": {accelerator: 1}}


# ray.init is once per process and not thread-safe: two first calls at once (a web session's
# verification and the status page's queue listing) fail with "called ray.init twice".
_CONNECT = threading.Lock()


class RayVerifier:
    """Jobs as Ray tasks on the cluster at JAXMEM_RAY_ADDRESS."""

    name = "ray"

    def __init__(self, settings: Settings):
        self.settings = settings
        self._connected = False

    def connect(self) -> None:
        if self._connected:
            return
        with _CONNECT:
            self._connect()

    def _connect(self) -> None:
        if self._connected:
            return
        try:
            ray.init(address=self.settings.ray_address, namespace=NAMESPACE, ignore_reinit_error=True,
                     log_to_driver=False, logging_level="ERROR", include_dashboard=False)
        except Exception as exc:
            raise JaxmemError(f"cannot connect to the Ray cluster at {self.settings.ray_address} "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}).",
                              "Check JAXMEM_RAY_ADDRESS and that the head node runs, or unset it to verify on "
                              "this machine.") from None
        self._board = _board()
        self._connected = True

    def run(self, request: Request, on_progress: OnProgress | None = None) -> Evidence | ScriptRun:
        self.connect()
        report = on_progress or (lambda p: None)
        kind = request.accelerator or self.settings.ray_accelerator
        job_id = uuid.uuid4().hex
        pair_files = self._pair_files(request.topic) if request.kind == "card" else None
        overrides = {k: v for k, v in {"database_url": self.settings.database_url, "sandbox": self.settings.sandbox,
                                       "verify_timeout": self.settings.verify_timeout}.items() if v is not None}
        ray.get(self._board.submitted.remote(job_id, kind, request.describe()))
        ref = _verify_on_worker.options(**resources_for(kind)).remote(asdict(replace(request, accelerator=kind)),
                                                                    pair_files, overrides, job_id)
        deadline = time.monotonic() + self.settings.ray_timeout
        last = None
        try:
            while True:
                ready, _ = ray.wait([ref], timeout=0.3)
                job = ray.get(self._board.get.remote(job_id))
                shown = self._progress(job, kind)
                if shown is not None and shown != last:
                    report(shown)
                    last = shown
                if ready:
                    break
                if time.monotonic() > deadline:
                    ray.cancel(ref, force=True)
                    waiting = job and job["state"] == "waiting"
                    raise JaxmemError(
                        f"the verification {'found no free worker with' if waiting else 'did not finish on a worker with'} "
                        f"{kind!r} within {self.settings.ray_timeout:g} s (JAXMEM_RAY_TIMEOUT).",
                        "Check that workers advertising that resource are up (`ray status`), or set "
                        "JAXMEM_RAY_ACCELERATOR to one they have.")
            stored = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the job itself failed on the worker: say why
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
            if isinstance(cause, JaxmemError):
                raise JaxmemError(cause.message, cause.hint) from None
            raise JaxmemError(f"the verification failed on the Ray worker: {type(cause).__name__}: "
                              f"{str(cause).splitlines()[0][:300] if str(cause) else ''}") from None
        except ray.exceptions.RayError as exc:  # the worker (or its node) died, on the retry as well
            raise JaxmemError(f"the Ray worker running the verification was lost ({type(exc).__name__}), "
                              f"{RETRIES + 1} times.", "Look at the worker nodes (`ray status`); try again.") from None
        finally:
            self._board.finished.remote(job_id)
        if request.kind == "card":  # in this replica's database: with a shared one, every replica sees it
            from jaxmem.evaluators.verify.store import save_cached

            save_cached(stored, self.settings)
        report(JobProgress("done", "done", 1, 1, where=stored.get("node")))
        return as_result(request, stored)

    @staticmethod
    def _progress(job: dict | None, kind: str) -> JobProgress | None:
        if job is None:
            return None
        if job["state"] == "waiting":
            return JobProgress("queued", f"waiting for a Ray worker with {kind}", position=job["ahead"] + 1,
                               where=f"Ray queue {kind}")
        p = job.get("progress") or {}
        retry = f" (attempt {job['attempts']})" if job["attempts"] > 1 else ""
        return JobProgress("running", (p.get("message") or "started") + retry, p.get("done", 0), p.get("total", 0),
                           where=f"Ray node {job['node'][:12]}")

    def _pair_files(self, topic: str) -> dict[str, str]:
        from jaxmem.evaluators.verify.api import pairs

        pair = next((p for p in pairs(self.settings).values() if p.topic == topic), None)
        if pair is None:
            raise JaxmemError(f"no snippet pair for topic {topic!r}.")
        return {name: (pair.directory / name).read_text() for name in ("before.py", "after.py", "manifest.yaml")}

    def queues(self) -> list[dict]:
        """Per resource kind: jobs waiting and running on the cluster, and on which nodes."""
        self.connect()
        board = ray.get(self._board.queues.remote())
        kinds = set(board) | {self.settings.ray_accelerator}
        return [{"queue": f"ray:{k}", "where": ", ".join(n[:12] for n in board.get(k, {}).get("nodes", [])) or
                 f"cluster {self.settings.ray_address}", "waiting_or_running":
                 board.get(k, {}).get("waiting", 0) + board.get(k, {}).get("running", 0),
                 "waiting": board.get(k, {}).get("waiting", 0), "running": board.get(k, {}).get("running", 0),
                 "slots": "workers with " + k} for k in sorted(kinds)]
