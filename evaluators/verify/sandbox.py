"""Run one command in an isolated child process: the parent half of the verifier's isolation.

The child gets a fresh process group (so a timeout kills everything it started), a scrubbed
environment (an allow-list, then a deny-list on top), a temporary working directory, a memory
ceiling and a wall-clock timeout. Output goes to files, never pipes, so a chatty child cannot
deadlock the parent. Resource use comes from `os.wait4`, which reports the child's own peak RSS.
"""
from __future__ import annotations

import importlib.util
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GiB = 1 << 30
MiB = 1 << 20

# Names passed through from the parent. Everything else is dropped: a snippet is untrusted code
# and must not see tokens, and nothing else in the parent should change what it measures.
_ALLOWED = {"PATH", "HOME", "LANG", "LANGUAGE", "JAX_PLATFORMS"}
_ALLOWED_PREFIXES = ("LC_",)

# Never passed, even when a manifest asks: secrets, and the variables that silence the C++ log
# the transfer count is read from (TF_CPP_MIN_LOG_LEVEL>=2 or JAX_LOGGING_LEVEL=ERROR hide it).
_DENIED_SUBSTRINGS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE")
_DENIED_PREFIXES = ("SLACK_", "OPENAI_", "AWS_", "ANTHROPIC_", "AZURE_", "GOOGLE_", "HF_TOKEN", "GITHUB_")
_LOG_HIDING = {"TF_CPP_MIN_LOG_LEVEL", "JAX_LOGGING_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE"}

# Accelerator plugins reserve huge virtual address ranges, so RLIMIT_AS would break them.
_ACCELERATOR_MODULES = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin",
                        "jax_rocm7_plugin", "libtpu")


def is_denied(name: str) -> bool:
    upper = name.upper()
    return (upper in _LOG_HIDING or upper.startswith(_DENIED_PREFIXES)
            or any(part in upper for part in _DENIED_SUBSTRINGS))


def scrub_env(parent: Mapping[str, str], extra: Mapping[str, str] | None = None,
              *, pythonpath: str | None = None) -> dict[str, str]:
    """The child's whole environment: allowed parent names, then `extra` (a manifest's env)."""
    env = {k: v for k, v in parent.items()
           if (k in _ALLOWED or k.startswith(_ALLOWED_PREFIXES)) and not is_denied(k)}
    for name, value in (extra or {}).items():
        if is_denied(name):
            raise ValueError(
                f"environment variable {name!r} may not be passed to a snippet: names containing "
                f"{', '.join(_DENIED_SUBSTRINGS)}, starting with {', '.join(_DENIED_PREFIXES)}, "
                f"or one of {', '.join(sorted(_LOG_HIDING))} are refused")
        env[name] = str(value)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("PATH", os.defpath)
    # Snippets never need the network; a model hub lookup would hang on DNS retries here.
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def accelerator_plugin_present() -> bool:
    """Whether the child may start a GPU/TPU backend (decides how the memory ceiling works)."""
    if os.environ.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return False
    return any(importlib.util.find_spec(m) is not None for m in _ACCELERATOR_MODULES)


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 60.0
    memory_bytes: int = 8 * GiB
    output_bytes: int = 64 * MiB


@dataclass
class ChildRun:
    argv: list[str]
    exit_code: int | None          # None when a signal ended the child
    signal: str | None             # e.g. "SIGKILL"
    timed_out: bool
    memory_exceeded: bool          # only set by the RSS poller (accelerator children)
    stdout: str
    stderr: str
    max_rss_bytes: int
    wall_s: float
    ceiling: str                   # "address space" (RLIMIT_AS) or "resident set" (polled)
    limits: Limits = field(default_factory=Limits)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.memory_exceeded

    def reason(self) -> str | None:
        """Why the run failed, in words, or None if it did not."""
        if self.timed_out:
            return (f"timed out after {self.limits.timeout_s:g} s; the child and its process "
                    "group were killed")
        if self.memory_exceeded:
            return (f"exceeded the memory ceiling of {_gib(self.limits.memory_bytes)} "
                    "(resident set); the child was killed")
        if self.signal:
            hint = " (possibly the memory ceiling or the system's OOM killer)" \
                if self.signal in ("SIGKILL", "SIGABRT", "SIGSEGV") else ""
            return f"the child was killed by {self.signal}{hint}"
        if self.exit_code:
            return f"the child exited with status {self.exit_code}"
        return None


def _gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


def _preexec(limits: Limits, use_rlimit_as: bool):
    def apply() -> None:
        # Runs in the forked child before exec: only async-signal-safe work here.
        if use_rlimit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
    return apply


def _rss_bytes(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_tail(path: Path, limit: int) -> str:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read().decode("utf-8", errors="replace")


def run_isolated(argv: Sequence[str], *, env: Mapping[str, str], limits: Limits = Limits(),
                 cwd: Path | None = None, use_rlimit_as: bool | None = None) -> ChildRun:
    """Run `argv` isolated; never raises for anything the child does."""
    if use_rlimit_as is None:
        use_rlimit_as = not accelerator_plugin_present()
    own_tmp = None
    if cwd is None:
        own_tmp = Path(tempfile.mkdtemp(prefix="jaxmem-child-"))
        cwd = own_tmp
    out_dir = Path(tempfile.mkdtemp(prefix="jaxmem-out-"))
    try:
        out_path, err_path = out_dir / "stdout", out_dir / "stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            start = time.monotonic()
            # Temporary files the child makes land in its own directory and go with it.
            child_env = {"TMPDIR": str(cwd), **env}
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=err, start_new_session=True, preexec_fn=_preexec(limits, use_rlimit_as),
                close_fds=True)
            status, usage, timed_out, mem_exceeded = _wait(proc, start, limits, use_rlimit_as)
            wall = time.monotonic() - start
        # Anything the child left running in its group (daemons, pools) goes with it.
        _kill_group(proc.pid)
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code   # reaped by wait4: tell Popen so it does not try again
        sig = signal.Signals(-code).name if code < 0 else None
        return ChildRun(
            argv=list(argv), exit_code=None if code < 0 else code, signal=sig,
            timed_out=timed_out, memory_exceeded=mem_exceeded,
            stdout=_read_tail(out_path, limits.output_bytes),
            stderr=_read_tail(err_path, limits.output_bytes),
            max_rss_bytes=usage.ru_maxrss * 1024,   # Linux reports KiB
            wall_s=wall, ceiling="address space" if use_rlimit_as else "resident set",
            limits=limits)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        if own_tmp is not None:
            shutil.rmtree(own_tmp, ignore_errors=True)


def _wait(proc: subprocess.Popen, start: float, limits: Limits, use_rlimit_as: bool):
    deadline = start + limits.timeout_s
    delay = 0.002
    timed_out = mem_exceeded = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return status, usage, timed_out, mem_exceeded
        if time.monotonic() >= deadline:
            timed_out = True
        elif not use_rlimit_as and _rss_bytes(proc.pid) > limits.memory_bytes:
            mem_exceeded = True
        if timed_out or mem_exceeded:
            _kill_group(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            return status, usage, timed_out, mem_exceeded
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
