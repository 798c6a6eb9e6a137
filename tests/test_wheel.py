"""The built wheel works on its own: installed into a fresh virtual environment outside the clone,
offline, `jaxmem ingest`, `ask`, `review` and `verify` work from the corpus inside the package.

The wheel is built from a copy of only what a source distribution has (pyproject, README, the
package folders), so neither tests/ nor benchmarks/ can leak in. Its dependencies are not
downloaded: the fresh environment sees this environment's third-party packages through a .pth
file (the same versions pip would install), never the checkout or the editable install's finder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("app", "core", "ingest", "evaluators", "corpus")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("sdist") / "jaxmem"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(ROOT / name, src / name)
    for name in PACKAGE_FOLDERS:
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(src)], check=True, capture_output=True, text=True, timeout=300)
    (whl,) = out.glob("jaxmem-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("fresh-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # Third-party packages only: a .pth line adds a folder to sys.path without running the .pth
    # files inside it, so the editable install's finder (which maps jaxmem.* to the checkout) stays off.
    (site / "zz_third_party.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--no-deps",
                    "--no-index", "-q", str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    return env


def test_the_wheel_holds_one_namespace_and_the_corpus_but_no_benchmark_input(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"jaxmem", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert not [n for n in names if "realcode" in n or "benchmarks" in n or n.startswith("tests")]
    cards = [n for n in names if n.startswith("jaxmem/corpus/cards/") and n.endswith(".md")]
    assert len(cards) == len(list((ROOT / "corpus" / "cards").glob("*/*.md")))
    for needed in ("jaxmem/corpus/topics.yaml", "jaxmem/corpus/languages.yaml", "jaxmem/corpus/evidence/cpu.json",
                   "jaxmem/corpus/scope/out_of_scope.yaml", "jaxmem/app/strings.yaml",
                   "jaxmem/core/migrations/versions/0001_feedback_and_evidence.py", "jaxmem/app/webui/pages/card.py"):
        assert needed in names, needed
    assert [n for n in names if n.startswith("jaxmem/corpus/vectors/") and n.endswith(".npz")]
    assert len([n for n in names if n.startswith("jaxmem/corpus/snippets/") and n.endswith("before.py")]) == \
        len(list((ROOT / "corpus" / "snippets").glob("*/before.py")))
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Dist: pydantic-settings" in meta
    assert "Requires-Dist: torch" not in meta, "torch comes through sentence-transformers, in the st extra only"


def run(venv: Path, home: Path, *args: str, stdin: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAXMEM_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), JAXMEM_DATA_DIR=str(home / "data"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    return subprocess.run([str(venv / "bin" / "jaxmem"), *args], cwd=home, env=env, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def test_ingest_ask_review_verify_from_the_installed_wheel(venv, tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "from jaxmem.core.layout import bundled_corpus; "
                            "print(bundled_corpus())"], cwd=home, capture_output=True, text=True, check=True)
    corpus = Path(where.stdout.strip())
    assert corpus.is_relative_to(venv) and (corpus / "topics.yaml").is_file(), corpus

    ingest = run(venv, home, "ingest", "--json")
    assert ingest.returncode == 0, ingest.stderr
    stats = json.loads(ingest.stdout)
    assert stats["cards"] == len(list((ROOT / "corpus" / "cards").glob("*/*.md"))) and stats["chunks"] > 1000

    ask = run(venv, home, "ask", "Why does JAX take 75% of my GPU memory at start-up?", "--json")
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout)
    assert answer["citations"][0]["card"] in ("gpu-preallocation", "gpu-memory-fraction")
    assert "github.com/jaxmem" not in ask.stdout
    assert answer["citations"][0]["url"].startswith("card?topic=")

    shutil.copy(ROOT / "tests" / "review" / "fixtures" / "JM204" / "bad_removed_apis.py", home / "train.py")
    review = run(venv, home, "review", "train.py", "--format", "json")
    assert review.returncode == 1, review.stderr  # findings: exit 1
    assert {f["code"] for f in json.loads(review.stdout)["findings"]} >= {"JM204"}

    verify = run(venv, home, "verify", "buffer-donation", "--json", "--repeats", "1")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    (record,) = json.loads(verify.stdout)["records"]
    assert record["topic"] == "buffer-donation" and record["verdict"] in ("confirmed", "not measurable here")

    # The installed corpus is package data: writers refuse it and say where to write instead.
    embed = run(venv, home, "corpus", "embed")
    assert embed.returncode == 2 and "installed package data" in embed.stderr and "JAXMEM_CORPUS_DIR" in embed.stderr
    assert "Traceback" not in embed.stderr
