"""Clocks: the calls and blocks that read the time, also through helpers a project writes.

Scripts time work with `time.time()` pairs, but also with helpers: a `Timer` whose `tick("train")`
and `tock("train")` read the clock, a `@contextmanager` that reads it before and after its `yield`
(`with tracker.record_time("step"):`), a class whose `__enter__`/`__exit__` do. A helper is a clock
when its own body reads one (one call deep), wherever it is defined: in this module, or in another
file of the reviewed tree (project.py records it there).
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.helpers import arguments, calls_one_deep, own_nodes, project_facts
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import TIMERS
from jaxmem.evaluators.review.semantic.scopes import Scope

CONTEXT_MANAGER = frozenset({"contextlib.contextmanager", "contextmanager"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def reads_clock(a: Analysis, fn: ast.AST) -> bool:
    """The function's own statements read a clock, or call a local function that does."""
    return calls_one_deep(a, fn, TIMERS.__contains__, "reads_clock")


def is_context_clock(a: Analysis, fn: ast.AST) -> bool:
    """A `@contextmanager` generator that reads the clock around its `yield`."""
    return (isinstance(fn, _FUNCS) and reads_clock(a, fn)
            and any((a.qualname(d) or getattr(d, "id", "")) in CONTEXT_MANAGER for d in fn.decorator_list)
            and any(isinstance(n, ast.Yield) for n in astutil.walk(fn)))


def clock_call(a: Analysis, call: ast.Call, scope: Scope) -> bool:
    """The call reads the clock: a clock itself, or a helper (local, a method of a local class,
    or one of another file of the tree) whose body reads one."""
    q = a.qualname(call.func)
    if q in TIMERS:
        return True
    fn = a.resolve_def(call.func, scope)
    if fn is not None:
        return reads_clock(a, fn) and not is_context_clock(a, fn)
    facts = project_facts(a, call.func, scope)
    return facts is not None and facts.reads_clock and not facts.clock_context


_WAITS = frozenset({"jax.block_until_ready", "jax.effects_barrier"})


def waiting_clock_call(a: Analysis, call: ast.Call, scope: Scope) -> bool:
    """A clock helper (this file's) that waits for the device before reading the time, itself or
    one call deep: `timer.stop(name)` whose body calls `sync_and_time()`, which blocks."""
    return calls_one_deep(a, a.resolve_def(call.func, scope), _WAITS.__contains__, "waits_before_clock",
                          methods=frozenset({"block_until_ready"}))


def clock_block(a: Analysis, expr: ast.AST, scope: Scope) -> bool:
    """`with <expr>:` times its body: a clock context manager (local or of the tree), or an
    instance of a class whose `__enter__` and `__exit__` read the clock (`with Timer():`)."""
    if not isinstance(expr, ast.Call):
        return False
    fn = a.resolve_def(expr.func, scope)
    if fn is not None:
        return is_context_clock(a, fn)
    cls = a.local_class(expr.func)
    if cls is not None:
        return all(reads_clock(a, cls.methods.get(m)) for m in ("__enter__", "__exit__"))
    facts = project_facts(a, expr.func, scope)
    return facts is not None and facts.clock_context


def named_clock_block(a: Analysis, expr: ast.AST, scope: Scope) -> bool:
    """`with timer.context("train"):` on `timer = Timer()` where `Timer` comes from a module
    outside the reviewed files: its body cannot be read, but the class is named as a timer. A
    guess (findings from it are "possible"); a class the model can read is judged by its body."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and isinstance(expr.func.value, ast.Name)):
        return False
    cls = a.constructor_of(expr.func.value, scope)
    if cls is None or a.resolve_def(expr.func, scope) is not None or project_facts(a, expr.func, scope) is not None:
        return False        # not made from a class, or one whose body is in the review (clock_block read it)
    return any(word in cls.rsplit(".", 1)[-1].lower() for word in _TIMER_WORDS)


_TIMER_WORDS = ("timer", "stopwatch")


def elapsed_in_helper(stmt: ast.stmt, end: str, start: str, a: Analysis, scope: Scope) -> bool:
    """`report(start_tic, prompt_tic, end_tic)` where the module's `report` subtracts the
    parameters the two timestamps land on (`prompt_time - start_time`): the elapsed time is
    computed there, so the region between them is timed all the same."""
    for n in astutil.walk(stmt):
        if not isinstance(n, ast.Call):
            continue
        fn = a.resolve_def(n.func, scope)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {arg.id: param for arg, param in arguments(n, fn) if isinstance(arg, ast.Name)}
        p_end, p_start = params.get(end), params.get(start)
        if p_end and p_start and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Sub)
                                     and isinstance(x.left, ast.Name) and x.left.id == p_end
                                     and isinstance(x.right, ast.Name) and x.right.id == p_start
                                     for x in own_nodes(fn)):
            return True
    return False


def prints_only_time(call: ast.Call, ctx) -> bool:
    """`print(time.perf_counter() - t0)` is where the timing ends, not a wait on JAX."""
    return isinstance(call.func, ast.Name) and call.func.id == "print" and not any(
        ctx.kind(a) == "jax" for a in call.args)
