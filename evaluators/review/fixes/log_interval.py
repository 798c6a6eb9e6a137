"""JM101 / JM102 / JM103 fix: read the loss every N steps, not every step (always unsafe).

    for step, batch in enumerate(batches):          for step, batch in enumerate(batches):
        state, loss = train_step(state, batch)  ->      state, loss = train_step(state, batch)
        print(f"step {step}: {loss}")                   if step % 100 == 0:
                                                            print(f"step {step}: {loss}")

A logging statement (print, logging and logger calls, tqdm's set_postfix/set_description/write,
summary writers' add_scalar, wandb.log, ...) that reads a device value goes under `if <step> % N ==
0:` (N from `--fix-interval`, 100 by default), together with an assignment just before it whose
names only it reads (`lossf = loss.item()` then `print(lossf)`); a second logging statement right
after joins the same guard. The step is the loop's own counter (`for i in range(...)`, `for i, x
in enumerate(...)`), else the loop is rewritten to `enumerate`. A running total or a list of
values (`total += float(loss)`, `losses.append(loss.item())`) keeps the device value instead of the
host copy: it is read once, where it is used after the loop. Unsafe: the first prints less, the
second changes the type of what is accumulated (a device array, float32, instead of a Python float).
A `while` loop, and a read used for anything else (a branch, an assert), get no fix.
"""
from __future__ import annotations

import libcst as cst

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes._cst import Tree, fresh_name, tree
from jaxmem.evaluators.review.fixes._edits import Edits
from jaxmem.evaluators.review.fixes._imports import Imports, dotted, qualify
from jaxmem.evaluators.review.fixes.base import UNSAFE, Fix, Options, make_fix
from jaxmem.evaluators.review.semantic.elements import ELEMENT_WISE

LOG_FUNCTIONS = frozenset({"print", "pprint", "logging.debug", "logging.info", "logging.warning", "logging.warn",
                           "logging.error", "logging.critical", "logging.log", "absl.logging.info",
                           "absl.logging.debug", "absl.logging.warning", "absl.logging.log", "tqdm.tqdm.write",
                           "tqdm.write", "wandb.log", "mlflow.log_metric", "mlflow.log_metrics", "jax.debug.print"})
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "log", "write", "set_postfix",
                         "set_postfix_str", "set_description", "set_description_str", "add_scalar", "add_scalars",
                         "add_histogram", "scalar", "write_scalars", "log_metrics", "log_metric", "print"})
READERS = frozenset({"float", "int", "bool", "complex"})
ARRAY_READERS = frozenset({"numpy.asarray", "numpy.array", "jax.device_get", "numpy.float32", "numpy.float64"})
KEEP_METHODS = frozenset({"append", "extend"})


def _logging(t: Tree, imports: Imports, stmt: cst.CSTNode) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.Call)):
        return False
    func = stmt.body[0].value.func
    if isinstance(func, cst.Name):
        return func.value in ("print", "pprint")
    q = qualify(imports, func)
    if q in LOG_FUNCTIONS:
        return True
    return isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS and q is None


def _read_value(t: Tree, imports: Imports, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The device value a host read reads: `x` of `float(x)`, `x.item()`, `np.asarray(x)`."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Name) and func.value in READERS and len(node.args) == 1:
        return node.args[0].value
    if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist") and not node.args:
        return func.value
    if qualify(imports, func) in ARRAY_READERS and len(node.args) == 1 and node.args[0].keyword is None:
        return node.args[0].value
    return None


def _step_of(t: Tree, loop: cst.CSTNode, source: str) -> tuple[str, cst.CSTNode | None] | None:
    """The loop's step counter, and the loop header rewritten when it needs one (or None)."""
    if not isinstance(loop, cst.For) or loop.asynchronous is not None:
        return None
    target, it = loop.target, loop.iter
    func = dotted(it.func) if isinstance(it, cst.Call) else ""
    if func == "range" and isinstance(target, cst.Name):
        if target.value != "_":
            return target.value, None
        if any(isinstance(n, cst.Name) and n.value == "_" for n in t.walk(loop.body)):
            return None
        name = fresh_name(source, "step_index")
        return name, loop.with_changes(target=cst.Name(name))
    if func == "enumerate" and isinstance(target, cst.Tuple) and target.elements and isinstance(
            target.elements[0].value, cst.Name) and target.elements[0].value.value != "_":
        return target.elements[0].value.value, None
    name = fresh_name(source, "step_index")
    inner = target
    if isinstance(inner, cst.Tuple) and not inner.lpar:
        inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new_target = cst.Tuple([cst.Element(cst.Name(name)), cst.Element(inner)], lpar=[], rpar=[])
    new_iter = cst.Call(cst.Name("enumerate"), [cst.Arg(it)])
    return name, loop.with_changes(target=new_target, iter=new_iter)


def _guard_of(stmt: cst.CSTNode, step: str, interval: int | None) -> bool:
    """`if <step> % <interval> == 0:` with no else: a guard this fix wrote (or one like it)."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None:
        return False
    test = stmt.test
    return (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)
            and isinstance(test.comparisons[0].comparator, cst.Integer) and test.comparisons[0].comparator.value == "0"
            and isinstance(test.left, cst.BinaryOperation) and isinstance(test.left.operator, cst.Modulo)
            and isinstance(test.left.left, cst.Name) and test.left.left.value == step
            and isinstance(test.left.right, cst.Integer)
            and (interval is None or test.left.right.value == str(interval)))


def fix(source: str, finding: Finding, options: Options) -> Fix | None:
    if ELEMENT_WISE in finding.message:
        return None  # `float(x)` for `x` in a device array: the fix is a host copy to loop over, not fewer reads
    t = tree(source)
    imports = Imports(t)
    nodes = t.at_all(finding, (cst.Call, cst.FormattedString, cst.ConcatenatedString, cst.BinaryOperation))
    if not nodes:
        return None
    node = nodes[-1]
    stmt = t.statement(node)
    located = t.body_of(stmt) if stmt is not None else None
    loops = t.enclosing_loops(node)
    if located is None or not loops:
        return None
    block, i = located
    loop = loops[0]
    if any(isinstance(p, (cst.For, cst.While)) and p is not loop for p in _between(t, stmt, loop)):
        return None
    kept = _keep_on_device(t, imports, finding, stmt, nodes)
    if kept is not None:
        return kept
    body = list(block.body)
    group = _log_group(t, imports, body, i, loop)
    if group is None:
        return None
    if _metrics_loop(t, imports, loop, block, group) and len(loops) > 1:
        # `for k, v in metrics.items(): print(...)`: logging the step's metrics one by one; the
        # step is the loop around it, and the whole inner loop is what to guard.
        inner = loop
        loop = loops[1]
        located = t.body_of(inner)
        if located is None or any(isinstance(p, (cst.For, cst.While)) and p is not loop
                                  for p in _between(t, inner, loop)):
            return None
        block, i = located
        body = list(block.body)
        group = (i, i + 1)
    counter = _step_of(t, loop, source)
    if counter is None:
        return None
    step, new_header = counter
    n = options.interval
    if any(_guard_of(p, step, None) for p in _between(t, body[group[0]], loop)):
        return None   # already under `if step % N == 0:` (this fix's own guard, run again)
    edits = Edits()
    prev = body[group[0] - 1] if group[0] > 0 else None
    stmts = [body[k] for k in range(group[0], group[1])]
    if prev is not None and _guard_of(prev, step, n):
        # Join the guard written for the statement before (two log lines, one guard).
        inner = [*prev.body.body, *stmts]
        edits.sub(prev, prev.with_changes(body=prev.body.with_changes(body=inner)))
        for s in stmts:
            edits.delete(s)
    else:
        guard = cst.If(test=cst.parse_expression(f"{step} % {n} == 0"),
                       body=cst.IndentedBlock([s.with_changes(leading_lines=()) for s in stmts]),
                       leading_lines=stmts[0].leading_lines)
        edits.insert_before(stmts[0], [guard])
        for s in stmts:
            edits.delete(s)
    if new_header is not None:
        # The header and the body change together: rebuild the loop from its new parts.
        return _with_header(t, finding, loop, new_header, edits, step, n)
    return make_fix(finding, UNSAFE, f"log every {n} steps (`if {step} % {n} == 0:`)", edits.apply(t))


def _with_header(t: Tree, finding: Finding, loop: cst.For, header: cst.For, edits: Edits, step: str,
                 n: int) -> Fix | None:
    """Apply the body edits, then put the new header on the loop they changed."""
    body_code = cst.Module(body=[loop]).visit(edits).body[0]
    new_loop = body_code.with_changes(target=header.target, iter=header.iter)
    outer = Edits().sub(loop, new_loop)
    # Say what the header change was: `for _ in range(n)` only gets a name; other loops get enumerate.
    how = "counting steps with `enumerate`" if header.iter is not loop.iter else f"naming the loop's counter `{step}`"
    return make_fix(finding, UNSAFE, f"log every {n} steps (`if {step} % {n} == 0:`, {how})", outer.apply(t))


def _metrics_loop(t: Tree, imports: Imports, loop: cst.CSTNode, block: cst.CSTNode, group: tuple[int, int]) -> bool:
    """A loop over a dict's entries whose whole body is the logging group."""
    it = getattr(loop, "iter", None)
    return (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute)
            and it.func.attr.value in ("items", "keys", "values") and block is loop.body
            and group == (0, len(block.body)))


def _between(t: Tree, stmt: cst.CSTNode, loop: cst.CSTNode) -> list[cst.CSTNode]:
    out = []
    for p in t.ancestors(stmt):
        if p is loop:
            break
        out.append(p)
    return out


def _log_group(t: Tree, imports: Imports, body: list, i: int, loop: cst.CSTNode) -> tuple[int, int] | None:
    """The statements [start, end) to guard: the logging statement at i (and ones right after it),
    or an assignment at i whose names only the logging statements right after it read."""
    stmt = body[i]
    if _logging(t, imports, stmt):
        end = i + 1
        while end < len(body) and _logging(t, imports, body[end]):
            end += 1
        return i, end
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    names = {n.value for tgt in stmt.body[0].targets for n in t.walk(tgt.target) if isinstance(n, cst.Name)}
    end = i + 1
    while end < len(body) and _logging(t, imports, body[end]):
        end += 1
    if end == i + 1:
        return None
    readers = set(map(id, (n for s in body[i + 1:end] for n in t.walk(s))))
    scope = t.scope_of(loop)
    for n in t.walk(scope):
        if isinstance(n, cst.Name) and n.value in names and id(n) not in readers:
            parent = t.parent(n)
            if isinstance(parent, cst.AssignTarget) and any(parent is tgt for tgt in stmt.body[0].targets):
                continue
            return None   # read elsewhere too: it must stay up to date every step
    return i, end


def _keep_on_device(t: Tree, imports: Imports, finding: Finding, stmt: cst.CSTNode, nodes: list) -> Fix | None:
    """`total += float(loss)` -> `total += loss`; `losses.append(loss.item())` -> `losses.append(loss)`."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    small = stmt.body[0]
    read = next((n for n in nodes if _read_value(t, imports, n) is not None), None)
    if read is None:
        return None
    value = _read_value(t, imports, read)
    ok = False
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign)):
        ok = _arithmetic_path(t, small.value, read)   # `total += float(loss) * n`
    elif _at_update_argument(t, read):
        ok = True   # `hist = hist.at[t].set(float(x))`: the update takes the device value as it is
    elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        total = small.targets[0].target.value
        v = small.value
        ok = (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, (cst.Add, cst.Subtract))
              and isinstance(v.left, cst.Name) and v.left.value == total and v.right is read)
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        ok = (isinstance(call.func, cst.Attribute) and call.func.attr.value in KEEP_METHODS and len(call.args) == 1
              and call.args[0].value is read)
    if not ok:
        return None
    edits = Edits().sub(read, value.with_changes(lpar=[], rpar=[]) if isinstance(value, cst.Name) else value)
    what = t.code(value).strip()
    return make_fix(finding, UNSAFE, f"keep `{what}` on the device (read once, where it is used after the loop)",
                    edits.apply(t))


def _arithmetic_path(t: Tree, root: cst.CSTNode, read: cst.CSTNode) -> bool:
    """`read` is `root`, or sits in it under + - * / only: the total stays a sum of device values."""
    node = read
    while node is not root:
        parent = t.parent(node)
        if not (isinstance(parent, cst.BinaryOperation) and isinstance(
                parent.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide))):
            return False
        node = parent
    return True


def _at_update_argument(t: Tree, read: cst.CSTNode) -> bool:
    arg = t.parent(read)
    call = t.parent(arg) if isinstance(arg, cst.Arg) else None
    func = call.func if isinstance(call, cst.Call) else None
    return (isinstance(func, cst.Attribute) and func.attr.value in ("set", "add", "multiply", "min", "max")
            and isinstance(func.value, cst.Subscript) and isinstance(func.value.value, cst.Attribute)
            and func.value.value.attr.value == "at")
