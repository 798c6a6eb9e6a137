"""JM602 both-mem-fraction-vars

What it does
    Flags a module that sets both `XLA_PYTHON_CLIENT_MEM_FRACTION` and
    `XLA_CLIENT_MEM_FRACTION`.

Why is this bad
    Newer jaxlib reads `XLA_CLIENT_MEM_FRACTION` as well as the older name, and refuses to
    start the GPU backend with a `ValueError` when both are set: the program fails at its
    first JAX operation.

Example
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".5"
    os.environ["XLA_CLIENT_MEM_FRACTION"] = ".5"

Use instead
    os.environ["XLA_CLIENT_MEM_FRACTION"] = ".5"    # one of the two
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, env_writes

KEYS = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")


class BothMemFractionVars(Rule):
    code = "JM602"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "both-mem-fraction-vars"
    topic = "gpu-memory-fraction"
    severity = "error"
    message = "`{key}` is set while `{other}` is also set (line {line}): the GPU backend raises ValueError at start-up"
    fix = "Set only one of XLA_PYTHON_CLIENT_MEM_FRACTION and XLA_CLIENT_MEM_FRACTION."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('MEM_FRACTION',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        seen = ctx.memo.setdefault("mem_fraction_keys", {})
        for key, _value in env_writes(ctx, node):
            if key not in KEYS:
                continue
            other = KEYS[1 - KEYS.index(key)]
            if other in seen and key not in seen:
                ctx.report(self, node, key=key, other=other, line=seen[other])
            seen.setdefault(key, node.lineno)


RULE = BothMemFractionVars()
