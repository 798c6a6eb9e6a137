"""JM903 tiny-trailing-dimension

What it does
    Flags JAX array creations with a literal 2-D shape, or any shape ending in 1, whose last
    two dimensions pad to at least 4x their size in TPU 8x128 tiles (for example
    `(65536, 1)`), for arrays of at least 65,536 elements. Information only: it matters on TPU,
    and XLA may choose another layout for some N-d arrays (image batches, say).

Why is this bad
    TPU memory stores the last two dimensions in tiles of 8 x 128 (for 32-bit types). A
    trailing dimension of 1 still occupies 128 lanes, so `(65536, 1)` takes 128 times its
    size in HBM; out-of-memory reports show this as "32x expansion" and similar.

Example
    mask = jnp.zeros((65536, 1))

Use instead
    mask = jnp.zeros((65536,))          # or put the long axis last: (1, 65536)
"""
from __future__ import annotations

import ast
import math
import re

from jaxmem.evaluators.review.rule import Ctx, Rule

SHAPED = frozenset({"zeros", "ones", "empty", "full"})
MIN_ELEMENTS = 65_536
MIN_FACTOR = 4
# Code that names a TPU as its platform: `jax.devices("tpu")`, `default_backend() == "tpu"`,
# Pallas's TPU module, `JAX_PLATFORMS=tpu`.
_TPU = re.compile(r"""['"]tpu['"]|pallas\s*\.\s*tpu|\bpltpu\b|JAX_PLATFORMS\s*=\s*['"]?tpu""", re.I)


def _padded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


class TinyTrailingDimension(Rule):
    code = "JM903"
    name = "tiny-trailing-dimension"
    topic = "tpu-memory-layout"
    severity = "info"
    message = "shape {shape} can pad to {padded} in TPU 8x128 tiles: up to {factor}x its size in HBM"
    fix = "Drop size-1 trailing dimensions or put the long axis last, so the last two dims fill 8x128 tiles."
    node_types = (ast.Call,)
    call_names = frozenset({"jax.numpy.", "jax.random."})
    requires = ('zeros', 'ones', 'empty', 'full', 'random')

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        q = ctx.qualname(node.func) or ""
        shape = None
        if q.startswith("jax.numpy.") and q.rsplit(".", 1)[-1] in SHAPED and node.args:
            shape = node.args[0]
        elif q.startswith("jax.random.") and len(node.args) >= 2:
            shape = node.args[1]
        for kw in node.keywords:
            if kw.arg == "shape" and (q.startswith("jax.numpy.") or q.startswith("jax.random.")):
                shape = kw.value
        if not isinstance(shape, (ast.Tuple, ast.List)) or len(shape.elts) < 2:
            return
        if not all(isinstance(d, ast.Constant) and isinstance(d.value, int) and d.value > 0 for d in shape.elts):
            return
        dims = [d.value for d in shape.elts]
        if len(dims) > 2 and dims[-1] != 1:
            return  # XLA may pick another physical layout for N-d arrays (NHWC images); 2-D is plain
        size = math.prod(dims)
        if size < MIN_ELEMENTS:
            return
        padded = dims[:-2] + [_padded(dims[-2], 8), _padded(dims[-1], 128)]
        factor = math.prod(padded) / size
        if factor >= MIN_FACTOR:
            # The padding exists on TPU only: sure where the module shows it targets one.
            ctx.report(self, node, shape=tuple(dims), padded=tuple(padded), factor=f"{factor:.0f}",
                       sure=_targets_tpu(ctx))


def _targets_tpu(ctx: Ctx) -> bool:
    memo = ctx.analysis.memo
    if "targets_tpu" not in memo:
        text = "\n".join(ctx.analysis.lines)
        memo["targets_tpu"] = bool(_TPU.search(text))
    return memo["targets_tpu"]


RULE = TinyTrailingDimension()
