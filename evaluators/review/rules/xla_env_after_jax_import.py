"""JM601 xla-env-after-jax-import

What it does
    Flags module code that sets an `XLA_*` variable (`XLA_PYTHON_CLIENT_PREALLOCATE`,
    `XLA_PYTHON_CLIENT_MEM_FRACTION`, `XLA_PYTHON_CLIENT_ALLOCATOR`, `XLA_FLAGS`, ...) or
    `TF_GPU_ALLOCATOR` in `os.environ` after `import jax`.

Why is this bad
    JAX reads these variables once, when the backend starts (the first JAX operation), not at
    import. Set after import they work only if nothing has touched a device yet; any earlier
    operation, in this module or in one it imports, silently makes them no-ops. (On the CPU
    backend the `XLA_PYTHON_CLIENT_*` variables have no effect at all.)

Example
    import jax
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

Use instead
    import os
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"   # before jax is imported
    import jax
"""
from __future__ import annotations

import ast

from evaluators.review.rule import Ctx, Rule
from evaluators.review.rules._util import ENV_CALLS, env_writes, in_module_code


def topic_for(key: str) -> str:
    if "MEM_FRACTION" in key:
        return "gpu-memory-fraction"
    if "ALLOCATOR" in key:
        return "gpu-allocator"
    return "gpu-preallocation"


class XlaEnvAfterJaxImport(Rule):
    code = "JM601"
    name = "xla-env-after-jax-import"
    topic = "gpu-preallocation"
    severity = "warning"
    message = "`{key}` is set after `import jax` (line {line}): it is ignored if any JAX operation ran before"
    fix = "Set the variable before `import jax` (top of the entry script) or in the environment that launches Python."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('XLA_', 'TF_GPU_ALLOCATOR')

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        first = ctx.analysis.imports_jax_line
        if first is None or not in_module_code(ctx) or node.lineno <= first:
            return
        for key, _value in env_writes(ctx, node):
            if key.startswith("XLA_") or key == "TF_GPU_ALLOCATOR":
                ctx.report(self, node, topic=topic_for(key), key=key, line=first)


RULE = XlaEnvAfterJaxImport()
