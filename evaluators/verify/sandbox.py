"""Run one command in an isolated child process: the parent half of the verifier's isolation.

Two levels (the setting JAXMEM_SANDBOX chooses; see `runner.isolation_for`):

- `bwrap` (default): the child runs in bubblewrap's namespaces: its own network (loopback only,
  nothing of the host's), PID namespace (when the run ends every descendant dies, whatever
  session it started), mount namespace with a read-only view of only the system libraries, the
  interpreter and its packages and the files of this run, a private /tmp and home, no data
  directory, no project tree; all capabilities dropped, an unprivileged uid inside.
- `process`: what every run also gets: a fresh process group (a timeout kills everything in it),
  a scrubbed environment (an allow-list, then a deny-list on top), a temporary working directory,
  a memory ceiling (RLIMIT_AS on CPU), a file-size limit, a wall-clock timeout, and where the
  machine allows it a cgroup that caps the number of processes (a fork bomb stops there).

User code needs `bwrap` (see `evaluators.verify.api`); the project's own snippets may run with
`process` where bubblewrap cannot start. Output goes to files, never pipes, so a chatty child
cannot deadlock the parent. Resource use comes from `os.wait4`.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import resource
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from jaxmem.core.errors import ConfigError

# Names never passed to a snippet (secrets, log-hiding variables): the corpus's schema defines them.
from jaxmem.ingest.schema import DENIED_PREFIXES, DENIED_SUBSTRINGS, LOG_HIDING, is_denied

GiB = 1 << 30
MiB = 1 << 20

# Names passed through from the parent. Everything else is dropped: a snippet is untrusted code
# and must not see tokens, and nothing else in the parent should change what it measures.
_ALLOWED = {"PATH", "HOME", "LANG", "LANGUAGE", "JAX_PLATFORMS"}
_ALLOWED_PREFIXES = ("LC_",)

# Accelerator plugins reserve huge virtual address ranges, so RLIMIT_AS would break them.
_ACCELERATOR_MODULES = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin",
                        "jax_rocm7_plugin", "libtpu")


def scrub_env(parent: Mapping[str, str], extra: Mapping[str, str] | None = None,
              *, pythonpath: str | None = None) -> dict[str, str]:
    """The child's whole environment: allowed parent names, then `extra` (a manifest's env)."""
    env = {k: v for k, v in parent.items()
           if (k in _ALLOWED or k.startswith(_ALLOWED_PREFIXES)) and not is_denied(k)}
    for name, value in (extra or {}).items():
        if is_denied(name):
            raise ValueError(
                f"environment variable {name!r} may not be passed to a snippet: names containing "
                f"{', '.join(DENIED_SUBSTRINGS)}, starting with {', '.join(DENIED_PREFIXES)}, "
                f"or one of {', '.join(sorted(LOG_HIDING))} are refused")
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
    # Tasks (processes and threads) of one run. XLA starts a few threads per core, so the cap
    # grows with the machine; a fork bomb meets it long before the host's limit.
    max_tasks: int = max(512, 16 * (os.cpu_count() or 1))


# ---- the bubblewrap sandbox ---------------------------------------------------------------------
SANDBOX_UID = 65534  # "nobody" inside the user namespace
# Device nodes an accelerator backend opens. Passed through only where they exist (GPU/TPU hosts),
# together with a read-only /sys, which the CUDA and TPU runtimes read for the PCI topology.
DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd", "/dev/accel*", "/dev/vfio/*")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")


def python_paths(python: str | None = None) -> list[Path]:
    """The interpreter and its packages: all the child may read of the Python installation.
    `python`: another interpreter (a virtual environment with the user's packages), asked once."""
    # A virtual environment's interpreter is a link to its base one: compare the links, not their targets.
    if python and os.path.abspath(python) != os.path.abspath(sys.executable):
        prefixes, packages = _interpreter_paths(python)
        executable = python
    else:
        prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix]
        # Package folders a .pth file added (a venv layered over another environment's packages)
        # are as much the installation as its own site-packages; other sys.path entries (the
        # working directory, PYTHONPATH) are not bound.
        extra = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
        packages = site.getsitepackages() + [site.getusersitepackages()] + extra
        executable = sys.executable
    paths = {Path(p).resolve() for p in prefixes}
    paths.add(Path(executable).resolve().parent.parent)
    for p in packages:
        if Path(p).is_dir():
            paths.add(Path(p).resolve())
    # Keep only the outermost of nested paths; bind them in a stable order.
    return sorted(p for p in paths if not any(q != p and p.is_relative_to(q) for q in paths))


class InterpreterError(ConfigError):
    """The interpreter named to run users' code (JAXMEM_RUN_PYTHON, --run-python) cannot be used."""


_ASK = ("import json, site, sys; print(json.dumps([[sys.prefix, sys.base_prefix, sys.exec_prefix], "
        "site.getsitepackages() + [p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))], "
        "list(sys.version_info[:2])]))")


@lru_cache(maxsize=8)
def _interpreter_paths(python: str) -> tuple[list[str], list[str]]:
    """Where another interpreter keeps itself and its packages (it is the operator's, not the user's)."""
    import json

    try:
        out = subprocess.run([python, "-I", "-c", _ASK], capture_output=True, text=True, timeout=60,
                             env={"PATH": os.defpath})
        prefixes, packages, version = json.loads(out.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise InterpreterError(f"the interpreter {python!r} cannot be used: {exc}",
                               "Set JAXMEM_RUN_PYTHON (or --run-python) to a Python 3.11+ that has jax.") from None
    if tuple(version) < (3, 11):
        raise InterpreterError(f"the interpreter {python!r} is Python {version[0]}.{version[1]}; the probe "
                               "needs 3.11 or newer (python -P)", "Point JAXMEM_RUN_PYTHON at Python 3.11+.")
    return prefixes, packages


def device_nodes() -> list[str]:
    return sorted({p for pattern in DEVICE_GLOBS for p in glob.glob(pattern)})


def bwrap_argv(argv: Sequence[str], *, writable: Sequence[Path], readonly: Sequence[Path], home: Path,
               cwd: Path, python: str | None = None, hidden: Sequence[Path] = ()) -> list[str]:
    cmd = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
           "--gid", str(SANDBOX_UID), "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--hostname", "jaxmem-sandbox", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            cmd += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            cmd += ["--ro-bind", str(host), str(host)]
    for name in _ETC:
        if (Path("/etc") / name).exists():
            cmd += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    devices = device_nodes()
    for node in devices:
        cmd += ["--dev-bind", node, node]
    if devices:
        cmd += ["--ro-bind", "/sys", "/sys"]
    for path in [*python_paths(python), *readonly]:
        cmd += ["--ro-bind", str(path), str(path)]
    for path in writable:
        cmd += ["--bind", str(path), str(path)]
    # Folders inside a bound tree the child must not see (the data directory under a user's home):
    # an empty tmpfs over each.
    for path in hidden:
        if Path(path).is_dir() and any(Path(path).resolve().is_relative_to(Path(r).resolve()) for r in readonly):
            cmd += ["--tmpfs", str(Path(path).resolve())]
    # The sandbox's own root (a tmpfs holding the mount points) read-only too: writable are only
    # `writable`, the run's directory and the private /tmp.
    cmd += ["--remount-ro", "/", "--setenv", "HOME", str(home), "--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd),
            "--", *argv]
    return cmd


@lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot start here, or None when it can (checked once per process)."""
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="jaxmem-bwrap-check-") as tmp:
        work = Path(tmp)
        argv = bwrap_argv([sys.executable, "-c", "pass"], writable=[work], readonly=[], home=work, cwd=work)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": os.defpath})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap failed to start: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap cannot create its namespaces here: {proc.stderr.strip()[:300] or proc.returncode}"
    return None


# ---- a cgroup per run: the process cap ----------------------------------------------------------
CLOSE_SECONDS = 10.0  # killed tasks leave the cgroup within milliseconds, seconds on a loaded machine
class TaskCap:
    """A pids cgroup (v2 or v1) holding one run, with `pids.max` = the run's task limit.

    Created only where the cgroup tree is writable (root, or a delegated subtree); elsewhere the
    run goes without, and RLIMIT_NPROC stands in for users other than root."""

    def __init__(self, limit: int):
        self.limit, self.path, self.closed = limit, None, False
        for parent in (_cgroup2_parent(), Path("/sys/fs/cgroup/pids")):
            if parent is None or not os.access(parent, os.W_OK) or not (parent / "cgroup.procs").exists():
                continue
            path = parent / f"jaxmem-{os.getpid()}-{time.monotonic_ns()}"
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "pids.max").write_text(str(limit))
            except OSError:
                path.rmdir()
                continue
            self.path = path
            break

    def join(self) -> None:
        """Called in the forked child before exec: everything it starts is counted."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    def peak(self) -> int | None:
        try:
            return int((self.path / "pids.peak").read_text())
        except (OSError, ValueError, TypeError):  # older kernels have no pids.peak
            return None

    def hit(self) -> bool:
        try:
            return "max 0" not in (self.path / "pids.events").read_text()
        except (OSError, TypeError):
            return False

    def close(self) -> None:
        """Kill what is left in the cgroup and remove it; a second call does nothing (`path` stays,
        for the report)."""
        if self.path is None or self.closed:
            return
        self.closed = True
        # No task may start from here on: a fork bomb would otherwise refill each slot the kills
        # below free, and outrun them on a loaded machine (seen in CI with the 1 s this loop had).
        try:
            (self.path / "pids.max").write_text("0")
        except OSError:
            pass
        deadline = time.monotonic() + CLOSE_SECONDS
        while True:
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.path.rmdir()  # succeeds once no task is left in it
            except FileNotFoundError:
                pass
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
            return


def _cgroup2_parent() -> Path | None:
    """Our own cgroup on a pure cgroup-v2 host with the pids controller delegated to it."""
    try:
        line = next(l for l in Path("/proc/self/cgroup").read_text().splitlines() if l.startswith("0::"))
    except (OSError, StopIteration):
        return None
    root = Path("/sys/fs/cgroup")
    if not (root / "cgroup.controllers").exists():
        return None
    path = root / line[3:].lstrip("/")
    try:
        return path if "pids" in (path / "cgroup.subtree_control").read_text().split() else None
    except OSError:
        return None


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
    isolation: str = "process"     # "bwrap" or "process"
    task_cap: bool = False         # whether a cgroup capped the number of tasks
    tasks_peak: int | None = None  # most tasks alive at once, where the cgroup reports it
    task_cap_hit: bool = False     # the run tried to start more tasks than allowed

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


def _preexec(limits: Limits, use_rlimit_as: bool, cap: TaskCap):
    def apply() -> None:
        # Runs in the forked child before exec: keep it to system calls.
        cap.join()
        if use_rlimit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        if cap.path is None and os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_tasks, limits.max_tasks))
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
                 cwd: Path | None = None, use_rlimit_as: bool | None = None, isolation: str = "process",
                 readonly: Sequence[Path] = (), writable: Sequence[Path] = (), scratch: Path | None = None,
                 python: str | None = None, hidden: Sequence[Path] = ()) -> ChildRun:
    """Run `argv` isolated; never raises for anything the child does.

    With `isolation="bwrap"` the child sees only `readonly` and `writable` (plus the system
    libraries and the interpreter `python`, default this one); `cwd` is writable unless it is one of
    `readonly` (a user's tree, mounted read-only as the working directory). `scratch` (default
    `cwd`) holds the child's home and temporary files; `hidden` folders inside `readonly` are
    covered by an empty tmpfs (bwrap only)."""
    if use_rlimit_as is None:
        use_rlimit_as = not accelerator_plugin_present()
    own_tmp = None
    if cwd is None:
        own_tmp = Path(tempfile.mkdtemp(prefix="jaxmem-child-"))
        cwd = own_tmp
    out_dir = Path(tempfile.mkdtemp(prefix="jaxmem-out-"))
    cap = TaskCap(limits.max_tasks)
    try:
        out_path, err_path = out_dir / "stdout", out_dir / "stderr"
        scratch = Path(scratch or cwd)
        # Temporary files the child makes land in its own directory and go with it.
        child_env = {"TMPDIR": str(scratch), **env}
        if isolation == "bwrap":
            home = scratch / ".home"
            home.mkdir(exist_ok=True)
            cwd_writable = [] if any(Path(cwd) == Path(r) for r in readonly) else [Path(cwd)]
            argv = bwrap_argv(argv, writable=[*cwd_writable, scratch, *writable], readonly=readonly, home=home,
                              cwd=Path(cwd), python=python, hidden=hidden)
            child_env = {**env, "HOME": str(home)}
        # fd 2 in append mode: a child that seeks on it cannot write over what is already there.
        with out_path.open("wb") as out, err_path.open("ab") as err:
            start = time.monotonic()
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=err, start_new_session=True, preexec_fn=_preexec(limits, use_rlimit_as, cap),
                close_fds=True)
            try:
                status, usage, timed_out, mem_exceeded = _wait(proc, start, limits, use_rlimit_as)
            except BaseException:  # Ctrl-C or SIGTERM of the parent: the child's group goes too
                _kill_group(proc.pid)
                proc.wait()
                raise
            wall = time.monotonic() - start
        # Anything the child left running in its group (daemons, pools) goes with it; in the
        # sandbox the PID namespace ended with it already, and the cgroup catches the rest.
        _kill_group(proc.pid)
        peak, hit = cap.peak(), cap.hit()
        cap.close()
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
            limits=limits, isolation=isolation, task_cap=cap.path is not None, tasks_peak=peak,
            task_cap_hit=hit)
    finally:
        cap.close()
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
