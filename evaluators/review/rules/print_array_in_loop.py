"""JM102 print-array-in-loop

What it does
    Flags `print`, logging calls, `str`/`repr`/`format`, f-strings and a tqdm bar's postfix or
    description (`bar.set_postfix(loss=loss)`, which tqdm formats with `str`) that format a JAX
    array inside an eagerly running Python loop, the values of a dict handed to `wandb.log`
    (wandb's `util.json_friendly` turns a JAX array into NumPy in the caller's thread), and the
    values handed to a tensorboardX `SummaryWriter` (`add_scalar`, `add_scalars`,
    `add_histogram`: its `x2num.make_np` calls `np.array` on a JAX array).

    Sure only in a loop the semantic model proves trains (a step that replaces its own state and
    takes gradients or applies an optimizer) on a value it proves is a device array: the loss
    formatted on every step. Demo and rollout loops that print on purpose are possible findings,
    shown with --show-possible (they made all of this rule's false positives on the real-code
    benchmark when it reported every loop alike).

Why is this bad
    Formatting an array needs its values: the host waits for the device and copies the array
    back, every iteration. The program becomes as slow as its slowest sync. Not flagged: logging
    under `if step % N == 0`, messages of a `raise`, loops of a few literal iterations, per-epoch
    loops and loops that queue no device work.

Example
    for step in range(steps):
        params, loss = update(params, batch)
        print(f"step {step}: loss {loss}")

Use instead
    for step in range(steps):
        params, loss = update(params, batch)
        if step % 100 == 0:
            print(f"step {step}: loss {loss}")
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.rules._util import describe
from jaxmem.evaluators.review.semantic.loops import not_per_step, periodic
from jaxmem.evaluators.review.semantic.roles import per_step_read
from jaxmem.evaluators.review.semantic.syncs import builtin_name

FORMATTERS = frozenset({"print", "str", "repr", "format"})
LOG_METHODS = frozenset({"debug", "info", "warning", "error", "critical", "exception", "log", "write"})
# A tqdm progress bar's text: it formats what it is handed with str() (a dict's values too).
PROGRESS_TEXT = frozenset({"set_postfix", "set_postfix_str", "set_description", "set_description_str"})
# Metric loggers that turn what they are handed into host numbers in the calling thread: wandb's
# `log` serialises each value with `util.json_friendly`, which converts a JAX array to NumPy.
METRIC_SINKS = frozenset({"wandb.log"})
# tensorboardX's SummaryWriter turns each value it is handed into NumPy in the calling thread
# (x2num.make_np: `if 'jax' in str(type(x)): return check_nan(np.array(x))`), then checks it for
# NaN: a device->host copy that waits for the step. Method -> which arguments are the values.
TENSORBOARDX_VALUES = {"add_scalar": ("scalar_value", 1), "add_histogram": ("values", 1),
                       "add_scalars": ("tag_scalar_dict", 1)}


class PrintArrayInLoop(Rule):
    code = "JM102"
    name = "print-array-in-loop"
    topic = "implicit-host-sync"
    severity = "warning"
    message = "formatting JAX array `{what}` in a loop forces a device->host sync and copy every iteration"
    fix = "Log every N steps (`if step % N == 0`), or collect values on device and print them once after the loop."
    sink_message = ("`{sink}` converts JAX array `{what}` to a host value in a loop: a device->host sync and copy "
                    "every iteration")
    held_message = ("formatting `{what}`, which holds JAX arrays, in a loop forces a device->host sync and copy "
                    "every iteration")
    held_sink_message = ("`{sink}` converts the JAX arrays put in `{what}` to host values in a loop: a device->host "
                         "sync and copy every iteration")
    node_types = (ast.Call, ast.JoinedStr)
    only_in_host_loops = True

    def check(self, node: ast.AST, ctx: Ctx) -> None:
        if not (ctx.host_loop or ctx.per_step_body):
            return
        message, sink, guessed = self.message, None, False
        if isinstance(node, ast.JoinedStr):
            values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        elif _str_format(node):
            values = [*node.args, *(kw.value for kw in node.keywords)]  # "Loss: {:.1f}".format(loss)
        elif builtin_name(ctx, node.func) in FORMATTERS or self._is_log(node.func, ctx):
            values = [*node.args, *(kw.value for kw in node.keywords)]
        elif (sink := ctx.qualname(node.func)) in METRIC_SINKS:
            # `wandb.log({"loss": loss})`: the values of a dict handed to it; `wandb.log(metrics)`:
            # a step's dict of device values handed whole (its first argument; `step=` is a number)
            values = [v for a in [*node.args, *(kw.value for kw in node.keywords)] if isinstance(a, ast.Dict)
                      for v in a.values]
            values += [a for a in node.args[:1] if not isinstance(a, ast.Dict)]
            message = self.sink_message
        elif _unseen_metric_log(node, ctx):
            # `run.log({"loss": loss})` on an object the reviewer cannot trace (`run = cfg["run"]`,
            # made by `wandb.init` in another function): a metrics logger's dict of values, as
            # wandb's, comet's and aim's are; a guess, so possible.
            values = [v for a in node.args if isinstance(a, ast.Dict) for v in a.values]
            message, sink, guessed = self.sink_message, f"{describe(node.func.value)}.{node.func.attr}", True
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in TENSORBOARDX_VALUES
              and ctx.analysis.made_by(node.func.value, ctx.scope, ("tensorboardX.",))):
            # `writer.add_scalar("loss", loss, step)` on a tensorboardX SummaryWriter
            keyword, position = TENSORBOARDX_VALUES[node.func.attr]
            given = [kw.value for kw in node.keywords if kw.arg == keyword] or node.args[position:position + 1]
            values = [v for g in given for v in (g.values if isinstance(g, ast.Dict) else [g])]
            message, sink = self.sink_message, f"SummaryWriter.{node.func.attr}"  # tensorboardX's
        elif isinstance(node.func, ast.Attribute) and node.func.attr in PROGRESS_TEXT:
            # `bar.set_postfix({"loss": loss})`, `bar.set_postfix(loss=loss)`
            values = [*node.args, *(kw.value for kw in node.keywords),
                      *(v for a in node.args if isinstance(a, ast.Dict) for v in a.values)]
        else:
            return
        for value in values:
            if isinstance(value, ast.JoinedStr) or _str_format(value):
                continue  # the f-string or `.format` call itself is checked (and reported) on its own
            device = ctx.kind(value) == "jax"
            held = not device and ctx.holds_device_values(value)
            if device or held:
                if not periodic(ctx) and not not_per_step(ctx, ("print", "format", "log")):
                    how = per_step_read(ctx, [value])
                    if how is not None:
                        if held:  # `metrics["loss"] = loss` ... `wandb.log(metrics)`: each item is read
                            message = self.held_sink_message if message is self.sink_message else self.held_message
                        ctx.report(self, node, message=message, what=describe(value), sink=sink,
                                   sure=how == "sure" and not guessed)
                return

    @staticmethod
    def _is_log(func: ast.AST, ctx: Ctx) -> bool:
        if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS:
            return False
        q = ctx.qualname(func)
        if q is not None:
            return q.startswith(("logging.", "absl.logging.", "sys.stdout.", "sys.stderr.", "loguru.logger."))
        # `logger.info(...)`, `log.info(...)`: conventional names for a logging.Logger
        base = func.value
        return isinstance(base, ast.Name) and ("log" in base.id.lower())


# A metrics logger's method taking a dict of values: wandb's `Run.log`, comet's `log_metrics`.
METRIC_LOG_METHODS = frozenset({"log", "log_metrics"})


def _unseen_metric_log(node: ast.Call, ctx: Ctx) -> bool:
    """`<receiver>.log({...})` whose receiver the model cannot name (not a module, not an
    import): handed a dict literal, it is a metrics logger's call."""
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr in METRIC_LOG_METHODS and ctx.qualname(func) is None
            and any(isinstance(a, ast.Dict) for a in node.args))


def _str_format(node: ast.AST) -> bool:
    """`"Loss: {:.1f}".format(loss)`: a literal's format method."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str))


RULE = PrintArrayInLoop()
