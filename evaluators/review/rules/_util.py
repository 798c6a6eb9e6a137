"""Predicates several rules share: syncs, periodic guards, loop-bound names, env writes."""
from __future__ import annotations

import ast

from evaluators.review.rule import COMPREHENSIONS, LOOP_TYPES, Ctx

SYNC_BUILTINS = frozenset({"float", "int", "bool", "complex"})
SYNC_METHODS = frozenset({"item", "tolist", "block_until_ready", "__array__"})
SYNC_FUNCS = frozenset({"jax.block_until_ready", "jax.device_get", "numpy.asarray", "numpy.array"})
TIMERS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time",
                    "time.perf_counter_ns", "time.time_ns", "time.monotonic_ns", "timeit.default_timer"})


def builtin_name(ctx: Ctx, func: ast.AST) -> str | None:
    """`float` when it is the builtin (not shadowed by an import or a def in this module)."""
    if isinstance(func, ast.Name) and func.id not in ctx.analysis.aliases and func.id not in ctx.analysis.functions:
        return func.id
    return None


def periodic(ctx: Ctx) -> bool:
    """A sync that is not a per-step cost to fix: inside `if step % N == 0:` within the innermost
    loop, in an outer (epoch) loop whose body runs the steps in a nested loop, or part of an
    assertion (`assert ...`, `self.assertEqual(...)`, which must read the value)."""
    loop = ctx.loops[-1] if ctx.loops else None
    if loop is not None and _runs_steps_inside(ctx, loop):
        return True
    for node in reversed(ctx.stack):
        if node is loop:
            break
        if isinstance(node, ast.Assert) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith(("assert", "fail"))):
            return True
    for node in reversed(ctx.stack):
        if node is loop:
            return False
        if isinstance(node, ast.If) and any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(node.test)
        ):
            return True
    return False


def _runs_steps_inside(ctx: Ctx, loop: ast.AST) -> bool:
    """The loop's body holds another loop that calls jitted functions or jnp (the steps)."""
    memo = ctx.memo.setdefault("epoch_loops", {})
    key = id(loop)
    if key not in memo:
        found = False
        for stmt in getattr(loop, "body", None) or []:
            for n in ast.walk(stmt):
                if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and any(
                    isinstance(c, ast.Call) and (ctx.analysis.jit_info(c.func) is not None
                                                 or (ctx.qualname(c.func) or "").startswith("jax."))
                    for c in ast.walk(n)
                ):
                    found = True
                    break
            if found:
                break
        memo[key] = found
    return memo[key]


def is_sync(ctx: Ctx, node: ast.AST) -> bool:
    """A call that waits for device results: block_until_ready, a host read, print of an array."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in SYNC_METHODS:
        return True
    if ctx.qualname(func) in SYNC_FUNCS:
        return True
    name = builtin_name(ctx, func)
    return name in SYNC_BUILTINS or name == "print"


def loop_bound(ctx: Ctx, loop: ast.AST) -> frozenset[str]:
    """Names (re)bound inside a loop, including its target; cached per loop node."""
    memo = ctx.memo.setdefault("loop_bound", {})
    key = id(loop)
    if key not in memo:
        names = set()
        roots = [loop.target] if isinstance(loop, (ast.For, ast.AsyncFor)) else []
        if isinstance(loop, COMPREHENSIONS):
            roots = [g.target for g in loop.generators]
        stack = [*roots, *(getattr(loop, "body", None) or [])]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.extend(ast.iter_child_nodes(n))
        memo[key] = frozenset(names)
    return memo[key]


def loop_targets(loop: ast.AST) -> frozenset[str]:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return frozenset(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
    if isinstance(loop, COMPREHENSIONS):
        return frozenset(n.id for g in loop.generators for n in ast.walk(g.target) if isinstance(n, ast.Name))
    return frozenset()


def enclosing_loop_of(ctx: Ctx, name: str) -> ast.AST | None:
    for loop in reversed(ctx.loops):
        if name in loop_bound(ctx, loop):
            return loop
    return None


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
    if not ctx.host_loop or ctx.analysis.jit_info(node.func) is None:
        return []
    return [*node.args, *(kw.value for kw in node.keywords)]

