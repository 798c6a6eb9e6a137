"""Documentation stays true: every setting and every command is in the README, and the quick start
is the two Makefile targets CI runs."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_settings_table_is_the_generated_one():
    from jaxmem.core.settings import settings_table

    assert settings_table() in README, "regenerate it: jaxmem settings --markdown"


def test_settings_are_read_only_by_the_settings_model():
    """No module reads a setting of its own from the environment (one model, read at start-up).
    Allowed: the model itself, the child environments the verifier builds (scrubbed copies), and
    the error handler, which must work when reading the settings failed."""
    allowed = {"core/settings.py", "core/errors.py", "evaluators/verify/sandbox.py", "evaluators/verify/runner.py",
               "app/webui/shared.py"}
    offenders = []
    for path in [*ROOT.glob("app/**/*.py"), *ROOT.glob("core/*.py"), *ROOT.glob("ingest/*.py"),
                 *ROOT.glob("evaluators/*/*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("benchmarks/"):  # tools that build a child's environment
            continue
        text = path.read_text(encoding="utf-8")
        if rel not in allowed and re.search(r"os\.environ(\.get|\[)|os\.getenv", text):
            offenders.append(rel)
    assert not offenders, offenders


def test_every_cli_command_is_documented():
    import click

    from jaxmem.app.cli import main

    for name in main.list_commands(click.Context(main)):
        assert f"jaxmem {name}" in README, name


def test_the_readme_is_a_guide_and_its_links_exist():
    """The README stays a user's guide (the measurement history has its own page), and every
    docs/ or benchmarks/ path it names exists."""
    assert len(README.splitlines()) <= 250
    for rel in set(re.findall(r"\b((?:docs|benchmarks|corpus)/[\w./-]*\w)(?![-<\w])", README)):
        assert (ROOT / rel).exists(), rel
    assert "github.com/jaxmem" not in README


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [l.split("#")[0].strip() for l in block.strip().splitlines()]
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci/run").read_text()
    assert "make test" in ci
