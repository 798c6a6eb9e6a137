"""JM206 host-array-reused-across-calls

What it does
    Flags a NumPy array created outside a loop and passed, unchanged, to a jitted function on
    every iteration of that loop.

Why is this bad
    JAX does not remember host arrays: each call copies the whole NumPy array to the device
    again, an implicit host->device transfer per call of the full array (an 8 MiB table in a
    50-step loop moves 400 MiB). `JAX_TRANSFER_GUARD=log` prints one line per copy.

Example
    table = np.load("embeddings.npy")
    for q in queries:
        scores.append(score(table, q))

Use instead
    table = jax.device_put(np.load("embeddings.npy"))   # one deliberate transfer
    for q in queries:
        scores.append(score(table, q))
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import TRANSFER_WORDS, jitted_call_args_in_host_loop
from jaxmem.evaluators.review.semantic.loops import enclosing_loop_of, not_per_step
from jaxmem.evaluators.review.semantic.roles import per_step_transfer


class HostArrayReusedAcrossCalls(Rule):
    code = "JM206"
    name = "host-array-reused-across-calls"
    topic = "explicit-device-put"
    severity = "warning"
    message = "NumPy array `{arg}` is copied host->device again on every call of jitted `{func}` in this loop"
    fix = "Place it on the device once before the loop (`{arg} = jax.device_put({arg})`) and pass the device array."
    node_types = (ast.Call,)
    requires = ('jit', 'pmap')
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        for arg in jitted_call_args_in_host_loop(node, ctx):
            if (isinstance(arg, ast.Name) and ctx.kind(arg) == "np"
                    and enclosing_loop_of(ctx, arg.id) is None):
                if not_per_step(ctx, TRANSFER_WORDS, sync=False):
                    return
                ctx.report(self, arg, arg=arg.id, func=ast.unparse(node.func), sure=per_step_transfer(ctx, arg))
                return


RULE = HostArrayReusedAcrossCalls()
