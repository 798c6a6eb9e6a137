"""Branches that run once per N steps: `if step % N == 0:` and what sits under one; and branches
that run on one or a few steps only: `if step == start_step:`, `if i < 3:` on a step counter.
"""
from __future__ import annotations

import ast
import re

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.semantic.model import Analysis
from jaxmem.evaluators.review.semantic.names import COMPREHENSIONS, TIMERS, passed_argument, pos
from jaxmem.evaluators.review.semantic.scopes import Scope
from jaxmem.evaluators.review.semantic.sizes import SMALL_LOOP, int_value, trip_count
from jaxmem.evaluators.review.semantic.walk import Walk


def periodic_guard(node: ast.AST, child: ast.AST | None = None, analysis: Analysis | None = None,
                   scope: Scope | None = None) -> bool:
    """A branch whose body runs once in many iterations: `if step % N == 0:` (unless N is 1, read
    through names bound to literals: `log_interval = 1` logs every step), `if should_log:` where
    `should_log` was bound to such a test, or a test on the clock (`if time.time() - last > 60:`).
    With `child` (the next node down the stack), only when the child is in the body, not `else:`."""
    if not isinstance(node, ast.If) or (child is not None and child not in node.body):
        return False
    return _periodic_test(node.test, analysis, scope, 0)


MOD_FUNCS = frozenset({"numpy.mod", "numpy.remainder", "math.fmod", "operator.mod"})


def _periodic_test(test: ast.AST, analysis: Analysis | None, scope: Scope | None, depth: int) -> bool:
    if analysis is not None and scope is not None and _few_steps_test(test, analysis, scope):
        return True
    mods = [n.right for n in astutil.walk(test) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)]
    if analysis is not None:
        # `if np.mod(i, 10) == 0:` is `i % 10 == 0`
        mods += [n.args[1] for n in astutil.walk(test) if isinstance(n, ast.Call) and len(n.args) == 2
                 and analysis.qualname(n.func) in MOD_FUNCS]
    if mods:
        if analysis is None or scope is None:
            return True
        return any(int_value(right, analysis, scope) != 1 for right in mods)
    if analysis is None or scope is None or depth > 2:
        return False
    for n in astutil.walk(test):
        if isinstance(n, ast.Call) and analysis.qualname(n.func) in TIMERS:
            return True  # time-based: every few seconds, whatever the step rate
        if isinstance(n, ast.Call) and _predicate_call(n, analysis, scope):
            return True  # `if u.itstime(step, log_every, total):`: a helper that answers `step % n == 0`
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            b = analysis.resolve(n.id, scope, pos(n))
            value = _bound_test(b) if b is not None and b.how == "assign" else None
            if value is not None and value is not test and isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
                if _periodic_test(value, analysis, scope, depth + 1):
                    return True
    return False


def _bound_test(b) -> ast.AST | None:
    """The expression a name holds: the assigned value, or, for a name unpacked from a literal or
    a comprehension (`log_, eval_ = [(i % f == 0) for f in freqs]`), the element it takes."""
    if b.index is None:
        return b.value
    if isinstance(b.value, (ast.ListComp, ast.GeneratorExp)):
        return b.value.elt
    if isinstance(b.value, (ast.Tuple, ast.List)) and b.index < len(b.value.elts):
        return b.value.elts[b.index]
    return None


def early_return_guard(fn: ast.AST, analysis: Analysis | None = None, scope: Scope | None = None) -> ast.If | None:
    """`if iter_idx % self.log_every != 0: return` (or `if not <periodic test>: return`) among a
    function's top-level statements: what follows it runs once in many calls. That `if`, else None."""
    for stmt in astutil.statements(fn):
        if not isinstance(stmt, ast.If) or stmt.orelse or not all(isinstance(b, ast.Return) for b in stmt.body):
            continue
        test = stmt.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _periodic_test(test.operand, analysis, scope, 0):
            return stmt
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)
                and isinstance(test.left, ast.BinOp) and isinstance(test.left.op, ast.Mod)
                and _periodic_test(test, analysis, scope, 0)):
            return stmt
    return None


def periodic_predicate(fn: ast.AST) -> bool:
    """A function whose answer is a periodic test: some `return` gives `step % n == 0` (through
    names its body binds, two deep), and every other one a constant or such a test (`is_freq`,
    `itstime(step, every_n_steps, total)`). Calling it in an `if` is a periodic guard."""
    returns, assigned = [], {}
    stack = list(getattr(fn, "body", []))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Return):
            returns.append(n.value)
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            assigned[n.targets[0].id] = n.value
        stack.extend(astutil.children(n))

    tests = [v for v in returns if v is not None and _periodic_value(v, assigned)]
    return bool(tests) and all(v is None or isinstance(v, ast.Constant) or _periodic_value(v, assigned)
                               for v in returns)


def _periodic_value(e: ast.AST, assigned: dict[str, ast.AST], depth: int = 0) -> bool:
    # A module function, not a recursive closure: that would be a reference cycle (collector.py).
    for n in astutil.walk(e):
        if (isinstance(n, ast.Compare) and isinstance(n.left, ast.BinOp) and isinstance(n.left.op, ast.Mod)
                and any(isinstance(op, ast.Eq) for op in n.ops)):
            return True
        if isinstance(n, ast.Name) and depth < 2 and n.id in assigned and _periodic_value(assigned[n.id], assigned, depth + 1):
            return True
    return False


def _predicate_call(call: ast.Call, analysis: Analysis, scope: Scope) -> bool:
    """A call of a periodic predicate: defined in this file, or a module function of another file
    of the reviewed tree (its facts)."""
    fn = analysis.resolve_def(call.func, scope)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        memo = analysis.memo.setdefault("periodic_predicate", {})
        if fn not in memo:
            memo[fn] = periodic_predicate(fn)
        return memo[fn]
    if analysis.project is None:
        return False
    q = analysis.qualname(call.func)
    facts = analysis.project.function(q) if q else None
    return facts is not None and facts.periodic


def after_early_return(ctx: Walk) -> bool:
    """The current node follows an early-return guard (`if step % every != 0: return`) of its
    function: it runs once in many calls."""
    memo = ctx.memo.setdefault("early_return_guard", {})
    fn = ctx.scope.node
    if fn not in memo:
        memo[fn] = early_return_guard(fn, ctx.analysis, ctx.scope)
    guard = memo[fn]
    here = ctx.stack[-1] if ctx.stack else None
    return guard is not None and getattr(here, "lineno", 0) > guard.end_lineno


def _few_steps_test(test: ast.AST, analysis: Analysis, scope: Scope) -> bool:
    """`step == start_step`, `i == 0`, `epoch < 3` (and such a test joined by `and`): true on one
    step, or on a handful, of a counter that moves every iteration."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_few_steps_test(v, analysis, scope) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq):
        return any((isinstance(side, ast.Name) and _counter(side, analysis, scope))
                   or _attribute_counter(side, analysis, scope) for side in (left, right))
    if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Name) and _counter(left, analysis, scope):
        n = int_value(right, analysis, scope)
        return n is not None and n <= SMALL_LOOP
    return False


def _counter(name: ast.Name, analysis: Analysis, scope: Scope) -> bool:
    """A name that takes a new value every iteration: a `range` loop's target, an `enumerate`
    index, or a name the loop adds to (`step += 1`)."""
    b = analysis.resolve(name.id, scope, pos(name))
    if b is None:
        return False
    if b.how == "param":
        return _counter_passed(b, analysis)
    if b.how == "iter":
        return b.element == "index" or (isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name)
                                        and b.value.func.id == "range")
    return isinstance(b.node, ast.AugAssign) and isinstance(b.node.op, ast.Add)


def _counter_passed(b, analysis: Analysis) -> bool:
    """A parameter that the loop calling its function every step binds to that loop's counter
    (`train_epoch(batch, epoch, index)` from `for index in range(n)`): `index == 0` inside holds on
    one call of the loop only, as it would in the loop's own body."""
    callee = analysis.scopes.get(b.node)
    call, caller = (callee.per_step, callee.per_step_scope) if callee is not None else (None, None)
    if not isinstance(call, ast.Call) or caller is None or caller is callee:
        return False
    if not isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    arg = passed_argument(call, b.node, b.name, receiver=isinstance(call.func, ast.Attribute))
    return isinstance(arg, ast.Name) and _counter(arg, analysis, caller)


def _attribute_counter(node: ast.AST, analysis: Analysis, scope: Scope) -> bool:
    """`self._num_episodes_seen` where a method of the class adds to it (`self.x += 1`): a count
    kept on the object, so `== 0` (or `== start`) holds on one call only."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"):
        return False
    cls = scope.cls
    if cls is None:
        return False
    memo = analysis.memo.setdefault("attribute_counters", {})
    if cls.node not in memo:
        memo[cls.node] = frozenset(t.attr for m in cls.methods.values() for t in _added_to_on_self(m))
    return node.attr in memo[cls.node]


def _added_to_on_self(fn: ast.AST):
    for n in astutil.walk(fn):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Attribute) \
                and isinstance(n.target.value, ast.Name) and n.target.value.id == "self":
            yield n.target


def _branches_up_to_loop(ctx: Walk):
    """The `if` statements whose body (not `else:`) holds the current node, innermost first, up to
    the innermost loop (in a function a loop calls each step: up to the function)."""
    loop = ctx.loops[-1] if ctx.loops else None
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        if node is loop:
            return
        if isinstance(node, ast.If) and stack[i + 1] in node.body:
            yield node


def under_periodic_guard(ctx: Walk) -> bool:
    """Inside the body of `if step % N == 0:` within the innermost loop, or an operand that a
    periodic test before it gates (`step % N == 0 and loss < best`, see periodic_operand)."""
    return (any(periodic_guard(node, None, ctx.analysis, ctx.scope) for node in _branches_up_to_loop(ctx))
            or any(periodic_operand(node, child, ctx.analysis, ctx.scope)
                   for node, child in zip(ctx.stack, ctx.stack[1:])))


def periodic_operand(node: ast.AST, child: ast.AST, analysis: Analysis | None, scope: Scope | None) -> bool:
    """`child` is an operand of `and` after a periodic test: Python evaluates it only when the test
    before it holds (`step % save_every == 0 and loss < best_loss` reads the loss on save steps
    only)."""
    if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And)) or child not in node.values:
        return False
    before = node.values[:node.values.index(child)]
    return any(_periodic_test(v, analysis, scope, 0) for v in before)

def short_under_guard(ctx: Walk) -> bool:
    """`if step % N == 0:` around a short inner loop: `for split, ds in eval_sets.items()` over
    two splits, `{k: float(v) for k, v in metrics.items()}` or a loop over a record's `.items()`.
    The reads run a handful of times every N steps. An inner loop of unknown length under the
    guard (an evaluation over a whole data set) still counts: its reads happen once per batch."""
    loops = ctx.loops
    guard_at = None
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        if periodic_guard(node, stack[i + 1], ctx.analysis, ctx.scope) and any(l in stack[:i] for l in loops):
            guard_at = i  # the innermost such guard wins
    if guard_at is None:
        return False
    inner = [l for l in loops if l in ctx.stack[guard_at:]]
    if not inner:
        return False
    total = 1
    for loop in inner:
        if isinstance(loop, COMPREHENSIONS):
            continue  # one expression over the items of a value: a handful of reads
        it = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys", "values"):
            continue  # `for name, value in measurements.items()`: the fields of one record, not data
        n = trip_count(it, ctx.analysis, ctx.scope) if it is not None else None
        if n is None:
            return False
        total *= n
    return total <= SMALL_LOOP


def under_periodic_guard_in(node: ast.AST, loop: ast.AST, analysis: Analysis, scope: Scope) -> bool:
    """`node` sits under `if step % N == 0:` (or another periodic test) inside `loop`: it runs
    every N-th iteration, not every one."""
    stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(loop, ())]
    while stack:
        current, path = stack.pop()
        if current is node:
            return any(periodic_guard(parent, child, analysis, scope) for parent, child in zip(path, path[1:]))
        for child in astutil.children(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.append((child, (*path, child)))
    return False


# Words that name a cadence when they are a token of an argument's name (`step_freq=`,
# `config.checkpoint_every`, `log_interval`).
_CADENCE_TOKENS = frozenset({"freq", "frequency", "every", "interval", "period"})
_DEBUG_TOKENS = frozenset({"debug", "dbg", "debugging"})
_WORD = re.compile(r"[^\W_]+")


def _tokens(text: str) -> set[str]:
    """`self._train_step_dbg` -> {"self", "train", "step", "dbg"}."""
    return set(_WORD.findall(text.lower()))


def _names_in(test: ast.AST) -> set[str]:
    """The tokens of every name, attribute and string constant in a test (`self._train_step_dbg`,
    `os.environ.get("APP_DEBUG")`)."""
    out: set[str] = set()
    for n in astutil.walk(test):
        if isinstance(n, ast.Name):
            out |= _tokens(n.id)
        elif isinstance(n, ast.Attribute):
            out |= _tokens(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 64:
            out |= _tokens(n.value)
    return out


def guessed_guard(test: ast.AST, analysis: Analysis | None = None, scope: Scope | None = None) -> str | None:
    """Why a branch's body may not run on every step although nothing proves it periodic, or
    None. Such a read is a guess, never proven:

    - "debug": the test names a debugging switch (`if self._train_step_dbg:`, `if args.debug:`,
      an environment variable such as `APP_DEBUG`): the path a performance run does not take;
    - "cadence": the test calls a predicate the model cannot see with an argument that names a
      cadence (`train_iter.is_freq(step_freq=config.checkpoint_freq)`): very likely `step % n`;
    - "lazy-init": `if x is None:` initialises what later calls find set (a cache, initial
      weights the caller passes back), so in the steady state it does not run."""
    if _DEBUG_TOKENS & _names_in(test):
        return "debug"
    for n in astutil.walk(test):
        if not isinstance(n, ast.Call):
            continue
        if analysis is not None and scope is not None and analysis.resolve_def(n.func, scope) is not None:
            continue  # seen: _predicate_call has judged it
        named = [kw.arg or "" for kw in n.keywords]
        named += [ast.unparse(a) for a in [*n.args, *(kw.value for kw in n.keywords)]
                  if isinstance(a, (ast.Name, ast.Attribute))]
        if any(_CADENCE_TOKENS & _tokens(x) for x in named):
            return "cadence"
    tests = test.values if isinstance(test, ast.BoolOp) else [test]
    if any(isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is)
           and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None for t in tests):
        return "lazy-init"
    return None


def under_guessed_guard(ctx: Walk) -> str | None:
    """The current node sits in the body of a branch `guessed_guard` names, within the innermost
    loop (or, in a function a loop calls each step, within that function)."""
    for node in _branches_up_to_loop(ctx):
        why = guessed_guard(node.test, ctx.analysis, ctx.scope)
        if why is not None:
            return why
    if ctx.per_step is not None and not ctx.loops:
        return _call_site_guard(ctx)
    return None


def _call_site_guard(ctx: Walk) -> str | None:
    """In a function a loop calls every step: the guess a branch around that call makes (`if
    debug & loading_bar: print(format_params(params))`), within the caller's loop."""
    scope = ctx.scope
    loop, caller, call = scope.per_step_loop, scope.per_step_scope, ctx.per_step
    if loop is None or caller is None:
        return None
    memo = ctx.memo.setdefault("call_site_guard", {})
    if call not in memo:
        memo[call] = guard_around(call, loop, ctx.analysis, caller)
    return memo[call]


def guard_around(call: ast.AST, loop: ast.AST, analysis: Analysis, scope: Scope) -> str | None:
    """The guess a branch of `loop` around `call` makes (guessed_guard), or None: the call may not
    run on every iteration (also importers.py, for a call another file's loop makes)."""
    for node in astutil.walk(loop):
        if isinstance(node, ast.If) and any(call is n for part in node.body for n in astutil.walk(part)):
            why = guessed_guard(node.test, analysis, scope)
            if why is not None:
                return why
    return None
