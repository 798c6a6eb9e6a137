"""`jaxmem review` through click's CliRunner: exit statuses, formats, stdin, options, errors."""
from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from jaxmem.evaluators.review import cli as review_cli
from jaxmem.evaluators.review.cli import command, rules_table
from jaxmem.evaluators.review.registry import all_rules

# A training loop (the step takes gradients and replaces its state) that reads the loss every
# step: a sure JM101. The same read in a loop that does not train is only a possible finding.
BAD = ("import jax\nimport jax.numpy as jnp\nfrom functools import partial\n\n"
       "@partial(jax.jit, donate_argnums=0)\ndef step(w, x):\n"
       "    loss, g = jax.value_and_grad(lambda w: jnp.sum((x @ w) ** 2))(w)\n    return w - 0.1 * g, loss\n\n"
       "def fit(w, xs):\n    for x in xs:\n        w, loss = step(w, x)\n        print(float(loss))\n    return w\n")
UNPROVEN = "import jax.numpy as jnp\nfor i in range(100):\n    x = jnp.ones(3)\n    print(float(x.sum()))\n"
CLEAN = "import jax.numpy as jnp\nx = jnp.ones(3)\nprint(float(x.sum()))\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    (tmp_path / "toy.py").write_text(UNPROVEN)
    return tmp_path


# Tiers, exit status and formats are exercised with a finding the model proves (JM101 in a
# training loop), apart from the current record on unseen code (conftest.py).
pytestmark = pytest.mark.usefixtures("calibration_apart")


def run(*args, input=None):
    return CliRunner().invoke(command, list(args), input=input, catch_exceptions=False)


def test_command_is_named_review_and_every_option_is_documented():
    assert command.name == "review"
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help and len(param.help) > 15, f"--{param.name} has no help text"


def test_exit_status_follows_findings(files: Path):
    assert run(str(files / "clean.py")).exit_code == 0
    res = run(str(files / "bad.py"))
    assert res.exit_code == 1
    assert res.output.startswith(f"{files / 'bad.py'}:13:15: JM101 ")
    lines = res.output.rstrip().splitlines()
    # ruff's order: the summary line, then what `--fix` can do about the findings (here an unsafe fix).
    assert lines[-2:] == ["Found 1 finding (1 warning) in 1 file.",
                          "1 fixable with `--fix --unsafe-fixes` (unsafe fixes may change what the code prints or "
                          "computes: `--diff --unsafe-fixes` shows them first)."]


def test_stdin_is_pasted_code():
    res = run("-", input=BAD)
    assert res.exit_code == 1 and res.output.startswith("<stdin>:13:15: JM101")


def test_formats(files: Path):
    doc = json.loads(run(str(files), "--format", "json").output)
    assert doc["version"] == 3
    assert doc["summary"]["findings"] == 1 and doc["summary"]["files"] == 3
    assert doc["summary"]["possible_not_shown"] == 1 and doc["findings"][0]["confidence"] == "sure"
    sarif = json.loads(run(str(files), "--format", "sarif").output)
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"][0]["ruleId"] == "JM101"
    assert run(str(files), "--format", "markdown").output.startswith("**jaxmem review**: Found 1 finding")


def test_select_ignore_and_output_file(files: Path, tmp_path: Path):
    assert run(str(files), "--ignore", "JM101").exit_code == 0
    assert run(str(files), "--select", "JM2,JM3").exit_code == 0
    out = tmp_path / "report.sarif"
    res = run(str(files), "--format", "sarif", "-o", str(out))
    assert res.exit_code == 1 and res.output == "" and json.loads(out.read_text())["runs"]


def test_pyproject_config_is_read(files: Path):
    (files / "pyproject.toml").write_text('[tool.jaxmem]\nignore = ["JM1"]\n')
    assert run(str(files)).exit_code == 0


def test_usage_errors_exit_2(files: Path):
    res = run(str(files), "--select", "JM999")
    assert res.exit_code == 2 and "matches no rule; valid codes are" in res.output
    res = run(str(files), "--format", "xml")
    assert res.exit_code == 2 and "'xml' is not one of" in res.output
    res = run("--explain", "JM9999")
    assert res.exit_code == 2 and "unknown rule" in res.output
    (files / "pyproject.toml").write_text("[tool.jaxmem.review]\nbogus = 1\n")
    res = run(str(files))
    assert res.exit_code == 2 and "unknown key" in res.output and "Traceback" not in res.output


def test_internal_error_is_a_message_not_a_traceback(files: Path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("jaxmem.evaluators.review.api.review_paths", boom)
    res = CliRunner().invoke(command, [str(files)])
    assert res.exit_code == 2
    assert "internal error: RuntimeError: disk on fire" in res.output and "Traceback" not in res.output


def test_list_rules_and_explain_are_generated_from_the_rules():
    table = run("--list-rules").output
    assert all(f"| {r.code} | {r.name} |" in table for r in all_rules())
    assert table == rules_table()
    text = run("--explain", "jm402").output
    assert "What it does" in text and "Use instead" in text and "topic: buffer-donation" in text


def test_run_attaches_measurements(files: Path, monkeypatch):
    """--run hands the script to the verifier; its counts land on the findings they explain."""
    seen = {}

    def fake_runner(path, **opts):
        seen["path"], seen["opts"] = path, opts
        return {"script": path, "ok": True, "backend": "cpu", "jax": "0.10.2", "host_syncs": 3,
                "h2d_transfers": 0, "compile_count": 2, "peak_rss": 200 * 2**20,
                "host_sync_lines": [{"line": 4, "source": "print(float(x.sum()))", "count": 3}]}

    monkeypatch.setattr(review_cli, "runner", lambda: fake_runner)
    res = run("--run", str(files / "toy.py"), "--show-possible")
    assert seen["path"] == str(files / "toy.py")
    assert seen["opts"]["limits"].timeout_s == 300 and "python" in seen["opts"]   # JAXMEM_RUN_TIMEOUT's default
    assert "[measured: backend=cpu, host_syncs_at_line=3, host_syncs_total=3]" in res.output
    assert "ran on cpu, jax 0.10.2: h2d_transfers=0, host_syncs=3, compile_count=2, peak_rss=200 MiB" in res.output


@pytest.mark.slow
def test_run_with_the_real_verifier(files: Path):
    res = CliRunner().invoke(command, ["--run", str(files / "toy.py"), "--format", "json", "--show-possible"])
    doc = json.loads(res.output)
    finding = next(f for f in doc["findings"] if f["code"] == "JM101")
    # The loop reads x 100 times on the host: the verifier must see those syncs at line 4.
    assert finding["measured"]["host_syncs_at_line"] == 100, finding["measured"]
    assert finding["runtime"]["status"] == "confirmed" and finding["runtime"]["per_step"]["host_syncs"] == 1.0
    # `jnp.ones(3)` sends its fill value to the device on every step, which no rule flags: measured.
    (measured,) = [f for f in doc["findings"] if f["code"] != "JM101"]
    assert (measured["code"], measured["line"], measured["runtime"]["per_step"]["implicit_h2d_transfers"]) == \
        ("JM012", 3, 1.0)


def test_a_missing_path_is_an_error_not_zero_findings(tmp_path):
    from click.testing import CliRunner

    from jaxmem.evaluators.review.cli import command

    result = CliRunner().invoke(command, [str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "no such file or directory" in result.output
    assert "No findings" not in result.output
    good = tmp_path / "ok.py"
    good.write_text("import jax.numpy as jnp\nx = jnp.ones(3)\n")
    result = CliRunner().invoke(command, [str(tmp_path / "missing.py"), str(good)])
    assert result.exit_code == 2 and "No findings in 1 file" in result.output  # the rest is still reviewed


def test_possible_findings_are_shown_only_on_request(files: Path):
    """The toy loop (a JAX read in a loop that trains nothing) is a possible finding: hidden by
    default, with a line saying so; --show-possible shows it marked and it counts for the exit."""
    toy = str(files / "toy.py")
    quiet = run(toy)
    assert quiet.exit_code == 0
    assert "No findings in 1 file. 1 possible finding not shown (--show-possible shows it)." in quiet.output
    shown = run(toy, "--show-possible")
    assert shown.exit_code == 1
    assert ": JM101 [possible] `float(x.sum())`" in shown.output
    sarif = json.loads(run(toy, "--show-possible", "--format", "sarif").output)
    assert sarif["runs"][0]["results"][0]["properties"]["confidence"] == "possible"


def test_baseline_leaves_out_accepted_findings_and_shows_new_ones(files: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(files)
    written = run("bad.py", "--write-baseline", "base.json")
    assert written.exit_code == 0 and "Wrote 1 finding to base.json" in written.output
    again = run("bad.py", "--baseline", "base.json")
    assert again.exit_code == 0, again.output
    assert "1 finding left out: recorded in this baseline" in again.output
    # A new finding (another training loop that reads its loss) is reported; the accepted one is not.
    (files / "bad.py").write_text(BAD + "\n\ndef fit_again(w, xs):\n    for x in xs:\n"
                                        "        w, loss = step(w, x)\n        print(loss.item())\n    return w\n")
    new = run("bad.py", "--baseline", "base.json")
    assert new.exit_code == 1 and "loss.item()" in new.output and "float(loss)" not in new.output


def test_a_bad_baseline_file_names_itself_and_the_fix(files: Path):
    (files / "junk.json").write_text("{}")
    res = run(str(files / "bad.py"), "--baseline", str(files / "junk.json"))
    assert res.exit_code == 2 and "junk.json: not a jaxmem baseline" in res.output
    res = run(str(files / "bad.py"), "--baseline", str(files / "missing.json"))
    assert res.exit_code == 2 and "no such baseline file" in res.output
