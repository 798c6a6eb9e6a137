"""JM101 host-scalar-conversion-in-loop

What it does
    Flags `float(x)`, `int(x)`, `bool(x)`, `x.item()` and `x.tolist()` on a JAX array inside a
    Python loop that runs eagerly (not under jit), writing a JAX array into an element of a
    NumPy array there (`losses[i] = loss`: NumPy converts it on the host, as `float` does), and
    slicing with a JAX value as a bound (`tokens[i:i + n]`: a slice needs Python ints, so the
    bound is read with `__index__`, as `int(i)` would be).

Why is this bad
    JAX dispatches work asynchronously. Reading a value on the host waits for every queued
    operation and copies the result device->host, so the host stops feeding the device once
    per iteration. Inside `if step % N == 0:` the read is periodic and not flagged, also when
    the guard wraps a short inner loop (two eval splits, a comprehension over a metrics dict);
    so are loops of a few iterations (literals, or names bound to them), per-epoch loops
    (`for epoch in ...`, `range(num_epochs)`), loops that queue no device work, loops that only
    walk the elements of finished device results, and reads after the iteration already waited
    (an earlier host read, an `if` on a device value around or before it, a module function
    that reads). A function that a loop calls on every step is checked as part of that loop
    (one level). Reading the elements of a device array the loop itself walks (`for i in perm:
    int(i)`, `[x.item() for x in tokens]`) is reported whatever the loop's role, as possible:
    one copy per element where one copy of the array before the loop would do, unless the
    source shows the loop is short (semantic/elements.py).

Example
    for batch in batches:
        state, loss = train_step(state, batch)
        total += float(loss)

Use instead
    for batch in batches:
        state, loss = train_step(state, batch)
        total = total + loss          # stays on device
    print(float(total))               # one sync after the loop
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic import helpers
from jaxmem.evaluators.review.semantic.elements import ELEMENT_WISE, walked_array
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.roles import enclosing_role, per_step_read
from jaxmem.evaluators.review.semantic.syncs import builtin_name

CONVERTERS = frozenset({"float", "int", "bool", "complex"})
# How a helper copies a whole array to the host (helpers.converted_params), as against a scalar.
ARRAY_COPIES = frozenset({".tolist()", "np.asarray", "np.array", "jax.device_get"})
# A benchmark named for one of these measures the host read itself.
READ_WORDS = ("item", "tolist", "to_host", "device_get", "fetch", "host_read", "d2h", "device_to_host")


class HostScalarConversionInLoop(Rule):
    code = "JM101"
    name = "host-scalar-conversion-in-loop"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "`{what}` on a JAX array in a loop forces a device->host sync every iteration"
    fix = "Accumulate on device (e.g. `total = total + loss`) and read the value once after the loop, or every N steps."
    item_message = ("`{what}` writes a JAX array into a NumPy array in a loop: NumPy converts it on the host, "
                    "a device->host sync every iteration")
    element_message = f"`{{what}}` reads JAX array `{{array}}` {ELEMENT_WISE} in a Python loop: one device->host copy per element"
    element_fix = "Copy the array to the host once before the loop (`np.asarray({array})` or `.tolist()`) and loop over that."
    inplace_message = ("`{what}` is a NumPy array updated in place with JAX array `{value}` in a loop: NumPy converts "
                       "it on the host, a device->host sync every iteration")
    helper_message = ("`{call}` is handed JAX array `{what}` in a loop and `{callee}` converts it with `{how}`: "
                      "a device->host sync every iteration")
    slice_message = ("`{what}` slices with JAX value `{bound}` in a loop: Python makes it an int on the host "
                     "(`__index__`), a device->host sync every iteration")
    node_types = (ast.Call, ast.Assign, ast.AugAssign, ast.Subscript)
    requires = ('float(', 'int(', 'bool(', 'complex(', '.item(', '.tolist(', '] =', '] +=', ' +=', ' -=', ' *=', ':')
    only_in_host_loops = True
    # Its sure findings on 12b-12i's first runs: 6 right, 4 wrong, and all 4 wrong ones on 12i were
    # one cause: reads of an action a host environment needs (in a rollout helper whose parameter
    # the model took for the converted value, and into a replay buffer after env.step); removed in
    # the model with a fixture (118a21d, JM101/clean_action_read_for_a_host_env). Its proven
    # findings on 12j-12q's first runs: 11 right, 8 wrong; 5 of the 8 were one cause, reads that
    # decide whether the loop goes on (a convergence test, `if float(val) < tol: break`), which
    # the model now knows as stop checks (never proven, and the loop's other reads free:
    # semantic/stops.stop_checks, JM101/clean_reads_beside_a_stop_check); 2 more (a read of an
    # action for env.step, a second read in one statement) were removed before. Restarted from
    # 12r. Its proven findings on 12r-12s's first runs: 2 right, 2 wrong: a 100-step loop taking
    # its gradients eagerly (semantic/roles.eager_steps, JM101/bad_read_in_an_eager_training_loop)
    # and an ensemble Kalman update handed forward outputs named `g`, taken for gradients
    # (roles.call_role; test_forward_outputs_named_g_do_not_prove_a_training_step). Both causes
    # removed; restarted again. Its proven findings on 12t-12y's first runs: 1 right, 21 wrong.
    # 18 of the 21 (12x) were one cause, a logging helper that returns early off the logging
    # step (branches.early_return_guard, 87751f4, before 12z's first run); the other 3 (12v,
    # 12w) were reads under a branch that very likely does not run every step: a debugging
    # switch, a checkpoint predicate the model cannot see handed a cadence, a lazy
    # initialisation (branches.guessed_guard: never proven; JM101/bad_reads_under_guessed_guards).
    # From 12z, the first reading run after the first fix, the proven record is 22 right, 0
    # wrong; the second fix only narrows what is proven (no finding of 12e-12ze changed but the
    # 3 wrong ones). Restarted from 12z.
    record_from = "unseen-2026-12z"

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body):
            return
        if isinstance(node, ast.Subscript):
            self._slice_bound(node, ctx)
            return
        if not isinstance(node, ast.Call):
            self._item_write(node, ctx)
            return
        func = node.func
        name = builtin_name(ctx, func)
        if name in CONVERTERS and len(node.args) == 1 and ctx.kind(node.args[0]) == "jax":
            what, value = f"{name}({describe(node.args[0])})", node.args[0]
        elif isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and ctx.kind(func.value) == "jax":
            what, value = f"{describe(func.value)}.{func.attr}()", func.value
        else:
            self._through_helper(node, ctx)
            return
        if periodic(ctx, sync=False):
            return
        # After the iteration already waited (an earlier read, `if converged:`), one more read of a
        # scalar costs little; reading an array element by element still costs a copy per element.
        waited = periodic(ctx)
        if not waited and not not_per_step(ctx, READ_WORDS):
            how = per_step_read(ctx, [value])
            if how is not None:
                # A number that sizes an array (`shape=(int(alpha * n),)`) must be on the host
                # before the array exists: the fix is computing it from static sizes, which the
                # source may not allow. Reported, never proven.
                ctx.report(self, node, what=what, sure=how == "sure" and not _sizes_an_array(node, ctx))
                return
        array = walked_array(ctx, value)
        if array is not None and not any(f.code == self.code and f.line == node.lineno and ELEMENT_WISE in f.message
                                         for f in ctx.findings):  # `tokens[int(i):int(i) + n]`: one finding
            # Whatever the loop's role: one copy per element where one copy of the array would do.
            # Whether the loop is hot is not seen here: reported, never proven.
            ctx.report(self, node, message=self.element_message, what=what, array=describe(array),
                       fix=self.element_fix, sure=False)

    def _slice_bound(self, node: ast.Subscript, ctx: Ctx) -> None:
        """`data[i:i + seq_len]` where `i` is a device scalar (`for i in jax.random.randint(...)`):
        a slice needs Python ints, so each bound is read on the host as `int(i)` would be, whatever
        is sliced (a list, a string, a NumPy or an eager JAX array)."""
        sl = node.slice
        if not isinstance(sl, ast.Slice):
            return
        bound = next((b for b in (sl.lower, sl.upper, sl.step) if b is not None and ctx.kind(b) == "jax"), None)
        if bound is None or periodic(ctx) or not_per_step(ctx, READ_WORDS):  # periodic(sync=False) is within
            return
        how = per_step_read(ctx, [bound])
        if how is not None:
            ctx.report(self, node, message=self.slice_message, what=describe(node), bound=describe(bound),
                       sure=how == "sure")

    def _item_write(self, node: ast.Assign | ast.AugAssign, ctx: Ctx) -> None:
        """`losses[i] = loss`: NumPy's __setitem__ converts the device value on the host
        (measured on jax 0.10.2: as blocking as `float(loss)`). Only into a proven NumPy array:
        a JAX array's item write raises, and a list keeps the device value without reading it.
        Only in a loop that trains: elsewhere filling a preallocated table (a similarity matrix,
        chunks of an output image) is how results are gathered, the loop's job."""
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self._inplace_into_numpy(node, ctx)
            return
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        # `train_loss[i], model, opt_state = make_step(...)`: an element of an unpacking target
        # takes the same position of a literal tuple, or a part of the call's results.
        pairs = [(t, node.value, t) for t in targets if not isinstance(t, (ast.Tuple, ast.List))]
        for t in targets:
            if isinstance(t, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in t.elts):
                literal = isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == len(t.elts)
                pairs += [(e, node.value.elts[k] if literal else node.value, e if literal else t)
                          for k, e in enumerate(t.elts)]
        for t, value, shown in pairs:
            if not (isinstance(t, ast.Subscript) and ctx.proven(t.value, "np") and ctx.kind(value) == "jax"):
                continue
            if periodic(ctx) or not_per_step(ctx, READ_WORDS) or enclosing_role(ctx).role != "train":
                return
            how = per_step_read(ctx, [value])
            if how is not None:
                ctx.report(self, node, message=self.item_message,
                           what=f"{describe(shown).removeprefix('(').removesuffix(')')} = {describe(value)}",
                           sure=how == "sure")
            return

    def _inplace_into_numpy(self, node: ast.AugAssign, ctx: Ctx) -> None:
        """`p += 0.5 * eta * grad` with `p` a proven NumPy array and the right side a device array:
        NumPy's in-place operator converts its operand on the host (in-place operators never defer
        to the JAX array), a device->host copy that waits, every iteration."""
        if ctx.kind(node.target, strict=True) != "np" or ctx.kind(node.value) != "jax":
            return
        if periodic(ctx) or not_per_step(ctx, READ_WORDS):
            return
        how = per_step_read(ctx, [node.value])
        if how is not None:
            ctx.report(self, node, message=self.inplace_message, what=describe(node.target),
                       value=describe(node.value), sure=how == "sure")

    def _through_helper(self, node: ast.Call, ctx: Ctx) -> None:
        """`metric.add(loss, acc)` where the local `add` does `float(b)` on its arguments."""
        converted, sig, fn = helpers.callee_conversions(ctx.analysis, node.func, ctx.scope)
        if not converted:
            return
        # An argument of unknown kind on a parameter a function of another file declares an
        # array (`start: Float[Array, "D"]`) counts by the callee's word: a guess, never proven.
        # (A local callee's own body is reviewed as part of the loop that calls it: semantic/per_step.py.)
        declared = helpers.declared_arrays(ctx.analysis, node.func, ctx.scope) if fn is None else frozenset()
        found, guessed = [], False
        for arg, name in helpers.arguments(node, sig):
            if name not in converted:
                continue
            kind = ctx.kind(arg)
            if kind == "jax" or kind is None and name in declared:
                found.append((arg, converted[name]))
                guessed = guessed or kind is None
        if not found or periodic(ctx) or not_per_step(ctx, READ_WORDS):
            return
        if not any(ctx.kind(arg) == "jax" for arg, _ in found):
            return  # by the declaration only: the helper's own review reports the read in its body
        # A helper that copies whole arrays out (`np.asarray`, `.tolist()`) gathers results, the
        # job of an evaluation loop; one that makes a Python number of each is a per-step read.
        arrays = all(conv in ARRAY_COPIES for _, conv in found)
        how = per_step_read(ctx, [arg for arg, _ in found], gather=arrays)
        if how is not None:
            arg, conv = found[0]
            ctx.report(self, node, message=self.helper_message, what=describe(arg), call=ast.unparse(node.func)[:40],
                       how=conv, callee=_callee_name(fn) or ast.unparse(node.func)[:40], sure=how == "sure" and not guessed)


def _callee_name(fn) -> str | None:
    """The helper's own name; an instance's `__call__` goes by the name the loop calls."""
    name = getattr(fn, "name", None)
    return None if name == "__call__" else name


_SIZE_KEYWORDS = frozenset({"shape", "size", "length", "num"})
_SHAPED = frozenset({"zeros", "ones", "empty", "full", "arange", "eye", "identity"})


def _sizes_an_array(node: ast.Call, ctx: Ctx) -> bool:
    """The conversion is part of a call's `shape=`/`size=` argument, or of the first argument of
    an array constructor (`jnp.zeros(int(n))`)."""
    for parent in reversed(ctx.stack[:-1]):
        if isinstance(parent, ast.stmt):
            return False
        if not isinstance(parent, ast.Call):
            continue
        if any(k.arg in _SIZE_KEYWORDS and any(n is node for n in ast.walk(k.value)) for k in parent.keywords):
            return True
        q = ctx.qualname(parent.func) or ""
        if q.rsplit(".", 1)[-1] in _SHAPED and parent.args and any(n is node for n in ast.walk(parent.args[0])):
            return True
    return False


RULE = HostScalarConversionInLoop()
