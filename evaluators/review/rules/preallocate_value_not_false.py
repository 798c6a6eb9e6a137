"""JM606 preallocate-value-not-false

What it does
    Flags `XLA_PYTHON_CLIENT_PREALLOCATE` set to a value meant as "off" that jaxlib reads as
    "on", such as "FALSE", "no", "off" or "none".

Why is this bad
    jaxlib 0.10.2 turns preallocation off only for exactly "false", "False" or "0"
    (`preallocate not in ('false', 'False', '0')`, jaxlib/xla_client.py). Any other value
    keeps the default: 75% of total GPU memory is grabbed at the first operation, and a
    second process on the same GPU runs out of memory.

Example
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "no"

Use instead
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes

OFF = ("false", "False", "0")
ON = ("true", "True", "1")


class PreallocateValueNotFalse(Rule):
    code = "JM606"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "preallocate-value-not-false"
    topic = "gpu-preallocation"
    severity = "error"
    message = "`XLA_PYTHON_CLIENT_PREALLOCATE={value}` still preallocates: only \"false\", \"False\" or \"0\" turn it off"
    fix = "Write \"false\" to disable preallocation."
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('XLA_PYTHON_CLIENT_PREALLOCATE',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        for key, value in env_writes(ctx, node):
            text = const_str(value)
            if key == "XLA_PYTHON_CLIENT_PREALLOCATE" and text is not None and text not in OFF and text not in ON:
                ctx.report(self, node, value=repr(text))


RULE = PreallocateValueNotFalse()
