"""Calls into code the reviewer cannot see (a package outside the review, a method of an object
it cannot trace): whether they may read the device values they are handed. Not flagging is the
safe side, so where the answer is unknown, they may.
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.helpers import own_calls
from jaxmem.evaluators.review.semantic.hostreads import reads_host
from jaxmem.evaluators.review.semantic.syncs import builtin_name, waits
from jaxmem.evaluators.review.semantic.walk import Walk, in_body

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Builtins that look at an array's type or shape, or pair it up, without its values (not `range`,
# `min`, `max`, `sorted`: those convert device values to Python numbers).
_NO_READ_BUILTINS = frozenset({"len", "isinstance", "type", "id", "hasattr", "getattr", "callable", "enumerate", "zip"})


def may_wait(call: ast.Call, ctx: Walk) -> bool:
    """Device values handed to code we cannot see (a checkpoint manager, a metrics writer)
    may be read there; not flagging is the safe side."""
    q = ctx.qualname(call.func)
    if ctx.jit_info(call.func) is not None:
        return False  # a jitted function
    if q is not None:
        # A known library (jax, numpy, time, ...) reads nothing unasked; a function of the reviewed
        # tree may, where its body copies values to the host (hostreads.py).
        return _tree_reads_host(q, ctx)
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("append", "extend", "add", "update"):
        return False  # containers keep references; they read nothing
    if builtin_name(ctx, call.func) in _NO_READ_BUILTINS:
        return False  # `len(xs)` reads a shape; `isinstance`, `zip` read no values
    fn = ctx.analysis.resolve_def(call.func, ctx.scope)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if _def_reads_host(fn, ctx):
            return True  # `self._run_evaluation()`: a method of this file that reads results on the host
        # A function the reviewer reads is not code it cannot see: it waits where something in it
        # may (`run(key)`, whose body only calls a jitted sampler and `.mean()`, queues its work).
        return _body_may_wait(fn, ctx)
    return handed_device_values(call, ctx)


def _body_may_wait(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Walk) -> bool:
    """Something in `fn`'s own statements waits or may wait, asked in `fn`'s scope: a wait
    (syncs.waits), a call that may wait, or a call the model cannot name at all (`ready()` of a
    `getattr(leaf, "block_until_ready")`). A traced body, or one being asked already in a
    recursion, does not; a body the model has no scope for may."""
    if ctx.analysis.scopes.get(fn) is None:
        return True
    return in_body(fn, ctx, "body_may_wait", False, lambda c: any(
        waits(c, s) for s in fn.body if not isinstance(s, _DEFS)) or any(
        not _named(x, c) or may_wait(x, c) for x in own_calls(fn, c.analysis)))


def _named(call: ast.Call, ctx: Walk) -> bool:
    """The model knows what `call` calls: a library or tree function, a jitted one, a builtin, a
    def or class it reads, or a method of a device array."""
    func = call.func
    return (ctx.jit_info(func) is not None or ctx.qualname(func) is not None or builtin_name(ctx, func) is not None
            or ctx.analysis.resolve_def(func, ctx.scope) is not None
            or isinstance(func, ast.Attribute) and ctx.kind(func.value) == "jax")


def _tree_reads_host(q: str, ctx: Walk) -> bool:
    project = ctx.analysis.project
    facts = project.function(q) if project is not None else None
    return facts is not None and facts.host_reads


def _def_reads_host(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Walk) -> bool:
    """A def of this file whose body reads on the host, itself or through a function of the tree
    it calls (`run_evaluation(...)` in another file): one level."""
    memo = ctx.memo.setdefault("def_reads_host", {})
    if fn not in memo:
        a = ctx.analysis
        memo[fn] = reads_host(a, fn) or any(
            (q := a.qualname(c.func)) is not None and _tree_reads_host(q, ctx)
            for c in astutil.walk(fn) if isinstance(c, ast.Call))
    return memo[fn]


def handed_device_values(call: ast.Call, ctx: Walk) -> bool:
    """A positional or keyword argument of `call` is (or is guessed to be) a device array."""
    return any(ctx.kind(a) == "jax" for a in [*call.args, *(k.value for k in call.keywords)])
