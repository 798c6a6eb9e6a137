"""Jitted callables however they were made: the call sites' view of jit, pmap and friends."""
from __future__ import annotations

import ast
from dataclasses import replace

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.jit import JitInfo
from jaxmem.evaluators.review.semantic.names import JIT_NAMES, PROPERTY_DECORATORS, dotted, keyword, pos
from jaxmem.evaluators.review.semantic.scopes import Binding, ClassInfo, Scope

# Transforms whose result takes the same arguments as the function they wrap: a jit of one of
# them maps donate_argnames and static_argnames through the inner function's signature.
SIGNATURE_PRESERVING = frozenset({
    "jax.shard_map", "flax.nnx.shard_map", "jax.vmap", "flax.nnx.vmap", "equinox.filter_vmap", "jax.checkpoint",
    "flax.nnx.remat", "jax.named_call", "haliax.named_call",
})


class CallablesMixin:
    # ---- jitted callables -----------------------------------------------------------------
    def jit_from_call(self, call: ast.Call, scope: Scope | None = None) -> tuple[JitInfo, ast.AST | None] | None:
        """A call that makes a jitted function: returns its info and the wrapped expression."""
        scope = scope or self.module_scope
        if not self.built:
            return self._jit_from_call(call, scope)
        key = (call, id(scope))  # rules ask of every call in a loop; most make nothing (scopes live as long as the model)
        if key not in self._mcache:
            self._mcache[key] = self._jit_from_call(call, scope)
        return self._mcache[key]

    def _jit_from_call(self, call: ast.Call, scope: Scope) -> tuple[JitInfo, ast.AST | None] | None:
        func = call.func
        q = self.qualname(func)
        if q in JIT_NAMES:
            if not call.args and not any(k.arg in ("fun", "f", "fn") for k in call.keywords):
                return None  # `jax.jit(static_argnums=...)` alone is a decorator maker
            info = JitInfo.from_keywords(call, call.keywords, q)
            return info, self._wrapped(call)
        factory = self.jit_factory_of(func, scope)
        if factory is not None:
            info = JitInfo.from_keywords(call, call.keywords, factory.maker).merged(factory)
            return info, self._wrapped(call)
        return None

    @staticmethod
    def _wrapped(call: ast.Call) -> ast.AST | None:
        if call.args:
            return call.args[0]
        return keyword(call, "fun") or keyword(call, "f") or keyword(call, "fn")

    def jit_factory(self, call: ast.Call, scope: Scope | None = None) -> JitInfo | None:
        """`functools.partial(jax.jit, **kw)` or `jax.jit(**kw)` with no function: a decorator maker."""
        q = self.qualname(call.func)
        if q == "functools.partial" and call.args:
            inner = self.qualname(call.args[0])
            if inner in JIT_NAMES:
                return JitInfo.from_keywords(call, call.keywords, inner)
            return None
        if q in JIT_NAMES and not call.args and not any(k.arg in ("fun", "f", "fn") for k in call.keywords):
            return JitInfo.from_keywords(call, call.keywords, q)
        return None

    def jit_factory_of(self, func: ast.AST, scope: Scope) -> JitInfo | None:
        """`my_jit` bound to `partial(jax.jit, ...)`, or `partial(jax.jit, ...)` written inline."""
        if isinstance(func, ast.Call):
            return self.jit_factory(func, scope)
        if isinstance(func, ast.Name):
            b = self.resolve(func.id, scope, pos(func))
            if b is not None and b.factory is not None:
                return b.factory
        if self.project is not None and isinstance(func, (ast.Name, ast.Attribute)):
            q = self.qualname(func)  # `constants.pmap`, a partial of jax.pmap in another file
            facts = self.project.function(q) if q else None
            if facts is not None and facts.jit_maker is not None:
                return facts.jit_maker
        return None

    def params_of(self, wrapped: ast.AST | None, scope: Scope | None = None) -> tuple[str, ...] | None:
        scope = scope or self.module_scope
        if isinstance(wrapped, ast.Lambda):
            return tuple(a.arg for a in [*wrapped.args.posonlyargs, *wrapped.args.args])
        if isinstance(wrapped, ast.Call) and self.qualname(wrapped.func) == "functools.partial" and wrapped.args:
            inner = self.params_of(wrapped.args[0], scope)
            if inner is None:
                return None
            rest = inner[len(wrapped.args) - 1:]
            bound = {k.arg for k in wrapped.keywords}
            out = []
            for p in rest:
                if p in bound:
                    break  # a keyword-bound parameter makes the rest keyword-only
                out.append(p)
            return tuple(out)
        if isinstance(wrapped, ast.Call) and self.qualname(wrapped.func) in SIGNATURE_PRESERVING and wrapped.args:
            return self.params_of(wrapped.args[0], scope)  # `jax.jit(shard_map(f, ...))`: f's parameters
        fn = self.resolve_def(wrapped, scope) if wrapped is not None else None
        if fn is None:
            return None
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        if isinstance(wrapped, ast.Attribute) and params and params[0] in ("self", "cls"):
            return params[1:]
        return params

    def jit_info(self, func: ast.AST, scope: Scope | None = None) -> JitInfo | None:
        """The jitted callable a call site invokes, if known (cached per node: rules ask often)."""
        key = func
        if key in self._jcache:
            return self._jcache[key]
        self._jcache[key] = None  # recursion guard (`f = f` chains)
        info = self._jcache[key] = self._jit_info(func, scope or self.module_scope)
        return info

    def _jit_info(self, func: ast.AST, scope: Scope) -> JitInfo | None:
        if isinstance(func, ast.Name):
            b = self.resolve(func.id, scope, pos(func))
            if b is None:
                return None
            if b.info is not None:
                return b.info
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Name) and b.value is not func:
                return self.jit_info(b.value, scope)  # `step = train_step`
            if (b.how == "assign" and b.index is None and isinstance(b.value, ast.Call) and b.value.args
                    and self.qualname(b.value.func) == "functools.partial"):
                # `update_fn = partial(update_parameters, grad_fn=..., optimizer=...)` of a jitted
                # function: calling the partial calls the jitted function.
                inner = self.jit_info(b.value.args[0], scope)
                return inner.partial(len(b.value.args) - 1) if inner is not None else None
            if b.how == "assign" and b.index is None and isinstance(b.value, ast.Call):
                through = self.transformed_jit(b.value, scope)  # `train_vmap = jax.vmap(train_jit)`
                if through is not None:
                    return through
            if b.how == "param":
                return self._param_jit(b)
            if self.project is not None:
                return self._project_jit(func, b, scope)
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if self.aliases.get(func.value.id):
                # A module attribute: `jax.numpy.sum` is no jitted callable; a function of another
                # file of the reviewed tree may be one (`training_utils.update_parameters`).
                facts = self.project.function(self.qualname(func) or "") if self.project is not None else None
                return facts.jit if facts is not None else None
            cls = self.class_of_receiver(func.value, scope)
            if cls is not None:
                return self._class_jit(cls, func.attr)
            if self.project is not None:
                typed = self.annotated_class(func.value, scope)
                facts = self.project.function(f"{typed}.{func.attr}") if typed is not None else None
                if facts is not None and facts.jit is not None:
                    # A method of a class of the reviewed tree, read through the receiver's
                    # annotation: known by a declared type, not a proven value (not exact).
                    return replace(facts.jit.as_method(), exact=False)
            made_by = self.constructor_of(func.value, scope)
            if made_by is not None:
                # `model = GPT(cfg)` of a class of another file of the tree: its jitted methods and
                # the jitted callables its methods store (`self.model_step = jax.jit(...)`).
                facts = self.made_facts(made_by, func.attr)
                if facts is not None and facts.jit is not None:
                    return replace(facts.jit.as_method(), exact=False)
                return None  # `env = catch.Catch()`: an instance of a library class, not one of ours
            candidates = self.attr_jits.get(func.attr, [])
            other = self.functions.get(func.attr)
            if len(candidates) == 1 and (other is None or other in self.jitted_defs):
                c = candidates[0]
                return JitInfo(c.node, c.params, c.donate_argnums, c.donate_argnames, c.static_argnums,
                               c.static_argnames, c.maker, c.donate_from, False, c.wrapped)
            return None
        if isinstance(func, ast.Call):
            return self.made_jit(func, scope) or self.transformed_jit(func, scope)
        return None

    def transformed_jit(self, call: ast.Call, scope: Scope) -> JitInfo | None:
        """`jax.vmap(train_jit)` (or shard_map, checkpoint, named_call) of a jitted callable: a call
        runs the jitted function's program, batched, and returns as soon as it is queued, like the
        jitted call itself (jax 0.10.2, CPU: a vmap of a jitted 50-step scan returned after 1 ms,
        its result was ready after 73 ms). Not through a callable that waits for its own work
        (`eqx.filter_jit`): traced under vmap it returns tracers and never waits."""
        if not call.args or self.qualname(call.func) not in SIGNATURE_PRESERVING:
            return None
        inner = call.args[0]
        info = self.jit_info(inner, scope) if isinstance(inner, (ast.Name, ast.Attribute, ast.Call)) else None
        return info if info is not None and not info.returns_ready else None

    def made_jit(self, call: ast.Call, scope: Scope) -> JitInfo | None:
        """The jitted callable a call makes (`jax.jit(step)`), with the parameters and the
        expression it wraps filled in."""
        made = self.jit_from_call(call, scope)
        if made is None:
            return None
        info, wrapped = made
        info.params = self.params_of(wrapped, scope)
        info.wrapped = wrapped
        return info

    def call_sites(self, fn: ast.AST) -> list[tuple[ast.Call, Scope]]:
        """(call, its scope) for every call of the module function `fn` by name in this module."""
        name = getattr(fn, "name", None)
        return [(call, s) for call, s in self.calls_by_name.get(name, ()) if self.resolve_def(call.func, s) is fn]

    def param_sites(self, b: Binding) -> list[tuple[ast.Call, Scope, ast.AST | None]]:
        """(call, its scope, the argument it passes for parameter `b`, by keyword or position;
        None where it passes none) for every call of `b`'s function in this module by name."""
        fn = b.node
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        out = []
        for call, s in self.call_sites(fn):
            arg = keyword(call, b.name)
            if arg is None and b.name in params and params.index(b.name) < len(call.args):
                arg = call.args[params.index(b.name)]
            out.append((call, s, arg))
        return out

    def _param_jit(self, b: Binding) -> JitInfo | None:
        """A parameter that every call of its function in this module fills with the same kind
        of jitted callable (`train_epoch(train_step_fn, ...)` with `train_step_fn = jax.jit(...)`)."""
        sites = self.param_sites(b)
        if not sites:
            return None
        found = None
        for _call, s, arg in sites:
            if arg is None or isinstance(arg, ast.Starred):
                return None
            info = self.jit_info(arg, s) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if info is None:
                return None
            found = found or info
        return JitInfo(found.node, found.params, found.donate_argnums, found.donate_argnames, found.static_argnums,
                       found.static_argnames, found.maker, found.donate_from, False, found.wrapped)

    def _class_jit(self, cls: ClassInfo, name: str, depth: int = 0) -> JitInfo | None:
        if name in cls.attrs:
            for b in reversed(cls.attrs[name]):
                if b.info is not None:
                    return b.info
            return None
        m = cls.methods.get(name)
        if m is not None:
            info = self.jitted_defs.get(m)
            if info is not None:
                return info.as_method()
            return self._property_jit(m)
        if depth < 3:
            for base in cls.bases:
                other = self.local_class(base)
                if other is not None and other is not cls:
                    found = self._class_jit(other, name, depth + 1)
                    if found is not None:
                        return found
        return None

    def _property_jit(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> JitInfo | None:
        """`@property def step(self): return jax.jit(...)`: the attribute is a jitted callable."""
        if not any((dotted(d) or "") in PROPERTY_DECORATORS or self.qualname(d) in PROPERTY_DECORATORS
                   for d in fn.decorator_list):
            return None
        scope = self.scopes.get(fn)
        for n in astutil.walk(fn):
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and scope is not None:
                made = self.jit_from_call(n.value, scope)
                if made is not None:
                    info, wrapped = made
                    info.params = self.params_of(wrapped, scope)
                    return info
        return None

    def made_returns(self, call: ast.Call, strict: bool) -> str | None:
        """What the function an imported factory makes gives when called: `step = make_step(...)`
        in another file of the tree, whose `make_step` returns a def it defines."""
        q = self.qualname(call.func) if self.project is not None else None
        facts = self.project.function(q) if q else None
        return facts.makes_returns[1 if strict else 0] if facts is not None else None

    def _project_jit(self, func: ast.Name, b: Binding, scope: Scope) -> JitInfo | None:
        """A jitted callable from another file of the reviewed tree: imported as one
        (`from .train import p_train_step`) or made by an imported factory (`step = make_step(...)`)."""
        if b.how == "import":
            facts = self.project.function(self.qualname(func) or "")
            return facts.jit if facts is not None else None
        if b.how == "assign" and isinstance(b.value, ast.Call):
            func = b.value.func
            q = self.qualname(func)
            if q is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                # `step = builder.make_step_fn(nets)`, `builder = Builder(cfg)` (or annotated) of a
                # class in another file of the tree: its factory method's facts.
                cls = self.constructor_of(func.value, scope) or self.annotated_class(func.value, scope)
                q = f"{cls}.{func.attr}" if cls is not None else None
            facts = self.project.function(q) if q else None
            if facts is None:
                return None
            if b.index is None:
                return facts.makes_jit
            # `train_step, eval_step = make_steps(...)`: the jitted callable in that position
            return facts.makes_jits[b.index] if b.index < len(facts.makes_jits) else None
        return None

    def decorator_qualname(self, dec: ast.AST) -> str | None:
        """`@jax.jit`, `@partial(jax.jit, ...)`, `@jax.jit(...)`: the transform a decorator applies."""
        target = dec.func if isinstance(dec, ast.Call) else dec
        q = self.qualname(target)
        if q == "functools.partial" and isinstance(dec, ast.Call) and dec.args:
            q = self.qualname(dec.args[0])
        return q

    def decorator_jit(self, dec: ast.AST, fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> JitInfo | None:
        """How a jit decorator jits `fn` (its options, and a jit factory's)."""
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
        info = None
        q = self.qualname(dec)
        if q in JIT_NAMES:
            info = JitInfo(node=dec, maker=q)
        elif isinstance(dec, ast.Call):
            info = self.jit_factory(dec, scope)
            if info is None and isinstance(dec.func, ast.Name):
                base = self.jit_factory_of(dec.func, scope)  # `@my_jit(static_argnums=1)`? rare
                if base is not None:
                    info = JitInfo.from_keywords(dec, dec.keywords, base.maker).merged(base)
        elif isinstance(dec, ast.Name):
            base = self.jit_factory_of(dec, scope)
            if base is not None:
                info = JitInfo(dec, None, base.donate_argnums, base.donate_argnames, base.static_argnums,
                               base.static_argnames, base.maker, base.donate_from)
        if info is not None:
            info.params = params
            info.wrapped = fn
        return info
