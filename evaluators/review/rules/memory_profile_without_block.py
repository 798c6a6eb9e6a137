"""JM702 memory-profile-without-block

What it does
    Flags `jax.profiler.save_device_memory_profile(...)` / `device_memory_profile()` taken in
    a block where no earlier statement waits for the device.

Why is this bad
    The profile lists the buffers alive at the moment of the call. With asynchronous
    dispatch, queued computations may not have allocated (or freed) their buffers yet, so the
    snapshot can miss exactly the arrays you are looking for.

Example
    y = model(params, x)
    jax.profiler.save_device_memory_profile("mem.prof")

Use instead
    y = model(params, x)
    y.block_until_ready()
    jax.profiler.save_device_memory_profile("mem.prof")
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.syncs import is_sync

PROFILES = frozenset({"jax.profiler.save_device_memory_profile", "jax.profiler.device_memory_profile"})


class MemoryProfileWithoutBlock(Rule):
    code = "JM702"
    name = "memory-profile-without-block"
    topic = "memory-profiling"
    severity = "info"
    message = "memory profile taken without waiting for queued JAX work: buffers of pending operations may be missing"
    fix = "Call `.block_until_ready()` on the results (or `jax.block_until_ready(tree)`) before taking the profile."
    wants_bodies = True
    requires = ('memory_profile',)

    def check_body(self, body: list[ast.stmt], ctx: Ctx) -> None:
        waited = False
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            # Compound statements get their own check_body; here they only count as waits.
            simple = not hasattr(stmt, "body")
            for n in ast.walk(stmt):
                if simple and isinstance(n, ast.Call) and ctx.qualname(n.func) in PROFILES and not waited:
                    ctx.report(self, n)
                if is_sync(ctx, n):
                    waited = True


RULE = MemoryProfileWithoutBlock()
