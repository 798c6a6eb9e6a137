"""JM103 numpy-conversion-in-loop

What it does
    Flags NumPy calls that convert their argument (`np.asarray`, `np.array`, ufuncs such as
    `np.exp`, `np.median`, ...) and `jax.device_get` applied to a JAX array inside an eagerly
    running Python loop. Not NumPy's reductions and shape functions that call the argument's own
    method (`np.mean(x)` is `x.mean()`: JAX computes it on the device; measured in
    benchmarks/claims/numpy_functions_on_jax_arrays.py).

Why is this bad
    Such a call first copies the device array to the host, waiting for all queued work: one
    blocking device->host transfer per iteration, sized like the whole array.

Example
    for batch in batches:
        logits = predict(params, batch)
        preds.append(np.asarray(logits).argmax(-1))

Use instead
    for batch in batches:
        preds.append(predict(params, batch).argmax(-1))   # stays on device
    preds = jax.device_get(preds)                           # one transfer at the end
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.names import defers_to_array
from jaxmem.evaluators.review.semantic.roles import per_step_read

# NumPy functions that read only shape and dtype: no copy, no wait.
METADATA = frozenset({"numpy.ndim", "numpy.shape", "numpy.size", "numpy.result_type", "numpy.dtype",
                      "numpy.iinfo", "numpy.finfo", "numpy.issubdtype", "numpy.isscalar", "numpy.can_cast",
                      "numpy.promote_types"})


# A benchmark named for one of these measures the copy to the host itself.
WORDS = ("device_get", "asarray", "numpy", "to_host", "fetch", "d2h", "device_to_host", "transfer")


class NumpyConversionInLoop(Rule):
    code = "JM103"
    name = "numpy-conversion-in-loop"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "`{func}` on a JAX array in a loop copies it device->host and blocks every iteration"
    list_message = ("`{func}` on list `{name}` of JAX arrays in a loop copies each item device->host on its own "
                    "and blocks every iteration")
    fix = "Keep the computation in jax.numpy on device and fetch results once after the loop with `jax.device_get`."
    node_types = (ast.Call,)
    call_names = frozenset({"numpy.", "jax.device_get"})
    only_in_host_loops = True

    def check(self, node: ast.Call, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body) or not node.args:
            return
        q = ctx.qualname(node.func)
        if q is None or not (q.startswith("numpy.") or q == "jax.device_get") or q in METADATA:
            return
        if q.startswith("numpy.testing."):
            return  # an assertion has to read the values; keeping them on device is no fix
        if defers_to_array(q, node, ctx.kind):
            return  # `np.mean(loss)` is `loss.mean()`: computed by JAX on the device, nothing copied
        values = [a for a in node.args if ctx.kind(a) == "jax" or ctx.holds_device_values(a)]
        if values and not periodic(ctx) and not not_per_step(ctx, WORDS):
            # Gathering results to the host is what an evaluation loop is for: not reported there.
            how = per_step_read(ctx, values, gather=True)
            if how is not None:
                func = q.replace("numpy.", "np.", 1)
                items = next((a for a in values if ctx.kind(a) != "jax"), None)
                if items is None:
                    ctx.report(self, node, func=func, sure=how == "sure")
                else:  # benchmarks/claims/jm108_growing_list_of_device_values.py: one copy per item
                    ctx.report(self, node, message=self.list_message, func=func, name=items.id, sure=how == "sure")


RULE = NumpyConversionInLoop()
