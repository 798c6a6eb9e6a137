"""The benchmark's generated tree is valid, varied Python that the reviewer handles."""
from __future__ import annotations

from pathlib import Path

from jaxmem.evaluators.review.api import review_paths
from tests.helpers import load_benchmark

generate = load_benchmark("bench_review.py").generate


def test_generated_tree_parses_and_mixes_clean_and_flawed_files(tmp_path: Path):
    lines, size = generate(tmp_path, 60, seed=1)
    files = sorted(tmp_path.rglob("*.py"))
    assert len(files) == 60 and lines > 60 * 100
    assert len({f.read_text() for f in files}) == 60, "every generated file differs"
    result = review_paths([str(tmp_path)], jobs=1)
    assert result.files == 60 and not result.notes
    assert not [f for f in result.findings if f.code == "JM001"], "generated code must parse"
    flawed = {f.path for f in result.findings + result.possible if f.severity != "info"}
    assert 0 < len(flawed) < 60, "a realistic mix: some files with warnings, most without"
