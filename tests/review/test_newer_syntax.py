"""The same-position rewrite of Python 3.12 syntax (evaluators/review/newer_syntax.py).

Each shape comes from vendored code of an unseen reading that 3.11 could not parse (12m, 12p,
12r, 12w, 12z, 12zl, 12zm); the property checked is the one the reviewer relies on: the rewrite
parses on this Python, has the same length and lines, and every node sits where the user wrote it.
"""
from __future__ import annotations

import ast
import sys

import pytest

from jaxmem.evaluators.review.astutil import parse
from jaxmem.evaluators.review.newer_syntax import downlevel

NEWER = [
    # PEP 701: the enclosing quote reused inside a replacement field
    "print(f'{'Epoch':^10} | {'Loss (1 - F)':^18} | {'State Fidelity (F)':^22}')\n",
    "print(f'  {'─' * 6}  {'─' * 10}')\n",
    'output_path = f"{target_directory}{prompts[i].replace(" ", "_")}.jpeg"\n',
    "print(f'  jax_qsim CPU  : {cpu_results['jax_qsim_cpu'][n] * 1000:7.2f} ms')\n",
    "print(f'JAX Device       : {(gpu_device if gpu_device else 'CPU (Fallback)')}')\n",
    "print(f'  {'  '.join(('─' * 14 for _ in hdr))}')\n",
    "x = f'{x:{'>' if right else '<'}10}'\n",
    "z = f'{f'{x}'}'\n",
    # PEP 701: backslashes and comments inside a field
    "s = f\"{'\\n'.join(lines)}\"\n",
    "s = f'''{\n    x  # the value\n}'''\n",
    # PEP 695: generic functions and classes, type aliases
    "def default_arg[T](\n    x: T,\n) -> T:\n    return x\n",
    "def flatten_axes[SelfType: AbstractBuffer](self: SelfType) -> SelfType:\n    return self\n",
    "def filter_cond[**ParamType, RetType](f):\n    return f\n",
    "def apply[S: \"AbstractAlgorithmState\"](s: S) -> S:\n    return s\n",
    "class Pair[First: Manifold, Second: Manifold](Tuple, ABC):\n    pass\n",
    "class Harmonium[\n    Observable: Differentiable,\n    Latent: Differentiable,\n](Base):\n    pass\n",
    "class Box[T]:\n    pass\n",
    "type LinearMap = Callable[[Array], Array]\n",
    "class K:\n    type Alias[T] = list[T]\n    x = 1\n",
]


def _positions(tree: ast.AST) -> list[tuple]:
    return sorted((type(n).__name__, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
                  for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Attribute, ast.Subscript, ast.BinOp)))


@pytest.mark.parametrize("src", NEWER)
def test_rewrite_parses_here_with_the_same_lines_and_columns(src: str):
    if sys.version_info < (3, 12):
        with pytest.raises(SyntaxError):
            ast.parse(src)
    out = downlevel(src)
    assert out is not None and len(out) == len(src)
    assert [len(x) for x in out.splitlines()] == [len(x) for x in src.splitlines()]
    tree = ast.parse(out)
    assert parse(src).body  # the reviewer's one parse reads the same text without a SyntaxError
    if sys.version_info >= (3, 12):  # where the original parses, every call sits where it did
        assert _positions(tree) == _positions(ast.parse(src))


def test_fields_keep_their_expressions():
    out = downlevel("print(f'{cpu['a'][n] * 1000:7.2f} ms {float(loss)}')\n")
    call = ast.parse(out).body[0].value
    values = [v.value for v in call.args[0].values if isinstance(v, ast.FormattedValue)]
    assert ast.unparse(values[0]) == "cpu['a'][n] * 1000" and ast.unparse(values[1]) == "float(loss)"
    assert values[1].col_offset == "print(f'{cpu['a'][n] * 1000:7.2f} ms {".__len__()


def test_code_that_needs_no_rewrite_is_left_alone():
    for src in ("x = f'{a!r:>{w}}' + f\"{b}\" + 'plain' + r'\\d'\n", "type = 3\nif type == 3:\n    pass\n",
                "def f(x):\n    return x[0]\n", "class C(Base):\n    items: list[int] = []\n"):
        assert downlevel(src) is None


def test_places_without_a_same_length_spelling_stay_unparsed():
    # a newline inside a single-quoted f-string's field; a type alias whose header spans lines
    for src in ("x = f'{1 +\n 2}'\n", "type Vector[\n    T,\n] = list[T]\n"):
        out = downlevel(src)
        if out is not None:
            with pytest.raises(SyntaxError):
                ast.parse(out)
