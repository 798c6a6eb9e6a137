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

BAD = "import jax.numpy as jnp\nfor i in range(100):\n    x = jnp.ones(3)\n    print(float(x.sum()))\n"
CLEAN = "import jax.numpy as jnp\nx = jnp.ones(3)\nprint(float(x.sum()))\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


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
    assert res.output.startswith(f"{files / 'bad.py'}:4:11: JM101 ")
    assert res.output.rstrip().endswith("Found 1 finding (1 warning) in 1 file.")


def test_stdin_is_pasted_code():
    res = run("-", input=BAD)
    assert res.exit_code == 1 and res.output.startswith("<stdin>:4:11: JM101")


def test_formats(files: Path):
    doc = json.loads(run(str(files), "--format", "json").output)
    assert doc["summary"]["findings"] == 1 and doc["summary"]["files"] == 2
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

    def fake_runner(path):
        seen["path"] = path
        return {"script": path, "ok": True, "backend": "cpu", "jax": "0.10.2", "host_syncs": 3,
                "h2d_transfers": 0, "compile_count": 2, "peak_rss": 200 * 2**20,
                "host_sync_lines": [{"line": 4, "source": "print(float(x.sum()))", "count": 3}]}

    monkeypatch.setattr(review_cli, "runner", lambda: fake_runner)
    res = run("--run", str(files / "bad.py"))
    assert seen["path"] == str(files / "bad.py")
    assert "[measured: backend=cpu, host_syncs_at_line=3, host_syncs_total=3]" in res.output
    assert "ran on cpu, jax 0.10.2: h2d_transfers=0, host_syncs=3, compile_count=2, peak_rss=200 MiB" in res.output


@pytest.mark.slow
def test_run_with_the_real_verifier(files: Path):
    res = CliRunner().invoke(command, ["--run", str(files / "bad.py"), "--format", "json"])
    doc = json.loads(res.output)
    (finding,) = doc["findings"]
    # The loop reads x 100 times on the host: the verifier must see those syncs at line 4.
    assert finding["measured"]["host_syncs_at_line"] == 100, finding["measured"]


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
