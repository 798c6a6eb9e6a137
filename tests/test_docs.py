"""Documentation stays true: every setting and every command is in the README, and the quick start
is the two Makefile targets CI runs."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_environment_setting_is_documented():
    source = (ROOT / "ingest/config.py").read_text(encoding="utf-8")
    names = set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', source))
    assert names, "no settings found"
    missing = sorted(n for n in names if f"`{n}`" not in README)
    assert not missing, f"undocumented settings: {missing}"


def test_every_cli_command_is_documented():
    import click

    from app.cli import main

    for name in main.list_commands(click.Context(main)):
        assert f"jaxmem {name}" in README, name


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [l.split("#")[0].strip() for l in block.strip().splitlines()]
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci/run").read_text()
    assert "make test" in ci


def test_layering_front_ends_do_not_reach_chroma_and_lower_layers_do_not_import_upper_ones():
    import ast

    def imports(path):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from (a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield node.module

    for path in ROOT.glob("**/*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv", "tests/", "corpus/", "build/")):
            continue
        mods = set(imports(path))
        if rel != "ingest/store.py":
            assert not {m for m in mods if m.split(".")[0] in ("chromadb", "langchain_chroma")}, rel
        if rel.startswith("ingest/"):
            assert not {m for m in mods if m.split(".")[0] in ("app", "evaluators")}, rel
        if rel.startswith("evaluators/") and not rel.startswith("evaluators/retrieval/") and not rel.startswith("evaluators/bench/"):
            assert not {m for m in mods if m.split(".")[0] == "app"}, rel
