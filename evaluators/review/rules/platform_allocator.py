"""JM604 platform-allocator

What it does
    Flags `XLA_PYTHON_CLIENT_ALLOCATOR=platform` set in code.

Why is this bad
    The platform allocator allocates and frees exactly what each buffer needs. It is the only
    mode that returns GPU memory to the system, and it is slow: every allocation goes to the
    driver. Meant for debugging memory use or for tiny footprints, not for training runs.

Example
    os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"] = "platform"

Use instead
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"   # share the GPU with a fixed budget
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes, forces_cpu


class PlatformAllocator(Rule):
    code = "JM604"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "platform-allocator"
    topic = "gpu-allocator"
    severity = "info"
    message = "`XLA_PYTHON_CLIENT_ALLOCATOR=platform` allocates and frees on every request: it returns memory but is slow"
    fix = "Keep it for debugging; for sharing a GPU prefer a memory fraction or disabling preallocation."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('XLA_PYTHON_CLIENT_ALLOCATOR',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        for key, value in env_writes(ctx, node):
            if key == "XLA_PYTHON_CLIENT_ALLOCATOR" and const_str(value) == "platform":
                # Possible where the module also selects the CPU platform: the setting is inert there.
                ctx.report(self, node, sure=not forces_cpu(ctx))


RULE = PlatformAllocator()
