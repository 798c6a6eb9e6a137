"""JM607 debug-checks-left-on

What it does
    Flags turning on JAX's NaN/Inf checker for the whole run: `jax.config.update("jax_debug_nans",
    True)` (or `jax_debug_infs`), or `JAX_DEBUG_NANS` / `JAX_DEBUG_INFS` set to a true value in
    `os.environ` before `import jax` (JAX reads them at import), in a module that runs JAX work in a loop (a jitted step, or JAX operations, called
    from a host loop). Not flagged: the setting under a branch (`if args.debug_nans:`: a switch the
    user turns on to hunt a NaN; `if __name__ == "__main__":` is not such a branch), a module that
    turns the checker off again, `with jax.debug_nans(True):` around one call, and modules with no
    such loop (a one-off computation), unless the module is a package's `__init__.py`, which runs
    in every program that imports the package.

    A new rule (its findings are possible until unseen readings judge it).

Why is this bad
    The checker adds a NaN check to every floating-point value XLA produces: eager operations'
    results are pulled back to the host and checked one by one, and every jitted function's
    outputs are checked before the call returns (JAX's debugging flags guide). So each call waits
    for its own work: the host can no longer queue the next step while the device runs this one
    (measured on jax 0.10.2, CPU: a jitted call that returned after 0.1 ms returned after 691 ms
    with the flag on, the time of its `block_until_ready`; jax/_src/dispatch.py checks each output
    buffer with `np.asarray`). While `jax_debug_nans` is on, `jax.jit` also drops the donation it
    was asked for (jax/_src/pjit.py: donation only `if ... not config.debug_nans.value`), so
    donated state is held twice.

Example
    jax.config.update("jax_debug_nans", True)
    for batch in loader:
        state, loss = train_step(state, batch)

Use instead
    if args.debug_nans:           # only while hunting a NaN
        jax.config.update("jax_debug_nans", True)
    # or around the suspect call only: `with jax.debug_nans(True): train_step(state, batch)`
"""
from __future__ import annotations

import ast
import os

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import ENV_CALLS, const_str, env_writes
from jaxmem.evaluators.review.semantic.jax_config import DEBUG_CHECK_VARS, DEBUG_CHECKS, TRUE_TEXT
from jaxmem.evaluators.review.semantic.regions import debug_checks


class DebugChecksLeftOn(Rule):
    code = "JM607"
    name = "debug-checks-left-on"
    topic = "implicit-host-sync"
    severity = "warning"
    message = ("`{flag}` is on for the whole run: every jitted call's outputs are copied to the host and checked "
               "before it returns (a device->host sync per call){donation}")
    fix = ("Turn the checker on only while hunting a NaN: behind a command-line switch, or around the suspect "
           "call with `with jax.debug_nans(True):`.")
    node_types = (ast.Call, ast.Assign)
    call_names = ENV_CALLS | {"jax.config.update"}  # (the model reads `jax.config.config.update` as it)
    requires = ('debug_nans', 'debug_infs', 'DEBUG_NANS', 'DEBUG_INFS')
    earns_sure = True  # possible until unseen readings judge it

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        flag = None
        updated = isinstance(node, ast.Call) and ctx.qualname(node.func) == "jax.config.update"
        if updated:
            if len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in DEBUG_CHECKS:
                value = node.args[1]
                if isinstance(value, ast.Constant) and (value.value is True or value.value == 1):
                    flag = node.args[0].value
        else:
            # JAX reads its `JAX_*` variables when it is imported: a write after `import jax` does
            # nothing (JM601 says so), one before it turns the checker on.
            first_import = ctx.analysis.imports_jax_line
            if first_import is None or node.lineno < first_import:
                flag = next((key for key, value in env_writes(ctx, node)
                             if key in DEBUG_CHECK_VARS and const_str(value) in TRUE_TEXT), None)
        # An update switched off again elsewhere in the module (a notebook that checks one cell)
        # is not left on (regions.debug_checks); an environment write is read at import: it stays.
        if flag is None or _switched(ctx) or updated and not debug_checks(ctx):
            return
        # A package's `__init__.py` runs in every program that imports the package: the checker is
        # then on for their loops, which are in other files.
        if not (_loops_over_jax(ctx) or os.path.basename(ctx.path) == "__init__.py"):
            return
        donation = ", and donation is ignored" if flag.lower().endswith("nans") else ""
        ctx.report(self, node, flag=flag, donation=donation, sure=True)


def _switched(ctx: Ctx) -> bool:
    """The setting sits under a branch other than the script's main guard: a debugging switch."""
    for parent in ctx.stack[:-1]:
        if isinstance(parent, ast.If) and not _main_guard(parent.test):
            return True
    return False


def _main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _loops_over_jax(ctx: Ctx) -> bool:
    """Some host loop of the module, not under a periodic guard, calls a jitted callable or a JAX
    function: the checker then runs on every iteration."""
    memo = ctx.memo
    if "debug_checks_loops" not in memo:
        a = ctx.analysis
        memo["debug_checks_loops"] = any(
            not guarded and not scope.traced and (
                a.jit_info(call.func, scope) is not None or (a.qualname(call.func) or "").startswith("jax."))
            for call, _loop, scope, guarded in a.loop_calls)
    return memo["debug_checks_loops"]


RULE = DebugChecksLeftOn()
