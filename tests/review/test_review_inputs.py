"""Batches over real files: bad input of every kind gets a clear message and the batch finishes;
notebooks report cell and line; .gitignore, suppression comments and [tool.jaxmem] are honoured."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from jaxmem.evaluators.review import config
from jaxmem.evaluators.review.api import extract_code_blocks, review_paths, review_question, review_source

BAD_LOOP = "import jax.numpy as jnp\n\nfor i in range(100):\n    x = jnp.ones(3)\n    print(float(x.sum()))\n"


def _nb(cells: list[tuple[str, str]]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True),
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for kind, src in cells]})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(BAD_LOOP)
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01binary\x00" * 10)
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\nx = 1\n".encode("latin-1"))
    (tmp_path / "huge.py").write_text("x = 1\n" * 900_000)  # ~5.4 MB
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    (tmp_path / "notes.txt").write_text("not python")
    (tmp_path / "nopy").mkdir()
    (tmp_path / "nopy" / "README.md").write_text("# nothing here")
    return tmp_path


def test_bad_input_gets_clear_messages_and_the_batch_finishes(tree: Path):
    result = review_paths([str(tree)], jobs=1, show_possible=True)
    by_file = {Path(f.path).name: f for f in result.findings}
    notes = {Path(n.path).name: n.message for n in result.notes}
    assert by_file["good.py"].code == "JM101"
    assert by_file["broken.py"].code == "JM001" and "cannot parse" in by_file["broken.py"].message
    assert by_file["bad.ipynb"].code == "JM001" and "notebook" in by_file["bad.ipynb"].message
    assert "binary" in notes["blob.py"]
    assert "not UTF-8" in notes["latin1.py"]
    assert "limit" in notes["huge.py"] and "MB" in notes["huge.py"]
    assert "empty" in notes["empty.py"]
    assert "notes.txt" not in notes, "non-Python files inside directories are skipped silently"
    assert result.exit_code == 1


def test_directory_without_python_and_missing_paths(tree: Path):
    result = review_paths([str(tree / "nopy"), str(tree / "missing"), str(tree / "notes.txt")], jobs=1, show_possible=True)
    assert result.findings == [] and result.exit_code == 0
    messages = [n.message for n in result.notes]
    assert any("no Python files" in m for m in messages)
    assert any("no such file" in m for m in messages)
    assert any("not a Python file" in m for m in messages)


def test_gitignore_and_excludes(tmp_path: Path):
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    for rel in ("a.py", "generated/b.py", "pkg/c_pb2.py", "pkg/d.py", ".venv/e.py", "skipme/f.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(BAD_LOOP)
    def names(r):
        return sorted(Path(f.path).relative_to(tmp_path).as_posix() for f in r.findings)
    assert names(review_paths([str(tmp_path)], exclude=["skipme"], jobs=1, show_possible=True)) == ["a.py", "pkg/d.py"]
    everything = names(review_paths([str(tmp_path)], respect_gitignore=False, jobs=1, show_possible=True))
    assert everything == ["a.py", "generated/b.py", "pkg/c_pb2.py", "pkg/d.py", "skipme/f.py"]


def test_notebook_findings_point_at_cell_and_line(tmp_path: Path):
    nb = tmp_path / "train.ipynb"
    nb.write_text(_nb([
        ("markdown", "# Training"),
        ("code", "%matplotlib inline\n!pip install jax\nimport jax\nimport jax.numpy as jnp"),
        ("code", "%%bash\necho hi"),
        ("code", "total = 0.0\nfor i in range(100):\n    x = jnp.ones(3)\n    total += float(x.sum())"),
    ]))
    result = review_paths([str(nb)], jobs=1, show_possible=True)
    (f,) = result.findings
    assert (f.cell, f.line, f.code) == (4, 4, "JM101")
    assert f.location == f"{nb}:cell 4:4:14"


def test_lines_a_notebook_finding_names_are_given_by_cell_and_line(tmp_path: Path):
    """A message that names another line (where the backend started) names it as the user sees
    the notebook, not in the joined cells' numbering."""
    nb = tmp_path / "setup.ipynb"
    nb.write_text(_nb([
        ("code", "import os\nimport jax\nprint(jax.devices())"),
        ("markdown", "# Settings"),
        ("code", "x = 1\nos.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false'"),
    ]))
    (f,) = [f for f in review_paths([str(nb)], jobs=1, show_possible=True).findings if f.code == "JM601"]
    assert (f.cell, f.line) == (3, 2)
    assert "(line 3 of cell 1: `jax.devices()`)" in f.message, f.message


def test_a_notebook_finding_shows_its_line_as_written_and_timeit_cells_are_read(tmp_path: Path):
    """`%timeit` lines and `%%timeit` cells are reviewed through a marker call; the finding shows
    the line as the user wrote it, and a `%%timeit` cell is read up to its last statement. (Loop
    counts fixed and small: a %timeit that picks its own count is not flagged, JM704.)"""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"),
        ("code", "%timeit -n 1 -r 5 f(x)[0]"),
        ("code", "%%timeit -n 3\ny = f(x)"),
    ]))
    found = {(f.cell, f.line): f for f in review_paths([str(nb)], jobs=1, show_possible=True).findings
             if f.code == "JM704"}
    assert set(found) == {(2, 1), (3, 2)}
    assert found[(2, 1)].source_line == "%timeit -n 1 -r 5 f(x)[0]"
    assert found[(3, 2)].source_line == "y = f(x)" and "`%%timeit f(x)`" in found[(3, 2)].message


def test_a_timeit_line_continued_with_backslashes_is_read_as_ipython_joins_it(tmp_path: Path):
    """`%timeit f(\\` with its arguments on the next lines (each ending in a backslash): IPython
    hands the magic the joined lines, so the reviewer reads the same call, reported on its first
    line; the later cells keep their lines."""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a, b: a @ b)\nx = jnp.ones((64, 64))"),
        ("code", "%timeit -n 1 -r 5 f(\\\n    x,\\\n    b=x,\\\n)"),
        ("code", "%timeit -n 2 f(\\\n    x, x).block_until_ready()\ny = 1"),
    ]))
    found = [(f.cell, f.line) for f in review_paths([str(nb)], jobs=1, show_possible=True).findings
             if f.code == "JM704"]
    assert found == [(2, 1)]


def test_a_timing_magic_bound_to_a_name_is_read_as_the_bare_magic(tmp_path: Path):
    """`t = %timeit -n 100 -o f(x)` keeps IPython's TimeitResult to compare two timings (from the
    twenty-sixth reading's miss, a NumPy-vs-JAX speed-up printed from two such results) and
    `y = %time f(x)` keeps the value: both time the same call as the bare magic, and `y` stays
    bound for later cells."""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"),
        ("code", "t_jax = %timeit -n 1 -r 5 -o f(x)\ny = %time f(x)\nprint(t_jax.average, y.shape)"),
        ("code", "t_ok = %timeit -o f(x).block_until_ready()"),
    ]))
    found = [(f.cell, f.line) for f in review_paths([str(nb)], jobs=1, show_possible=True).findings
             if f.code == "JM704"]
    assert found == [(2, 1), (2, 2)]


def test_a_time_cell_of_one_statement_is_read_as_time_of_it(tmp_path: Path):
    """`%%time` over one statement (here over two lines, a comment above it) is `%time` of it: the
    clock stops after a call that has not finished (JM704). A `%%time` cell of several statements
    is not marked, nor is a constructor, whose `__init__` the reviewer does not see."""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a: (a, a @ a))\nx = jnp.ones((64, 64))"),
        ("code", "%%time\n# warm\n_, y = f(\n    x)"),
        ("code", "%%time\nz = f(x)\nprint(z[1].sum())"),
        ("code", "%%time\nsolver = Solver(x)"),
    ]))
    found = [(f.cell, f.line, f.message) for f in review_paths([str(nb)], jobs=1, show_possible=True).findings
             if f.code == "JM704"]
    assert [(c, line) for c, line, _m in found] == [(2, 3)]
    assert "`%%time f(x)`" in found[0][2]


def test_a_timeit_that_picks_its_own_loop_count_is_not_flagged(tmp_path: Path):
    """JAX lets at most 32 calls queue ahead of the device, so %timeit's own loop count (10**k
    calls reaching 0.2 s, seven runs) times the work within a tenth (JM704's QUEUED_AHEAD); a fixed
    count of 320 calls or fewer is flagged, with how many calls it times."""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"),
        ("code", "%timeit f(x)\n%timeit -n 1000 f(x)\n%timeit -r 3 f(x)"),
        ("code", "%timeit -n 10 -r 3 f(x)"),
        ("code", "%%timeit\ny = f(x)"),
        ("code", "%%timeit -n1 -r2\ny = f(x)"),
    ]))
    found = {(f.cell, f.line): f.message for f in review_paths([str(nb)], jobs=1, show_possible=True).findings
             if f.code == "JM704"}
    assert set(found) == {(3, 1), (5, 2)}
    assert "times 30 calls" in found[(3, 1)] and "times 2 calls" in found[(5, 2)]


def test_stacked_cell_magics_are_read_as_ipython_runs_them(tmp_path: Path):
    """`%%capture cap` runs the rest of the cell as a cell of its own, so a `%%time` on its second
    line times the statement under it (from the twenty-ninth reading's miss: a jitted test-set
    prediction timed this way and saved as the model's testing time). The cell was skipped as
    not Python before."""
    nb = tmp_path / "bench.ipynb"
    nb.write_text(_nb([
        ("code", "import jax\nimport jax.numpy as jnp\nf = jax.jit(lambda a: a @ a)\nx = jnp.ones((64, 64))"),
        ("code", "%%capture cap\n%%time\ny = f(x)"),
        ("code", "%%capture cap\n%%time\nz = f(x).block_until_ready()"),
    ]))
    result = review_paths([str(nb)], jobs=1, show_possible=True)
    assert [(f.cell, f.line) for f in result.findings if f.code == "JM704"] == [(2, 3)]
    assert not result.notes


def test_a_notebook_cells_last_expression_is_shown_not_discarded(tmp_path: Path):
    """Jupyter displays the value of a cell's last expression: `arr.at[3].set(10)` there is a
    demonstration of immutability, not a lost update. Ended by `;`, or before other statements
    of the cell, or in a script, its result is thrown away (JM502)."""
    cells = [
        ("code", "import jax.numpy as jnp\narr = jnp.arange(5)"),
        ("code", "arr.at[3].set(10)"),
        ("code", "arr.at[2].set(7);  # hidden"),
        ("code", "arr.at[1].set(4)\nprint(arr)"),
    ]
    nb = tmp_path / "immutability.ipynb"
    nb.write_text(_nb(cells))
    found = {(f.cell, f.line) for f in review_paths([str(nb)], jobs=1, show_possible=True).findings if f.code == "JM502"}
    assert found == {(3, 1), (4, 1)}
    script = "\n".join(src for _, src in cells)
    assert len([f for f in review_source(script, "demo.py") if f.code == "JM502"]) == 3
    # The same when another cell is not Python and the rest is read without it (from the
    # twenty-sixth reading, after its report: a notebook with one broken cell).
    nb.write_text(_nb([cells[0], ("code", "def broken(:\n    pass"), *cells[1:]]))
    found = {(f.cell, f.line) for f in review_paths([str(nb)], jobs=1, show_possible=True).findings if f.code == "JM502"}
    assert found == {(4, 1), (5, 1)}


@pytest.mark.parametrize("files, sure", [
    ({}, True),                                                       # nothing declared: jax today
    ({"pyproject.toml": '[project]\ndependencies = ["jax==0.4.25", "jaxlib==0.4.25"]\n'}, False),
    ({"requirements.txt": "jax[cuda12]~=0.4.20\nflax==0.10.0\n"}, False),
    ({"requirements.txt": "jax<0.10\n"}, True),                        # may be 0.9.x: not known to work
    ({"requirements.txt": "jaxlib==0.4.25\njax>=0.4\n"}, True),        # no upper bound on jax itself
    ({"gpu_requirements.txt": "jax[cuda]==0.3.12\nflax==0.5.0\n"}, False),  # one file per accelerator (12zzzzzzzw)
])
def test_a_removed_api_is_an_upgrade_note_where_the_project_pins_an_older_jax(tmp_path: Path, files, sure):
    """JM204's claim (raises on jax 0.10) does not hit a project whose requirements keep JAX below
    0.9: there the finding is possible and says the call works on the pinned version."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    pkg = tmp_path / "agents"
    pkg.mkdir()
    (pkg / "ppo.py").write_text("import jax\n\ndef init(state):\n    return jax.device_put_replicated(state, jax.devices())\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    (f,) = [f for f in result.findings + result.possible if f.code == "JM204"]
    assert (f.confidence == "sure") is sure
    assert ("works on the jax this project pins" in f.message) is not sure


@pytest.mark.parametrize("body, sure", [
    ("def place(x, devices: Sequence[jax.xla.Device]):\n", False),        # jax.xla: removed in 0.4.14
    ("def place(x, devices):\n    g = jax.tree_multimap(lambda a: a, x)\n", False),  # removed in 0.3.16
    ("def place(x, devices: Sequence[jax.Device]):\n", True),             # today's name: no hint
])
def test_code_that_uses_names_jax_removed_long_ago_gets_the_upgrade_note(tmp_path: Path, body, sure):
    """JM204's claim (raises on jax 0.10) is read against the JAX the code was written for: one that
    uses `jax.xla.Device` (removed in jax 0.4.14) runs where `device_put_sharded` still works."""
    (tmp_path / "misc.py").write_text(
        "from typing import Sequence\n\nimport jax\n\n\n" + body + "    return jax.device_put_sharded(x, devices)\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    (f,) = [f for f in result.findings + result.possible if f.code == "JM204"]
    assert (f.confidence == "sure") is sure
    assert ("works on the JAX this code was written for" in f.message) is not sure


@pytest.mark.parametrize("files, cpu, sure", [
    ({}, True, True),                                                  # nothing declared: jax today
    ({"requirements.txt": "jax==0.4.9\njaxlib==0.4.9\n"}, True, False),  # synchronous on the CPU then
    ({"requirements.txt": "jax==0.4.9\n"}, False, True),               # a GPU dispatches asynchronously
    ({"requirements.txt": "jax==0.4.32\n"}, True, True),               # asynchronous from 0.4.32
])
def test_a_timer_on_a_cpu_that_dispatched_synchronously_is_not_proven(tmp_path: Path, files, cpu, sure):
    """Before jax 0.4.32 the CPU backend dispatched non-parallel computations synchronously (the
    0.4.32 changelog): in a project that pins such a JAX and forces the CPU, a timer without
    `block_until_ready` may measure the work, so JM701 is possible and says why."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    platform = 'jax.config.update("jax_platform_name", "cpu")\n' if cpu else ""
    (tmp_path / "bench.py").write_text(
        "import time\n\nimport jax\nimport jax.numpy as jnp\n\n" + platform +
        "f = jax.jit(lambda x: x @ x)\nx = jnp.ones((500, 500))\nf(x).block_until_ready()\n"
        "t0 = time.perf_counter()\ny = f(x)\nprint(time.perf_counter() - t0)\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    (f,) = [f for f in result.findings + result.possible if f.code == "JM701"]
    assert (f.confidence == "sure") is sure
    assert ("declares a JAX before 0.4.32" in f.message) is not sure


def test_a_timer_with_cpu_async_dispatch_turned_off_is_not_proven(tmp_path: Path):
    (tmp_path / "bench.py").write_text(
        "import time\n\nimport jax\nimport jax.numpy as jnp\n\n"
        'jax.config.update("jax_platforms", "cpu")\njax.config.update("jax_cpu_enable_async_dispatch", False)\n'
        "f = jax.jit(lambda x: x @ x)\nx = jnp.ones((500, 500))\nf(x).block_until_ready()\n"
        "t0 = time.perf_counter()\ny = f(x)\nprint(time.perf_counter() - t0)\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert [f.confidence for f in result.findings + result.possible if f.code == "JM701"] == ["possible"]


def test_a_notebook_is_limited_by_its_code_not_its_outputs(tmp_path: Path):
    """Embedded plots make notebooks large; max-file-size counts the code cells."""
    doc = json.loads(_nb([("code", "import jax.numpy as jnp"),
                          ("code", "for i in range(100):\n    x = jnp.ones(3)\n    print(float(x.sum()))")]))
    doc["cells"][1]["outputs"] = [{"output_type": "display_data", "metadata": {},
                                   "data": {"image/png": "A" * 3_000_000}}]  # a 3 MB plot
    (tmp_path / "plots.ipynb").write_text(json.dumps(doc))
    many = json.loads(_nb([("code", "x = 1\n" * 200_000)]))  # 1.2 MB of code
    (tmp_path / "long.ipynb").write_text(json.dumps(many))
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert [(Path(f.path).name, f.code) for f in result.findings] == [("plots.ipynb", "JM101")]
    notes = {Path(n.path).name: n.message for n in result.notes}
    assert "of code cells is over the 1.0 MB limit" in notes["long.ipynb"]


def test_a_symbolic_link_checked_out_as_text_is_a_note_not_a_parse_error(tmp_path: Path):
    """Where git cannot make a link (core.symlinks off) it writes the target path as the file."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "walkthrough.ipynb").write_text("../examples/walkthrough.ipynb")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert result.findings == []
    (note,) = [n for n in result.notes if n.path.endswith("walkthrough.ipynb")]
    assert "symbolic link" in note.message and "../examples/walkthrough.ipynb" in note.message


def test_suppression_comments():
    src = BAD_LOOP.replace("print(float(x.sum()))", "print(float(x.sum()))  # jaxmem: ignore[JM101]")
    assert review_source(src, show_possible=True) == []
    assert review_source(BAD_LOOP.replace("x.sum()))", "x.sum()))  # jaxmem: ignore"), show_possible=True) == []
    assert [f.code for f in review_source(BAD_LOOP.replace("x.sum()))", "x.sum()))  # jaxmem: ignore[JM2]"), show_possible=True)] == ["JM101"]


def test_pyproject_section(tmp_path: Path):
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.jaxmem]\nother-command = 1\nignore = ["JM101"]\n[tool.jaxmem.review]\nmax-file-size = 2000\n')
    cfg = config.load(config.find_pyproject(tmp_path))
    assert cfg.ignore == ["JM101"] and cfg.max_file_size == 2000
    pp.write_text('[tool.jaxmem.review]\nselct = ["JM1"]\n')
    with pytest.raises(config.ConfigError, match=r"unknown key .*'selct'.*valid keys: select, ignore"):
        config.load(pp)
    pp.write_text('[tool.jaxmem]\nmax-file-size = "big"\n')
    with pytest.raises(config.ConfigError, match="max-file-size must be a positive number"):
        config.load(pp)


def test_question_code_blocks():
    q = f"Why is this slow?\n```python\n{BAD_LOOP}```\nand this:\n```\nx = 1\n```"
    assert len(extract_code_blocks(q)) == 2
    findings = review_question(q, show_possible=True)
    assert [(f.path, f.code) for f in findings] == [("<pasted block 1>", "JM101")]
    assert extract_code_blocks("how much memory does jit use?") == []
    assert extract_code_blocks("is ```x = jnp.ones(3)``` slow?") == ["x = jnp.ones(3)"]
    assert extract_code_blocks("```py\nimport jax\n```") == ["import jax\n"]
    assert [f.code for f in review_question(BAD_LOOP, show_possible=True)] == ["JM101"], "unfenced code that imports jax"


def test_parallel_batch_matches_serial(tmp_path: Path, monkeypatch):
    for i in range(230):
        (tmp_path / f"m{i:03}.py").write_text(BAD_LOOP if i % 3 else "x = 1\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    serial = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    parallel = review_paths([str(tmp_path)], jobs=2, show_possible=True)
    assert [f.to_dict() for f in serial.findings] == [f.to_dict() for f in parallel.findings]
    assert len(serial.findings) == 154 and serial.files == 231
    assert serial.notes == parallel.notes
    assert {f.url for f in parallel.findings} == {""}, "no public URL: no link"
    # The workers' findings get their card links in the parent (which reads the setting while
    # they run): the same links as a serial run, and none for a syntax error.
    monkeypatch.setenv("JAXMEM_PUBLIC_URL", "https://jaxmem.example.org")
    serial = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    parallel = review_paths([str(tmp_path)], jobs=2, show_possible=True)
    assert [f.to_dict() for f in serial.findings] == [f.to_dict() for f in parallel.findings]
    urls = {f.code: f.url for f in parallel.findings}
    assert urls["JM101"].startswith("https://jaxmem.example.org/card?topic=") and urls["JM001"] == ""


def test_fix_marks_computed_in_workers_match_serial(tmp_path: Path):
    from jaxmem.evaluators.review.fixes import session

    fixtures = Path(__file__).parent / "fixtures"
    sources = sorted(fixtures.glob("JM701/bad_*.py"))[:3] + sorted(fixtures.glob("JM301/bad_*.py"))[:3]
    for src in sources:
        (tmp_path / f"{src.parent.name}_{src.name}").write_text(src.read_text())
    runs = []
    for jobs in (1, 2):
        found = review_paths([str(tmp_path)], jobs=1, show_possible=True).findings
        session.annotate_findings(found, jobs=jobs)
        runs.append([(f.path, f.line, f.code, f.fix_applicability, f.fix_edits) for f in found])
    assert runs[0] == runs[1] and sum(1 for r in runs[0] if r[3] is not None) >= 4


def test_a_crashing_rule_skips_one_file_and_exits_2(tmp_path: Path, monkeypatch):
    from jaxmem.evaluators.review import api
    from jaxmem.evaluators.review.rules import host_scalar_conversion_in_loop as mod

    (tmp_path / "a.py").write_text(BAD_LOOP)
    (tmp_path / "b.py").write_text("import jax\nprint(jax.jit)\n")

    def explode(self, node, ctx):
        raise KeyError("boom")

    monkeypatch.setattr(mod.HostScalarConversionInLoop, "check", explode)
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert result.exit_code == 2 and result.errors == 1
    (note,) = [n for n in result.notes if n.message.startswith(api.INTERNAL)]
    assert note.path.endswith("a.py") and "KeyError" in note.message
    with pytest.raises(api.ReviewError, match="<pasted>: internal error while reviewing: KeyError"):
        review_source(BAD_LOOP, show_possible=True)


def test_progress_bar_for_long_batches(tmp_path: Path, capsys):
    for i in range(60):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    review_paths([str(tmp_path)], jobs=1, progress=True, show_possible=True)
    assert "jaxmem review" in capsys.readouterr().err
    review_paths([str(tmp_path)], jobs=1, progress=False, show_possible=True)
    assert capsys.readouterr().err == ""


def test_magics_inside_blocks_keep_the_cell_valid(tmp_path: Path):
    nb = tmp_path / "colab.ipynb"
    nb.write_text(_nb([("code", "import jax.numpy as jnp\nmount = 'no'\nif mount == 'yes':\n  !ls /content\n"
                                 "for i in range(100):\n    print(float(jnp.ones(2).sum()))")]))
    (f,) = review_paths([str(nb)], jobs=1, show_possible=True).findings
    assert (f.code, f.cell, f.line) == ("JM101", 1, 6)


FIT_CELL = '''def fit(xs, epochs=10):
    for i in range(epochs):
        for x in xs:
            print(float(jnp.sum(x)))
        print(
            "epoch %d"
            % (i,)
        )
    """
    %not_a_magic
    """
    %time fit
'''


def test_a_percent_that_continues_an_expression_is_python_not_a_magic(tmp_path: Path):
    # Reduced from a public notebook: a training cell whose last `print("..." % (...))` breaks its
    # line before the `%`. IPython runs it as Python (it looks for magics only where a statement
    # starts), so the cell is reviewed, not skipped as "not Python".
    nb = tmp_path / "fit.ipynb"
    nb.write_text(_nb([("code", "import jax\nimport jax.numpy as jnp\n"), ("code", FIT_CELL),
                       ("code", "fit([jnp.ones(3)] * 100)")]))
    result = review_paths([str(nb)], jobs=1, show_possible=True)
    assert not any("not Python" in n.message for n in result.notes)
    assert [(f.code, f.cell, f.line) for f in result.findings] == [("JM101", 2, 4)]


def test_test_files_are_skipped_by_default_and_can_be_included(tmp_path: Path):
    for rel in ("train.py", "tests/test_train.py", "tests/helpers.py", "pkg/model_test.py", "conftest.py",
                "pkg/test_data.py", "pkg/contest.py", "test_resnet_cifar.py", "pkg/check_test.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(BAD_LOOP)
    # Files named like tests that hold tests (or use a test framework) are tests; one that holds
    # none and runs as a script (`test_resnet_cifar.py` timing a model on the test split) is not.
    (tmp_path / "pkg" / "model_test.py").write_text(BAD_LOOP + "\n\ndef test_loop():\n    pass\n")
    (tmp_path / "pkg" / "test_data.py").write_text("import unittest\n" + BAD_LOOP)
    (tmp_path / "pkg" / "check_test.py").write_text("import jax.numpy as jnp\n\ndef helper(x):\n    return float(x)\n")
    def names(r):
        return sorted(Path(f.path).relative_to(tmp_path).as_posix() for f in r.findings)
    default = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert names(default) == ["pkg/contest.py", "test_resnet_cifar.py", "train.py"]
    assert any("6 test files not reviewed" in n.message and "--include-tests" in n.message for n in default.notes)
    assert len(names(review_paths([str(tmp_path)], jobs=1, include_tests=True, show_possible=True))) == 8  # check_test.py: none
    # Named explicitly, or a tests folder given as the path: reviewed.
    assert names(review_paths([str(tmp_path / "tests" / "test_train.py")], jobs=1, show_possible=True)) == ["tests/test_train.py"]
    assert names(review_paths([str(tmp_path / "tests")], jobs=1, show_possible=True)) == ["tests/helpers.py", "tests/test_train.py"]
    (tmp_path / "pyproject.toml").write_text("[tool.jaxmem]\ninclude-tests = true\n")
    assert config.load(config.find_pyproject(tmp_path)).include_tests is True
    (tmp_path / "pyproject.toml").write_text('[tool.jaxmem]\ninclude-tests = "yes"\n')
    with pytest.raises(config.ConfigError, match="include-tests must be true or false"):
        config.load(config.find_pyproject(tmp_path))


def test_ipython_syntax_is_skipped_line_by_line_and_bad_cells_alone(tmp_path: Path):
    nb = tmp_path / "demo.ipynb"
    nb.write_text(_nb([
        ("code", "import jax.numpy as jnp\ncurrent_dir = %pwd\nfiles = !ls\njnp.ones?"),
        ("code", "!pip install \\\n    flax \\\n    optax\nprint(current_dir)"),
        ("code", "timeit -n 5 jnp.ones(3).block_until_ready()"),
        ("code", "def broken(:\n    pass"),
        ("code", "for i in range(100):\n    print(float(jnp.ones(2).sum()))"),
    ]))
    result = review_paths([str(nb)], jobs=1, show_possible=True)
    assert [(f.code, f.cell, f.line) for f in result.findings] == [("JM101", 5, 2)]
    (note,) = result.notes
    assert note.message.startswith("cell 4: not Python") and "the others reviewed" in note.message


def test_a_repl_transcript_is_a_note_not_a_syntax_error(tmp_path: Path):
    # 12zzk: a talk's code folder held `>>>` sessions with their printed output, kept as .py files
    # for the slides; nine JM001 errors ("cannot parse") where nothing was meant to run.
    (tmp_path / "slide.py").write_text("# same as torch.autograd.grad(c,x)\n>>> c.backward()\n>>> x.grad\n"
                                       "tensor([0.9743, 0.4026, 0.8935])\n")
    (tmp_path / "broken.py").write_text("x = (\n")  # a real syntax error stays one
    (tmp_path / "doc.py").write_text('"""Usage:\n\n>>> run()\n"""\ndef run(:\n    pass\n')
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert sorted((Path(f.path).name, f.code, f.severity) for f in result.findings) == [
        ("broken.py", "JM001", "error"), ("doc.py", "JM001", "error")]  # a docstring's prompt is not a session
    (note,) = result.notes
    assert note.path.endswith("slide.py") and "REPL transcript" in note.message
    pasted = review_source(">>> import jax\n>>> jax.numpy.ones(3)\nArray([1., 1., 1.], dtype=float32)\n", "<pasted>",
                           show_possible=True)
    assert [(f.code, f.severity) for f in pasted] == [("JM001", "info")] and ">>>" in pasted[0].fix


def test_a_function_in_an_annotation_is_reviewed_like_any_other(tmp_path: Path):
    # 12zzn: sixteen config files of one repository wrote `decoder.act: lambda x: x` (an annotation,
    # a typo for `=`); the model had no scope for that lambda and a rule raised KeyError, so each
    # file was skipped with an internal error.
    (tmp_path / "cfg.py").write_text("import jax\n\nclass C:\n    pass\n\nc = C()\nc.act: lambda x: x\n"
                                     "c.out = jax.jit(lambda x: x)\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert result.errors == 0 and not result.notes and result.files == 1


def test_newer_python_syntax_is_reviewed(tmp_path: Path):
    # Shape of 12zm's quantum scripts: a PEP 701 header f-string made the whole file unreadable on
    # 3.11, and with it the per-epoch float() of the jitted step's loss (found on 3.12).
    src = ("import jax\n\n@jax.jit\ndef step(params):\n    loss = (params ** 2).sum()\n"
           "    return params - 0.1 * params, loss\n\n"
           "def run(params):\n    print(f'{'Epoch':^10} | {'Loss':^18}')\n    history = []\n"
           "    for ep in range(100):\n        params, loss = step(params)\n"
           "        history.append(float(loss))\n    return history\n\n"
           "type Vector = list[float]\n\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n")
    (tmp_path / "newer.py").write_text(src)
    result = review_paths([str(tmp_path / "newer.py")], jobs=1, show_possible=True)
    assert result.notes == []
    found = {(f.code, f.line): f for f in result.findings}
    assert set(found) == {("JM101", 13), ("JM401", 12)}  # columns as written, too
    assert found["JM101", 13].source_line == "history.append(float(loss))" and found["JM101", 13].col == 24


def test_newer_python_syntax_without_a_rewrite_is_a_note_not_an_error(tmp_path: Path):
    import sys

    # A type alias whose header spans lines: no same-length 3.11 spelling (newer_syntax).
    src = "type Vector[\n    T,\n] = list[T]\n"
    (tmp_path / "generic.py").write_text(src)
    result = review_paths([str(tmp_path / "generic.py")], jobs=1, show_possible=True)
    if sys.version_info >= (3, 12):
        assert result.findings == [] and result.notes == []
        return
    assert result.findings == [] and result.exit_code == 0
    (note,) = result.notes
    assert "PEP 695" in note.message and "Python 3.12 or newer" in note.message
    (pasted,) = review_source(src, show_possible=True)
    assert pasted.code == "JM001" and pasted.severity == "info" and "3.12" in pasted.message
    (real,) = review_source("def f(:\n    pass\n", show_possible=True)
    assert real.severity == "error" and "cannot parse" in real.message


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_compiler_warnings_about_reviewed_code_stay_quiet(tmp_path: Path, suffix: str):
    """`"\\g"` in reviewed code makes the compiler warn (invalid escape sequence); that is about
    the user's file and must not reach the reviewer's stderr, for files and notebook cells alike
    (a notebook cell that needs IPython is parsed on its own, a second time)."""
    import warnings

    code = 'import re\nx = re.sub("a", "\\g<0>", "abc")\n%timeit x\n'
    path = tmp_path / f"f{suffix}"
    path.write_text(_nb([("code", code)]) if suffix == ".ipynb" else code.replace("%timeit x\n", ""))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        review_paths([str(path)], jobs=1, show_possible=True)
    assert not [w for w in caught if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]


def test_a_link_to_a_file_outside_the_reviewed_folder_is_a_note_not_a_crash(tmp_path: Path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("import jax\n")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text("import jax\n")
    (tree / "sub" / "link.py").symlink_to(outside)
    (tree / "sub" / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    result = review_paths([str(tree)], jobs=1, show_possible=True)
    assert result.errors == 0 and result.files == 1
    assert any("outside the reviewed folder" in n.message for n in result.notes)


def test_a_trainer_that_gets_jax_through_a_star_import_of_the_tree(tmp_path: Path):
    # Reduced from 12zo's KataCV trainers: `jax` and `partial` come from `from pkg.utils.imports
    # import *`, so without following the star import the step is not known to be jitted and the
    # per-step f-string of its loss goes unseen.
    pkg = tmp_path / "pkg"
    (pkg / "utils").mkdir(parents=True)
    for d in (pkg, pkg / "utils"):
        (d / "__init__.py").write_text("")
    (pkg / "utils" / "imports.py").write_text(
        "import jax, optax\nimport jax.numpy as jnp\nfrom functools import partial\nfrom tqdm import tqdm\n")
    (pkg / "train.py").write_text(
        "from pkg.utils.imports import *\n\n"
        "@partial(jax.jit, static_argnames=['train'])\n"
        "def model_step(state, x, train: bool):\n"
        "    loss = jnp.mean(x ** 2)\n"
        "    return state, loss\n\n"
        "def main(state, train_ds):\n"
        "    bar = tqdm(train_ds)\n"
        "    for x in bar:\n"
        "        state, loss = model_step(state, x, train=True)\n"
        "        bar.set_description(f'loss={loss:.4f}')\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert ("JM102", 12) in {(f.code, f.line) for f in result.findings}


def test_scripts_in_sibling_folders_star_import_the_model_beside_each(tmp_path: Path):
    # Reduced from 12zzzzf's jaxgptoolbox demos: `demos/a/main.py` and `demos/b/main.py` each do
    # `from model import *`, and each folder has its own `model.py` importing jax. The script's
    # own folder comes first on sys.path, so each star import means the model beside it; the text
    # prefilter and the "touches JAX" check must resolve it that way too, as the model does
    # (they used to see two candidate `model` modules, take neither, and drop the file's rules).
    for folder in ("a", "b"):
        d = tmp_path / "demos" / folder
        d.mkdir(parents=True)
        (d / "model.py").write_text("import jax\nimport jax.numpy as np\nfrom jax import jit, value_and_grad\n"
                                    "import numpy as onp\n")
        (d / "main.py").write_text(
            "from model import *\n\n"
            "@jit\n"
            "def update(p, x):\n"
            "    value, g = value_and_grad(lambda q: np.mean((q * x) ** 2))(p)\n"
            "    return value, p - 0.1 * g\n\n"
            "if __name__ == '__main__':\n"
            "    p = np.ones(3)\n"
            "    history = onp.zeros(1000)\n"
            "    for epoch in range(1000):\n"
            "        value, p = update(p, np.ones(3))\n"
            "        history[epoch] = value\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    found = {(Path(f.path).parent.name, f.code, f.line) for f in result.findings}
    assert {("a", "JM101", 13), ("b", "JM101", 13)} <= found


def test_a_timer_around_a_tree_helper_that_reads_on_the_host_is_not_sure(tmp_path: Path):
    # Reduced from 12zzzzc-12zzzzg's first run, where all 5 wrong sure JM701 findings had this
    # shape: the step's metrics go through a helper in another file of the tree whose body copies
    # them to the host (`jax.device_get` of a tree mapped over its argument), then the clock stops.
    # Which values the helper reads is more data flow than the model follows: the region may have
    # waited, so a timing there is possible at most (semantic/hostreads.py). A helper that reads
    # nothing on the host leaves the finding sure.
    (tmp_path / "utils.py").write_text(
        "import jax\n\n"
        "def get_from_first_device(nest):\n"
        "    first = jax.tree_util.tree_map(lambda x: x[0], nest)\n"
        "    return jax.device_get(first)\n\n"
        "def first_only(nest):\n"
        "    return jax.tree_util.tree_map(lambda x: x[0], nest)\n")
    for name, helper in (("learner_reads.py", "get_from_first_device"), ("learner_plain.py", "first_only")):
        (tmp_path / name).write_text(
            "import time\n\nimport jax\nimport jax.numpy as jnp\n\nimport utils\n\n"
            "@jax.jit\n"
            "def sgd_step(state, batch):\n"
            "    return state - 0.1 * batch, {'loss': jnp.mean(batch)}\n\n"
            "def step(state, batch, log):\n"
            "    start = time.time()\n"
            "    state, metrics = sgd_step(state, batch)\n"
            f"    metrics = utils.{helper}(metrics)\n"
            "    log({'time': time.time() - start})\n"
            "    return state, metrics\n")
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    jm701 = {Path(f.path).name: f.confidence for f in result.findings if f.code == "JM701"}
    assert jm701.get("learner_plain.py") == "sure"
    assert jm701.get("learner_reads.py") != "sure"


@pytest.mark.parametrize("files, flagged", [
    ({}, False),                                                       # equinox today: filter_jit waits
    ({"requirements.txt": "equinox==0.11.3\njax==0.4.30\n"}, True),     # before 0.11.8 it did not
    ({"pyproject.toml": 'dependencies = ["equinox>=0.11.8"]\n'}, False),  # a lower bound pins nothing old
])
def test_a_timer_after_filter_jit_is_read_against_the_equinox_the_project_pins(tmp_path: Path, files, flagged):
    """Since equinox 0.11.8 every `eqx.filter_jit` call blocks on its outputs before it returns, so
    a clock read right after one measures the work; a project that pins an older equinox (the
    shape of unseen-2026-12zzzzzzo's trainit, equinox==0.11.3) gets asynchronous dispatch, and the
    same timer measures only the dispatch."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import time
        import equinox as eqx

        @eqx.filter_jit
        def make_step(model, x):
            return model, (model * x).sum()

        def train(model, batches):
            for x in batches:
                start = time.time()
                model, loss = make_step(model, x)
                print("step took", time.time() - start)
    """))
    result = review_paths([str(tmp_path)], jobs=1, show_possible=True)
    assert any(f.code in ("JM701", "JM704") for f in result.findings + result.possible) is flagged
