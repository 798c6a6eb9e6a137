"""The child half of the verifier: install measurement hooks, run one snippet, write a JSON result.

Run as `python -P probe.py CONFIG.json`. Stdout belongs to the snippet; the result goes to the
file named in the config. Transfer counts are not taken here: the transfer guard logs from C++
straight to file descriptor 2, so the parent counts those lines, and this module only writes
markers to fd 2 that delimit the snippet and its explicit `device_put` calls.

The measured code is untrusted and runs in this process, so it could hide or fake what the parent
counts. What it could do naively is made impossible or detected: fd 2 carries only the guard's
lines and the markers (the snippet's own `sys.stderr` goes to a file of its own); markers and the
result carry a per-run nonce the parent chose (read from the config, which is then deleted);
replacing, closing, reopening or writing fd 2, or the run ending before the probe's end marker,
makes the run "tampered", which the parent reports as not measurable instead of as numbers.
With `attribute` in the config (a user's script or command), a line tracer over the user's own
files (the `roots`) also writes event markers on fd 2: a host sync or a compilation at the line of
the user's code that caused it, and after any user line during which something was written to fd 2
a "trailing" marker naming that line, so the parent can put each guard line (a transfer) on the
line that made it. Each marker also names the user's enclosing loops and their iteration, which
separates the first (compiling) step from the steady steps (see `attribution.py`, the parent half).
Donation that took effect is measured here too (`Hooks._install_aliasing`): every execution of a
compiled program whose inputs XLA aliases to its outputs (`input_output_alias` of the compiled
module, which is what `donate_argnums` asks for) counts the bytes of the aliased inputs that the
call consumed (the donated array is deleted after it), per device as XLA's memory analysis counts
them, and, when attributing, writes an event marker on the line of the user's code that made the
call. Such programs run through JAX's Python dispatch path in the measured process (their C++ fast
path would execute them where no hook sees it): a few tens of microseconds more per call, which
only wall time (information, never judged) can show.
Must stay importable without the rest of the project (only the standard library and jax).
"""
from __future__ import annotations

import ast
import builtins
import itertools
import json
import linecache
import os
import re
import sys
import threading
import time
import traceback
from pathlib import Path
from urllib.parse import quote

MARK_PREFIX = "@@jaxmem:"
# Each marker is MARK_PREFIX + nonce + ":" + name + "@@"; the parent knows the nonce, the snippet does not.
BEGIN, END, EXPLICIT_BEGIN, EXPLICIT_END = "snippet-begin", "snippet-end", "explicit-begin", "explicit-end"
# A process the snippet starts writes to the same fd 2: whatever it prints could pass for guard lines.
_SPAWN_EVENTS = ("os.system", "subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty")
# Paths that reach this process's fd 2 under another descriptor.
_FD2_PATHS = ("/dev/stderr", "/dev/fd/2", "/proc/self/fd/2")
# C functions that reach a file descriptor without passing os.* (looked up through ctypes).
_FD_SYMBOLS = frozenset({"write", "writev", "pwrite", "pwrite64", "pwritev", "dup", "dup2", "dup3", "close",
                         "close_range", "ftruncate", "ftruncate64", "lseek", "lseek64", "syscall"})

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_YIELD_VALUE = __import__("dis").opmap["YIELD_VALUE"]

# Public ways to read a device array's value on the host. Each one is a host sync point.
_SYNC_METHODS = ("__float__", "__int__", "__bool__", "__index__", "__complex__", "item", "tolist",
                 "__array__", "__str__", "__repr__", "__format__", "tobytes")

_NUMPY_CONVERTERS = ("asarray", "array", "asanyarray", "ascontiguousarray", "copy")


def marker(nonce: str, name: str) -> str:
    return f"{MARK_PREFIX}{nonce}:{name}@@"


class Guard:
    """Keeps fd 2 for the transfer guard and the markers, and notes any attempt to touch it."""

    def __init__(self, nonce: str):
        self._nonce = nonce
        self.tampered: list[str] = []
        self.active = False
        self._fd2 = None
        self._write = os.write
        self._lseek = os.lseek  # the originals: install() wraps the os functions the snippet sees
        self._spawning = threading.local()
        self.wrapped: dict = {}

    def mark(self, name: str) -> None:
        # Flush Python's buffers first so the marker lands after everything written before it.
        sys.stdout.flush()
        self._write(2, f"{marker(self._nonce, name)}\n".encode())

    def event(self, body: str) -> None:
        """An attribution marker (no flush: stdout is another file, and these are many)."""
        self._write(2, f"{MARK_PREFIX}{self._nonce}:{body}@@\n".encode())

    def install(self, user_stderr: Path) -> None:
        st = os.fstat(2)
        self._fd2 = (st.st_dev, st.st_ino)
        # The snippet's Python-level stderr (print(..., file=sys.stderr), logging, warnings) is
        # its own file: nothing it prints can pass for a guard line or a marker.
        sys.stderr = open(user_stderr, "w", buffering=1, encoding="utf-8", errors="replace")
        # sys.__stderr__ would still write to fd 2 (through io, not os.write): it is the same file.
        sys.__stderr__ = sys.stderr
        guard = self

        def _is_fd2(fd) -> bool:
            return isinstance(fd, int) and fd == 2

        def wrap(name, check):
            original = getattr(os, name)

            def wrapper(*args, **kwargs):
                if guard.active and check(*args, **kwargs):
                    guard.note(f"the code called os.{name} on file descriptor 2")
                return original(*args, **kwargs)
            setattr(os, name, wrapper)

        wrap("dup", lambda fd, *a, **k: _is_fd2(fd))
        wrap("dup2", lambda fd, fd2, *a, **k: _is_fd2(fd2) or _is_fd2(fd))
        wrap("close", lambda fd, *a, **k: _is_fd2(fd))
        wrap("closerange", lambda lo, hi, *a, **k: lo <= 2 < hi)
        wrap("write", lambda fd, *a, **k: _is_fd2(fd))
        wrap("writev", lambda fd, *a, **k: _is_fd2(fd))
        wrap("pwrite", lambda fd, *a, **k: _is_fd2(fd))
        wrap("lseek", lambda fd, *a, **k: _is_fd2(fd))
        self.wrapped = {name: getattr(os, name) for name in ("dup", "dup2", "close", "closerange", "write",
                                                             "writev", "pwrite", "lseek")}
        import fcntl
        original_fcntl = fcntl.fcntl

        def fcntl_wrapper(fd, cmd, *args):
            if guard.active and _is_fd2(fd) and cmd in (fcntl.F_DUPFD, fcntl.F_DUPFD_CLOEXEC):
                guard.note("the code duplicated file descriptor 2 (fcntl)")
            return original_fcntl(fd, cmd, *args)
        fcntl.fcntl = fcntl_wrapper
        self._install_subprocess()

        def audit(event: str, args) -> None:
            if not guard.active:
                return
            if event == "open" and args and (str(args[0]) in _FD2_PATHS or args[0] == 2):
                guard.note(f"the code opened {args[0]}")
            elif event == "os.truncate" and args and (args[0] == 2 or str(args[0]) in _FD2_PATHS):
                guard.note("the code truncated file descriptor 2")
            elif event == "ctypes.dlsym" and len(args) > 1 and str(args[1]) in _FD_SYMBOLS:
                guard.note(f"the code looked up the C function {args[1]} through ctypes (file descriptors "
                           "without os.*)")
            elif event in _SPAWN_EVENTS and not getattr(guard._spawning, "safe", False):
                guard.note("the code started a process, whose output shares file descriptor 2")
        sys.addaudithook(audit)

    def _install_subprocess(self) -> None:
        """Processes started through `subprocess` (matplotlib asks fc-list for fonts) get the user's
        stderr file instead of fd 2, so they cannot write there and need not make the run tampered;
        one that is handed fd 2 itself, or any other way of starting a process, still does."""
        import subprocess

        guard = self
        user_stderr = sys.stderr
        original_init = subprocess.Popen.__init__

        def is_fd2(target) -> bool:
            if isinstance(target, int):
                return target == 2
            try:
                return target is not None and target.fileno() == 2
            except (AttributeError, OSError, ValueError):
                return False

        def init(popen, args, bufsize=-1, executable=None, stdin=None, stdout=None, stderr=None, *rest, **kwargs):
            if stderr is None:
                stderr = user_stderr
            into_stdout = stderr == subprocess.STDOUT
            guard._spawning.safe = guard.active and not (is_fd2(stdout) if into_stdout else is_fd2(stderr))
            try:
                original_init(popen, args, bufsize, executable, stdin, stdout, stderr, *rest, **kwargs)
            finally:
                guard._spawning.safe = False
        subprocess.Popen.__init__ = init
        self.wrapped["Popen.__init__"] = init

    def note(self, what: str) -> None:
        if what not in self.tampered:
            self.tampered.append(what)

    def intact(self) -> bool:
        """Whether the wrappers that watch fd 2 are still the ones the snippet calls."""
        import subprocess

        return all((subprocess.Popen.__init__ if name == "Popen.__init__" else getattr(os, name, None)) is f
                   for name, f in self.wrapped.items())

    def check_fd2(self) -> None:
        try:
            st = os.fstat(2)
        except OSError:
            self.note("file descriptor 2 was closed")
            return
        if (st.st_dev, st.st_ino) != self._fd2:
            self.note("file descriptor 2 was replaced")


_INTERNAL_PACKAGES = ("jax", "jaxlib", "numpy")
_CO_GENERATORS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_MAX_USER_FRAMES = 32


class _Loops:
    """The loops of one user file, from its syntax tree: for each `for`/`while` header line the
    loop's last line and its header's last line, and for each line the headers of the loops around
    it, innermost first. Lines of a nested function carry the outer loops too: only the frame that
    executes a header counts its iterations, so another frame's loops never show up."""

    def __init__(self, path: str):
        self.end: dict[int, int] = {}
        self.head_end: dict[int, int] = {}
        self.around: dict[int, tuple[int, ...]] = {}
        try:
            tree = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return
        self._visit(tree, ())

    def _visit(self, node: ast.AST, loops: tuple[int, ...]) -> None:
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.body:
            h = node.lineno
            body_end = max(getattr(b, "end_lineno", None) or b.lineno for b in node.body)
            self.end[h] = body_end
            self.head_end[h] = max(h, node.body[0].lineno - 1)
            here = (h, *loops)
            for line in range(h, body_end + 1):
                self.around[line] = here
            for part in (node.body, [getattr(node, "test", None) or getattr(node, "iter", None)]):
                for child in part:
                    if child is not None:
                        self._visit(child, here)
            for child in node.orelse:
                self._visit(child, loops)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child, loops)


class Attribution:
    """Puts what the snippet does on the lines of the user's code that did it.

    A line tracer runs in the user's frames only (files under `roots`, not site-packages). It
    counts each loop's iterations per frame activation and, whenever something was written to fd 2
    since the thread last looked (a transfer guard line), writes a trailing marker naming the user's
    line that was running. Syncs and compilations write their own markers. Every marker carries a
    context: the user's call chain (innermost line first) and the enclosing loops with their
    iteration, so the parent can tell the first step of a loop from the steady ones."""

    def __init__(self, guard: Guard, roots: list[str], probe_file: str):
        self.guard = guard
        self.roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots)
        self.probe_file = os.path.realpath(probe_file)
        self.active = False
        self.counts = {"s": 0, "c": 0, "a": 0, "ab": 0}   # syncs, compiles, aliased calls and their bytes
        self.ran: set[tuple[str, int]] = set()   # (file, line) of every user line that ran
        self.error: str | None = None             # why attribution stopped (a bug of the probe's)
        self._user: dict = {}
        self._sites: dict[tuple[str, int], int] = {}
        self._loops: dict[str, _Loops] = {}
        self._frames: dict[int, list] = {}
        self._acts = itertools.count(1)
        self._tl = threading.local()
        self._internal: tuple[str, ...] = ()
        self._stdlib: tuple[str, ...] = ()
        # Bound now: the snippet may rebind the os and sys functions, not these references.
        self._lseek, self._getframe, self._tid = guard._lseek, sys._getframe, threading.get_native_id
        self._settrace, self._gettrace = sys.settrace, sys.gettrace
        # One function each, so that what sys.gettrace() returns can be compared with it. The global
        # one runs on every Python call of the process: a closure, and the shortest path for code
        # that is not the user's (most calls).
        self._local_tracer = self._local
        user_get, is_user, enter = self._user.get, self.is_user, self._enter_traced

        def tracer(frame, event, arg):
            code = frame.f_code
            user = user_get(code)
            if user is None:
                user = is_user(code)
            return enter(frame, code) if user else None
        self._tracer = tracer

    # ---- which code is the user's -------------------------------------------------------------
    def is_user(self, code) -> bool:
        known = self._user.get(code)
        if known is None:
            name = code.co_filename
            real = os.path.realpath(name) if os.path.isabs(name) else ""
            known = bool(real) and real.startswith(self.roots) and real != self.probe_file \
                and not any(p in real for p in ("/site-packages/", "/dist-packages/"))
            self._user[code] = known
        return known

    def _is_internal(self, name: str) -> bool:
        """JAX, NumPy, the standard library and the probe: never the library line to name."""
        if not os.path.isabs(name) or name == self.probe_file or name.startswith(self._internal):
            return True
        return name.startswith(self._stdlib) and "/site-packages/" not in name and "/dist-packages/" not in name

    def _site(self, path: str, line: int) -> int:
        key = (path, line)
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = len(self._sites) + 1
            self.guard.event(f"d:{site}:{line}:{quote(path)}")
        return site

    def _loopmap(self, path: str) -> _Loops:
        loops = self._loops.get(path)
        if loops is None:
            loops = self._loops[path] = _Loops(path)
        return loops

    # ---- the tracer ---------------------------------------------------------------------------
    def start(self) -> None:
        import jax
        import jaxlib
        import numpy

        self._internal = tuple(os.path.join(os.path.dirname(os.path.realpath(m.__file__)), "")
                               for m in (jax, jaxlib, numpy))
        self._internal += tuple(os.path.join(os.path.dirname(m.__file__), "") for m in (jax, jaxlib, numpy))
        self._stdlib = tuple({os.path.join(os.path.dirname(os.__file__), ""),
                              os.path.join(os.path.dirname(os.path.realpath(os.__file__)), "")})
        self._tl.pos = self._lseek(2, 0, os.SEEK_CUR)
        self.active = True
        threading.settrace(self._tracer)
        self._settrace(self._tracer)
        guard = self.guard
        attribution = self

        def settrace(func):  # the snippet's own tracer would replace the one that attributes lines
            if attribution.active and func != attribution._tracer:
                guard.note("the code set its own trace function (sys.settrace), which replaces the probe's "
                           "line attribution")
            return attribution._settrace(func)
        sys.settrace = settrace
        self._own_settrace = settrace

    def stop(self) -> None:
        self.flush(self._getframe(1))
        if self._gettrace() != self._tracer or sys.settrace is not self._own_settrace:
            self.guard.note("the probe's line tracer was replaced or removed while the code ran")
        self.active = False
        self._settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        for key, state in list(self._frames.items()):
            self._end_activation(state)
            del self._frames[key]

    def _enter_traced(self, frame, code):
        if not self.active:
            return None
        try:
            return self._enter(frame, code)
        except Exception as exc:  # the probe's own failure must not become the user's
            return self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self.error = f"{type(exc).__name__}: {exc}"
        self.active = False
        return None

    def _enter(self, frame, code):
        # What was written since the last look belongs to the caller's line.
        if frame.f_back is not None:
            self.flush(frame.f_back)
        key = id(frame)
        state = self._frames.get(key)
        if state is None or state[5] is not code:
            path = code.co_filename
            loops = self._loopmap(path)
            # [activation, hits per header, exhausted per header, last line, loops, code]
            self._frames[key] = [next(self._acts), {}, {}, 0, loops, code]
        return self._local_tracer

    def _local(self, frame, event, arg):
        if not self.active:
            return None
        try:
            self._event(frame, event)
        except Exception as exc:
            return self._failed(exc)
        return self._local_tracer

    def _event(self, frame, event) -> None:
        if event == "line":
            state = self._frames.get(id(frame))
            if state is None:
                return
            last = state[3]
            if self._lseek(2, 0, os.SEEK_CUR) != getattr(self._tl, "pos", -1):
                self._trailing(frame, last or None)
            line = frame.f_lineno
            loops = state[4]
            end = loops.end
            if line in end:
                if not (line < last <= loops.head_end[line]):  # not from the header's own later lines
                    hits = state[1]
                    hits[line] = hits.get(line, 0) + 1
            if last in end and not (last <= line <= end[last]):
                exhausted = state[2]        # left the loop from its header: the iterator ran out
                exhausted[last] = exhausted.get(last, 0) + 1
            state[3] = line
            self.ran.add((state[5].co_filename, line))
        elif event == "return":
            self.flush(frame)
            code = frame.f_code
            if code.co_flags & _CO_GENERATORS and code.co_code[frame.f_lasti] == _YIELD_VALUE:
                return  # suspended, not finished: its loop counts go on at the next resume
            state = self._frames.pop(id(frame), None)
            if state is not None:
                self._end_activation(state)

    def _end_activation(self, state: list) -> None:
        path = state[5].co_filename
        if state[3] in state[1]:  # the frame ended on a loop's header: its iterator had run out
            state[2][state[3]] = state[2].get(state[3], 0) + 1
        for header, hits in state[1].items():
            iterations = hits - state[2].get(header, 0)
            self.guard.event(f"l:{self._site(path, header)}:{state[0]}:{iterations}")

    # ---- markers ------------------------------------------------------------------------------
    def flush(self, frame) -> None:
        """Name the user's line running now if anything was written to fd 2 since the last look."""
        if self._lseek(2, 0, os.SEEK_CUR) != getattr(self._tl, "pos", -1):
            self._trailing(frame, None)

    def _trailing(self, frame, line: int | None) -> None:
        self.guard.event(f"t:{self._tid()}:{self.context(frame, line)}")
        self._tl.pos = self._lseek(2, 0, os.SEEK_CUR)

    def context(self, frame, line: int | None = None) -> str:
        """`site<site<...|loop.activation.iteration,...`: the user's frames from the innermost out,
        and the loops around each with their iteration in that frame."""
        sites: list[str] = []
        loops: list[str] = []
        f = frame
        while f is not None and len(sites) < _MAX_USER_FRAMES:
            code = f.f_code
            user = self._user.get(code)
            if user is None:
                user = self.is_user(code)
            if user:
                here = f.f_lineno if line is None or sites else line
                path = code.co_filename
                state = self._frames.get(id(f))
                if state is not None and state[5] is not code:
                    state = None
                # The innermost frame with its activation: how often its line ran outside loops.
                act = f".{state[0]}" if state is not None and not sites else ""
                sites.append(f"{self._site(path, here)}{act}")
                if state is not None:
                    hits = state[1]
                    for header in state[4].around.get(here, ()):
                        n = hits.get(header)
                        if n:
                            loops.append(f"{self._site(path, header)}.{state[0]}.{n}")
            f = f.f_back
        return "<".join(sites) + "|" + ",".join(loops)

    def _outside(self, frame):
        """The innermost user frame from `frame` out, and the innermost library frame before it."""
        lib = None
        f = frame
        while f is not None:
            code = f.f_code
            user = self._user.get(code)
            if user is None:
                user = self.is_user(code)
            if user:
                return f, lib
            if lib is None and not self._is_internal(code.co_filename):
                lib = f
            f = f.f_back
        return None, lib

    def _lib(self, lib) -> str:
        return "" if lib is None else str(self._site(lib.f_code.co_filename, lib.f_lineno))

    def sync(self, frame, how: str, nbytes: int | None) -> None:
        user, lib = self._outside(frame)
        if user is None:
            return  # not the user's code (the probe's own set-up, or a thread with no user frame)
        self.flush(user)
        self.counts["s"] += 1
        self.guard.event(f"s:{self._tid()}:{self.context(user)}:{how}:{'' if nbytes is None else nbytes}:"
                         f"{self._lib(lib)}")
        self._tl.pos = self._lseek(2, 0, os.SEEK_CUR)

    def alias(self, frame, nbytes: int, fun_name: str) -> None:
        """A call of a compiled program that consumed `nbytes` of donated, aliased input."""
        user, lib = self._outside(frame)
        if user is None:
            return
        self.flush(user)
        self.counts["a"] += 1
        self.counts["ab"] += nbytes
        self.guard.event(f"a:{self._tid()}:{self.context(user)}:{nbytes}:{self._lib(lib)}:{quote(str(fun_name))}")
        self._tl.pos = self._lseek(2, 0, os.SEEK_CUR)

    def compile(self, frame, fun_name: str) -> None:
        user, lib = self._outside(frame)
        if user is None:
            return
        self.flush(user)
        self.counts["c"] += 1
        self.guard.event(f"c:{self._tid()}:{self.context(user)}:{self._lib(lib)}:{quote(str(fun_name))}")
        self._tl.pos = self._lseek(2, 0, os.SEEK_CUR)


class Hooks:
    """Counters the snippet feeds while it runs; `active` is off outside the snippet."""

    def __init__(self, user_file: str, guard: Guard, attribution: Attribution | None = None):
        self.guard = guard
        self.user_file = os.path.realpath(user_file)
        self.attribution = attribution
        self.active = False
        self.compiles = 0
        self.syncs: list[dict] = []
        # Calls that consumed donated, aliased inputs: how many, their bytes, the largest call's,
        # per compiled program; `alias_error` says why none could be measured (a JAX without the
        # internals this reads).
        self.aliased = {"calls": 0, "bytes": 0, "max_call_bytes": 0, "by_function": {}}
        self.alias_error: str | None = None
        self._depth = threading.local()
        self._installed: list[tuple[object, str, object]] = []

    def _set(self, owner, name: str, value) -> None:
        setattr(owner, name, value)
        self._installed.append((owner, name, value))

    def intact(self) -> bool:
        """Whether every hook is still in place (the snippet may have put an original back)."""
        return all(getattr(owner, name, None) is value for owner, name, value in self._installed) and \
            self._on_duration in self._listeners

    def install(self) -> None:
        import jax
        from jax._src import config as jax_config
        from jax._src import monitoring
        from jax._src.array import ArrayImpl

        getframe = sys._getframe

        def on_duration(event: str, _duration: float, **kw) -> None:
            if self.active and event == COMPILE_EVENT:
                self.compiles += 1
                if self.attribution is not None:
                    self.attribution.compile(getframe(1), kw.get("fun_name", ""))
        jax.monitoring.register_event_duration_secs_listener(on_duration)
        self._on_duration = on_duration
        self._listeners = monitoring._event_duration_secs_listeners

        for name in _SYNC_METHODS:
            original = getattr(ArrayImpl, name, None)
            if original is not None:
                self._set(ArrayImpl, name, self._sync_wrapper(original, name))
        self._set(jax, "device_get", self._sync_wrapper(jax.device_get, "jax.device_get", explicit=True))
        # NumPy reads CPU arrays through the buffer protocol, never calling `__array__`, so
        # the conversion functions themselves are wrapped (only jax.Array arguments count).
        import numpy as np
        for name in _NUMPY_CONVERTERS:
            self._set(np, name, self._sync_wrapper(getattr(np, name), f"np.{name}",
                                                   only_if=lambda a, *_r, **_k: isinstance(a, jax.Array)))

        original_put = jax.device_put

        def device_put(*args, **kwargs):
            # Nested puts (device_put of a pytree) sit inside one marked region.
            if not self.active or getattr(self._depth, "put", 0):
                return original_put(*args, **kwargs)
            self._depth.put = 1
            if self.attribution is not None:
                self.attribution.flush(getframe(1))
            self.guard.mark(EXPLICIT_BEGIN)
            try:
                # A snippet's own guard ("disallow", "log") allows explicit transfers but does not
                # log them; log them here so they are counted. "*_explicit" levels stay as set.
                level = jax_config.transfer_guard_host_to_device.value
                if level in ("allow", "log", "disallow"):
                    with jax.transfer_guard_host_to_device("log_explicit"):
                        return original_put(*args, **kwargs)
                return original_put(*args, **kwargs)
            finally:
                # The transfers inside belong to the caller's line: name it before the region ends.
                if self.attribution is not None:
                    self.attribution.flush(getframe(1))
                self.guard.mark(EXPLICIT_END)
                self._depth.put = 0
        self._set(jax, "device_put", device_put)
        try:
            self._install_aliasing()
        except Exception as e:  # another JAX's internals: the rest of the measurement stands
            self.alias_error = f"donation cannot be measured with this JAX ({type(e).__name__}: {e})"

    def _install_aliasing(self) -> None:
        """Count the donated bytes each execution really aliased.

        What a call aliased is read from the compiled program (the parameters its module aliases to
        outputs, and their per-device shapes) and from the call (each such input's array was
        consumed: deleted after the call). Everything read is bound now, before the snippet runs:
        the snippet may rebind `ArrayImpl.is_deleted`, `nbytes` or the executable's methods, not
        these references. Aliasing programs lose JAX's C++ fast path in this process, so that each
        of their calls passes the hooks on the executable's `execute_sharded`/`execute` (which also
        see code that executes a compiled program itself)."""
        from collections import OrderedDict

        from jax._src.array import ArrayImpl
        from jax._src.interpreters import pxla
        from jax._src.lib import _jax, hlo

        hooks = self
        getframe = sys._getframe
        hlo_modules = _jax.LoadedExecutable.hlo_modules
        to_string = hlo.HloModule.to_string
        memory_stats = _jax.LoadedExecutable.get_compiled_memory_stats
        alias_size = _jax.CompiledMemoryStats.__dict__["alias_size_in_bytes"].__get__
        is_deleted = ArrayImpl.is_deleted
        cache: OrderedDict = OrderedDict()   # id(executable) -> (executable, {param: bytes}, module name)

        def program(executable) -> tuple:
            key = id(executable)
            hit = cache.get(key)
            if hit is not None and hit[0] is executable:
                cache.move_to_end(key)
                return hit
            params, name = {}, ""
            # XLA's own total first: a program that aliases nothing is not printed (a large module's
            # text would add to the very peak memory being measured).
            try:
                aliases = alias_size(memory_stats(executable))
            except TypeError:
                aliases = 0                          # not a real executable (one the code made up)
            except Exception:
                aliases = None                       # a backend without memory stats: read the text
            try:
                modules = hlo_modules(executable) if aliases != 0 else ()
                if len(modules) == 1:
                    text = to_string(modules[0])
                    params = aliased_params(text)
                    name = text[:200].split("\n", 1)[0].split(" ")[1].rstrip(",") if text.startswith("HloModule ") \
                        else ""
            except Exception:
                pass
            hit = cache[key] = (executable, params, name)   # held: its id is not reused while cached
            if len(cache) > 256:
                cache.popitem(last=False)
            return hit

        original_fastpath = pxla.MeshExecutableFastpathData

        def fastpath(xla_executable, *args, **kwargs):
            if program(xla_executable)[1]:
                return None     # no C++ fast path: every call executes through the methods below
            return original_fastpath(xla_executable, *args, **kwargs)

        def counting(original):
            # Every way Python executes a compiled program (JAX's dispatch, or code calling the
            # executable itself); the arguments are the program's parameters, in order.
            def execute(executable, arguments, *args, **kwargs):
                _exe, params, name = program(executable) if hooks.active else (None, None, "")
                if not params:
                    return original(executable, arguments, *args, **kwargs)
                watched = [(x, params[p]) for p, x in enumerate(arguments)
                           if p in params and type(x) is ArrayImpl and not is_deleted(x)]
                out = original(executable, arguments, *args, **kwargs)
                consumed = sum(n for x, n in watched if is_deleted(x))
                if consumed:
                    hooks._record_alias(name, consumed, getframe(1))
                return out
            execute.__name__ = original.__name__
            return execute

        self._set(pxla, "MeshExecutableFastpathData", fastpath)
        for method in ("execute_sharded", "execute"):
            if hasattr(_jax.LoadedExecutable, method):
                self._set(_jax.LoadedExecutable, method, counting(getattr(_jax.LoadedExecutable, method)))

    def _record_alias(self, fun_name: str, nbytes: int, caller) -> None:
        a = self.aliased
        a["calls"] += 1
        a["bytes"] += nbytes
        a["max_call_bytes"] = max(a["max_call_bytes"], nbytes)
        by = a["by_function"]
        if fun_name in by or len(by) < 64:
            by[fun_name] = by.get(fun_name, 0) + nbytes
        if self.attribution is not None:
            self.attribution.alias(caller, nbytes, fun_name)

    def _sync_wrapper(self, original, name: str, only_if=None, explicit: bool = False):
        hooks = self
        getframe = sys._getframe

        def wrapper(*args, **kwargs):
            depth = getattr(hooks._depth, "sync", 0)
            counted = hooks.active and depth == 0 and (only_if is None or (args and only_if(*args, **kwargs)))
            if counted:
                hooks._record_sync(name, getframe(1), args[0] if args else None)
            hooks._depth.sync = depth + 1
            marked = counted and explicit and hooks.attribution is not None
            if marked:  # device_get: its device->host guard lines (GPU, TPU) are explicit ones
                hooks.attribution.flush(getframe(1))
                hooks.guard.mark(EXPLICIT_BEGIN)
            try:
                return original(*args, **kwargs)
            finally:
                hooks._depth.sync = depth
                if marked:
                    hooks.attribution.flush(getframe(1))
                    hooks.guard.mark(EXPLICIT_END)
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _record_sync(self, how: str, caller, value) -> None:
        if self.attribution is not None:
            self.attribution.sync(caller, how, _nbytes(value))
            frame, _lib = self.attribution._outside(caller)
        else:
            # The innermost frame in the user's file is the line to blame.
            frame = caller
            while frame is not None and os.path.realpath(frame.f_code.co_filename) != self.user_file:
                frame = frame.f_back
        if frame is None:
            self.syncs.append({"line": None, "source": None, "how": how})
            return
        line = frame.f_lineno
        source = linecache.getline(frame.f_code.co_filename, line).strip()
        self.syncs.append({"line": line, "source": source, "how": how})


# Bytes per element of XLA's primitive types (sub-byte ones packed); unknown types count no bytes.
_HLO_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                 "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5, "s2": 0.25,
                 "u2": 0.25, "s1": 0.125, "u1": 0.125, "token": 0}


def _hlo_section(header: str, key: str) -> str | None:
    """The text between the braces after `key=` in an HLO module's header line, braces balanced."""
    start = header.find(key + "={")
    if start < 0:
        return None
    i = start + len(key) + 2
    depth = 1
    for j in range(i, len(header)):
        c = header[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return header[i:j]
    return None


def _hlo_shape(text: str, i: int):
    """One shape of an HLO layout from position i: bytes of an array, or a list for a tuple."""
    while text[i] == " ":
        i += 1
    if text[i] == "(":
        items = []
        i += 1
        while text[i] != ")":
            item, i = _hlo_shape(text, i)
            items.append(item)
            while text[i] in ", ":
                i += 1
        return items, i + 1
    j = text.index("[", i)
    kind = text[i:j]
    k = text.index("]", j)
    n = 1
    for d in text[j + 1:k].split(","):
        d = d.strip().lstrip("<=")
        if d:
            n *= int(d) if d.isdigit() else 0
    i = k + 1
    if i < len(text) and text[i] == "{":     # the layout: {1,0}, {0:T(8,128)}, ...
        depth = 0
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
    size = _HLO_ITEMSIZE.get(kind)
    if size is None and kind[:2] in ("f8", "f4", "f6"):
        size = {"f8": 1, "f6": 0.75, "f4": 0.5}[kind[:2]]
    return int(n * (size or 0)), i


def aliased_params(hlo_text: str) -> dict[int, int]:
    """{parameter: bytes per device} of the parameters a compiled module aliases to its outputs,
    read from its header line: `input_output_alias={ {0}: (0, {}, may-alias) }` and
    `entry_computation_layout={(f32[100]{0}, ...)->...}`."""
    header = hlo_text.split("\n", 1)[0]
    alias = _hlo_section(header, "input_output_alias")
    layout = _hlo_section(header, "entry_computation_layout")
    if not alias or not layout or not layout.startswith("("):
        return {}
    try:
        shapes, _ = _hlo_shape(layout, 0)
    except (ValueError, IndexError):
        return {}
    out: dict[int, int] = {}
    for param, index in re.findall(r"\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*,\s*(?:may|must)-alias\s*\)", alias):
        p = int(param)
        if p >= len(shapes):
            continue
        shape = shapes[p]
        for part in (x for x in index.split(",") if x.strip()):
            shape = shape[int(part)] if isinstance(shape, list) and int(part) < len(shape) else 0
        while isinstance(shape, list):       # a whole tuple parameter aliased: all its leaves
            shape = sum(x if isinstance(x, int) else 0 for x in shape)
        out[p] = out.get(p, 0) + shape
    return out


def _nbytes(value) -> int | None:
    """Bytes a host read of `value` brings over (an array, or the arrays of a pytree)."""
    n = getattr(value, "nbytes", None)
    if isinstance(n, int):
        return n
    if isinstance(value, (list, tuple, dict)):
        try:
            import jax
            return sum(int(getattr(leaf, "nbytes", 0) or 0) for leaf in jax.tree_util.tree_leaves(value))
        except Exception:
            return None
    return None


def _live_bytes() -> tuple[int, int, dict[str, int]]:
    """Total live bytes and the largest per-device share, each buffer counted once."""
    import jax
    seen: set[tuple[int, int]] = set()
    per_device: dict[str, int] = {}
    for arr in jax.live_arrays():
        for shard in arr.addressable_shards:
            data = shard.data
            try:
                key = (shard.device.id, data.unsafe_buffer_pointer())
            except Exception:  # deleted or donated between listing and reading
                continue
            if key in seen:
                continue
            seen.add(key)
            nbytes = data.nbytes
            per_device[str(shard.device)] = per_device.get(str(shard.device), 0) + nbytes
    return sum(per_device.values()), max(per_device.values(), default=0), per_device


def _device_info() -> dict:
    import jax
    import jaxlib
    devices = jax.devices()
    info = {"backend": jax.default_backend(), "device_kind": devices[0].device_kind,
            "device_count": len(devices), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "memory_stats": None}
    stats = [d.memory_stats() for d in jax.local_devices()]
    if all(s is not None for s in stats) and stats:
        def biggest(*keys: str) -> int | None:
            for key in keys:
                values = [s[key] for s in stats if key in s]
                if values:
                    return max(values)
            return None
        info["memory_stats"] = {
            "peak_bytes_in_use": biggest("peak_bytes_in_use"),
            "bytes_in_use": biggest("bytes_in_use"),
            # What the allocator holds from the device (the preallocated pool when on).
            "reserved_bytes": biggest("peak_pool_bytes", "pool_bytes", "peak_bytes_reserved",
                                      "bytes_reserved", "bytes_limit"),
        }
    return info


def _entry_analysis(entry: dict, g: dict) -> dict:
    import jax
    fn = g.get(entry["function"])
    args_fn = g.get(entry.get("args", ""))
    if fn is None or args_fn is None:
        names = ", ".join(sorted(k for k in g if not k.startswith("_")))
        raise LookupError(f"entry {entry} not found among the snippet's globals: {names}")
    args = args_fn()
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    lowered = jitted.lower(**args) if isinstance(args, dict) else jitted.lower(*args)
    compiled = lowered.compile()
    ma = compiled.memory_analysis()
    return {
        "temp_bytes": int(ma.temp_size_in_bytes),
        "argument_bytes": int(ma.argument_size_in_bytes),
        "output_bytes": int(ma.output_size_in_bytes),
        "alias_bytes": int(ma.alias_size_in_bytes),
        "hlo_chars": len(compiled.as_text()),
    }


def run(config: dict, guard: Guard) -> dict:
    module = config.get("module")
    snippet = Path(config["snippet"]).resolve() if config.get("snippet") else None
    attribution = None
    if config.get("attribute"):
        roots = config.get("roots") or [str(snippet.parent if snippet else Path.cwd())]
        attribution = Attribution(guard, roots, __file__)
    hooks = Hooks(str(snippet or ""), guard, attribution)
    result: dict = {"error": None, "traceback": None, "exit_status": 0}
    # Hooks touch only Python objects: the backend must not start before the snippet runs,
    # because allocator variables set by the snippet are read at backend start.
    hooks.install()
    g = {"__name__": "__main__", "__file__": str(snippet), "__builtins__": builtins}
    if module:  # `python -m module`: the working directory comes first on the import path
        sys.argv = [module, *config.get("argv", [])]
        sys.path.insert(0, os.getcwd())
        code = None
    else:
        sys.argv = [str(snippet), *config.get("argv", [])]
        sys.path.insert(0, str(snippet.parent))
        try:
            code = compile(snippet.read_bytes(), str(snippet), "exec")
        except (SyntaxError, ValueError, UnicodeDecodeError) as e:
            result.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=0),
                          wall_s=0.0, compile_count=0, host_syncs=[], device={})
            return result
    guard.mark(BEGIN)
    hooks.active = guard.active = True
    if attribution is not None:
        attribution.start()
    t0 = time.perf_counter()
    try:
        if code is not None:
            exec(code, g)
        else:
            import runpy
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (None, 0):
            result["exit_status"] = e.code if isinstance(e.code, int) else 1
            result["error"] = f"the snippet called sys.exit({e.code!r})"
    except BaseException as e:  # the snippet's failure is a result, not a probe failure
        result["error"] = f"{type(e).__name__}: {e}"
        user = attribution.is_user if attribution is not None else \
            (lambda c: c.co_filename == str(snippet))
        result["traceback"] = _user_traceback(e, user)
    finally:
        result["wall_s"] = time.perf_counter() - t0
        if attribution is not None:
            attribution.stop()
        hooks.active = guard.active = False
        if attribution is not None and not (hooks.intact() and guard.intact()):
            guard.note("the code replaced one of the probe's hooks (a host read, device_put, the compile "
                       "listener or the execution of donating programs), so what it did there would not be counted")
        guard.check_fd2()
        guard.mark(END)
    result["compile_count"] = hooks.compiles
    result["host_syncs"] = hooks.syncs
    result["aliased"] = None if hooks.alias_error else dict(hooks.aliased)
    result["alias_error"] = hooks.alias_error
    if attribution is not None:
        # What the probe wrote as markers: the parent checks the markers it read add up to these.
        ran: dict[str, list[int]] = {}
        for path, line in attribution.ran:
            ran.setdefault(path, []).append(line)
        result["attribution"] = {"syncs": attribution.counts["s"], "compiles": attribution.counts["c"],
                                 "aliased_calls": attribution.counts["a"], "aliased_bytes": attribution.counts["ab"],
                                 "ran": {path: sorted(lines) for path, lines in ran.items()},
                                 "error": attribution.error}
    try:
        result["live_bytes"], result["per_device_bytes"], result["live_by_device"] = _live_bytes()
    except Exception as e:
        result["live_error"] = f"{type(e).__name__}: {e}"
    result["device"] = _device_info()
    entry = config.get("entry")
    if entry and result["error"] is None:
        try:
            result["entry"] = _entry_analysis(entry, g)
        except Exception as e:
            result["entry_error"] = f"{type(e).__name__}: {e}"
    return result


def _user_traceback(exc: BaseException, is_user) -> str:
    """The traceback from the user's first frame on; the probe's own frames are noise."""
    tb = exc.__traceback__
    while tb is not None and not is_user(tb.tb_frame.f_code):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def _vm_hwm() -> int | None:
    """This process's own peak RSS. `wait4` in the parent is not enough: Linux carries the
    parent's RSS into the child's ru_maxrss at exec, so a child of a big process (a test session,
    the web server) reports at least its parent's size and before/after look the same."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return None


def main(argv: list[str]) -> int:
    config_path = Path(argv[1])
    config = json.loads(config_path.read_text())
    config_path.unlink()  # the nonce in it is not for the snippet to read
    guard = Guard(config.pop("nonce"))
    guard.install(Path(config["user_stderr"]))
    result = run(config, guard)
    result["vm_hwm_bytes"] = _vm_hwm()
    result["tampered"] = guard.tampered
    result["nonce"] = guard._nonce
    out = Path(config["result"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=str))
    tmp.replace(out)
    sys.stderr.flush()
    # Now, before any atexit handler or thread the snippet left behind can rewrite the result.
    os._exit(0 if result["error"] is None else 3)


if __name__ == "__main__":
    main(sys.argv)
