"""JM701 fix: wait for the JAX work before the timer stops (and warm up before it starts).

    t0 = time.perf_counter()                   t0 = time.perf_counter()
    y = f(x)                          ->       y = f(x)
    print(time.perf_counter() - t0)            jax.block_until_ready(y)
                                               print(time.perf_counter() - t0)

The wait goes just before the statement that reads the timer, on every value the timed region
assigns from a call (bound on every path through it), or around the region's last call when it
assigns nothing; `timeit.timeit(lambda: f(x))` becomes `lambda: jax.block_until_ready(f(x))`.
Safe: it only waits (`jax.block_until_ready` passes anything that is not an array through), so the
program computes and prints the same, with timings that now include the work.

For a region that holds the first, compiling call of a jitted function, the fix (unsafe: it runs
the function once more, which matters where it has side effects) calls it once before the timer
starts, on the same arguments, and waits for it.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import Tree, expr_ast, free_names, stmt_ast, stored_names, target_names, tree
from jaxmem.evaluators.review.fixes._edits import Edits, take_leading
from jaxmem.evaluators.review.fixes._imports import Imports, qualify
from jaxmem.evaluators.review.fixes.base import SAFE, UNSAFE, Fix, Options, make_fix, message_fields, message_is
from jaxmem.evaluators.review.semantic.names import TIMERS

TIMEIT = frozenset({"timeit.timeit", "timeit.repeat"})


def _is_timer(node: cst.CSTNode, imports: Imports) -> bool:
    return isinstance(node, cst.Call) and qualify(imports, node.func) in TIMERS


def _assign_of(stmt: cst.CSTNode) -> cst.Assign | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        return stmt.body[0]
    return None


def _single_target(assign: cst.Assign | None) -> str | None:
    if assign is not None and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return assign.targets[0].target.value
    return None


def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    t = tree(source)
    imports = Imports(t)
    nodes = t.at_all(finding, (cst.Call, cst.BinaryOperation))
    for node in nodes:
        if isinstance(node, cst.Call) and qualify(imports, node.func) in TIMEIT:
            return _timeit(t, imports, finding, node)
    stop = next((n for n in nodes if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Subtract)
                 and isinstance(n.right, cst.Name)), None)
    stop = stop or next((n for n in nodes if _is_timer(n, imports)), None)
    if stop is None:
        return None
    stmt = t.statement(stop)
    located = t.body_of(stmt) if stmt is not None else None
    if located is None:
        return None
    block, i = located
    body = list(block.body)
    if isinstance(stop, cst.BinaryOperation):
        start_name = stop.right.value
    else:   # `end = time.time()` ... `end - start` later
        end_name = _single_target(_assign_of(stmt))
        if end_name is None:
            return None
        start_name = next((n.right.value for s in body[i + 1:] for n in t.walk(s)
                           if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Subtract)
                           and isinstance(n.left, cst.Name) and n.left.value == end_name
                           and isinstance(n.right, cst.Name)), None)
        if start_name is None:
            return None
    j = next((k for k in range(i - 1, -1, -1) if _single_target(_assign_of(body[k])) == start_name
              and _is_timer(_assign_of(body[k]).value, imports)), None)
    if j is None:
        return None
    region = body[j + 1:i]
    if message_is(finding, "compile_message"):
        return _warm_up(t, imports, finding, body, j, region)
    return _wait(t, imports, finding, body, j, stmt, region)


def _timeit(t: Tree, imports: Imports, finding: Finding, call: cst.Call) -> Fix | None:
    lam = call.args[0].value if call.args else None
    if not isinstance(lam, cst.Lambda):
        return None
    edits = Edits()
    new: list[str] = []
    jax = imports.ensure("jax", None, edits, new)
    if jax is None:
        return None
    body = cst.parse_expression(f"{jax}.block_until_ready({t.code(lam.body).strip()})")
    edits.sub(lam.body, body)
    imports.add(edits, new)
    return make_fix(finding, SAFE, "wait for the result inside the timed callable", edits.apply(t))


def _bound_names(t: Tree, stmts: list[cst.BaseStatement], before: set[str]) -> list[str]:
    """Names the region assigns from a call, on every path through it: at its top level, in a
    `with` block, or in a loop or branch when the name already held a value before the region."""
    out: list[str] = []

    def take(small) -> None:
        if isinstance(small, cst.Assign):
            if not any(isinstance(n, cst.Call) for n in t.walk(small.value)):
                return   # `old = params`: an alias, not a result
            for target in small.targets:
                out.extend(target_names(target.target))
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.value is not None:
            out.extend(target_names(small.target))

    for s in stmts:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                take(small)
                if isinstance(small, cst.Del):
                    for gone in target_names(small.target):
                        while gone in out:
                            out.remove(gone)
        elif isinstance(s, cst.With):
            out.extend(_bound_names(t, list(s.body.body), before))
        elif isinstance(s, cst.BaseCompoundStatement):
            inner = stored_names(stmt_ast(t, s))
            out.extend(n for n in _bound_names(t, _top(s), before) if n in before and n in inner)
    return list(dict.fromkeys(out))


def _top(s: cst.BaseCompoundStatement) -> list[cst.BaseStatement]:
    body = getattr(s, "body", None)
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def _wait(t: Tree, imports: Imports, finding: Finding, body: list, j: int, stmt: cst.BaseStatement,
          region: list) -> Fix | None:
    before = set()
    for s in body[:j]:
        before |= stored_names(stmt_ast(t, s))
    scope = t.scope_of(stmt)
    if isinstance(scope, cst.FunctionDef):
        before |= {p.name.value for p in scope.params.params}
    names = _bound_names(t, region, before)
    edits = Edits()
    new: list[str] = []
    jax = imports.ensure("jax", None, edits, new)
    if jax is None:
        return None
    if names:
        what = names[0] if len(names) == 1 else f"({', '.join(names)})"
        wait = cst.parse_statement(f"{jax}.block_until_ready({what})\n")
        edits.insert_before(stmt, take_leading(stmt, [wait], edits))
        title = f"wait for `{', '.join(names)}` before the timer stops"
    else:
        last = region[-1] if region else None
        if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
                and isinstance(last.body[0], cst.Expr) and isinstance(last.body[0].value, cst.Call)):
            return None
        call = last.body[0].value
        edits.sub(call, cst.parse_expression(f"{jax}.block_until_ready({t.code(call).strip()})"))
        title = "wait for the timed call's result before the timer stops"
    imports.add(edits, new)
    return make_fix(finding, SAFE, title, edits.apply(t))


def _warm_up(t: Tree, imports: Imports, finding: Finding, body: list, j: int, region: list) -> Fix | None:
    func = message_fields(finding).get("func")
    if not func:
        return None
    first = None
    for s in region:
        for n in t.walk(s):
            if isinstance(n, cst.Call) and t.code(n.func).strip() == func:
                first = n
                break
        if first is not None:
            break
    if first is None:
        return None
    changed = set()
    for s in region:
        changed |= stored_names(stmt_ast(t, s))
    if free_names(expr_ast(t, first)) & changed:
        return None   # its arguments are made inside the region
    edits = Edits()
    new: list[str] = []
    jax = imports.ensure("jax", None, edits, new)
    if jax is None:
        return None
    warm = cst.parse_statement(f"{jax}.block_until_ready({t.code(first).strip()})  # compile outside the timed region\n")
    start = body[j]
    edits.insert_before(start, take_leading(start, [warm], edits))
    imports.add(edits, new)
    return make_fix(finding, UNSAFE, f"call `{func}` once before the timer starts (compiles it untimed)",
                    edits.apply(t))
