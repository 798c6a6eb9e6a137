"""jaxmem review as a pre-commit hook, tried the way a user adopts it (`pre-commit try-repo`
against a sample repository): it flags the anti-pattern, passes clean code, and its environment
is the light base install (no torch, jax or Chroma). pip installs that environment from the
package index, as pre-commit always does."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

CLEAN = "import jax.numpy as jnp\n\nx = jnp.ones(3) * 2\n"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def test_try_repo_flags_the_sample_and_installs_no_heavy_stack(tmp_path: Path):
    pre_commit = Path(sys.executable).with_name("pre-commit")
    sample = tmp_path / "sample"
    sample.mkdir()
    git(sample, "init", "-q")
    # A rule whose record on unseen code shows its findings as sure (the hook shows only those).
    shutil.copy(ROOT / "tests" / "review" / "fixtures" / "JM204" / "bad_removed_apis.py", sample / "train.py")
    (sample / "ok.py").write_text(CLEAN)
    git(sample, "add", "train.py", "ok.py")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("JAXMEM_", "VIRTUAL_ENV"))},
           "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}

    def try_repo(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(pre_commit), "try-repo", str(ROOT), "jaxmem-review", "--files", *files],
                              cwd=sample, env=env, capture_output=True, text=True, timeout=900)

    bad = try_repo("train.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "train.py:7:10: JM204" in bad.stdout
    ok = try_repo("ok.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # try-repo keeps its environment in a temporary store: install the hook the way a team does
    # (.pre-commit-config.yaml at a commit of this repository) to look inside its environment.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    (sample / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {head}\n  hooks:\n  - id: jaxmem-review\n")
    installed_run = subprocess.run([str(pre_commit), "run", "--files", "ok.py"], cwd=sample, env=env,
                                   capture_output=True, text=True, timeout=900)
    assert installed_run.returncode == 0, installed_run.stdout + installed_run.stderr
    (hook_env,) = [p for p in (tmp_path / "cache").glob("repo*/py_env-*") if p.is_dir()]
    installed = {p.name.split("-")[0].lower() for p in hook_env.glob("lib/python*/site-packages/*")}
    assert "jaxmem" in installed and "pydantic_settings" in installed
    assert not installed & {"torch", "jax", "jaxlib", "chromadb", "streamlit", "langchain", "numpy"}, installed
    # The light install says what a chat command needs instead of failing with a traceback.
    ask = subprocess.run([str(hook_env / "bin" / "jaxmem"), "ask", "Why does JAX take 75% of my GPU?"],
                         capture_output=True, text=True, env=env, cwd=sample, timeout=120)
    assert ask.returncode == 2 and "pip install 'jaxmem[chat]'" in ask.stderr and "Traceback" not in ask.stderr
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
