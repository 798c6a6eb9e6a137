"""Findings in definitions nothing in the reviewed files uses are possible, not sure (semantic/unused.py)."""
from __future__ import annotations

from pathlib import Path

from jaxmem.evaluators.review.api import review_paths

TIMED = '''import time

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T) @ x


def bench(x):
    step(x).block_until_ready()
    t0 = time.perf_counter()
    y = step(x)
    print(time.perf_counter() - t0)
    return y


def old_bench(x):
    step(x).block_until_ready()
    t0 = time.perf_counter()
    y = step(x)
    print(time.perf_counter() - t0)
    return y


if __name__ == "__main__":
    bench(jnp.ones((256, 256)))
'''


def _tiers(root: Path, *paths: Path) -> dict[tuple[str, int], str]:
    result = review_paths([str(p) for p in paths] or [str(root)], jobs=1, progress=False, show_possible=True)
    return {(Path(f.path).name, f.line): f.confidence for f in [*result.findings, *result.possible] if f.code == "JM701"}


def _tree(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_function_nothing_calls_is_possible_and_says_why(tmp_path):
    root = _tree(tmp_path, **{"bench.py": TIMED, "other.py": "x = 1\n"})
    result = review_paths([str(root)], jobs=1, progress=False, show_possible=True)
    by_line = {f.line: f for f in [*result.findings, *result.possible] if f.code == "JM701"}
    assert by_line[16].confidence == "sure"
    assert by_line[24].confidence == "possible"
    assert "nothing in the reviewed files calls `old_bench`" in by_line[24].message
    assert not by_line[24].proven


def test_a_call_from_a_file_that_imports_the_module_is_a_use(tmp_path):
    root = _tree(tmp_path, **{"bench.py": TIMED, "run.py": "import bench\n\nbench.old_bench(None)\n"})
    assert _tiers(root)[("bench.py", 24)] == "sure"


def test_a_star_import_of_the_module_and_a_call_is_a_use(tmp_path):
    root = _tree(tmp_path, **{"bench.py": TIMED, "run.py": "from bench import *\n\nold_bench(None)\n"})
    assert _tiers(root)[("bench.py", 24)] == "sure"


def test_a_copy_that_defines_and_calls_its_own_function_is_no_use(tmp_path):
    """A script copied beside another defines and calls its own `old_bench`; it never imports
    this one, so this one's stays unused."""
    copy = TIMED.replace('bench(jnp.ones((256, 256)))', 'old_bench(jnp.ones((256, 256)))')
    root = _tree(tmp_path, **{"bench.py": TIMED, "bench_copy.py": copy})
    tiers = _tiers(root)
    assert tiers[("bench.py", 24)] == "possible"
    assert tiers[("bench_copy.py", 24)] == "sure"


def test_one_file_alone_keeps_its_findings_sure(tmp_path):
    """A single file (or a pasted snippet) is often a function on its own: nothing is unused there."""
    root = _tree(tmp_path, **{"bench.py": TIMED})
    assert _tiers(root, root / "bench.py")[("bench.py", 24)] == "sure"


def test_decorated_definitions_are_left_alone(tmp_path):
    registered = TIMED.replace("def old_bench(x):", "@app.command()\ndef old_bench(x):").replace(
        "import time\n", "import time\n\nimport typer\n\napp = typer.Typer()\n")
    root = _tree(tmp_path, **{"bench.py": registered, "other.py": "x = 1\n"})
    assert set(_tiers(root).values()) == {"sure"}


def test_a_library_module_keeps_its_findings_sure(tmp_path):
    """A module of only definitions is a library: nothing in the review calls its functions, its
    users do."""
    library = TIMED[:TIMED.index('if __name__')]
    root = _tree(tmp_path, **{"bench.py": library, "other.py": "x = 1\n"})
    assert set(_tiers(root).values()) == {"sure"}
