"""Per-line attribution (issue 24): each host sync, transfer and compilation on the line of the user's
code that caused it, the first (compiling) step apart from the steady ones, and peak memory per run.

The first tests read hand-written streams (what the probe writes on fd 2); the slow ones run small
scripts and commands in the sandbox and check the lines and counts a reader of the code expects."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.api import CommandError, verify_command, verify_script
from jaxmem.evaluators.verify.attribution import parse, per_step, summarize
from jaxmem.evaluators.verify.command import parse as parse_command

NONCE = "ab" * 16
H2D = "W1130 11:16:47.229349    {tid} guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[8,4])"
H2D_FAST = "W1130 11:16:47.229380    {tid} guard_lib.cc:125] host-to-device transfer: "


def m(body: str) -> str:
    return probe.marker(NONCE, body)


def stream(*lines: str) -> str:
    return "\n".join([m(probe.BEGIN), *lines, m(probe.END)])


def metrics(summary: dict, line: int, table: str = "lines") -> dict:
    return next(r["metrics"] for r in summary[table] if r["line"] == line)


# ---- the stream, read ---------------------------------------------------------------------------
def test_guard_lines_go_to_the_line_the_next_trailing_marker_of_their_thread_names():
    text = stream(
        m("d:1:10:/p/train.py"), m("d:2:8:/p/train.py"),
        H2D.format(tid=7), H2D_FAST.format(tid=9),          # thread 9 never says where it was
        m("t:7:1.1|2.1.1"),
        H2D_FAST.format(tid=7), m("t:7:1.1|2.1.2"),
        H2D_FAST.format(tid=7), m("t:7:1.1|2.1.3"),
        m("l:2:1:3"))
    s = parse(text, NONCE)
    assert s.problems == [] and s.counts.h2d == 4
    summary = summarize(s)
    h2d = metrics(summary, 10)["implicit_h2d_transfers"]
    assert (h2d["total"], h2d["first_step"], h2d["steady_total"], h2d["steady_steps"]) == (3, 1, 2, 2)
    assert h2d["per_step"] == 1.0 and h2d["loop"] == "/p/train.py:8"
    assert h2d["bytes"] == 128 and h2d["bytes_not_shown"] == 2   # only the first line showed its shape
    assert summary["unattributed"] == {"implicit_h2d_transfers": 1}
    assert per_step(h2d)


def test_the_step_is_the_loop_with_the_most_iterations_in_one_run_of_its_frame():
    """A loop over three parameters inside the step function is not the step; the training loop is."""
    text = stream(
        m("d:1:5:/p/t.py"), m("d:2:4:/p/t.py"), m("d:3:20:/p/t.py"), m("d:4:19:/p/t.py"),
        *[m(f"s:1:1.{a}<3|2.{a}.{k},4.1.{a - 1}:__float__:4:") for a in range(2, 12) for k in (1, 2, 3)],
        *[m(f"l:2:{a}:3") for a in range(2, 12)], m("l:4:1:10"))
    summary = summarize(parse(text, NONCE))
    syncs = metrics(summary, 5)["host_syncs"]
    assert syncs["loop"] == "/p/t.py:19" and syncs["first_step"] == 3 and syncs["per_step"] == 3.0
    assert metrics(summary, 20, "inclusive")["host_syncs"]["total"] == 30   # the call site carries them too


def test_markers_outside_the_region_or_of_another_run_are_problems():
    text = "\n".join([m("s:1:1.1|:item::"), m(probe.BEGIN), probe.marker("cd" * 16, "t:1:1.1|"), m(probe.END)])
    problems = parse(text, NONCE).problems
    assert "an attribution marker appeared outside the measured region" in problems
    assert "a marker that is not this run's appeared on file descriptor 2" in problems
    truncated = "\n".join([H2D.format(tid=1), m(probe.END)])
    assert any("without a snippet-begin" in p for p in parse(truncated, NONCE).problems)


# ---- commands, read -----------------------------------------------------------------------------
def test_run_commands_are_python_scripts_or_modules_of_the_tree(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    cmd = parse_command("MPLBACKEND=Agg python3 -u train.py --steps 5", tmp_path)
    assert cmd.env == {"MPLBACKEND": "Agg"} and cmd.script == tmp_path / "train.py" and cmd.argv == ("--steps", "5")
    assert parse_command("python -m pkg.train -n 2", tmp_path).module == "pkg.train"
    for bad, why in (("bash run.sh", "runs Python only"), ("python ../x.py", "outside the reviewed tree"),
                     ("python missing.py", "is not a file"), ("python -c 'print(1)'", "not supported"),
                     ("python 'unclosed", "cannot be read")):
        with pytest.raises(CommandError, match=why):
            parse_command(bad, tmp_path)


# ---- real runs ----------------------------------------------------------------------------------
ISSUE_EXAMPLE = '''\
import jax
import jax.numpy as jnp
import numpy as np


def log_metrics(metrics):
    return {k: v.tolist() for k, v in metrics.items()}


@jax.jit
def step(w, x):
    loss = jnp.mean((x @ w) ** 2)
    return w - 0.01 * x.T @ (x @ w), {"loss": loss, "norm": jnp.linalg.norm(w)}


w = jnp.ones((4, 2))
for i in range(20):
    x = np.ones((8, 4), np.float32)
    w, metrics = step(w, x)
    history = log_metrics(metrics)
'''


@pytest.fixture
def issue_example(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(ISSUE_EXAMPLE)
    return path


@pytest.mark.slow
def test_the_issue_example_puts_two_syncs_per_step_on_the_helpers_line(issue_example, capsys):
    result = verify_script(issue_example)
    assert result["ok"], result["error"]
    a = result["attribution"]
    syncs = metrics(a, 7)["host_syncs"]   # `{k: v.tolist() ...}` in the logging helper
    assert (syncs["total"], syncs["first_step"], syncs["per_step"], syncs["steps_with"]) == (40, 2, 2.0, 19)
    assert syncs["loop"] == "train.py:17" and syncs["how"] == {"tolist": 40}
    assert next(r for r in a["lines"] if r["line"] == 7)["called_from"] == ["train.py:20"]
    step = metrics(a, 19)
    assert step["implicit_h2d_transfers"]["per_step"] == 1.0            # x, a NumPy array, every step
    assert step["compiles"]["first_step"] == 1 and step["compiles"]["per_step"] == 0.0   # compiled once
    assert a["unattributed"] == {} and a["loops"][0]["iterations"] == 20
    assert result["host_sync_lines"] == [{"line": 7, "source": "return {k: v.tolist() for k, v in metrics.items()}",
                                          "count": 40}]
    assert result["peak_rss"] > 0
    json.dumps(result)
    with capsys.disabled():
        print(f"\n[attribution] issue example: line 7 {syncs['per_step']} syncs/step after {syncs['first_step']} in "
              f"step 1; line 19 {step['implicit_h2d_transfers']['per_step']} h2d/step, compiles only in step 1")


@pytest.mark.slow
def test_a_recompile_every_step_and_epochs_of_batches(tmp_path):
    script = tmp_path / "loops.py"
    script.write_text(textwrap.dedent('''\
        import jax
        import jax.numpy as jnp

        f = jax.jit(lambda x: jnp.sum(jnp.sin(x)))
        for n in range(1, 8):
            total = f(jnp.ones(n))
        g = jax.jit(lambda x: x * 2)
        for epoch in range(2):
            for batch in range(6):
                y = g(jnp.ones(3))
                print(float(y[0]))
        import numpy as np
        for k in range(4):
            z = jax.device_put(np.ones(2, np.float32))
        '''))
    result = verify_script(script)
    assert result["ok"], result["error"]
    recompiles = metrics(result["attribution"], 6)["compiles"]
    assert recompiles["per_step"] >= 1 and recompiles["steps_with"] == 6 and per_step(recompiles)
    syncs = metrics(result["attribution"], 11)["host_syncs"]
    # The step is the batch loop (12 iterations over both epochs), not the epoch loop.
    assert syncs["loop"] == "loops.py:9" and syncs["steady_steps"] == 11 and syncs["per_step"] == 1.0
    put = metrics(result["attribution"], 14)
    assert "implicit_h2d_transfers" not in put   # device_put's copies are the explicit ones
    assert put["explicit_h2d_transfers"]["per_step"] == 1.0 and put["explicit_h2d_transfers"]["bytes"] == 32


@pytest.mark.slow
def test_a_command_runs_a_module_of_its_tree_read_only(tmp_path):
    tree = tmp_path / "proj"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "helpers.py").write_text("def read(x):\n    return float(x.sum())\n")
    (tree / "pkg" / "train.py").write_text(textwrap.dedent('''\
        import argparse
        import jax.numpy as jnp
        from pkg.helpers import read

        p = argparse.ArgumentParser()
        p.add_argument("--steps", type=int)
        args = p.parse_args()
        for i in range(args.steps):
            read(jnp.ones(3) * i)
        try:
            open("written.txt", "w").write("x")
        except OSError as e:
            print("write refused:", type(e).__name__)
        '''))
    result = verify_command("python -m pkg.train --steps 5", tree)
    assert result["ok"], result["error"]
    syncs = metrics(result["attribution"], 2)["host_syncs"]
    assert next(r for r in result["attribution"]["lines"] if r["line"] == 2)["path"] == "pkg/helpers.py"
    assert syncs["total"] == 5 and syncs["per_step"] == 1.0 and syncs["loop"] == "pkg/train.py:8"
    assert "write refused: OSError" in result["stdout"] and not (tree / "written.txt").exists()


@pytest.mark.slow
def test_a_loop_inside_a_library_call_is_per_run_of_the_users_line(tmp_path):
    tree = tmp_path / "proj"
    lib = tree / "site-packages"   # not the user's code (a library), though inside the tree
    lib.mkdir(parents=True)
    (lib / "fakelib.py").write_text("def fit(x, n):\n    for _ in range(n):\n        float(x.sum())\n\n\n"
                                    "def show(x):\n" + "".join(f"    float(x[{i}])\n" for i in range(12)))
    (tree / "run.py").write_text("import os, sys\nsys.path.insert(0, os.path.abspath('site-packages'))\n"
                                 "import jax.numpy as jnp\nimport fakelib\nfakelib.fit(jnp.ones(3), 30)\n"
                                 "fakelib.show(jnp.ones(12))\n")
    result = verify_command("python run.py", tree)
    assert result["ok"], result["error"]
    syncs = metrics(result["attribution"], 5)["host_syncs"]
    assert syncs["outside_loops"] == 30 and syncs["per_run"] == 30 and syncs["inside"] == ["fakelib.py:3"]
    assert syncs["per_run_of_busiest_library_line"] == 30 and per_step(syncs)
    # Twelve reads from twelve lines of a library, once (a plot of a few arrays): not a loop's.
    once = metrics(result["attribution"], 6)["host_syncs"]
    assert once["total"] == 12 and once["per_run_of_busiest_library_line"] == 1 and not per_step(once)
