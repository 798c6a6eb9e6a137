"""JM603 invalid-mem-fraction

What it does
    Flags a literal `XLA_PYTHON_CLIENT_MEM_FRACTION` / `XLA_CLIENT_MEM_FRACTION` value that is
    not a number in (0, 1], such as "75" (meant as 75%) or "0".

Why is this bad
    The value is the fraction of total GPU memory to preallocate: jaxlib passes
    `float(value)` to the allocator (jaxlib/xla_client.py, 0.10.2), so "75" means 7,500% of
    the device, and a value that is not a number makes `float()` raise ValueError when the
    GPU backend starts. Either way the error shows only on a GPU machine, far from this line.

Example
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "75"

Use instead
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".75"
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes


class InvalidMemFraction(Rule):
    code = "JM603"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "invalid-mem-fraction"
    topic = "gpu-memory-fraction"
    severity = "error"
    message = "`{key}={value}` is not a fraction in (0, 1]: {effect}"
    fix = "Write the share as a fraction, e.g. \".75\" for 75% of the GPU's memory."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('MEM_FRACTION',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        for key, value in env_writes(ctx, node):
            if not key.endswith("MEM_FRACTION"):
                continue
            text = const_str(value)
            if text is None:
                continue
            try:
                number = float(text)
            except ValueError:
                effect = "float() raises ValueError when the GPU backend starts"
            else:
                if 0.0 < number <= 1.0:
                    continue
                effect = f"it is read as {number:.0%} of GPU memory"
            ctx.report(self, node, key=key, value=repr(text), effect=effect)


RULE = InvalidMemFraction()
