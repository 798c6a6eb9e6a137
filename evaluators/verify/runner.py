"""Run one snippet through the probe in an isolated child and turn what comes back into metrics."""
from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from jaxmem.core.errors import JaxmemError
from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.attribution import GuardCounts, Stream, parse, summarize
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

_MEMORY_ERRORS = ("MemoryError", "RESOURCE_EXHAUSTED", "Out of memory", "std::bad_alloc",
                  "Cannot allocate memory")


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
    # Per-line costs (attribution.summarize) of an attributed run that was not tampered with.
    attribution: dict | None = None
    attribution_error: str | None = None   # why an attributed run has no per-line costs (a probe bug)
    alias_error: str | None = None         # why donation (aliased bytes) cannot be measured with this JAX

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_stderr(text: str, nonce: str = "") -> tuple[GuardCounts, str, list[str]]:
    """Count guard lines inside the snippet's marked region; return the rest as the user's stderr,
    and what looks tampered with (markers missing, repeated, out of order, or not this run's)."""
    stream = parse(text, nonce)
    return stream.counts, stream.stderr, stream.problems


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
                isolation: str | None = None, attribute: bool = False, python: str | None = None,
                hidden: list[Path] = ()) -> SnippetRun:
    """Run `path` once in isolation under the probe; never raises for what the snippet does.

    `untrusted`: user code (a pasted or uploaded script), which runs only in the sandbox and
    raises SandboxUnavailable where it cannot start. `attribute`: also put each sync, transfer and
    compile on the line of the script's folder that caused it (`SnippetRun.attribution`).
    `python`: the interpreter to run it with (default: this one); `hidden`: folders the child must
    not see even where they lie inside the script's folder (the data directory)."""
    path = Path(path).resolve()
    isolation = isolation or isolation_for(untrusted)
    with tempfile.TemporaryDirectory(prefix="jaxmem-verify-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        config = {"snippet": str(path), "entry": entry, "attribute": attribute, "roots": [str(path.parent)]}
        return _probe_run(config, Path(tmp), cwd=work, readonly=[path.parent], env=env, limits=limits,
                          baseline=baseline, isolation=isolation, python=python, hidden=hidden)


def run_command(tree: Path, *, script: Path | None = None, module: str | None = None, argv: list[str] = (),
                env: dict[str, str] | None = None, limits: Limits = Limits(), baseline: SnippetRun | None = None,
                isolation: str | None = None, python: str | None = None, hidden: list[Path] = ()) -> SnippetRun:
    """Run a user's command (`python SCRIPT ARGS` or `python -m MODULE ARGS`) under the probe, with
    `tree` mounted read-only as its working directory (so it imports its own package) and every
    sync, transfer and compile put on the line of the tree's code that caused it. User code: the
    sandbox only (SandboxUnavailable where it cannot start, unless `isolation="process"`)."""
    tree = Path(tree).resolve()
    isolation = isolation or isolation_for(True)
    with tempfile.TemporaryDirectory(prefix="jaxmem-command-") as tmp:
        config = {"snippet": str(Path(script).resolve()) if script else None, "module": module, "argv": list(argv),
                  "attribute": True, "roots": [str(tree)]}
        return _probe_run(config, Path(tmp), cwd=tree, readonly=[tree], env=env, limits=limits,
                          baseline=baseline, isolation=isolation, python=python, hidden=hidden)


def _probe_run(config: dict, tmp: Path, *, cwd: Path, readonly: list[Path], env: dict[str, str] | None,
               limits: Limits, baseline: SnippetRun | None, isolation: str, python: str | None,
               hidden: list[Path] = ()) -> SnippetRun:
    result_path = tmp / "result.json"
    user_stderr = tmp / "stderr.txt"
    nonce = secrets.token_hex(16)
    config = {**config, "result": str(result_path), "nonce": nonce, "user_stderr": str(user_stderr)}
    config_path = tmp / "config.json"
    config_path.write_text(json.dumps(config))
    scratch = tmp / "scratch"
    scratch.mkdir()
    # -P: the probe's folder (the verifier's own modules, e.g. queue.py) is not put first on the
    # child's import path, where it would hide the standard library's modules of the same names
    # from the snippet (without bubblewrap, PyTorch's `import queue` found ours).
    child = run_isolated([python or sys.executable, "-P", str(PROBE), str(config_path)], env=child_env(env),
                         limits=limits, cwd=cwd, isolation=isolation, readonly=[*readonly, PROBE], writable=[tmp],
                         scratch=scratch, python=python, hidden=hidden)
    result = _read_result(result_path)
    own_stderr = user_stderr.read_text(errors="replace") if user_stderr.is_file() else ""
    run = _to_run(child, result, baseline, nonce, own_stderr, attributed=bool(config.get("attribute")),
                  roots=config.get("roots") or [])
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
            own_stderr: str = "", attributed: bool = False, roots: list[str] = ()) -> SnippetRun:
    stream = parse(child.stderr, nonce)
    stderr = "\n".join(s for s in (own_stderr.rstrip("\n"), stream.stderr) if s)
    tampered = tampering(stream.problems, result, nonce, stream.ended) if nonce else []
    if attributed and result is not None and not tampered:
        tampered = _disagreement(stream, result)
    run = _measured(child, result, baseline, stream.counts, stderr)
    if tampered:
        # Numbers from a run that hid or faked what is counted would be made up: none are reported.
        run.values = {k: None for k in run.values}
        run.syncs = []
        run.tampered = tampered
    elif attributed and result is not None:
        probe_side = result.get("attribution") or {}
        if probe_side.get("error"):
            run.attribution_error = f"per-line attribution stopped: {probe_side['error']}; counts are per run only"
        else:
            run.attribution = summarize(stream, shorten=_shortener(roots), ran=probe_side.get("ran"))
            # Counted, but with no frame of the user's code on the stack (another thread, a callback).
            missing = run.attribution["unattributed"]
            for name, n in (("compiles", (result.get("compile_count") or 0) - stream.markers["c"]),
                            ("host_syncs", len(result.get("host_syncs") or []) - stream.markers["s"]),
                            ("aliased_calls", ((result.get("aliased") or {}).get("calls") or 0) - stream.markers["a"])):
                if n > 0:
                    missing[name] = missing.get(name, 0) + n
    return run


def _disagreement(stream: Stream, result: dict) -> list[str]:
    """The markers the runner read must add up to what the probe says it wrote, and the probe's
    own list of host syncs to its sync markers: otherwise markers were faked, lost or removed."""
    wrote = result.get("attribution") or {}
    named = sum(1 for s in result.get("host_syncs") or [] if s.get("line") is not None)
    # Donated bytes: the markers' own sum must be what the probe says it wrote, and no more than it
    # counted in all (a count raised in memory, without its markers, does not add up).
    marked_bytes = sum(int(e.nbytes or 0) for e in stream.events if e.kind == "alias")
    aliased = result.get("aliased") or {}
    unmarked_calls = aliased.get("calls", 0) - stream.markers["a"]   # made with no user frame (a thread)
    unmarked_bytes = aliased.get("bytes", 0) - marked_bytes
    if (stream.markers["s"], stream.markers["c"]) != (wrote.get("syncs"), wrote.get("compiles")) \
            or named != wrote.get("syncs") \
            or (stream.markers["a"], marked_bytes) != (wrote.get("aliased_calls", 0), wrote.get("aliased_bytes", 0)) \
            or unmarked_calls < 0 or unmarked_bytes < 0 or (unmarked_calls == 0) != (unmarked_bytes == 0):
        return ["the probe's counts and the markers it wrote on file descriptor 2 disagree (markers were "
                "faked, removed or lost)"]
    return []


def _shortener(roots: list[str]):
    """Paths as the user reads them: relative to the reviewed tree, or to the library's package."""
    bases = [os.path.join(os.path.realpath(r), "") for r in roots]

    def shorten(path: str) -> str:
        real = os.path.realpath(path) if os.path.isabs(path) else path
        for base in bases:
            if real.startswith(base):
                return real[len(base):]
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in path:
                return path.split(marker, 1)[1]
        return path
    return shorten


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
    # Donation that took effect, over the whole run: the calls that consumed donated inputs XLA
    # aliased to outputs, and those bytes (per device). None where this JAX cannot show it.
    aliased = result.get("aliased")
    values["aliased_calls"] = aliased.get("calls") if aliased else None
    values["aliased_bytes"] = aliased.get("bytes") if aliased else None
    values["aliased_max_call_bytes"] = aliased.get("max_call_bytes") if aliased else None
    if not error and child.reason():
        error = child.reason()
    return SnippetRun(values=values, device=device, error=error, traceback=result.get("traceback"),
                      syncs=result.get("host_syncs") or [], stdout=child.stdout, stderr=stderr,
                      entry_error=result.get("entry_error"), guard=guard, child_wall_s=child.wall_s,
                      alias_error=result.get("alias_error"))


_EMPTY = "# The empty snippet: the floor every count is measured against.\n"


def run_baseline(env: dict[str, str] | None = None, limits: Limits = Limits(), isolation: str | None = None,
                 python: str | None = None) -> SnippetRun:
    with tempfile.TemporaryDirectory(prefix="jaxmem-baseline-") as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text(_EMPTY)
        return run_snippet(empty, env=env, limits=limits, isolation=isolation, python=python)
