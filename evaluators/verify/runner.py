"""Run one snippet through the probe in an isolated child and turn what comes back into metrics."""
from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from jaxmem.core.errors import JaxmemError
from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.sandbox import (
    ChildRun,
    Limits,
    accelerator_plugin_present,
    bwrap_problem,
    run_isolated,
    scrub_env,
)

# The child runs this file by path: it needs nothing of the project, and in the sandbox it is the
# only file of the project tree the child can see.
PROBE = Path(probe.__file__).resolve()
log = logging.getLogger(__name__)


class SandboxUnavailable(JaxmemError):
    """User code was asked to run but the sandbox cannot start here."""


def isolation_for(untrusted: bool, wanted: str = "bwrap") -> str:
    """The isolation a run gets: `wanted` (the JAXMEM_SANDBOX setting) if it can start; the
    project's own snippets fall back to process isolation where bubblewrap cannot start, user
    code is refused."""
    if wanted == "process":
        return "process"
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    if untrusted:
        raise SandboxUnavailable(
            f"user code runs only in the sandbox, and it cannot start here: {problem}.",
            "Install bubblewrap (scripts/install-system-packages.sh does), or set JAXMEM_SANDBOX=process to "
            "accept process isolation only: the code could then read the server's files and reach its network.")
    log.warning("bubblewrap cannot start (%s); the project's own snippets run with process isolation", problem)
    return "process"

_GUARD = re.compile(r"\] (host-to-device|device-to-host|device-to-device) transfer:")
_MEMORY_ERRORS = ("MemoryError", "RESOURCE_EXHAUSTED", "Out of memory", "std::bad_alloc",
                  "Cannot allocate memory")


@dataclass
class GuardCounts:
    h2d: int = 0
    h2d_explicit: int = 0
    d2h: int = 0
    d2d: int = 0


@dataclass
class SnippetRun:
    """One child run of one snippet: values per metric name, or why there are none."""
    values: dict[str, float | None]
    device: dict
    error: str | None = None
    traceback: str | None = None
    syncs: list[dict] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""          # the snippet's own stderr, guard lines and markers removed
    entry_error: str | None = None
    guard: GuardCounts = field(default_factory=GuardCounts)
    child_wall_s: float = 0.0
    isolation: str = "process"
    # How the run was contained: {"task_cap": bool, "tasks_peak": int | None, "task_cap_hit": bool}
    containment: dict = field(default_factory=dict)
    # Why the counts cannot be trusted (the measured code touched what measures it); then no values.
    tampered: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_stderr(text: str, nonce: str = "") -> tuple[GuardCounts, str, list[str]]:
    """Count guard lines inside the snippet's marked region; return the rest as the user's stderr,
    and what looks tampered with (markers missing, repeated, out of order, or not this run's)."""
    counts = GuardCounts()
    kept: list[str] = []
    inside = explicit = False
    seen: list[str] = []
    problems: list[str] = []
    marks = {probe.marker(nonce, name): name for name in (probe.BEGIN, probe.END, probe.EXPLICIT_BEGIN,
                                                           probe.EXPLICIT_END)}
    for line in text.splitlines():
        for mark, name in marks.items():
            if mark in line:
                seen.append(name)
                if name == probe.BEGIN and (inside or probe.END in seen[:-1] or seen.count(probe.BEGIN) > 1):
                    problems.append("the snippet-begin marker appeared twice or late")
                inside = {probe.BEGIN: True, probe.END: False}.get(name, inside)
                explicit = {probe.EXPLICIT_BEGIN: True, probe.EXPLICIT_END: False}.get(name, explicit)
                line = line.replace(mark, "")
                break
        else:
            if probe.MARK_PREFIX in line:  # a marker, but not one of this run's
                problems.append("a marker that is not this run's appeared on file descriptor 2")
                continue
        m = _GUARD.search(line)
        if m:
            if inside:
                kind = m.group(1)
                if kind == "host-to-device":
                    counts.h2d += 1
                    counts.h2d_explicit += explicit
                elif kind == "device-to-host":
                    counts.d2h += 1
                else:
                    counts.d2d += 1
            continue
        if line:
            kept.append(line)
    return counts, "\n".join(kept), problems


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = scrub_env(os.environ, extra)
    if "JAX_PLATFORMS" not in env and not accelerator_plugin_present():
        # Only CPU can start anyway; naming it skips the search for other plugins (~0.25 s a run).
        env["JAX_PLATFORMS"] = "cpu"
    # log_explicit logs implicit AND explicit transfers; the probe's markers tell them apart.
    env.setdefault("JAX_TRANSFER_GUARD", "log_explicit")
    return env


def run_snippet(path: Path, *, entry: dict | None = None, env: dict[str, str] | None = None,
                limits: Limits = Limits(), baseline: SnippetRun | None = None, untrusted: bool = False,
                isolation: str | None = None) -> SnippetRun:
    """Run `path` once in isolation under the probe; never raises for what the snippet does.

    `untrusted`: user code (a pasted or uploaded script), which runs only in the sandbox and
    raises SandboxUnavailable where it cannot start."""
    path = Path(path).resolve()
    isolation = isolation or isolation_for(untrusted)
    with tempfile.TemporaryDirectory(prefix="jaxmem-verify-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        result_path = Path(tmp) / "result.json"
        user_stderr = Path(tmp) / "stderr.txt"
        nonce = secrets.token_hex(16)
        config = {"snippet": str(path), "result": str(result_path), "entry": entry, "nonce": nonce,
                  "user_stderr": str(user_stderr)}
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(config))
        # -P: the probe's folder (the verifier's own modules, e.g. queue.py) is not put first on the
        # child's import path, where it would hide the standard library's modules of the same names
        # from the snippet (without bubblewrap, PyTorch's `import queue` found ours).
        child = run_isolated([sys.executable, "-P", str(PROBE), str(config_path)], env=child_env(env), limits=limits,
                             cwd=work, isolation=isolation, readonly=[path.parent, PROBE], writable=[Path(tmp)])
        result = _read_result(result_path)
        own_stderr = user_stderr.read_text(errors="replace") if user_stderr.is_file() else ""
    run = _to_run(child, result, baseline, nonce, own_stderr)
    run.isolation = isolation
    run.containment = {"task_cap": child.task_cap, "tasks_peak": child.tasks_peak, "task_cap_hit": child.task_cap_hit}
    return run


def _read_result(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return {"unreadable": True}  # not the probe's: it writes complete JSON and renames it into place


def tampering(child_stderr_problems: list[str], result: dict | None, nonce: str, markers_seen: bool) -> list[str]:
    """Why this run's counts cannot be trusted ([] when nothing points at tampering)."""
    why = list(dict.fromkeys(child_stderr_problems))
    if result is None:
        return why
    if result.get("unreadable") or result.get("nonce") != nonce:
        why.append("the result file was not the probe's")
    why += list(result.get("tampered") or [])
    if not markers_seen:
        why.append("the probe's end marker never reached the runner (file descriptor 2 was redirected)")
    return why


def _to_run(child: ChildRun, result: dict | None, baseline: SnippetRun | None, nonce: str = "",
            own_stderr: str = "") -> SnippetRun:
    guard, stderr, problems = parse_stderr(child.stderr, nonce)
    stderr = "\n".join(s for s in (own_stderr.rstrip("\n"), stderr) if s)
    ended = probe.marker(nonce, probe.END) in child.stderr
    tampered = tampering(problems, result, nonce, ended) if nonce else []
    run = _measured(child, result, baseline, guard, stderr)
    if tampered:
        # Numbers from a run that hid or faked what is counted would be made up: none are reported.
        run.values = {k: None for k in run.values}
        run.syncs = []
        run.tampered = tampered
    return run


def _measured(child: ChildRun, result: dict | None, baseline: SnippetRun | None, guard: GuardCounts,
              stderr: str) -> SnippetRun:
    if result is None:
        reason = child.reason() or "the child ended without writing a result"
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
        if last and not child.timed_out:
            reason = f"{reason}: {last.strip()[:300]}"
        if not child.timed_out and any(m in child.stderr for m in _MEMORY_ERRORS):
            reason = f"memory ceiling of {child.limits.memory_bytes / (1 << 30):.1f} GiB exceeded; {reason}"
        return SnippetRun(values={}, device={}, error=reason, stdout=child.stdout,
                          stderr=stderr, guard=guard, child_wall_s=child.wall_s)
    error = result.get("error")
    if error and any(m in (result.get("traceback") or error) for m in _MEMORY_ERRORS):
        error = (f"memory ceiling of {child.limits.memory_bytes / (1 << 30):.1f} GiB "
                 f"({child.ceiling}) exceeded: {error}")
    base = baseline.guard if baseline else GuardCounts()
    base_compiles = baseline.values.get("compile_count", 0) if baseline else 0
    device = result.get("device") or {}
    backend = device.get("backend")
    stats = device.get("memory_stats") or {}
    entry = result.get("entry") or {}
    values: dict[str, float | None] = {
        "h2d_transfers": max(0, guard.h2d - base.h2d),
        "implicit_h2d_transfers": max(0, (guard.h2d - guard.h2d_explicit) - (base.h2d - base.h2d_explicit)),
        "d2h_transfers": max(0, guard.d2h - base.d2h) if backend in ("gpu", "tpu") else None,
        "host_syncs": len(result.get("host_syncs") or []),
        "compile_count": max(0, result.get("compile_count", 0) - (base_compiles or 0)),
        "live_bytes": result.get("live_bytes"),
        "per_device_bytes": result.get("per_device_bytes"),
        # the child's own high-water mark when it could report it (see probe._vm_hwm)
        "peak_rss": result.get("vm_hwm_bytes") or child.max_rss_bytes,
        "wall_time": result.get("wall_s"),
        "device_peak_bytes": stats.get("peak_bytes_in_use"),
        "device_reserved_bytes": stats.get("reserved_bytes"),
    }
    for key in ("temp_bytes", "argument_bytes", "output_bytes", "alias_bytes", "hlo_chars"):
        values[key] = entry.get(key)
    if not error and child.reason():
        error = child.reason()
    return SnippetRun(values=values, device=device, error=error, traceback=result.get("traceback"),
                      syncs=result.get("host_syncs") or [], stdout=child.stdout, stderr=stderr,
                      entry_error=result.get("entry_error"), guard=guard, child_wall_s=child.wall_s)


_EMPTY = "# The empty snippet: the floor every count is measured against.\n"


def run_baseline(env: dict[str, str] | None = None, limits: Limits = Limits(), isolation: str | None = None) -> SnippetRun:
    with tempfile.TemporaryDirectory(prefix="jaxmem-baseline-") as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text(_EMPTY)
        return run_snippet(empty, env=env, limits=limits, isolation=isolation)
