"""Jitted callables: how one was made, and what JAX donates and treats as static for it."""
from __future__ import annotations

import ast
from dataclasses import dataclass

from jaxmem.evaluators.review.semantic.names import literal_ints, literal_strs

# Makers whose calls return only once their work is done. Since equinox 0.11.8 (commit 141c18d,
# 2024-10-01; unchanged through 0.13) every `eqx.filter_jit` call ends with
# `marker.block_until_ready()` on an output of the same compiled program, to raise its runtime
# errors where they happen; before 0.11.8 it dispatched asynchronously like `jax.jit`.
RETURNS_READY = frozenset({"equinox.filter_jit"})


@dataclass
class JitInfo:
    """How a jitted callable was made; `None` sets mean "not a literal, unknown"."""

    node: ast.AST
    params: tuple[str, ...] | None = None
    donate_argnums: frozenset[int] | None = frozenset()
    donate_argnames: frozenset[str] | None = frozenset()
    static_argnums: frozenset[int] | None = frozenset()
    static_argnames: frozenset[str] | None = frozenset()
    maker: str = "jax.jit"
    donate_from: int | None = None  # equinox `donate="all"` (0) / `"all-except-first"` (1)
    exact: bool = True  # False: matched by attribute name only (another object may have it)
    wrapped: ast.AST | None = None  # the expression that was jitted, when visible
    receiver_donated: bool | None = None  # a bound method: whether its receiver (self) is donated

    @classmethod
    def from_keywords(cls, node: ast.AST, keywords: list[ast.keyword], maker: str = "jax.jit") -> JitInfo:
        info = cls(node=node, maker=maker)
        for kw in keywords:
            if kw.arg in ("donate_argnums", "static_argnums"):
                setattr(info, kw.arg, literal_ints(kw.value))
            elif kw.arg in ("donate_argnames", "static_argnames"):
                setattr(info, kw.arg, literal_strs(kw.value))
            elif kw.arg == "donate" and maker.startswith("equinox."):
                v = kw.value.value if isinstance(kw.value, ast.Constant) else None
                if v in ("all", "warn"):
                    info.donate_from = 0
                elif v in ("all-except-first", "warn-except-first"):
                    info.donate_from = 1
                elif v != "none":
                    info.donate_argnums = None
            elif kw.arg in ("donate_args", "donate_kwargs"):  # haliax: a pytree of flags
                info.donate_argnums = None
            elif kw.arg is None:  # **kwargs: anything could be donated
                info.donate_argnums = None
        return info

    @property
    def returns_ready(self) -> bool:
        """A call waits for its own work before it returns (see RETURNS_READY)."""
        return self.maker in RETURNS_READY

    def merged(self, base: JitInfo) -> JitInfo:
        """This call's keywords over a factory's (`my_jit = partial(jax.jit, ...)`)."""
        for attr in ("donate_argnums", "donate_argnames", "static_argnums", "static_argnames"):
            if not getattr(self, attr):
                setattr(self, attr, getattr(base, attr))
        if self.donate_from is None:
            self.donate_from = base.donate_from
        self.maker = base.maker
        return self

    @property
    def donation_known(self) -> bool:
        """The source says what is donated. Not when a spec is not a literal, and not when
        `donate_argnames` is given for a signature the model cannot see (`jit(shard_map(f, ...))`
        of an f from elsewhere): JAX maps the names through that signature."""
        if self.donate_argnames and self.params is None:
            return False
        return self.donate_argnums is not None and self.donate_argnames is not None

    @property
    def pmapped(self) -> bool:
        return self.maker in ("jax.pmap", "flax.nnx.pmap")

    def donates_keyword(self, name: str) -> bool:
        """Whether an argument passed by keyword is donated (measured on jax 0.10.2): `jax.pmap`
        donates no keyword argument; `jax.jit` donates one named in `donate_argnames`, or, given
        `donate_argnums` alone, one whose position the signature maps into it (since 0.4.14),
        unless the function takes `*args`/`**kwargs` (no signature to map through)."""
        if self.pmapped:
            return False
        if name in (self.donate_argnames or ()):
            return True
        if self.donate_argnums and self.donate_argnames:
            return False  # both given: keywords follow donate_argnames only
        if self.params is None or name not in self.params:
            return False
        p = self.params.index(name)
        return p in (self.donate_argnums or ()) or (self.donate_from is not None and p >= self.donate_from)

    @property
    def donates_anything(self) -> bool:
        return bool(self.donate_argnums or self.donate_argnames) or self.donate_from is not None

    def donates(self, position: int) -> bool:
        return position in self.donated_positions() or (self.donate_from is not None and position >= self.donate_from)

    def donated_positions(self) -> frozenset[int]:
        """Positions donated, with names mapped through the signature as JAX itself does."""
        out = set(self.donate_argnums or ())
        if self.params and self.donate_argnames:
            out.update(i for i, p in enumerate(self.params) if p in self.donate_argnames)
        if self.donate_from is not None and self.params:
            out.update(range(self.donate_from, len(self.params)))
        return frozenset(out)

    def static_positions(self) -> frozenset[int]:
        out = set(self.static_argnums or ())
        if self.params and self.static_argnames:
            out.update(i for i, p in enumerate(self.params) if p in self.static_argnames)
        return frozenset(out)

    def static_names(self) -> frozenset[str]:
        out = set(self.static_argnames or ())
        if self.params:
            out.update(self.params[i] for i in (self.static_argnums or ()) if 0 <= i < len(self.params))
        return frozenset(out)

    def partial(self, given: int) -> JitInfo:
        """The callable `functools.partial(this, *given_args)` makes: the first `given` positions
        are filled, so the caller's positions start after them."""
        if not given:
            return self

        def shift(nums):
            return None if nums is None else frozenset(i - given for i in nums if i >= given)
        return JitInfo(self.node, self.params[given:] if self.params else self.params, shift(self.donate_argnums),
                       self.donate_argnames, shift(self.static_argnums), self.static_argnames, self.maker,
                       None if self.donate_from is None else max(0, self.donate_from - given), self.exact,
                       self.wrapped)

    def as_method(self) -> JitInfo:
        """How a call through an instance sees a jitted method: bound when its first parameter is
        `self` or `cls`, as it is otherwise."""
        return self.bound() if self.params and self.params[0] in ("self", "cls") else self

    def bound(self) -> JitInfo:
        """The same callable reached as a bound method: positions shift past `self`."""
        def shift(nums):
            return None if nums is None else frozenset(i - 1 for i in nums if i > 0)
        out = JitInfo(self.node, self.params[1:] if self.params else self.params, shift(self.donate_argnums),
                      self.donate_argnames, shift(self.static_argnums), self.static_argnames, self.maker,
                      None if self.donate_from is None else max(0, self.donate_from - 1), self.exact, self.wrapped)
        # The receiver is argument 0 of the jitted function: a method that returns a new instance
        # replaces its receiver (`model, info = model.update(batch)`), donated only if 0 is.
        out.receiver_donated = self.donates(0) or bool(self.params and self.params[0] in (self.donate_argnames or ()))
        return out
