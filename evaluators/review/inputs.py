"""Which files a batch reviews, and reading each one safely.

Directories are walked recursively; `.gitignore` files (in the tree and above it, up to the
repository root) and well-known tool folders are honoured. Files named explicitly are always
reviewed if they are Python or notebooks. Nothing here raises for bad input: every skipped
path comes back as a `Note`.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

from jaxmem.evaluators.review.finding import Note

PY_SUFFIXES = (".py", ".pyi", ".ipynb")
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", ".tox", ".nox",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "site-packages",
                       ".eggs", "build", "dist"})
BINARY_PROBE = 8192
TEST_DIRS = frozenset({"tests", "test"})
_TEST_NAME = re.compile(r"^(test_.*|.*_test|conftest)\.(py|ipynb)$")
TESTS_NOTE = ("test files not reviewed (tests/, conftest.py, and test_*.py or *_test.py files that hold tests or do not run as scripts); "
              "--include-tests or `include-tests = true` in [tool.jaxmem] reviews them")


def is_test_path(rel: str) -> bool:
    """A test file by the usual layout: under tests/ or test/, or named test_*.py, *_test.py, conftest.py."""
    parts = rel.replace("\\", "/").split("/")
    return any(p in TEST_DIRS for p in parts[:-1]) or bool(_TEST_NAME.match(parts[-1]))


# What makes a file a test: a test a runner collects (`def test_*`, `class Test*`), or a test
# framework's import (pytest, unittest, hypothesis, absltest, JAX's own test_util).
_TEST_CONTENT = re.compile(
    rb"^[ \t]*(async[ \t]+)?def[ \t]+test|^[ \t]*class[ \t]+Test"
    rb"|^[ \t]*(import|from)[ \t]+(pytest|unittest|hypothesis|absl\.testing|nose)\b|test_util",
    re.MULTILINE)
# What makes it a script: a `__main__` block, or a loop at the top level of the module (a helper
# module of a test suite defines things; at most it configures something at import).
_RUNS = re.compile(rb"^(if[ \t]+__name__[ \t]*==|for[ \t]|while[ \t])", re.MULTILINE)


def is_test_script(rel: str, path: str | Path) -> bool:
    """A file named like a test (test_*.py, *_test.py) outside any tests/ folder that holds no
    test and runs as a script: `test_resnet_cifar.py` timing a model on the test split. Such a
    file is reviewed like any script: what it runs is real use, and no test runner collects it.
    A notebook always runs its cells. Everything under tests/ or test/ stays a test suite's (its
    tools, fixtures and benchmarks serve the tests); unreadable files count as tests."""
    parts = rel.replace("\\", "/").split("/")
    if any(p in TEST_DIRS for p in parts[:-1]) or parts[-1].startswith("conftest."):
        return False
    path = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(2_000_000)
    except OSError:
        return False
    if _TEST_CONTENT.search(raw):
        return False
    return path.endswith(".ipynb") or _RUNS.search(raw) is not None


@dataclass
class Loaded:
    path: str
    text: str | None  # None when skipped (then `note` says why)
    note: Note | None = None


def _ancestor_specs(root: Path) -> list[tuple[Path, object]]:
    """`.gitignore` files above `root`, up to the enclosing repository's top."""
    specs = []
    for d in [root, *root.parents]:
        if d != root:
            spec = _spec_in(d)
            if spec is not None:
                specs.append((d, spec))
        if (d / ".git").exists():
            break
    return specs


def _spec_in(directory: Path):
    gi = directory / ".gitignore"
    if not gi.is_file():
        return None
    import pathspec  # ~0.1 s to import: only when a .gitignore is actually there

    try:
        return pathspec.GitIgnoreSpec.from_lines(gi.read_text(encoding="utf-8", errors="replace").splitlines())
    except Exception:  # a malformed pattern must not stop the batch; that file's rules are skipped
        return None


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, object]]) -> bool:
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(rel + "/" if is_dir else rel):
            return True
    return False


def _excluded(rel: str, name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def discover(paths: list[str], exclude: list[str] = (), respect_gitignore: bool = True,
             include_tests: bool = False) -> tuple[list[str], list[Note]]:
    """Expand paths into Python files and notebooks (sorted per directory), plus notes.

    Inside directories, test files are skipped unless `include_tests` (one note says how many);
    a file named explicitly, or a directory that is itself a tests folder, is always reviewed."""
    files: list[str] = []
    notes: list[Note] = []
    for given in paths:
        p = Path(given)
        if p.is_file():
            if p.suffix in PY_SUFFIXES:
                files.append(given)
            else:
                notes.append(Note(given, f"not a Python file or notebook ({', '.join(PY_SUFFIXES)}); skipped"))
            continue
        if not p.is_dir():
            notes.append(Note(given, "no such file or directory; skipped"))
            continue
        root = p.resolve()
        specs = _ancestor_specs(root) if respect_gitignore else []
        found_before = len(files)
        skip_tests = not include_tests and root.name not in TEST_DIRS
        tests_skipped = 0
        cache: dict[Path, object] = {}  # folder -> its .gitignore spec (or None)
        for dirpath, dirnames, filenames in os.walk(p):
            # os.walk follows no links, so a folder it enters is under `root` as written: its
            # place there is read from the walk's path, not resolved again (a resolve() costs an
            # lstat per path component, per folder and per file).
            here = root.joinpath(os.path.relpath(dirpath, p))
            local = list(specs)
            if respect_gitignore:
                # Each .gitignore between the root and here applies, relative to its own folder.
                cur = root
                for part in ("", *here.relative_to(root).parts):
                    cur = cur / part if part else cur
                    if cur not in cache:
                        cache[cur] = _spec_in(cur)
                    if cache[cur] is not None:
                        local.append((cur, cache[cur]))
            keep = []
            for name in sorted(dirnames):
                full = here / name
                if os.path.islink(full):
                    full = full.resolve()
                if not full.is_relative_to(root):
                    continue  # a link to a folder elsewhere (os.walk does not follow it anyway)
                rel = full.relative_to(root).as_posix()
                if name in SKIP_DIRS or _excluded(rel, name, list(exclude)) or _ignored(full, True, local):
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                if not name.endswith(PY_SUFFIXES):
                    continue
                full = here / name
                if os.path.islink(full):
                    full = full.resolve()
                if not full.is_relative_to(root):
                    # A symbolic link to a file outside the reviewed folder: not this tree's code.
                    notes.append(Note(os.path.join(dirpath, name), "a link to a file outside the reviewed folder; "
                                                                    "skipped (review its target by name to include it)"))
                    continue
                rel = full.relative_to(root).as_posix()
                if _excluded(rel, name, list(exclude)) or _ignored(full, False, local):
                    continue
                if skip_tests and is_test_path(rel) and not is_test_script(rel, full):
                    tests_skipped += 1
                    continue
                files.append(os.path.join(dirpath, name))
        if tests_skipped:
            notes.append(Note(given, f"{tests_skipped} {TESTS_NOTE}"))
        if len(files) == found_before:
            notes.append(Note(given, "no Python files or notebooks found (after .gitignore, excludes and test files)"))
    return files, notes


# A notebook's file is mostly its outputs (embedded plots, logs): max-file-size applies to its code
# cells (api.review_notebook), and the JSON itself may be this many times larger.
NOTEBOOK_FILE_FACTOR = 32


def read(path: str, max_bytes: int) -> Loaded:
    """The file's text, or a note saying why it is skipped (too big, binary, not UTF-8)."""
    try:
        size = os.path.getsize(path)
        limit = max_bytes * NOTEBOOK_FILE_FACTOR if path.endswith(".ipynb") else max_bytes
        if size > limit:
            what = "notebook file" if limit != max_bytes else "file"
            return Loaded(path, None, Note(path, f"{size / 1e6:.1f} MB is over the {limit / 1e6:.1f} MB limit for a {what} "
                                                 f"(max-file-size{' x ' + str(NOTEBOOK_FILE_FACTOR) if limit != max_bytes else ''}); skipped"))
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return Loaded(path, None, Note(path, f"cannot read: {exc.strerror or exc}; skipped"))
    return decode(path, data)


def decode(path: str, data: bytes) -> Loaded:
    if b"\x00" in data[:BINARY_PROBE]:
        return Loaded(path, None, Note(path, "binary file (contains NUL bytes); skipped"))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Loaded(path, None, Note(path, f"not UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); skipped"))
    if not text.strip():
        return Loaded(path, text, Note(path, "empty file; nothing to review"))
    target = _symlink_text(text)
    if target is not None:
        return Loaded(path, None, Note(path, f"holds only the path `{target}`: a git symbolic link checked out as a "
                                             f"text file (core.symlinks off); skipped, the file it names is reviewed "
                                             f"where it is"))
    return Loaded(path, text)


_LINK = re.compile(r"^(\.{1,2}/)?[\w.\-/]+\.(py|ipynb)$")


def _symlink_text(text: str) -> str | None:
    """The target when the whole file is one relative path to a Python file or notebook, as git
    writes a symbolic link where it cannot make one (`../../examples/01_walkthrough.ipynb`)."""
    t = text.strip()
    if "\n" in t or "/" not in t or len(t) > 300 or not _LINK.match(t):
        return None
    return t
