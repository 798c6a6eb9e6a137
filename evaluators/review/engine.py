"""Parse once, build the shared analysis, walk once, let every selected rule look."""
from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable

from jaxmem.evaluators.review import notebook, semantic
from jaxmem.evaluators.review.astutil import _FIELDS, LEAVES, fields, parse
from jaxmem.evaluators.review.finding import Finding, Note
from jaxmem.evaluators.review.parse_errors import NEWER_FIX, newer_syntax, parse_error, repl_transcript
from jaxmem.evaluators.review.rule import Ctx, Rule
from jaxmem.evaluators.review.semantic import iterations, jax_use, loops, per_step, switches
from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS, LOOP_TYPES

_FUNC_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda})
_LOOPS = frozenset(LOOP_TYPES)
_COMPS = frozenset(COMPREHENSIONS)
_SPECIAL = _FUNC_TYPES | _LOOPS | _COMPS | {ast.ClassDef}
_BODY_FIELDS = ("body", "orelse", "finalbody")
_SUPPRESS = re.compile(r"#\s*jaxmem:\s*ignore(?:\[([A-Za-z0-9_,\s]+)\])?")


class _Walker:
    def __init__(self, rules: list[Rule], ctx: Ctx):
        self.ctx = ctx
        self.dispatch: dict[type, list[Rule]] = {}  # outside host loops
        self.loop_dispatch: dict[type, list[Rule]] = {}  # inside them: every rule
        # Calls go to rules that named the functions they care about only when the call's
        # resolved name matches: one name lookup per call instead of one per rule.
        self.by_name: tuple[dict[str, list[Rule]], dict[str, list[Rule]]] = ({}, {})
        self.by_prefix: tuple[list[tuple[str, Rule]], list[tuple[str, Rule]]] = ([], [])
        for rule in rules:
            for t in rule.node_types:
                if t is ast.Call and rule.call_names:
                    for i in (0, 1):
                        if i == 0 and rule.only_in_host_loops:
                            continue
                        for name in rule.call_names:
                            if name.endswith("."):
                                self.by_prefix[i].append((name, rule))
                            else:
                                self.by_name[i].setdefault(name, []).append(rule)
                    self.loop_dispatch.setdefault(t, [])  # calls are still entered
                    continue
                self.loop_dispatch.setdefault(t, []).append(rule)
                if not rule.only_in_host_loops:
                    self.dispatch.setdefault(t, []).append(rule)
        self.named_calls = any(self.by_name[1]) or bool(self.by_prefix[1])
        self.body_rules = [r for r in rules if r.wants_bodies]
        # Leaf nodes no rule asked for are never entered: about a third of all nodes.
        self.skip = frozenset(LEAVES - set(self.loop_dispatch))
        self._moved()  # `in_loop`: kept by `special`, where loops and scopes change, not found per node

    def _moved(self) -> None:
        ctx = self.ctx
        self.in_loop = 1 if (ctx.loops or ctx.per_step is not None) and not ctx.scope.traced else 0

    def walk(self, node: ast.AST) -> None:
        ctx = self.ctx
        t = node.__class__
        ctx.stack.append(node)
        in_loop = self.in_loop
        rules = (self.loop_dispatch if in_loop else self.dispatch).get(t)
        if rules:
            for rule in rules:
                rule.check(node, ctx)
        if t is ast.Call and self.named_calls:
            q = ctx.analysis.qualname(node.func)
            if q is not None:
                for rule in self.by_name[in_loop].get(q, ()):
                    rule.check(node, ctx)
                for prefix, rule in self.by_prefix[in_loop]:
                    if q.startswith(prefix):
                        rule.check(node, ctx)
        if t in _SPECIAL:
            self.special(node, t)
        elif t is ast.With and loops.raises_block(node, ctx.analysis):
            for item in node.items:  # the body is expected to raise: nothing in it is a cost
                self.walk(item.context_expr)
        elif t is ast.If and switches.switched_off(node.test, ctx.analysis, ctx.scope):
            self.walk(node.test)  # `if config["DEBUG"]:` with the key off everywhere: never runs
            self.body(node.orelse)
        elif t is ast.Attribute and t not in self.loop_dispatch:
            # `jax.numpy.zeros`: a dotted chain has nothing below it for rules but its base,
            # which is usually a Name (skipped) or a call (`f(x).block_until_ready`).
            base = node.value
            while base.__class__ is ast.Attribute:
                base = base.value
            if base.__class__ not in self.skip:
                self.walk(base)
        elif t not in LEAVES:
            walk, skip = self.walk, self.skip
            for name in _FIELDS.get(t) or fields(t):
                value = getattr(node, name, None)
                if value is None:
                    continue
                if value.__class__ is list:
                    if name in _BODY_FIELDS and value and isinstance(value[0], ast.stmt):
                        self.body(value)
                        continue
                    for item in value:
                        if item.__class__ not in skip and isinstance(item, ast.AST):
                            walk(item)
                elif value.__class__ not in skip and isinstance(value, ast.AST):
                    walk(value)
        ctx.stack.pop()

    def special(self, node: ast.AST, t: type) -> None:
        """Functions switch scope and reset loops; loops and comprehensions push themselves."""
        ctx = self.ctx
        if t in _FUNC_TYPES:
            saved = ctx.scope, ctx.loops, ctx.per_step
            for dec in getattr(node, "decorator_list", ()):
                self.walk(dec)
            inline = node in ctx.analysis.mapped_lambdas  # `tree_map(lambda v: ...)` runs here, per leaf
            ctx.scope, ctx.loops = ctx.analysis.scopes[node], ctx.loops if inline else []
            ctx.per_step = ctx.per_step if inline else ctx.scope.per_step
            self._moved()
            if t is ast.Lambda:
                self.walk(node.body)
            else:
                self.body(node.body)
            ctx.scope, ctx.loops, ctx.per_step = saved
            self._moved()
        elif t is ast.ClassDef:
            for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
                self.walk(expr)
            saved_scope, ctx.scope = ctx.scope, ctx.analysis.scopes[node]
            self._moved()
            self.body(node.body)
            ctx.scope = saved_scope
            self._moved()
        elif t in _LOOPS:
            if t is ast.While:
                ctx.loops.append(node)
                self._moved()
                self.walk(node.test)
            else:
                self.walk(node.target)
                self.walk(node.iter)  # evaluated once, before the first iteration
                ctx.loops.append(node)
                self._moved()
            self.body(node.body)
            ctx.loops.pop()
            self._moved()
            self.body(node.orelse)
        else:
            gens = node.generators
            self.walk(gens[0].iter)
            ctx.loops.append(node)
            self._moved()
            for i, gen in enumerate(gens):
                self.walk(gen.target)
                if i:
                    self.walk(gen.iter)
                for cond in gen.ifs:
                    self.walk(cond)
            for part in (node.key, node.value) if t is ast.DictComp else (node.elt,):
                self.walk(part)
            ctx.loops.pop()
            self._moved()

    def body(self, stmts: list[ast.stmt], notebook_cells: bool = False) -> None:
        # A notebook's joined cells are not one block: a cell that stops (`raise`, `exit()`) does
        # not stop the next cell from being run.
        if not notebook_cells:
            stmts = live(stmts, self.ctx.analysis)
        for rule in self.body_rules:
            rule.check_body(stmts, self.ctx)
        for stmt in stmts:
            self.walk(stmt)


def live(stmts: list[ast.stmt], analysis) -> list[ast.stmt]:
    """The statements of a block that can run: none after one that always leaves it (`return`,
    `raise`, `break`, `continue`, `exit()`)."""
    for i, stmt in enumerate(stmts[:-1]):
        if isinstance(stmt, ast.Continue) or iterations.ends_loop(stmt, analysis):
            return stmts[:i + 1]
    return stmts


def suppressed(lines: list[str]) -> dict[int, set[str] | None]:
    """Line number -> codes (or prefixes) silenced there; None silences every code."""
    out: dict[int, set[str] | None] = {}
    for i, text in enumerate(lines, 1):
        if "jaxmem" not in text:
            continue
        m = _SUPPRESS.search(text)
        if m:
            out[i] = None if m.group(1) is None else {c.strip().upper() for c in m.group(1).split(",") if c.strip()}
    return out


def _is_suppressed(f: Finding, marks: dict[int, set[str] | None]) -> bool:
    if f.line not in marks:
        return False
    codes = marks[f.line]
    return codes is None or any(f.code.startswith(c) for c in codes)


def check_source(source: str, path: str, rules: Iterable[Rule],
                 card_url: Callable[[str], str], notes: list[Note] | None = None, project=None,
                 tree: ast.Module | None = None) -> list[Finding]:
    """Findings for one module's source. A syntax error becomes one JM001 finding; syntax that
    only a newer Python parses, or a REPL transcript, becomes a note in `notes` (or, without a
    list, an info JM001); a
    `.py` script with IPython lines (`!pip install ...`) is reviewed with those lines blanked.
    `project`: the other files of a reviewed tree (semantic.project.Project), followed on demand;
    `tree`: `source` already parsed by the caller (a notebook's joined cells)."""
    lines = source.splitlines()
    try:
        kept_tree, kept_model = project.take(path, source) if project is not None and tree is None else (None, None)
        tree = tree or kept_tree or parse(source, path)
    except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
        script = _ipython_script(source, path, notes)
        if script is not None:  # the rules' text prefilter reads what was parsed (`%timeit` became a call)
            return _check_tree(script[0], script[1], lines, path, rules, card_url, project)
        newer, fix = newer_syntax(exc, lines), NEWER_FIX
        if newer is None and (newer := repl_transcript(exc, lines)) is not None:
            fix = "Remove the `>>>` prompts and the printed output to review the code."
        if newer is not None and notes is not None:
            notes.append(Note(path, newer))
            return []
        return [parse_error(path, exc, lines, card_url, newer, fix)]
    return _check_tree(tree, source, lines, path, rules, card_url, project, kept_model)


def _ipython_script(source: str, path: str, notes: list[Note] | None) -> tuple[ast.Module, str] | None:
    """A `.py` file that parses once its IPython lines (`!pip install ...`, `%matplotlib`) are
    blanked: that tree and text, with a note saying so; None otherwise."""
    if not path.endswith(".py"):
        return None
    blanked = notebook.blank_script(source)
    if blanked is None:
        return None
    try:
        tree = parse(blanked[0], path)
    except (SyntaxError, ValueError):
        return None
    if notes is not None:
        notes.append(Note(path, f"{blanked[1]} line(s) of IPython syntax: `!command` and `%magic` lines skipped, `%timeit EXPR` "
                                f"and `%time STATEMENT` read as what they time; the rest reviewed"))
    return tree, blanked[0]


def _applicable(rules: Iterable[Rule], seen: str) -> list[Rule]:
    """The rules whose text prefilter (`Rule.requires`) the source passes. Each string is searched
    once per file, and not at all when a shorter required string inside it is absent (`XLA_` before
    `XLA_PYTHON_CLIENT_ALLOCATOR`): most rare strings are absent from most files, and their full
    scans were a twentieth of a review's time."""
    rules = list(rules)
    inside = _substrings(tuple(s for r in rules for s in r.requires))
    found: dict[str, bool] = {}
    return [r for r in rules if not r.requires or any(_has(s, seen, inside, found) for s in r.requires)]


def _has(s: str, seen: str, inside: dict[str, str], found: dict[str, bool]) -> bool:
    """`s in seen`, remembered in `found`; False at once when a shorter required string inside `s`
    is absent. (A module function: a recursive closure is a reference cycle per file.)"""
    v = found.get(s)
    if v is None:
        part = inside.get(s)
        v = found[s] = (part is None or _has(part, seen, inside, found)) and s in seen
    return v


@functools.lru_cache(maxsize=8)
def _substrings(required: tuple[str, ...]) -> dict[str, str]:
    """Each required string -> the longest other required string it contains."""
    unique = set(required)
    out = {}
    for s in unique:
        inner = [t for t in unique if t != s and t in s]
        if inner:
            out[s] = max(inner, key=len)
    return out


def _check_tree(tree: ast.Module, source: str, lines: list[str], path: str, rules: Iterable[Rule],
                card_url: Callable[[str], str], project, kept_model=None) -> list[Finding]:
    module = project.module_of(path) if project is not None else None
    seen = source + (project.prefilter_text(source, module) if project is not None else "")
    rules = _applicable(rules, seen)
    if not jax_use.touches_jax(source, project, module):
        rules = [r for r in rules if not r.needs_jax]
    if not rules:
        return []
    analysis = kept_model or semantic.build(tree, lines, module=module, project=project)
    per_step.mark(analysis)
    ctx = Ctx(analysis=analysis, path=path, card_url=card_url, scope=analysis.module_scope)
    walker = _Walker(rules, ctx)
    walker.body(tree.body, notebook_cells=path.endswith(".ipynb"))
    for rule in rules:
        if rule.wants_module:
            rule.check_module(ctx)
    analysis.release()  # the findings are plain data; nothing below reads the model
    marks = suppressed(lines) if "jaxmem" in source else {}
    findings = [f for f in ctx.findings if not _is_suppressed(f, marks)] if marks else ctx.findings
    # One finding per rule and place: nested loops or two matching patterns never double-report.
    unique: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.code, f.line, f.col)
        if key not in unique or (f.confidence == "sure" and unique[key].confidence != "sure"):
            unique[key] = f
    return sorted(unique.values(), key=Finding.sort_key)
