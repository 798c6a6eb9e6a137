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
Must stay importable without the rest of the project (only the standard library and jax).
"""
from __future__ import annotations

import builtins
import json
import linecache
import os
import sys
import threading
import time
import traceback
from pathlib import Path

MARK_PREFIX = "@@jaxmem:"
# Each marker is MARK_PREFIX + nonce + ":" + name + "@@"; the parent knows the nonce, the snippet does not.
BEGIN, END, EXPLICIT_BEGIN, EXPLICIT_END = "snippet-begin", "snippet-end", "explicit-begin", "explicit-end"
# A process the snippet starts writes to the same fd 2: whatever it prints could pass for guard lines.
_SPAWN_EVENTS = ("os.system", "subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty")
# Paths that reach this process's fd 2 under another descriptor.
_FD2_PATHS = ("/dev/stderr", "/dev/fd/2", "/proc/self/fd/2")

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

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

    def mark(self, name: str) -> None:
        # Flush Python's buffers first so the marker lands after everything written before it.
        sys.stdout.flush()
        self._write(2, f"{marker(self._nonce, name)}\n".encode())

    def install(self, user_stderr: Path) -> None:
        st = os.fstat(2)
        self._fd2 = (st.st_dev, st.st_ino)
        # The snippet's Python-level stderr (print(..., file=sys.stderr), logging, warnings) is
        # its own file: nothing it prints can pass for a guard line or a marker.
        sys.stderr = open(user_stderr, "w", buffering=1, encoding="utf-8", errors="replace")
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

        wrap("dup2", lambda fd, fd2, *a, **k: _is_fd2(fd2))
        wrap("close", lambda fd, *a, **k: _is_fd2(fd))
        wrap("closerange", lambda lo, hi, *a, **k: lo <= 2 < hi)
        wrap("write", lambda fd, *a, **k: _is_fd2(fd))
        wrap("writev", lambda fd, *a, **k: _is_fd2(fd))

        def audit(event: str, args) -> None:
            if not guard.active:
                return
            if event == "open" and args and str(args[0]) in _FD2_PATHS:
                guard.note(f"the code opened {args[0]}")
            elif event in _SPAWN_EVENTS:
                guard.note("the code started a process, whose output shares file descriptor 2")
        sys.addaudithook(audit)

    def note(self, what: str) -> None:
        if what not in self.tampered:
            self.tampered.append(what)

    def check_fd2(self) -> None:
        try:
            st = os.fstat(2)
        except OSError:
            self.note("file descriptor 2 was closed")
            return
        if (st.st_dev, st.st_ino) != self._fd2:
            self.note("file descriptor 2 was replaced")


class Hooks:
    """Counters the snippet feeds while it runs; `active` is off outside the snippet."""

    def __init__(self, user_file: str, guard: Guard):
        self.guard = guard
        self.user_file = os.path.realpath(user_file)
        self.active = False
        self.compiles = 0
        self.syncs: list[dict] = []
        self._depth = threading.local()

    def install(self) -> None:
        import jax
        from jax._src import config as jax_config
        from jax._src.array import ArrayImpl

        def on_duration(event: str, _duration: float, **_kw) -> None:
            if self.active and event == COMPILE_EVENT:
                self.compiles += 1
        jax.monitoring.register_event_duration_secs_listener(on_duration)

        for name in _SYNC_METHODS:
            original = getattr(ArrayImpl, name, None)
            if original is not None:
                setattr(ArrayImpl, name, self._sync_wrapper(original, name))
        jax.device_get = self._sync_wrapper(jax.device_get, "jax.device_get")
        # NumPy reads CPU arrays through the buffer protocol, never calling `__array__`, so
        # the conversion functions themselves are wrapped (only jax.Array arguments count).
        import numpy as np
        for name in _NUMPY_CONVERTERS:
            setattr(np, name, self._sync_wrapper(getattr(np, name), f"np.{name}",
                                                 only_if=lambda a, *_r, **_k: isinstance(a, jax.Array)))

        original_put = jax.device_put

        def device_put(*args, **kwargs):
            # Nested puts (device_put of a pytree) sit inside one marked region.
            if not self.active or getattr(self._depth, "put", 0):
                return original_put(*args, **kwargs)
            self._depth.put = 1
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
                self.guard.mark(EXPLICIT_END)
                self._depth.put = 0
        jax.device_put = device_put

    def _sync_wrapper(self, original, name: str, only_if=None):
        hooks = self

        def wrapper(*args, **kwargs):
            depth = getattr(hooks._depth, "sync", 0)
            if hooks.active and depth == 0 and (only_if is None or (args and only_if(*args, **kwargs))):
                hooks._record_sync(name)
            hooks._depth.sync = depth + 1
            try:
                return original(*args, **kwargs)
            finally:
                hooks._depth.sync = depth
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _record_sync(self, how: str) -> None:
        # The innermost frame in the user's file is the line to blame.
        frame = sys._getframe(2)
        while frame is not None and os.path.realpath(frame.f_code.co_filename) != self.user_file:
            frame = frame.f_back
        if frame is None:
            self.syncs.append({"line": None, "source": None, "how": how})
            return
        line = frame.f_lineno
        source = linecache.getline(frame.f_code.co_filename, line).strip()
        self.syncs.append({"line": line, "source": source, "how": how})


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
    snippet = Path(config["snippet"]).resolve()
    hooks = Hooks(str(snippet), guard)
    result: dict = {"error": None, "traceback": None, "exit_status": 0}
    # Hooks touch only Python objects: the backend must not start before the snippet runs,
    # because allocator variables set by the snippet are read at backend start.
    hooks.install()
    g = {"__name__": "__main__", "__file__": str(snippet), "__builtins__": builtins}
    sys.argv = [str(snippet), *config.get("argv", [])]
    sys.path.insert(0, str(snippet.parent))
    try:
        code = compile(snippet.read_text(), str(snippet), "exec")
    except (SyntaxError, ValueError, UnicodeDecodeError) as e:
        result.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=0),
                      wall_s=0.0, compile_count=0, host_syncs=[], device={})
        return result
    guard.mark(BEGIN)
    hooks.active = guard.active = True
    t0 = time.perf_counter()
    try:
        exec(code, g)
    except SystemExit as e:
        if e.code not in (None, 0):
            result["exit_status"] = e.code if isinstance(e.code, int) else 1
            result["error"] = f"the snippet called sys.exit({e.code!r})"
    except BaseException as e:  # the snippet's failure is a result, not a probe failure
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = _user_traceback(e, str(snippet))
    finally:
        result["wall_s"] = time.perf_counter() - t0
        hooks.active = guard.active = False
        guard.check_fd2()
        guard.mark(END)
    result["compile_count"] = hooks.compiles
    result["host_syncs"] = hooks.syncs
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


def _user_traceback(exc: BaseException, snippet: str) -> str:
    """The traceback from the snippet's first frame on; the probe's own frames are noise."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != snippet:
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
