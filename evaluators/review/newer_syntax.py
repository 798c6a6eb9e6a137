"""Read Python 3.12 syntax on an older Python: the same source, rewritten so that it parses.

Code written for Python 3.12+ uses two things older parsers reject: PEP 701 f-strings (the
enclosing quote reused inside a replacement field, backslashes or comments there, as in
`f'{'Epoch':^10}'` or `f"{", ".join(xs)}"`) and PEP 695 type parameters (`def f[T](x: T)`,
`class Box[T]:`, `type Alias = ...`). Without this a reviewer running on 3.11 skips such a file
whole: every training loop in it goes unread. `downlevel` rewrites exactly those places into
3.11 syntax with **the same length and the same lines**, so every node the older parser builds
sits at the line and column it has in the user's file, and findings point at the user's text.

What the rewrite gives up, and why that is safe for review: a string literal inside a
replacement field may read differently (its quote swapped, a conflicting quote or a backslash
turned into a space): no rule reads the text of such a literal. Type parameters vanish (the
reviewer does not read annotations' meaning). Where a same-length rewrite is impossible (a
newline inside a single-quoted f-string's field, a multi-line type alias header), the place is
left as it was and the file stays unparsed, as before.
"""
from __future__ import annotations

import re

_PREFIXES = frozenset({"r", "u", "f", "b", "rb", "br", "fr", "rf"})
_IDENT = re.compile(r"[^\W\d]\w*")
_NUMBER = re.compile(r"[\w.]+")
_HEADER = re.compile(r"(def|class)([ \t]+)([^\W\d]\w*)([ \t]*)\[")
_ALIAS = re.compile(r"type([ \t]+)([^\W\d]\w*)([ \t]*)(\[[^\]\n]*\])?([ \t]*)=(?!=)")
_OPEN = "([{"
_CLOSE = ")]}"


class _Source:
    """The text and its rewrite as a list of characters; every edit replaces one character by
    one character, so lines and columns never move."""

    def __init__(self, text: str):
        self.text = text
        self.out = list(text)
        self.changed = False

    def put(self, i: int, ch: str) -> None:
        if self.out[i] != ch:
            self.out[i] = ch
            self.changed = True


class _Give(Exception):
    """A place with no same-length 3.11 spelling, or input this scanner does not follow."""


def downlevel(text: str) -> str | None:
    """`text` rewritten to parse on Python 3.11 with the same lines and columns, or None when
    nothing in it needed (or allowed) a rewrite."""
    src = _Source(text)
    try:
        _code(src, 0, enclosing=(), field=False)
    except (_Give, IndexError):
        return None
    return "".join(src.out) if src.changed else None


def _code(src: _Source, i: int, enclosing: tuple[str, ...], field: bool) -> int:
    """Scan code from `i`. In a replacement field (`field`) stop at the `}`, `!` or `:` that ends
    its expression at bracket depth 0 and return that index; at the top level scan to the end.
    `enclosing`: the terminators of the f-strings around this code as the rewrite spells them,
    innermost last."""
    text, n, depth = src.text, len(src.text), 0
    line_start = True  # at the first token of a logical line (for `type X = ...`)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            if field:  # 3.11 rejects `#` inside a replacement field: blank the comment
                for k in range(i, j):
                    src.put(k, " ")
            i = j
            continue
        if c == "\\":
            if field:  # a line continuation inside a field: 3.11 rejects the backslash
                src.put(i, " ")
            i += 2
            continue
        if c == "\n":
            line_start = line_start or (depth == 0 and not field)
            i += 1
            continue
        if c in " \t\r\f":
            i += 1
            continue
        if c in "'\"":
            i = _string(src, i, i, enclosing)
            line_start = False
            continue
        if c.isdigit():
            i = _NUMBER.match(text, i).end()
            line_start = False
            continue
        if c.isalpha() or c == "_" or ord(c) > 127:
            m = _IDENT.match(text, i)
            if m is None:
                i += 1
                continue
            word, end = m.group(), m.end()
            if end < n and text[end] in "'\"" and word.lower() in _PREFIXES:
                i = _string(src, i, end, enclosing)
            else:
                if not field and word in ("def", "class"):
                    h = _HEADER.match(text, i)
                    if h is not None:
                        _type_params(src, h.end() - 1)
                elif not field and word == "type" and line_start and depth == 0:
                    _alias(src, i)
                i = end
            line_start = False
            continue
        line_start = False
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            if depth == 0 and field and c == "}":
                return i
            depth = max(0, depth - 1)
        elif field and depth == 0 and (c == ":" or (c == "!" and text[i + 1:i + 2] != "=")):
            return i
        i += 1
    if field:
        raise _Give
    return i


def _string(src: _Source, start: int, quote_at: int, enclosing: tuple[str, ...]) -> int:
    """A string literal from its prefix at `start` (quote at `quote_at`); returns the index after
    it. Inside an f-string's field (`enclosing` not empty) the literal is made legal for 3.11:
    quotes that would end an enclosing string swapped, backslashes and clashing characters in
    its body turned into spaces."""
    text = src.text
    prefix = text[start:quote_at].lower()
    q = text[quote_at]
    term = q * 3 if text.startswith(q * 3, quote_at) else q
    body = quote_at + len(term)
    new = _requote(src, quote_at, term, enclosing, body) if enclosing else term
    if "f" in prefix:
        return _fstring_body(src, body, term, new, raw="r" in prefix, enclosing=enclosing)
    end = _find_end(text, body, term)
    if enclosing:
        bad = _clashing_chars(new, enclosing)
        for k in range(body, end):
            if text[k] == "\\" or text[k] in bad:
                src.put(k, " ")
    return end + len(term)


def _clashing_chars(new: str, enclosing: tuple[str, ...]) -> set[str]:
    """Characters a nested literal's body may not hold once rewritten: its own (new) single
    quote and the quote of every single-quoted string around it."""
    return {t for t in enclosing + (new,) if len(t) == 1}


def _requote(src: _Source, at: int, term: str, enclosing: tuple[str, ...], body: int) -> str:
    """Swap a nested literal's quotes when they clash with an enclosing f-string's terminator;
    the terminator as the rewrite spells it."""
    if not _clashes(term, enclosing):
        return term
    other = ("'" if term[0] == '"' else '"') * len(term)
    if _clashes(other, enclosing):
        raise _Give  # both quote kinds taken by enclosing f-strings: no same-length spelling
    end = _find_end(src.text, body, term)
    for k in range(len(term)):
        src.put(at + k, other[0])
        src.put(end + k, other[0])
    return other


def _clashes(term: str, enclosing: tuple[str, ...]) -> bool:
    # A quote ends an enclosing single-quoted string of its kind; inside a triple-quoted one only
    # a triple quote of the same kind does.
    return any(t[0] == term[0] and (len(t) == 1 or len(term) == 3) for t in enclosing)


def _find_end(text: str, i: int, term: str) -> int:
    """Index of the terminator of a literal whose body starts at `i` (escapes skipped)."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if text.startswith(term, i):
            return i
        if c == "\n" and len(term) == 1:
            raise _Give
        i += 1
    raise _Give


def _fstring_body(src: _Source, i: int, term: str, new: str, raw: bool, enclosing: tuple[str, ...]) -> int:
    """The literal parts and replacement fields of an f-string whose body starts at `i` and ends
    at `term` (as written; `new` as rewritten); returns the index after the terminator."""
    text, n = src.text, len(src.text)
    inner = enclosing + (new,)
    bad = _clashing_chars(new, enclosing) if enclosing else set()
    while i < n:
        c = text[i]
        if c == "\\":
            if not raw and text.startswith("N{", i + 1):  # \\N{NAME}: the brace is no field
                j = text.find("}", i)
                if enclosing:
                    for k in range(i, j + 1):
                        src.put(k, " ")
                i = n if j < 0 else j + 1
                continue
            if enclosing:
                src.put(i, " ")
                if text[i + 1] in bad:
                    src.put(i + 1, " ")
            i += 2
            continue
        if text.startswith(term, i):
            return i + len(term)
        if c == "\n" and len(term) == 1:
            raise _Give
        if c in bad:
            src.put(i, " ")
            i += 1
            continue
        if c == "{":
            if text.startswith("{{", i):
                i += 2
                continue
            i = _field(src, i + 1, term, inner)
            continue
        if c == "}":
            i += 2 if text.startswith("}}", i) else 1
            continue
        i += 1
    raise _Give


def _field(src: _Source, i: int, term: str, inner: tuple[str, ...]) -> int:
    """A replacement field after its `{`: expression, `=`, `!conversion`, `:format spec`; returns
    the index after its closing `}`."""
    text, n = src.text, len(src.text)
    start = i
    i = _code(src, i, enclosing=inner, field=True)
    if len(term) == 1 and "\n" in text[start:i]:
        raise _Give  # 3.12 allows a newline here; 3.11 cannot, at the same length
    if text[i] == "!":
        i += 2
    if i < n and text[i] == ":":
        i += 1
        while i < n and text[i] != "}":  # the format spec: literal text with nested fields
            if text[i] == "{":
                i = _field(src, i + 1, term, inner)
                continue
            if text.startswith(term, i):
                raise _Give
            i += 1
    if i >= n or text[i] != "}":
        raise _Give
    return i + 1


def _type_params(src: _Source, at: int) -> None:
    """`def f[T](...)` / `class C[T](...)` / `class C[T]:` with the bracket at `at`: the type
    parameters blanked, as `def f(   ...)` / `class C(   ...)` / `class C(  ):` of the same
    length. Newlines inside the brackets stay (they are inside the new parentheses)."""
    text, n = src.text, len(src.text)
    depth, j = 0, at
    while j < n:
        c = text[j]
        if c in "'\"":
            j = _find_end(text, j + 1, c) + 1
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0:
                break
        j += 1
    else:
        return
    k = j + 1
    while k < n and text[k] in " \t":
        k += 1
    src.put(at, "(")
    for m in range(at + 1, j):
        if text[m] != "\n":
            src.put(m, " ")
    if k < n and text[k] == "(":  # parameters or bases follow: they join the new parenthesis
        src.put(j, " ")
        src.put(k, " ")
    else:  # `class C[T]:`
        src.put(j, ")")


def _alias(src: _Source, at: int) -> None:
    """`type X[T] = value` with its header on one line: `X` moved to where `type` stood and the
    rest of the header blanked (`X         = value`), so the indentation and the value's columns
    stay."""
    m = _ALIAS.match(src.text, at)
    if m is None:
        return
    name = m.group(2)
    eq = m.end() - 1
    for k in range(at, eq):
        src.put(k, name[k - at] if k - at < len(name) else " ")
