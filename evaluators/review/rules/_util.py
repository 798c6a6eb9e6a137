"""Helpers rules share that are about reporting, not about the code's meaning: message text,
environment-variable writes, timers. What code means (kinds, loops, syncs) is the semantic model's."""
from __future__ import annotations

import ast
import re

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx
from jaxmem.evaluators.review.semantic.names import TIMERS  # noqa: F401 (the rules read it from here)
from jaxmem.evaluators.review.semantic.sizes import int_value

# A benchmark named for one of these measures the host->device copy itself.
TRANSFER_WORDS = ("transfer", "device_put", "h2d", "host_to_device", "numpy_arg", "from_host")


def describe(node: ast.AST) -> str:
    """Short source text for messages, cut so a message stays one line."""
    try:
        text = ast.unparse(node)
    except Exception:  # unparse has failed on odd trees before; a message must still print
        return "expression"
    return text if len(text) <= 40 else text[:37] + "..."


ENV_CALLS = frozenset({"os.environ.setdefault", "os.environ.update", "os.putenv"})


def env_writes(ctx: Ctx, node: ast.AST) -> list[tuple[str, ast.AST | None]]:
    """`os.environ[K] = v`, `os.environ.setdefault(K, v)`, `.update({K: v})`, `os.putenv(K, v)`.

    Returns (key, value expression or None when not visible) for literal keys.
    """
    out: list[tuple[str, ast.AST | None]] = []
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Subscript) and ctx.qualname(t.value) == "os.environ":
                key = t.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out.append((key.value, node.value))
    elif isinstance(node, ast.Call):
        q = ctx.qualname(node.func)
        if q in ("os.environ.setdefault", "os.putenv") and node.args:
            key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                out.append((key.value, node.args[1] if len(node.args) > 1 else None))
        elif q == "os.environ.update":
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    for k, v in zip(arg.keys, arg.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            out.append((k.value, v))
            out.extend((kw.arg, kw.value) for kw in node.keywords if kw.arg)
    return out


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
        return str(node.value)
    return None


def in_module_code(ctx: Ctx) -> bool:
    return ctx.scope is ctx.analysis.module_scope


def jitted_call_args_in_host_loop(node: ast.Call, ctx: Ctx) -> list[ast.AST]:
    """Arguments of a call to a jitted function made from a host loop (each call transfers its
    host arguments again); empty when the call is not one."""
    if not ctx.host_loop or ctx.jit_info(node.func) is None:
        return []
    return [*node.args, *(kw.value for kw in node.keywords)]


# Executions JAX's runtime lets a host queue ahead of a device before the next call waits (XLA's
# PjRt client: "up to 32 executions ahead of the device", so that `%timeit` is not fooled;
# measured on jax 0.10.2, CPU: 1,000 unwaited calls of a 1.4 ms program timed 0.84 ms each against
# 0.87 ms with a wait, 100 calls 0.57 against 0.82, 30 calls 0.04 ms). %timeit picks a loop count
# of 10**k calls reaching 0.2 s and runs it 7 times: on this CPU it reported 0.21, 1.00, 5.66 and
# 43.85 ms per call without a wait against 0.25, 0.96, 5.38 and 46.14 ms with one.
QUEUED_AHEAD = 32
# Timed calls at or below which the ones left queued can be more than a tenth of the figure.
FEW_CALLS = 10 * QUEUED_AHEAD


def timeit_calls(node: ast.Call, qualname: str, ctx: Ctx) -> int:
    """Calls `timeit.timeit`/`timeit.repeat` makes in all: `number` (1,000,000 unless given) times
    `repeat` (5 for `repeat`, unless given), each a literal or a name bound to one; 0 (few) where
    the source does not say."""
    given = {k.arg: int_value(k.value, ctx.analysis, ctx.scope) for k in node.keywords}
    number = given["number"] if "number" in given else 1_000_000
    repeat = given["repeat"] if "repeat" in given else (5 if qualname == "timeit.repeat" else 1)
    return number * repeat if number is not None and repeat is not None else 0


# Said after a timing finding where synchronous_cpu holds (the finding is then only possible).
SYNC_CPU_NOTE = (" (unless the call ran synchronously: this project runs JAX on the CPU and declares a JAX "
                 "before 0.4.32, which dispatched non-parallel CPU computations synchronously)")


def absence_handled(ctx: Ctx, attr: str) -> bool:
    """The current call of a removed API (`jax.clear_backends()`) is compatibility code that copes
    with the name being gone: under `if hasattr(jax, "clear_backends"):`, or in a `try` body with
    an `except AttributeError` handler. A broader handler (`except Exception`) is not enough: it
    is as often a step's error handler that logs and gives up (12zzzzzm's judges)."""
    stack = ctx.stack
    for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
        if isinstance(parent, ast.If) and child in parent.body and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "hasattr"
                and len(n.args) == 2 and const_str(n.args[1]) == attr for n in astutil.walk(parent.test)):
            return True
        if isinstance(parent, ast.Try) and child in parent.body and any(
                isinstance(t, ast.Name) and t.id == "AttributeError"
                for h in parent.handlers if h.type is not None
                for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
    return False


def timing_tier(message: str, ctx: Ctx, sure: bool) -> dict:
    """A timing finding's tier and message (JM701, JM704): where the CPU may have run the timed
    work synchronously (synchronous_cpu), never sure, and said so."""
    if synchronous_cpu(ctx):
        return {"sure": False, "message": message + SYNC_CPU_NOTE}
    return {"sure": sure, "message": message}


def synchronous_cpu(ctx: Ctx) -> bool:
    """The module runs on the CPU (forces_cpu) where JAX may dispatch synchronously: the project
    declares a JAX below 0.4.32, before which "non-parallel computations were always dispatched
    synchronously" on the CPU backend (jax 0.4.32 changelog), or it turns
    `jax_cpu_enable_async_dispatch` off. A call then often returns with its work done, so a timer
    without `block_until_ready` may well measure the work: not proven to measure dispatch only."""
    memo = ctx.memo
    if "synchronous_cpu" not in memo:
        from jaxmem.evaluators.review.semantic.pins import jax_below

        memo["synchronous_cpu"] = forces_cpu(ctx) and (jax_below(ctx.path, (0, 4, 32)) or _async_dispatch_off(ctx))
    return memo["synchronous_cpu"]


def _async_dispatch_off(ctx: Ctx) -> bool:
    if not any("cpu_enable_async_dispatch" in line for line in ctx.analysis.lines):
        return False
    return any(isinstance(n, ast.Call) and ctx.qualname(n.func) == "jax.config.update" and len(n.args) == 2
               and const_str(n.args[0]) == "jax_cpu_enable_async_dispatch"
               and isinstance(n.args[1], ast.Constant) and n.args[1].value in (False, 0)
               for n in astutil.walk(ctx.analysis.tree))


def forces_cpu(ctx: Ctx) -> bool:
    """The module selects the CPU platform (`JAX_PLATFORMS=cpu`, `jax.config.update(
    "jax_platform_name" / "jax_platforms", "cpu")`): GPU allocator settings are inert there."""
    memo = ctx.memo
    if "forces_cpu" not in memo:
        found = False
        for n in astutil.walk(ctx.analysis.tree):
            if isinstance(n, ast.Call) and ctx.qualname(n.func) == "jax.config.update" and len(n.args) == 2:
                key, value = const_str(n.args[0]), const_str(n.args[1])
                found = found or (key in ("jax_platform_name", "jax_platforms") and value == "cpu")
            elif isinstance(n, (ast.Assign, ast.Call)):
                found = found or any(k in ("JAX_PLATFORMS", "JAX_PLATFORM_NAME") and const_str(v) == "cpu"
                                     for k, v in env_writes(ctx, n))
            if found:
                break
        memo["forces_cpu"] = found
    return memo["forces_cpu"]


# A label naming the compiling warm-up ("Time to jit", "warm-up"), not "jitted step" (the compiled run).
_JIT_WORD = re.compile(r"(?<![A-Za-z])(jit|jitting|warm[- _]?up)(?![A-Za-z])", re.IGNORECASE)


def names_compilation(stmt: ast.stmt) -> bool:
    """`compile_time = time.time() - tic`, `timings["compilation"] = ...`, `first_call_time = ...`,
    or a printed label that says so (after the region, or just before it starts): the region is
    meant to time the compiling first call, which returns only after tracing and compilation."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AnnAssign, ast.AugAssign)) else []
    words = [n.id for t in targets for n in astutil.walk(t) if isinstance(n, ast.Name)]
    words += [n.value for t in targets for n in astutil.walk(t) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    # `print("compile time:", time.time() - s)`: the label the script prints names what it times.
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        words += [n.value for n in astutil.walk(stmt.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    # `first_call_time = time.time() - start`, `print("First call (includes JIT compilation)")`:
    # the first call is what it means to time.
    # `print(f"Time to jit: {time.time() - st}")`, "warm-up took": the label names the compiling
    # warm-up (not "jitted step", which is the compiled program's run).
    return any("compil" in w.lower() or "first" in w.lower() or _JIT_WORD.search(w) for w in words)



def plain_label(stmt: ast.stmt) -> bool:
    """`print("Compiling...")` just before a timer starts labels the region; a print that reports
    a value (`print(f"Compile time: {compile_time}")`, the previous region's result) does not."""
    if not isinstance(stmt, ast.Expr):
        return False
    call = stmt.value
    parts = [*call.args, *(k.value for k in call.keywords)] if isinstance(call, ast.Call) else [call]
    return not any(isinstance(n, (ast.FormattedValue, ast.Name)) for p in parts for n in astutil.walk(p))
