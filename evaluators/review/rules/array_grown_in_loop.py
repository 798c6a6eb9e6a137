"""JM505 array-grown-in-loop

What it does
    Flags an array that a Python loop carries and grows by concatenation on every iteration,
    in either of two places:

    - in the loop itself, outside jit: `samples = jnp.concatenate([samples, batch])` (also
      `jnp.append`, `jnp.vstack`, `jnp.hstack`, `jax.lax.concatenate`), where `samples` was
      bound before the loop; where the loop hands the grown array to a jitted function (a
      decoder feeding its whole token sequence to a jitted forward), the finding is placed on
      that call, which is traced and compiled again for every new length, benchmarks included;
    - through a jitted step: `out, cache = step(params, cache, x)` where the jitted function
      returns, at the position that replaces `cache`, a concatenation of its own `cache`
      parameter (the KV cache of a decoder grown by one position per token).

    Left alone: growth under a periodic guard, concatenation inside a jitted function's own
    loops (unrolled once at trace time), and, for growth in the loop itself, loops of a few
    literal iterations and epoch loops (through a jitted step every iteration is a whole compile,
    so any loop counts). Sure at module level, in a loop that drives a jitted call, or through a
    jitted function this file defines; possible where a plain function's loop might itself be
    traced from jitted code elsewhere, or the jitted function is matched by name only.

Why is this bad
    A JAX array never grows in place: each concatenation allocates a new buffer and copies the
    whole array into it while the old one is alive, so n iterations copy O(n^2) elements. The
    shape also changes every iteration, and JAX compiles per shape: a jitted step is traced and
    compiled again for every new length, and even an eager `jnp.concatenate` compiles its small
    program once per new shape. Measured with jax 0.10.2 on CPU: 50 eager growth steps of a
    (4, 8) block compiled 50 times (1.14 s), one concatenation of the 50 blocks once (0.14 s);
    the kv-cache snippet pair, 16 decoding steps: 29 compilations with the concatenated cache
    against 15 with a preallocated one.

Example
    for _ in range(steps):
        x, cache = decode_step(params, cache, x)      # returns jnp.concatenate([cache, k], axis=1)

Use instead
    cache = jnp.zeros((batch, max_len, heads, dim))  # allocate once, at the maximum length
    # in the jitted, cache-donating step: cache = lax.dynamic_update_slice(cache, k, (0, pos, 0, 0))
    # or, to collect results: append each to a Python list and concatenate once after the loop
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.astutil import own_returns
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import loops
from jaxmem.evaluators.review.semantic.branches import under_periodic_guard_in
from jaxmem.evaluators.review.semantic.flow import replaced_state_calls
from jaxmem.evaluators.review.semantic.names import dotted
from jaxmem.evaluators.review.semantic.training import jitted_def
from jaxmem.evaluators.review.semantic.walk import At

# Functions whose result holds their first argument's elements and more: the result is larger
# than the input along an axis. (`jnp.stack` adds an axis; a loop cannot stack onto its own result
# twice without a shape error, so it is not growth.)
LIST_GROWERS = frozenset({"jax.numpy.concatenate", "jax.numpy.vstack", "jax.numpy.hstack", "jax.numpy.row_stack",
                          "jax.numpy.column_stack", "jax.numpy.dstack", "jax.lax.concatenate"})
FIRST_ARG_GROWERS = frozenset({"jax.numpy.append"})


def grows(value: ast.AST, qualname) -> frozenset[str]:
    """The names `value` could be growing (`jnp.concatenate([x, y])` -> {x, y}: the carried one at
    either end, appended to or prepended to), `self.losses` included; empty for anything else."""
    if not isinstance(value, ast.Call) or not value.args:
        return frozenset()
    func = qualname(value.func)
    first = value.args[0]
    if func in LIST_GROWERS and isinstance(first, (ast.List, ast.Tuple)) and len(first.elts) >= 2:
        names = [dotted(e) for e in first.elts]
        return frozenset(n for n in (names[0], names[-1]) if n is not None and names.count(n) == 1)
    if func in FIRST_ARG_GROWERS and dotted(first) is not None and len(value.args) >= 2:
        return frozenset({dotted(first)})
    return frozenset()


class ArrayGrownInLoop(Rule):
    code = "JM505"
    name = "array-grown-in-loop"
    topic = "kv-cache"
    severity = "warning"
    message = ("`{name}` {verb} by {how} on every iteration: each one copies the whole array into a new buffer "
               "and, with a new shape each time, {compiles}")
    fix = ("Allocate it once at its final size and write each part in place (`lax.dynamic_update_slice` or "
           "`.at[...].set` in a jitted step that donates it), or collect the parts in a Python list and "
           "concatenate once after the loop.")
    node_types = (ast.For, ast.AsyncFor, ast.While)
    # Text the file must hold for the rule to run (`np.append` also matches `jnp.append`; a bare
    # `append` would run it on every file with a list).
    requires = ('concatenate', 'np.append', 'numpy.append', 'vstack', 'hstack', 'dstack', 'column_stack',
                'row_stack')

    def check(self, loop: ast.AST, ctx: Ctx) -> None:
        if ctx.scope.traced:
            return
        # A benchmark that grows an array may time exactly that; one that hands the grown array
        # to a jitted function times recompilation it did not mean to (reported either way).
        bench = loops.benchmark_function(ctx.scope, ctx.analysis) is not None
        # Through a jitted step every iteration is a whole trace and compile, costly in a loop of
        # any length; in the loop itself a few copies and compiles of one small operation are not.
        if not bench:
            self._through_jit(loop, ctx)
        if not (loops.small_loop(loop, ctx.analysis, ctx.scope) or loops.epoch_loop(loop, ctx)):
            self._in_loop(loop, ctx, bench)

    def _in_loop(self, loop: ast.AST, ctx: Ctx, bench: bool) -> None:
        """`x = jnp.concatenate([x, y])` in the loop's own statements (not its inner loops)."""
        start = (loop.lineno, loop.col_offset - 1)
        for stmt in _own_statements(loop.body):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and dotted(stmt.targets[0]) is not None):
                continue
            name = dotted(stmt.targets[0])  # `self.losses = jnp.concatenate(...)`: state kept on the object
            if name not in grows(stmt.value, ctx.qualname) or under_periodic_guard_in(stmt, loop, ctx.analysis, ctx.scope):
                continue
            if ("." not in name and ctx.analysis.resolve(name, ctx.scope, start) is None
                    or _fresh_each_iteration(loop, stmt, name)):
                continue   # not carried from one iteration to the next
            if _reset_in_loop(loop, stmt, name):
                continue   # emptied again in the loop (`if it % 10 == 0: losses = jnp.array([])`): bounded
            # Sure where the loop is proven to run eagerly: at module level, or driving a jitted
            # call (a plain function's loop might itself be traced from jitted code elsewhere,
            # where it unrolls once).
            sure = ctx.scope is ctx.analysis.module_scope or _calls_jitted(loop, ctx)
            fed = _jitted_call_fed(loop, name, ctx)
            if fed is not None:
                # The grown array is a jitted function's input: that function is traced and
                # compiled again for every new length, the larger cost, so it is reported there.
                step = ast.unparse(fed.func)
                ctx.report(self, fed, name=name, verb="grows", how=f"`{_how(stmt.value, ctx)}` (line {stmt.lineno})",
                           compiles=f"jitted `{step}`, which receives it, is traced and compiled again for each new "
                                    f"length", sure=True)
                continue
            if bench:
                continue
            ctx.report(self, stmt, name=name, verb="grows", how=f"`{_how(stmt.value, ctx)}`",
                       compiles="its operation is compiled again for each new length", sure=sure)

    def _through_jit(self, loop: ast.AST, ctx: Ctx) -> None:
        """A jitted step whose output replacing an argument is that argument, concatenated."""
        for call, replaced in replaced_state_calls(ctx.analysis, loop, ctx.scope):
            info = ctx.jit_info(call.func)
            if info is None or under_periodic_guard_in(call, loop, ctx.analysis, ctx.scope):
                continue
            fn = jitted_def(info, At(ctx.analysis, ctx.scope))
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            assign = _assignment_of(call, loop)
            if assign is None:
                continue
            outputs = _returned_outputs(fn)
            if not outputs:
                continue
            params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
            if info.receiver_donated is not None and params:
                params = params[1:]   # a bound method: `self` is not in the call's arguments
            grown_params = set(params) & _grown_in(fn, ctx)
            grown = []
            for position, target in _targets(assign):
                param = _param_for(call, target, params) if target in replaced else None
                if param is not None and param in grown_params and outputs.get(position) == param:
                    grown.append(target)
            if grown:
                step = ast.unparse(call.func)
                ctx.report(self, call, name=", ".join(grown), verb="grow" if len(grown) > 1 else "grows",
                           how=f"concatenation inside jitted `{step}`",
                           compiles=f"`{step}` is traced and compiled again", sure=info.exact)


def _fresh_each_iteration(loop: ast.AST, grown: ast.stmt, name: str) -> bool:
    """`x = batch["x"][0]` ... `x = jnp.concatenate([x, pad])` later in the same iteration: the
    name is bound anew, without reading itself, by a statement of the loop body that runs on every
    iteration before the one that extends it; what is extended never carries over."""
    for stmt in loop.body:
        if stmt is grown or any(n is grown for n in astutil.walk(stmt)):
            return False
        if _binds_anew(stmt, name):
            return True
    return False


def _reset_in_loop(loop: ast.AST, grown: ast.stmt, name: str) -> bool:
    """Another statement of the loop's own body binds the name anew without reading it (a reset,
    often every N iterations): the array never holds more than what one period adds, so its copies
    stay small and its few lengths are each compiled once."""
    return any(stmt is not grown and _binds_anew(stmt, name) for stmt in _own_statements(loop.body))


def _binds_anew(stmt: ast.stmt, name: str) -> bool:
    """`name = <a value that does not read name>`: what the name held before is gone."""
    return (isinstance(stmt, ast.Assign) and any(dotted(t) == name for t in stmt.targets)
            and not any(dotted(n) == name for n in astutil.walk(stmt.value)))


def _own_statements(body: list[ast.stmt]):
    """The loop body's statements, through `if`/`with`/`try` blocks but not inner loops or defs."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for field in ("body", "orelse", "finalbody"):
                yield from _own_statements(getattr(stmt, field, []) or [])
            for h in getattr(stmt, "handlers", []):
                yield from _own_statements(h.body)


def _jitted_call_fed(loop: ast.AST, name: str, ctx: Ctx) -> ast.Call | None:
    """The first call of a jitted function in the loop's own statements that is handed `name`
    itself as an argument (not a slice of it: `x[:, -1:]` keeps a fixed shape)."""
    for stmt in _own_statements(loop.body):
        for n in astutil.walk(stmt):
            if isinstance(n, ast.Call) and any(dotted(a) == name for a in [*n.args, *(k.value for k in n.keywords)]):
                info = ctx.jit_info(n.func)
                if info is not None and info.exact:
                    return n
    return None


def _calls_jitted(loop: ast.AST, ctx: Ctx) -> bool:
    return any(isinstance(n, ast.Call) and ctx.jit_info(n.func) is not None for n in astutil.walk(loop))


def _how(value: ast.Call, ctx: Ctx) -> str:
    return (ctx.qualname(value.func) or ast.unparse(value.func)).replace("jax.numpy.", "jnp.").replace("jax.lax.", "lax.")


def _assignment_of(call: ast.Call, loop: ast.AST) -> ast.Assign | None:
    for n in astutil.walk(loop):
        if isinstance(n, ast.Assign) and n.value is call and len(n.targets) == 1:
            return n
    return None


def _targets(assign: ast.Assign) -> list[tuple[int | None, str]]:
    """(output position, name): `a, b = f()` -> [(0, a), (1, b)]; `a = f()` -> [(None, a)]."""
    t = assign.targets[0]
    if isinstance(t, ast.Name):
        return [(None, t.id)]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [(i, e.id) for i, e in enumerate(t.elts) if isinstance(e, ast.Name)]
    return []


def _param_for(call: ast.Call, name: str, params: list[str]) -> str | None:
    """The parameter of the jitted function that receives the loop's `name`."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if isinstance(arg, ast.Name) and arg.id == name:
            return params[i] if i < len(params) else None
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.value.id == name and kw.arg in params:
            return kw.arg
    return None


def _returned_outputs(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int | None, str] | None:
    """What each position of the function's single return statement returns, as a local name:
    `return out, cache_k` -> {0: "out", 1: "cache_k"}; `return cache` -> {None: "cache"}."""
    returns = [r for r in own_returns(fn) if r.value is not None]
    if len(returns) != 1:
        return None
    v = returns[0].value
    if isinstance(v, ast.Name):
        return {None: v.id}
    if isinstance(v, ast.Tuple):
        return {i: e.id for i, e in enumerate(v.elts) if isinstance(e, ast.Name)}
    return None


def _grown_in(fn, ctx: Ctx) -> set[str]:
    """Names rebound in the function's own body (not its loops) to a concatenation of themselves."""
    grown = set()
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name in grows(stmt.value, ctx.analysis.qualname):
                grown.add(name)
    return grown


RULE = ArrayGrownInLoop()
