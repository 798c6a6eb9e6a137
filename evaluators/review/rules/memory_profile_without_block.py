"""JM702 memory-profile-without-block

What it does
    Opt-in (`--select JM702`). Flags `jax.profiler.save_device_memory_profile(...)` /
    `device_memory_profile()` taken in a block where no earlier statement waits for the device.

Why is this bad
    JAX's own example of the device memory profiler waits (`block_until_ready`) before saving the
    profile, so that the snapshot is taken with the program's work done. Whether waiting changes
    what the profile lists depends on the backend: measured here on jax 0.10.2 (CPU), a profile
    taken right after dispatching a 2.5-second jitted computation already listed its pending
    output, an input the queued work still used after Python dropped it was listed neither
    before nor after, and the live bytes were the same before and after waiting
    (benchmarks/memory_profile_wait.py). Whether GPU or
    TPU profiles differ is not measurable here. Opt-in for that reason: on the first runs of
    unseen readings its findings were judged wrong (the profile did show the pending outputs).

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

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.syncs import is_sync

PROFILES = frozenset({"jax.profiler.save_device_memory_profile", "jax.profiler.device_memory_profile"})


class MemoryProfileWithoutBlock(Rule):
    code = "JM702"
    name = "memory-profile-without-block"
    topic = "memory-profiling"
    severity = "info"
    message = ("memory profile taken without waiting for queued JAX work: the snapshot may not show the finished step "
               "(on CPU it lists the same buffers either way; not measurable here for GPU/TPU)")
    fix = "Call `.block_until_ready()` on the results (or `jax.block_until_ready(tree)`) before taking the profile."
    wants_bodies = True
    requires = ('memory_profile',)
    default = False  # opt-in: see "Why is this bad" (its premise did not hold where it was measured)

    def check_body(self, body: list[ast.stmt], ctx: Ctx) -> None:
        waited = False
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            # Compound statements get their own check_body; here they only count as waits.
            simple = not hasattr(stmt, "body")
            for n in astutil.walk(stmt):
                if simple and isinstance(n, ast.Call) and ctx.qualname(n.func) in PROFILES and not waited:
                    ctx.report(self, n)
                if is_sync(ctx, n):
                    waited = True


RULE = MemoryProfileWithoutBlock()
