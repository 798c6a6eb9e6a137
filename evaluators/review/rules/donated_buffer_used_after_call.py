"""JM402 donated-buffer-used-after-call

What it does
    Flags reading an argument after it was donated to a jitted call: later in the same block,
    or on the next iteration of a loop that never re-binds it. Only where that is certain: the
    callable is resolved by scope (not matched by an attribute name alone), made by `jax.jit`,
    `pjit` or `pmap` with a literal donation spec. `nnx.jit` re-binds a donated Module's state
    in place, so it is not flagged.

Why is this bad
    A donated buffer is deleted (its memory now holds the output). Any later use raises
    `RuntimeError: Array has been deleted`, on CPU as well as on GPU and TPU.

Example
    @partial(jax.jit, donate_argnums=0)
    def step(x):
        return x * 2

    y = step(x)
    print(x.sum())        # x was donated

Use instead
    x = step(x)           # re-bind the name to the result
    print(x.sum())
"""
from __future__ import annotations

import ast

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic.names import ARRAY_RESULT_METHODS, HOST_ATTRS, HOST_METHODS, LOOP_TYPES

# What a `jax.Array` itself has (jax 0.10.2): reading one of these on a donated array reads the
# deleted buffer. Any other attribute belongs to some other object (a pytree of arrays).
ARRAY_MEMBERS = ARRAY_RESULT_METHODS | frozenset(HOST_METHODS) | frozenset({
    "T", "mT", "real", "imag", "at", "flat", "addressable_shards", "global_shards", "unsafe_buffer_pointer"})


def _names(node: ast.AST, want: type) -> set[str]:
    return {n.id for n in astutil.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, want)}


def _metadata_reads(stmt: ast.AST, ctx: Ctx) -> set[int]:
    """Names read only for metadata, fine on a deleted array: `x.shape`, `x.is_deleted()`,
    `f.lower(x)` / `f.trace(x)` / `jax.eval_shape(f, x)` (they look at shapes and dtypes)."""
    out = set()
    for n in astutil.walk(stmt):
        if isinstance(n, ast.Attribute) and (n.attr in HOST_ATTRS or n.attr == "is_deleted"):
            out.add(id(n.value))
        elif isinstance(n, ast.Call) and (
                (isinstance(n.func, ast.Attribute) and n.func.attr in ("lower", "trace"))
                or ctx.qualname(n.func) == "jax.eval_shape"):
            out.update(id(a) for a in n.args)
            out.update(id(k.value) for k in n.keywords)
    return out


class DonatedBufferUsedAfterCall(Rule):
    code = "JM402"
    name = "donated-buffer-used-after-call"
    topic = "buffer-donation"
    severity = "error"
    message = "`{arg}` was donated to `{func}` on line {line} and is read afterwards: its buffer is deleted, this raises"
    loop_message = "`{arg}` is donated to `{func}` but never re-bound in the loop: the next iteration passes a deleted buffer and raises"
    fix = "Re-bind the name to the call's result (`{arg} = ...`) or stop donating this argument."
    wants_bodies = True
    requires = ('donate_',)

    def check_body(self, body: list[ast.stmt], ctx: Ctx) -> None:
        if ctx.scope.traced:
            return  # inside jit, donation of an inner call is ignored
        in_loop = bool(ctx.stack) and isinstance(ctx.stack[-1], LOOP_TYPES) and ctx.stack[-1].body is body
        for i, stmt in enumerate(body):
            call = self._donating_call(stmt, ctx)
            if call is None:
                continue
            info = ctx.jit_info(call.func)
            # A NumPy array passed to a donating call is copied to the device and the copy is
            # donated: the host array stays valid (JAX warns that it could not donate it).
            donated = {n for n in self._donated_args(call, info, ctx) if ctx.kind(_name(call, n)) != "np"}
            rebound = _names(stmt, ast.Store)
            # A loop target is bound afresh by every iteration, like a name the body re-binds.
            bound_each_iteration = _names(ctx.stack[-1].target, ast.Store) if in_loop and isinstance(
                ctx.stack[-1], (ast.For, ast.AsyncFor)) else set()
            for name in donated - rebound:
                if self._read_later(name, body[i + 1:], ctx, call):
                    continue
                if in_loop and name not in bound_each_iteration and not any(name in _names(s, ast.Store) for s in body):
                    # Next iteration passes the deleted buffer again.
                    self._emit(ctx, call, name, call, message=self.loop_message)

    def _read_later(self, name: str, rest: list[ast.stmt], ctx: Ctx, call: ast.Call) -> bool:
        for stmt in rest:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            benign = _metadata_reads(stmt, ctx)
            loads = [n for n in astutil.walk(stmt) if isinstance(n, ast.Name) and n.id == name
                     and isinstance(n.ctx, ast.Load) and id(n) not in benign]
            if loads:
                first = min(loads, key=lambda n: (n.lineno, n.col_offset))
                # `mesh.attrs` of a donated pytree object: the attribute may be static data of the
                # pytree, which donation leaves alone, not one of its arrays: not certain.
                member = _members(stmt).get(id(first))
                self._emit(ctx, first, name, call, sure=member is None or member in ARRAY_MEMBERS)
                return True
            if name in _names(stmt, ast.Store) or name in _names(stmt, ast.Del):
                return True
        return False

    def _emit(self, ctx: Ctx, node: ast.AST, name: str, call: ast.Call, message: str | None = None,
              sure: bool = True) -> None:
        # Sure where the donated value is proven a device array (a NumPy one is copied, not deleted).
        ctx.report(self, node, message=message, arg=name, func=ast.unparse(call.func), line=call.lineno,
                   sure=sure and ctx.proven(_name(call, name)))

    @staticmethod
    def _donating_call(stmt: ast.stmt, ctx: Ctx) -> ast.Call | None:
        value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            return None
        info = ctx.jit_info(value.func)
        # An error needs certainty: the callable resolved by scope (not by attribute name alone)
        # and a literal donation spec.
        if (info is None or not info.exact or not info.donation_known or not info.donates_anything
                or not info.maker.startswith("jax.")):
            return None  # nnx.jit re-binds donated Module state in place; Equinox donates arrays only
        return value

    @staticmethod
    def _donated_args(call: ast.Call, info, ctx: Ctx) -> set[str]:
        out = set()
        explicit = info.donated_positions() - (
            set(range(info.donate_from, len(info.params or ()))) if info.donate_from is not None else set())
        for pos, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if not isinstance(arg, ast.Name):
                continue
            if pos in explicit or (info.donate_from is not None and pos >= info.donate_from
                                   and ctx.kind(arg) == "jax"):  # Equinox donates arrays only
                out.add(arg.id)
        for kw in call.keywords:
            # By keyword, JAX's own rules: jax.pmap donates none; jit maps names through the signature.
            if isinstance(kw.value, ast.Name) and kw.arg is not None and info.donates_keyword(kw.arg):
                out.add(kw.value.id)
        return out


def _members(stmt: ast.AST) -> dict[int, str]:
    """id of a name read as `name.attr` in the statement -> attr."""
    return {id(n.value): n.attr for n in astutil.walk(stmt) if isinstance(n, ast.Attribute)}


def _name(call: ast.Call, name: str) -> ast.AST:
    """The argument node that passes `name` to the call (for its kind at the call site)."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Name) and arg.id == name:
            return arg
    return ast.Name(name, ast.Load(), lineno=call.lineno, col_offset=call.col_offset)


RULE = DonatedBufferUsedAfterCall()
