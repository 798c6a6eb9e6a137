"""Which bindings of a name can reach a read, by the block structure of the scope.

The plain reading (scopes.py) takes the last binding written before the read (and, in a loop,
the one the previous iteration left). That is right whenever the last binding is in the read's
own block or an enclosing one, and wrong when it sits in a branch the read is not in:

    if self.distributed:
        loss = pmapped_step(...)          # reaches the return below
    else:
        loss = jitted_step(...)           # reaches it too
        if vmap:
            out, loss = vmap_step(...)
            return loss                   # leaves: reaches nothing after the `if`
    return loss

Here every binding that some path carries to the read is found, as a reaching-definitions
analysis over the statement tree would: both arms of an `if` (or the binding before it where an
arm binds nothing), the handlers of a `try` beside its body, nothing from a block that always
leaves (`return`, `raise`, `continue`, `break`). Loops are read as running at least once (a
binding in the body replaces the one before the loop), as the plain reading has it.
"""
from __future__ import annotations

import ast
from bisect import bisect_right

from jaxmem.evaluators.review.semantic.names import LOOP_TYPES, TRY_TYPES, end_pos, pos

_BRANCHING = (ast.If, ast.Match, *TRY_TYPES)
_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def blocks_of(s: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists a compound statement holds, in source order (none for a def or class:
    their bodies are other scopes)."""
    if isinstance(s, (ast.If, *LOOP_TYPES)):
        return [s.body, s.orelse]
    if isinstance(s, TRY_TYPES):
        return [s.body, *(h.body for h in s.handlers), s.orelse, s.finalbody]
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return [s.body]
    if isinstance(s, ast.Match):
        return [c.body for c in s.cases]
    return []


class Structure:
    """One scope's statements: which compound statement and block each one is in."""

    def __init__(self, body: list[ast.stmt]):
        self.body = body
        self.flows: dict[tuple[int, int], _Flow] = {}  # per binding list: memos shared by its reads
        self._starts: dict[int, list[tuple[int, int]]] = {}
        self.parent: dict[int, tuple[ast.stmt, list[ast.stmt]]] = {}
        todo = [body]
        while todo:
            for s in todo.pop():
                if isinstance(s, _SCOPES):
                    continue
                for block in blocks_of(s):
                    for inner in block:
                        self.parent[id(inner)] = (s, block)
                    todo.append(block)

    def apart(self, node: ast.AST, p: tuple[int, int]) -> bool:
        """`node` (a binding's statement) is in a branch of an `if`/`try`/`match` that does not
        hold `p`: the plain reading may be wrong there."""
        up = self.parent.get(id(node))
        while up is not None:
            compound, block = up
            if isinstance(compound, _BRANCHING) and not (pos(block[0]) <= p <= end_pos(block[-1])):
                return True
            up = self.parent.get(id(compound))
        return False

    def starts(self, stmts: list[ast.stmt]) -> list[tuple[int, int]]:
        got = self._starts.get(id(stmts))
        if got is None:
            got = self._starts[id(stmts)] = [pos(s) for s in stmts]
        return got


def reaching(structure: Structure, bindings: list, p: tuple[int, int]) -> list:
    """The bindings (of one name, this scope's) that some path carries to `p`, latest first."""
    key = (id(bindings), len(bindings))  # a scope's list for one name (or `self.` attribute), still growing while built
    flow = structure.flows.get(key)
    if flow is None:
        flow = structure.flows[key] = _Flow(bindings, structure)
    found = flow.reach(structure.body, p)[0]
    return sorted(set(found), key=lambda b: b.at, reverse=True)


class _Flow:
    def __init__(self, bindings: list, structure: Structure):
        self.structure = structure
        self.bs = [b for b in bindings if b.until is None]
        self._outs: dict[int, tuple[list, bool]] = {}
        self._falls: dict[int, bool] = {}

    def _within(self, start, end) -> list:
        return [b for b in self.bs if start <= b.at <= end]

    # ---- reads ------------------------------------------------------------------------------
    def reach(self, stmts: list[ast.stmt], p) -> tuple[list, bool]:
        """Bindings in `stmts` that may hold at `p` (inside them or after them), and whether one
        of them surely does (then nothing before `stmts` reaches)."""
        acc: list = []
        i = bisect_right(self.structure.starts(stmts), p) - 1
        if i < 0:
            return acc, False
        if p <= end_pos(stmts[i]):
            acc, d = self._inside(stmts[i], p)
            if d:
                return acc, True
            i -= 1
        m, d = self._backwards(stmts[:i + 1])
        return acc + m, d

    def _inside(self, s: ast.stmt, p) -> tuple[list, bool]:
        block = next((b for b in blocks_of(s) if b and pos(b[0]) <= p <= end_pos(b[-1])), None)
        header = [b for b in self._header(s, self._within(pos(s), end_pos(s))) if b.at < p]
        if block is None:  # the read is in the header, or `s` is a simple statement
            return ([max(header, key=lambda b: b.at)], True) if header else ([], False)
        m, d = self.reach(block, p)
        if d:
            return m, True
        if isinstance(s, TRY_TYPES) and block is not s.body:
            # An `else` runs after the whole body; a handler or `finally` after any part of it.
            if block is s.orelse:
                mb, d = self._seq(s.body)
                m = m + mb
                if d:
                    return m, True
            else:
                m = m + self._within(pos(s), end_pos(s.body[-1]))
        if header:
            return [*m, max(header, key=lambda b: b.at)], True
        return m, False

    # ---- what a statement leaves behind --------------------------------------------------------
    def _out(self, s: ast.stmt) -> tuple[list, bool]:
        """Bindings that may hold after `s` runs and falls through, and whether one surely does."""
        got = self._outs.get(id(s))
        if got is None:
            got = self._outs[id(s)] = self._compute_out(s)
        return got

    def _compute_out(self, s: ast.stmt) -> tuple[list, bool]:
        inside = self._within(pos(s), end_pos(s))
        if not inside:
            return [], False
        blocks = blocks_of(s)
        if not blocks:
            return [max(inside, key=lambda b: b.at)], True
        if isinstance(s, ast.If):
            mb, db = self._seq(s.body)
            me, de = self._seq(s.orelse)
            m, d = mb + me, db and de
        elif isinstance(s, LOOP_TYPES):
            mb, db = self._seq(s.body, loop=True)
            mo, do = self._seq(s.orelse)
            m, d = mb + mo, db or do
        elif isinstance(s, TRY_TYPES):
            mf, df = self._seq(s.finalbody)
            if df:
                return mf, True
            mb, db = self._seq(s.body + s.orelse)
            handlers = [self._seq(h.body) for h in s.handlers]
            m = mb + [b for mh, _ in handlers for b in mh] + mf
            d = db and all(dh for _, dh in handlers)
            if handlers:  # a handler runs after part of the body: what the body bound may hold
                m += self._within(pos(s), end_pos(s.body[-1]))
        elif isinstance(s, ast.Match):
            cases = [self._seq(c.body) for c in s.cases]
            m, d = [b for mc, _ in cases for b in mc], False
        else:  # with
            m, d = self._seq(s.body)
        if not d and (header := self._header(s, inside)):
            return [*m, max(header, key=lambda b: b.at)], True
        return m, d

    @staticmethod
    def _header(s: ast.stmt, inside: list) -> list:
        """Of the bindings in `s`, those its header makes before its first block runs: a `for`
        target, `with ... as`, a walrus in an `if` test."""
        first = next((pos(b[0]) for b in blocks_of(s) if b), end_pos(s))
        return [b for b in inside if b.at < first]

    def _seq(self, stmts: list[ast.stmt], loop: bool = False) -> tuple[list, bool]:
        """What a block leaves behind. A block that always leaves (`return`, `raise`) leaves
        nothing after its statement; "surely" then holds vacuously. A loop's body is read as
        falling through (`continue` starts the next iteration)."""
        if not stmts:
            return [], False
        if not loop and not self._falls_block(stmts):
            return [], True
        return self._backwards(stmts)

    def _backwards(self, stmts: list[ast.stmt]) -> tuple[list, bool]:
        """What statements run one after another leave behind, read from the last back to the
        first binding that surely holds."""
        acc: list = []
        for s in reversed(stmts):
            m, d = self._out(s)
            acc += m
            if d:
                return acc, True
        return acc, False

    def _falls_block(self, stmts: list[ast.stmt]) -> bool:
        return all(self._falls_stmt(s) for s in stmts)

    def _falls_stmt(self, s: ast.stmt) -> bool:
        got = self._falls.get(id(s))
        if got is None:
            if isinstance(s, _LEAVES):
                got = False
            elif isinstance(s, ast.If):
                got = self._falls_block(s.body) or not s.orelse or self._falls_block(s.orelse)
            elif isinstance(s, TRY_TYPES):
                got = (self._falls_block(s.body + s.orelse) or any(self._falls_block(h.body) for h in s.handlers)) \
                    and (not s.finalbody or self._falls_block(s.finalbody))
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                got = self._falls_block(s.body)
            else:
                got = True
            self._falls[id(s)] = got
        return got
