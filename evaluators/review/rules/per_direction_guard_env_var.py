"""JM205 per-direction-guard-env-var

What it does
    Flags setting `JAX_TRANSFER_GUARD_HOST_TO_DEVICE`, `JAX_TRANSFER_GUARD_DEVICE_TO_HOST` or
    `JAX_TRANSFER_GUARD_DEVICE_TO_DEVICE` through the environment.

Why is this bad
    Measured on jax 0.10.2: the per-direction guard variables are ignored when set in the
    environment (a disallowed host->device transfer runs without error), while
    `JAX_TRANSFER_GUARD` is honoured. The guard you think you set is not active.

Example
    os.environ["JAX_TRANSFER_GUARD_HOST_TO_DEVICE"] = "disallow"

Use instead
    jax.config.update("jax_transfer_guard_host_to_device", "disallow")
    # or, for one block:  with jax.transfer_guard_host_to_device("disallow"): ...
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, env_writes

KEYS = frozenset({"JAX_TRANSFER_GUARD_HOST_TO_DEVICE", "JAX_TRANSFER_GUARD_DEVICE_TO_HOST",
                  "JAX_TRANSFER_GUARD_DEVICE_TO_DEVICE"})


class PerDirectionGuardEnvVar(Rule):
    code = "JM205"
    needs_jax = False  # an environment variable the process reads, whatever this file imports
    name = "per-direction-guard-env-var"
    topic = "transfer-guard"
    severity = "warning"
    message = "`{key}` in the environment is ignored (measured on jax 0.10.2): this transfer guard is not active"
    fix = ("Use `jax.config.update` with the flag in lower case (e.g. \"jax_transfer_guard_host_to_device\"), "
           "the `jax.transfer_guard_*` context managers, or the global `JAX_TRANSFER_GUARD`.")
    node_types = (ast.Assign, ast.Call)
    call_names = ENV_CALLS
    requires = ('JAX_TRANSFER_GUARD_',)

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        for key, _value in env_writes(ctx, node):
            if key in KEYS:
                ctx.report(self, node, key=key)


RULE = PerDirectionGuardEnvVar()
