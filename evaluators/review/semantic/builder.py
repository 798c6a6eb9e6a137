"""One recursive pass over a module: imports, scopes, bindings with positions, classes, loops."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.astutil import _FIELDS, LEAVES, fields
from jaxmem.evaluators.review.semantic.jit_bindings import JitBindings
from jaxmem.evaluators.review.semantic.names import (
    APPENDERS,
    COMPILED_BODIES,
    CONTROL_FLOW,
    CUSTOM_RULES,
    JIT_NAMES,
    MODULE_BASES,
    NETWORK_BASES,
    TRACING_NAMES,
    TREE_MAPS,
    absolute_module,
    end_pos,
    pos,
)
from jaxmem.evaluators.review.semantic.scopes import Binding, ClassInfo, Scope

if TYPE_CHECKING:
    from jaxmem.evaluators.review.semantic.model import Analysis


class _Builder(JitBindings):
    """One recursive pass: imports, scopes, bindings with positions, classes, transform uses."""

    _methods: dict[type, object] = {}  # node class -> unbound visit function (or generic_visit)

    def __init__(self, analysis: Analysis):
        self.a = analysis
        self.scope = analysis.module_scope
        self.loop_depth = 0
        self.guarded = 0  # inside `if step % N ...:` within the current loop

    def visit(self, node: ast.AST) -> None:
        cls = node.__class__
        fn = self._methods.get(cls)
        if fn is None:
            fn = self._methods[cls] = getattr(_Builder, f"visit_{cls.__name__}", _Builder.generic_visit)
        fn(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        for name in _FIELDS.get(node.__class__) or fields(node.__class__):
            v = getattr(node, name, None)
            if v is None:
                continue
            if v.__class__ is list:
                for item in v:
                    if item.__class__ not in LEAVES and isinstance(item, ast.AST):
                        visit(item)
            elif v.__class__ not in LEAVES and isinstance(v, ast.AST):
                visit(v)

    def visit_list(self, nodes: list[ast.AST]) -> None:
        for n in nodes:
            self.visit(n)

    def _header(self, nodes: list[ast.AST]) -> None:
        """A def's or class's decorators, defaults and bases: evaluated in the enclosing body, but
        kept apart from that body's own calls (a timer's own calls are its statements')."""
        calls = self.scope.calls
        start = len(calls)
        self.visit_list(nodes)
        self.scope.header_calls.extend(calls[start:])
        del calls[start:]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # A dotted chain holds nothing this pass records except what sits at its base.
        base = node.value
        while base.__class__ is ast.Attribute:
            base = base.value
        if base.__class__ not in LEAVES:
            self.visit(base)

    # ---- imports --------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        # `import data_utils` in `src/train.py`: the module beside the importing file (a script's
        # folder is first on sys.path), as for `from data_utils import ...` (model.from_import).
        beside = self.a.project.beside if self.a.project is not None else None
        for alias in node.names:
            if alias.asname:
                self.a.aliases[alias.asname] = beside(alias.name, self.a.module_name) if beside else alias.name
                name = alias.asname
            else:
                name = alias.name.split(".")[0]
                self.a.aliases[name] = beside(name, self.a.module_name) if beside else name
            self.scope.bind(Binding(name, "import", pos(node), node))
            if alias.name.split(".")[0] == "jax" and self.a.imports_jax_line is None:
                self.a.imports_jax_line = node.lineno

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # `from .train import step`: resolved through the module's own name when it is known.
        base = absolute_module(node, self.a.module_name, self.a.is_package)
        for alias in node.names:
            name = alias.asname or alias.name
            if base:
                self.a.aliases[name] = self.a.from_import(base, alias.name)
            self.scope.bind(Binding(name, "import", pos(node), node))
        if base and not node.level and base.split(".")[0] == "jax" and self.a.imports_jax_line is None:
            self.a.imports_jax_line = node.lineno

    # ---- functions and classes --------------------------------------------------------------
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        all_args = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        cls = self.scope.cls if self.scope.is_class else None
        lookup_parent = self.scope.parent if self.scope.is_class else self.scope
        scope = Scope(node, lookup_parent, self.a, params=params, cls=cls)
        self.a.scopes[node] = scope
        self.scope.inner.append(scope)
        self._header([d for d in [*args.defaults, *args.kw_defaults] if d is not None])
        if not isinstance(node, ast.Lambda):
            self._header(node.decorator_list)
            info = None
            for dec in node.decorator_list:
                info = info or self.a.decorator_jit(dec, node, self.scope)
                q = self.a.decorator_qualname(dec)
                if q in TRACING_NAMES:
                    scope.reasons.add("custom" if q in CUSTOM_RULES else "control" if q in CONTROL_FLOW
                                      else "jit" if q in JIT_NAMES else "transform")
            if info is not None:
                self.a.jitted_defs[node] = info
                scope.jit = info
                scope.reasons.add("jit")
            self.a.functions[node.name] = node
            binding = Binding(node.name, "def", pos(node), node, info=info)
            if cls is not None:
                cls.methods[node.name] = node
                if info is not None:
                    self.a.attr_jits.setdefault(node.name, []).append(info.as_method())
            self.scope.bind(binding)
            if cls is not None and cls.framework is not None:
                if cls.framework == "linen" or node.name in ("__call__", "setup"):
                    scope.reasons.add("module")
        start = pos(node)
        for a in all_args:
            scope.bind(Binding(a.arg, "param", start, node, value=a.annotation))
        for a in (args.vararg, args.kwarg):
            if a is not None:
                scope.bind(Binding(a.arg, "param", start, node))
        if len(params) >= 2 and params[0] in ("key", "rng", "prng_key", "rngs") and params[1] == "shape":
            scope.reasons.add("transform")  # an initializer: called inside init, traced
        prev, self.scope = self.scope, scope
        saved_depth, self.loop_depth, self.guarded = (self.loop_depth, self.guarded), 0, 0
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        else:
            self.visit_list(node.body)
        self.scope, (self.loop_depth, self.guarded) = prev, saved_depth

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._header([*node.decorator_list, *node.bases])
        info = ClassInfo(node, bases=list(node.bases))
        for base in node.bases:
            q = self.a.qualname(base)
            info.network |= q in NETWORK_BASES
            if q in MODULE_BASES:
                info.framework = MODULE_BASES[q]
            else:
                other = self.a.local_class(base)
                if other is not None and other.framework:
                    info.framework, info.network = other.framework, info.network or other.network
        self.a.classes[node] = info
        self.scope.bind(Binding(node.name, "class", pos(node), node))
        body = Scope(node, self.scope, self.a, cls=info, is_class=True)
        self.a.scopes[node] = body
        self.scope.inner.append(body)
        prev, self.scope = self.scope, body
        saved_depth, self.loop_depth, self.guarded = (self.loop_depth, self.guarded), 0, 0
        self.visit_list(node.body)
        self.scope, (self.loop_depth, self.guarded) = prev, saved_depth

    # ---- bindings -------------------------------------------------------------------------
    def _targets(self, target: ast.AST, stmt: ast.AST, value: ast.AST | None, at, how="assign",
                 index: int | None = None, element: str | None = None, until=None) -> None:
        if isinstance(target, ast.Name):
            b = Binding(target.id, how, at, stmt, value=value, index=index, element=element, until=until)
            if how == "assign" and index is None and isinstance(value, ast.Call):
                self._jit_binding(b, value)
            elif how == "assign" and index is None and isinstance(value, ast.IfExp):
                self._maybe_jit_binding(b, value)
            elif how == "assign" and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                # `learn, evaluate, state = setup(...)` where setup returns `jax.pmap(...)` in that place
                fn = self.a.resolve_def(value.func, self.scope)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.pending_returns.append((b, fn))
            self.scope.bind(b)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if (index is None and isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                    and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))):
                # `state, step = self.state, self.make_step()`: each name is bound to its own value.
                for elt, part in zip(target.elts, value.elts):
                    self._targets(elt, stmt, part, at, how, None, element, until)
                return
            for i, elt in enumerate(target.elts):
                self._targets(elt.value if isinstance(elt, ast.Starred) else elt, stmt, value, at, how,
                              i if index is None else index, element, until)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = self._method_class()
            if cls is not None:
                b = Binding(target.attr, "assign", at, stmt, value=value, index=index)
                if index is None and isinstance(value, ast.Call):
                    self._jit_binding(b, value)
                    if b.info is None:
                        self.pending_attrs.append(b)  # made by a factory: known after resolution
                elif index is None and isinstance(value, ast.Name):  # `self.step = _step`, a jitted def
                    named = self.a.resolve(value.id, self.scope, at)
                    b.info = named and (self.a.jitted_defs.get(named.node) if named.how == "def" else named.info)
                if b.info is not None:
                    self.a.attr_jits.setdefault(target.attr, []).append(b.info)
                cls.attrs.setdefault(target.attr, []).append(b)
                self.scope.attr_bindings.setdefault(target.attr, []).append(b)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and how == "assign":
            # `metrics[step] = out` or `..., metrics[step] = jitted(...)`: what the container holds.
            b = Binding(target.value.id, how, at, stmt, value=value, index=index)
            self.scope.item_sets.setdefault(target.value.id, []).append(b)
        elif isinstance(target, ast.Starred):
            self._targets(target.value, stmt, value, at, how, index, element, until)

    def _method_class(self) -> ClassInfo | None:
        s = self.scope
        return s.cls if not s.is_class else None

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        at = end_pos(node)
        for target in node.targets:
            self._targets(target, node, node.value, at)
            if not isinstance(target, ast.Name):
                self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        # The walk reads the annotation too; a function there (`cfg.act: lambda x: x`, a typo for
        # `=`) needs its scope like any other.
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)
            self._targets(node.target, node, node.value, end_pos(node))
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add) and isinstance(node.value, ast.List):
            self.scope.appends.setdefault(node.target.id, []).extend(node.value.elts)  # `history += [x]`
        if isinstance(node.target, ast.Name):
            load = ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.lineno, col_offset=node.col_offset)
            self.scope.bind(Binding(node.target.id, "assign", end_pos(node), node, value=ast.BinOp(load, node.op, node.value)))
        else:
            if isinstance(node.target, ast.Subscript) and isinstance(node.target.value, ast.Name):
                # `totals["loss"] += loss`: the item now holds the sum, a device array when `loss` is one.
                self.scope.item_sets.setdefault(node.target.value.id, []).append(
                    Binding(node.target.value.id, "assign", end_pos(node), node, value=node.value))
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._targets(node.target, node, node.value, end_pos(node))

    def _loop(self, node: ast.AST, start, end) -> None:
        self.scope.loops.append((start, end, node))
        self.scope.has_loops = True

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._loop(node, pos(node), end_pos(node))
        self._iter_targets(node.target, node.iter, node, pos(node.target))
        self.loop_depth += 1
        saved, self.guarded = self.guarded, 0
        self.visit_list(node.body)
        self.loop_depth -= 1
        self.guarded = saved
        self.visit_list(node.orelse)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self._loop(node, pos(node), end_pos(node))
        self.loop_depth += 1
        saved, self.guarded = self.guarded, 0
        self.visit(node.test)
        self.visit_list(node.body)
        self.loop_depth -= 1
        self.guarded = saved
        self.visit_list(node.orelse)

    def _comprehension(self, node: ast.AST) -> None:
        start, end = pos(node), end_pos(node)
        self._loop(node, start, end)
        self.loop_depth += 1
        for _i, gen in enumerate(node.generators):
            self.visit(gen.iter)
            # Visible in the whole comprehension: the element is written before the `for`.
            self._iter_targets(gen.target, gen.iter, node, start, until=end)
            for cond in gen.ifs:
                self.visit(cond)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.loop_depth -= 1

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _iter_targets(self, target: ast.AST, it: ast.AST, stmt: ast.AST, at, until=None) -> None:
        """Loop targets: rows of an array, items of a host list, through zip/enumerate/items."""
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate")
                and it.func.id not in self.a.aliases and it.args and isinstance(target, (ast.Tuple, ast.List))):
            parts = list(it.args) if it.func.id == "zip" else [None, it.args[0]]
            if len(target.elts) == len(parts):
                for t, p in zip(target.elts, parts):
                    if p is None:
                        self._targets(t, stmt, None, at, "iter", element="index", until=until)
                    else:
                        self._iter_targets(t, p, stmt, at, until)
                return
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values")
                and not it.args):
            recv = it.func.value
            if it.func.attr == "values":
                self._targets(target, stmt, recv, at, "iter", element="dictvalue", until=until)
            elif isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                self._targets(target.elts[0], stmt, None, at, "iter", until=until)
                self._targets(target.elts[1], stmt, recv, at, "iter", element="dictvalue", until=until)
            else:
                self._targets(target, stmt, None, at, "iter", until=until)
            return
        if astutil.walks_keys(stmt):  # `for m in metrics: ... metrics[m]`: keys, not elements
            self.a.key_loops.add(stmt)
            self._targets(target, stmt, None, at, "iter", until=until)
            return
        self._targets(target, stmt, it, at, "iter", element="elem", until=until)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._targets(item.optional_vars, node, item.context_expr, end_pos(item.optional_vars))
        self.visit_list(node.body)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(Binding(node.name, "assign", pos(node), node))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.scope.calls.append(node)
        q = self.a.qualname(node.func)
        if q in TRACING_NAMES:
            positions = COMPILED_BODIES.get(q, (0,))
            for i in positions:
                if i < len(node.args):
                    self.a.transform_args.append((node.args[i], q, self.scope))
            for kw in node.keywords:
                if kw.arg in ("f", "fun", "fn", "body_fun", "cond_fun", "true_fun", "false_fun", "branches", "kernel"):
                    self.a.transform_args.append((kw.value, q, self.scope))
        elif isinstance(node.func, ast.Call) and self.a.jit_factory(node.func, self.scope) is not None and node.args:
            self.a.transform_args.append((node.args[0], self.a.jit_factory(node.func, self.scope).maker, self.scope))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in ("defvjp", "defjvp", "defjvps")
              and node.args):
            self.a.defvjp.append((node, self.scope))
        if q in TREE_MAPS and node.args and isinstance(node.args[0], ast.Lambda):
            self.a.mapped_lambdas[node.args[0]] = (node, self.scope)
        if isinstance(node.func, ast.Name):
            self.a.calls_by_name.setdefault(node.func.id, []).append((node, self.scope))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in APPENDERS and node.args
              and isinstance(node.func.value, ast.Name)):
            self.scope.appends.setdefault(node.func.value.id, []).append(node.args[-1])
        if self.loop_depth and not self.scope.is_class:
            self.a.loop_calls.append((node, self._innermost_loop(node), self.scope, self.guarded > 0))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        periodic = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in astutil.walk(node.test))
        self.guarded += periodic
        self.visit_list(node.body)
        self.guarded -= periodic
        self.visit_list(node.orelse)

    def _innermost_loop(self, node: ast.AST) -> ast.AST | None:
        found = self.scope.loop_at(pos(node))
        return found[2] if found else None
