"""The base every rule module subclasses, and the context the engine hands to rules."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import ClassVar

from jaxmem.evaluators.review import calibration
from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.semantic import Analysis, JitInfo, Scope
from jaxmem.evaluators.review.semantic.unused import unused_definition


class Rule:
    """One anti-pattern. Subclasses set the class attributes and override a `check_*` hook.

    The module docstring holds the user docs (What it does / Why is this bad / Example /
    Use instead), so `jaxmem review --explain CODE` and the rule table are never written twice.
    """

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, names the anti-pattern (not the fix)
    topic: ClassVar[str]  # topic id from corpus/topics.yaml: the card a finding links to
    severity: ClassVar[str]  # error | warning | info
    message: ClassVar[str]  # one line naming the concrete cost; may use {placeholders}
    fix: ClassVar[str]
    node_types: ClassVar[tuple[type, ...]] = ()
    wants_bodies: ClassVar[bool] = False  # call check_body on every statement list
    wants_module: ClassVar[bool] = False
    # Substrings one of which the source must contain for the rule to apply at all. A plain
    # `in` test on the text is ~1000x cheaper than walking the tree, and most files fail it.
    requires: ClassVar[tuple[str, ...]] = ()
    # The engine calls `check` only inside eagerly running loops (most code is not), which
    # saves one Python call per node per rule elsewhere.
    only_in_host_loops: ClassVar[bool] = False
    # About JAX work: not run on a file that neither names JAX nor imports a module of the tree
    # that does (semantic/jax_use.py). False for rules about the process's environment variables.
    needs_jax: ClassVar[bool] = True
    # For Call rules: the resolved names (or "prefix." entries) of the functions the rule is
    # about; the engine calls `check` only for those calls. Empty: every call.
    call_names: ClassVar[frozenset[str]] = frozenset()
    # In the default set (what `jaxmem review` runs without --select). A rule whose cost depends
    # on sizes the source does not show, and which found no real problem on the real-code
    # benchmark (benchmarks/review/realcode/), is opt-in: `--select JMxxx`, a prefix or ALL.
    default: ClassVar[bool] = True
    # The first unseen reading whose first run judges the rule as it is now. A change that
    # removes the cause of a rule's record on earlier readings (a model gap, fixed with a
    # fixture) starts its record again; until the next fresh readings judge it, the model's
    # own verdict stands (calibration.py). Never set to hide a record whose cause is not fixed.
    record_from: ClassVar[str | None] = None
    # A rule that joined the default set before any unseen reading judged it: its proven
    # findings are reported as possible until its record there reaches the floor
    # (calibration.earned), so a new rule never enters the default output on the model's word alone.
    earns_sure: ClassVar[bool] = False

    @property
    def doc(self) -> str:
        import sys

        return (sys.modules[type(self).__module__].__doc__ or "").strip()

    def check(self, node: ast.AST, ctx: Ctx) -> None:  # pragma: no cover - overridden
        pass

    def check_body(self, body: list[ast.stmt], ctx: Ctx) -> None:  # pragma: no cover
        pass

    def check_module(self, ctx: Ctx) -> None:  # pragma: no cover
        pass


@dataclass
class Ctx:
    """Where the traversal is: rules read it during their callback, never store it."""

    analysis: Analysis
    path: str
    card_url: object  # callable(topic) -> url; injected so rules never read settings
    scope: Scope = None  # type: ignore[assignment]
    loops: list[ast.AST] = field(default_factory=list)  # loops of the current function only
    stack: list[ast.AST] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    memo: dict = field(default_factory=dict)  # per-file state for rules (rule objects are shared)
    # In a function whose body runs once per step (semantic/per_step.py): the call that runs it,
    # or the def itself where a framework or another file does.
    per_step: ast.AST | None = None

    @property
    def in_loop(self) -> bool:
        return bool(self.loops)

    @property
    def host_loop(self) -> bool:
        """In a Python loop that runs eagerly: the place where per-iteration costs add up."""
        return bool(self.loops) and not self.scope.traced

    @property
    def per_step_body(self) -> bool:
        """In the body (outside its own loops) of a function a host loop calls every step."""
        return self.per_step is not None and not self.loops and not self.scope.traced

    def jit_info(self, func: ast.AST) -> JitInfo | None:
        return self.analysis.jit_info(func, self.scope)

    def builtin(self, func: ast.AST) -> str | None:
        """`float` when it is the builtin here (not imported or bound under that name)."""
        return func.id if self.analysis.is_builtin(func, self.scope) else None

    @property
    def parent(self) -> ast.AST | None:
        return self.stack[-2] if len(self.stack) > 1 else None

    def kind(self, expr: ast.AST, strict: bool = False) -> str | None:
        return self.analysis.kind(expr, self.scope, strict)

    def proven(self, expr: ast.AST, kind: str = "jax") -> bool:
        """The semantic model proves `expr` holds this kind (not a guess)."""
        return self.analysis.kind(expr, self.scope, True) == kind

    def qualname(self, expr: ast.AST) -> str | None:
        return self.analysis.qualname(expr)

    def holds_device_values(self, expr: ast.AST) -> bool:
        """A list or dict the code starts empty and fills with device arrays (`losses.append(loss)`,
        `metrics["loss"] = loss`): handing it to NumPy, a formatter or a logger reads every item on
        the host, one copy per item (kinds.container_item_kind)."""
        return isinstance(expr, ast.Name) and self.analysis.container_item_kind(expr, self.scope) == "jax"

    def report(self, rule: Rule, node: ast.AST, *, topic: str | None = None, message: str | None = None,
               fix: str | None = None, severity: str | None = None, sure: bool = True, **fmt: object) -> None:
        """Record a finding; `message`/`fix` replace the rule's templates for a variant of it.
        `sure`: the rule's premises were proven by the semantic model (else the finding is
        "possible": shown only on request)."""
        line = getattr(node, "lineno", 1)
        src = self.analysis.lines[line - 1] if 0 < line <= len(self.analysis.lines) else ""
        topic = topic or rule.topic
        template = message or rule.message
        if self.per_step_body:
            call = self.per_step
            if self.scope.per_step_why is not None:
                template += f" ({self.scope.per_step_why})"
            elif self.scope.step_role is not None:
                what = "method" if self.scope.cls is not None else "function"
                template += f" (this {what} runs a training step, line {call.lineno}: once per step of the loop that calls it)"
            else:
                template += f" (this function runs on every iteration of the loop that calls it on line {call.lineno})"
        if sure and (unused := unused_definition(self.analysis, self.scope, self.path)) is not None:
            # Proven in itself, but in code nothing in the review calls: not proven to run.
            template += f" (nothing in the reviewed files calls `{unused}`)"
            sure = False
        fix_text = fix or rule.fix
        # Proven premises, but a rule whose proven findings did not hold on unseen code reports
        # them as possible (calibration.py; `--list-rules` gives each rule's record).
        shown_sure = (sure and rule.code not in calibration.demoted()
                      and (not rule.earns_sure or calibration.earned(rule.code)))
        self.findings.append(Finding(
            path=self.path, line=line, col=getattr(node, "col_offset", 0) + 1, code=rule.code,
            name=rule.name, message=template.format(**fmt) if fmt else template,
            severity=severity or rule.severity, topic=topic, fix=fix_text.format(**fmt) if fmt else fix_text,
            url=self.card_url(topic),
            source_line=src.strip(), confidence="sure" if shown_sure else "possible", proven=sure,
        ))
