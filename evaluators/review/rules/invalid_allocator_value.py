"""JM605 invalid-allocator-value

What it does
    Flags a literal `XLA_PYTHON_CLIENT_ALLOCATOR` value other than "default", "platform",
    "bfc", "cuda_async" or "vmm" (case-insensitive).

Why is this bad
    jaxlib 0.10.2 validates the value when the GPU backend starts and raises
    `ValueError: XLA_PYTHON_CLIENT_ALLOCATOR env var must be ...` (jaxlib/xla_client.py):
    the first JAX operation fails. Spellings from other frameworks ("cuda_malloc_async",
    the value of `TF_GPU_ALLOCATOR`) are the usual cause.

Example
    os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"] = "cuda_malloc_async"

Use instead
    os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"] = "cuda_async"
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes

VALID = ("default", "platform", "bfc", "cuda_async", "vmm")


class InvalidAllocatorValue(Rule):
    code = "JM605"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "invalid-allocator-value"
    topic = "gpu-allocator"
    severity = "error"
    message = "`XLA_PYTHON_CLIENT_ALLOCATOR={value}` is not one of " + ", ".join(VALID) + ": the GPU backend raises ValueError at start-up"
    fix = "Use one of " + ", ".join(VALID) + " (\"cuda_malloc_async\" is TF_GPU_ALLOCATOR's spelling; JAX's is \"cuda_async\")."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('XLA_PYTHON_CLIENT_ALLOCATOR',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        for key, value in env_writes(ctx, node):
            text = const_str(value)
            if key == "XLA_PYTHON_CLIENT_ALLOCATOR" and text is not None and text.lower() not in VALID:
                ctx.report(self, node, value=repr(text))


RULE = InvalidAllocatorValue()
