"""`jaxmem corpus check`: the real corpus passes; each kind of defect is reported precisely."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxmem.ingest.cards import check_corpus

ROOT = Path(__file__).resolve().parents[2]


def messages(root: Path) -> list[str]:
    return [str(p) for p in check_corpus(root)]


def test_real_corpus_passes_the_check():
    problems = messages(ROOT / "corpus")
    assert problems == []


def test_real_corpus_has_every_topic_in_every_language():
    import yaml

    topics = yaml.safe_load((ROOT / "corpus/topics.yaml").read_text())
    langs = yaml.safe_load((ROOT / "corpus/languages.yaml").read_text())["languages"]
    files = list((ROOT / "corpus/cards").glob("*/*.md"))
    # Topic ids are an interface: the first 23 stay forever; topics are added, never renamed.
    first = {"transfer-guard", "explicit-device-put", "implicit-host-sync", "batch-transfers", "prefetch-to-device",
             "jit-compilation", "async-dispatch", "buffer-donation", "in-place-updates", "gpu-preallocation",
             "gpu-memory-fraction", "gpu-allocator", "multi-process-gpu", "memory-fragmentation",
             "gradient-checkpointing", "memory-profiling", "live-arrays-cleanup", "scan-over-loops",
             "sharding-memory", "host-offloading", "tpu-memory-layout", "mixed-precision", "oom-debugging"}
    assert first <= set(topics) and len(topics) >= 37 and len(langs) == 10
    assert len(files) == len(topics) * len(langs)


def test_seeds_are_the_unmodified_user_documents():
    shared = ROOT.parent / "shared" / "seeds"
    if not shared.exists():
        pytest.skip("shared/seeds is not beside this checkout")
    for seed in shared.glob("*.txt"):
        assert (ROOT / "corpus/seeds" / seed.name).read_bytes() == seed.read_bytes()


def test_mini_corpus_is_clean(mini_corpus):
    assert messages(mini_corpus) == []


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"fixture text {old!r} not found"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


CASES = [
    # (file, old, new, expected fragment of the message)
    ("cards/buffer-donation/en.md", "applies_to: [cpu, gpu, tpu]", "applies_to: [cpu, fpga]", "en.md: applies_to.1:"),
    ("cards/buffer-donation/en.md", "title: Donate", "titel: Donate", "en.md: title: Field required"),
    ("cards/buffer-donation/sv.md", "related: [gpu-preallocation]", "related: [gpu-prealloc]", "sv.md: related: unknown topic id 'gpu-prealloc'"),
    ("cards/buffer-donation/sv.md", "id: buffer-donation", "id: buffer-donations", "sv.md: id: unknown topic id 'buffer-donations'"),
    ("cards/buffer-donation/sv.md", "donate_argnums=0)\n```", "donate_argnums=(0,))\n```", "sv.md: body: code blocks differ from the English version"),
    ("cards/gpu-preallocation/sv.md", "gpu_memory_allocation.html", "gpu_memory.html", "sv.md: sources: sources differ"),
    ("cards/buffer-donation/en.md", "../gpu-preallocation/en.md", "../gpu-prealocation/en.md", "en.md: body: dead internal link '../gpu-prealocation/en.md'"),
    ("cards/buffer-donation/en.md", "## Why it works", "## Why this works", "en.md: body: sections must be"),
    ("cards/buffer-donation/en.md", "snippets: []", "snippets: [buffer-donation]", "en.md: snippets: no snippet pair corpus/snippets/buffer-donation/"),
    ("cards/buffer-donation/en.md", "lang: en", "lang: xx", "en.md: lang: unknown language 'xx'"),
    ("cards/buffer-donation/en.md", '  - "What does donate_argnums actually do?"\n', "", "en.md: questions: 4 question(s); at least 5 needed"),
    ("cards/buffer-donation/sv.md", '"Vad gör donate_argnums egentligen?"', '"Vad gör donate_argnums egentligen?"\n  - "vad gör donate_argnums egentligen?"',
     "sv.md: questions: Value error, questions repeat"),
    ("cards/gpu-preallocation/en.md", '"What does XLA_PYTHON_CLIENT_PREALLOCATE=false change?"', '"Why?"', "en.md: questions: Value error, each question is one line"),
    ("seeds/audit.yaml", "verdict: inaccurate", "verdict: wrong", "audit.yaml: claims[0].verdict: Input should be 'accurate'"),
]


@pytest.mark.parametrize("rel,old,new,expected", CASES, ids=[c[3][:40] for c in CASES])
def test_defects_are_reported_with_file_field_and_problem(mini_corpus, rel, old, new, expected):
    edit(mini_corpus / rel, old, new)
    found = messages(mini_corpus)
    assert any(expected in m for m in found), found


def test_missing_language_version_is_reported(mini_corpus):
    (mini_corpus / "cards/gpu-preallocation/sv.md").unlink()
    assert any("missing sv version of gpu-preallocation" in m for m in messages(mini_corpus))


def test_snippet_pair_that_does_not_parse_or_lacks_a_manifest(mini_corpus):
    pair = mini_corpus / "snippets" / "buffer-donation"
    pair.mkdir(parents=True)
    (pair / "before.py").write_text("def f(:\n")
    (pair / "after.py").write_text("x = 1\n")
    found = messages(mini_corpus)
    assert any("before.py: line 1: does not parse" in m for m in found), found
    assert any("manifest.yaml: file: missing (a pair needs before.py, after.py, manifest.yaml)" in m for m in found), found


def test_corpus_check_cli_exit_status(mini_corpus):
    cmd = [sys.executable, "-m", "jaxmem.app.cli", "corpus", "check", "--path", str(mini_corpus)]
    ok = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    edit(mini_corpus / "cards/buffer-donation/sv.md", "related: [gpu-preallocation]", "related: [nope]")
    bad = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1
    assert "sv.md: related: unknown topic id 'nope'" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


SCOPE = """\
- id: cooking-recipes
  text:
    en: "Cooking and baking, recipes, ingredients and kitchen techniques."
    sv: "Matlagning och bakning, recept, ingredienser och tekniker i köket."
  questions:
    en: ["How long should I boil an egg for a runny yolk?"]
    sv: ["Hur länge ska ett ägg koka för att gulan ska vara lös?"]
"""


def test_an_everyday_area_carries_questions_without_a_name_but_in_every_language(mini_corpus):
    # Everyday areas are declined with the generic message (no name, no docs to point to), and
    # their questions show retrieval what they look like in each card language.
    (mini_corpus / "scope").mkdir()
    path = mini_corpus / "scope" / "out_of_scope.yaml"
    path.write_text(SCOPE, encoding="utf-8")
    assert messages(mini_corpus) == []
    path.write_text(SCOPE.replace('    sv: ["Hur länge', '    xx: ["Hur länge'), encoding="utf-8")
    found = messages(mini_corpus)
    assert any("out_of_scope.yaml: [0].questions: missing languages: sv" in m for m in found), found
