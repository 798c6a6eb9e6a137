#!/usr/bin/env python3
"""Overlap check for the sealed-2026-12 question set (standard library + pyyaml only).

Checks every item in dev.yaml and sealed.yaml against the project's own material (corpus/,
evaluators/, benchmarks/ other than this folder, and the rest of the repository's text files,
skipping .git, virtualenvs and caches):
  1. URL overlap: the item's normalised thread URL appears in project text.
  2. Reference overlap: "owner/repo#N", "owner/repo/issues/N", ".../pull/N" or ".../discussions/N"
     for the item's repository and number appears in project text (google/jax == jax-ml/jax).
  3. Content overlap: a distinctive phrase of the question (a run of 10 consecutive words of its
     prose, code spans removed) appears in project text; items sharing >= 2 such 10-word runs
     are counted as overlaps.
and within the set:
  4. one url per split (a url in both files), unique ids, translations point at an original
     with the same url/split, and the split rule holds for every item.
Prints each overlap found and, last, the total count of overlaps (must be 0).
"""
import hashlib
import os
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]          # .../benchmarks/questions/sealed-2026-12 -> repository root
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".ruff_cache",
             ".hypothesis", ".import_linter_cache", ".mypy_cache", ".pytest_cache"}
TEXT_EXT = {".yaml", ".yml", ".md", ".txt", ".json", ".jsonl", ".py", ".rst", ".toml", ".csv",
            ".html", ".cfg", ".ini", ".sh", ""}
N_WORDS = 10
MIN_SHARED = 2

URL_RX = re.compile(r"https?://(?:www\.)?github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"
                    r"/(?:issues|pull|discussions)/\d+", re.I)
REF_RX = re.compile(r"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:#|/issues/|/pull/|/discussions/)(\d+)\b")
ITEM_RX = re.compile(r"^https://github\.com/([^/]+/[^/]+)/(issues|pull|discussions)/(\d+)$")


def canon_repo(r):
    r = r.lower()
    return "jax-ml/jax" if r == "google/jax" else r


def tidy_url(u):
    """The form an item url must already have: no anchor/query, no trailing slash, jax-ml/jax."""
    u = u.strip()
    u = re.split(r"[#?]", u, maxsplit=1)[0].rstrip("/")
    return re.sub(r"github\.com/google/jax/", "github.com/jax-ml/jax/", u, flags=re.I)


def norm_url(u):
    """Comparison key (case-insensitive owner/repo)."""
    u = u.strip()
    u = re.split(r"[#?]", u, maxsplit=1)[0]
    u = u.rstrip("/.,;:)")
    u = re.sub(r"^http://", "https://", u)
    u = u.replace("://www.github.com/", "://github.com/")
    m = re.match(r"^https://github\.com/([^/]+/[^/]+)(/.*)?$", u, re.I)
    if m:
        u = "https://github.com/" + canon_repo(m.group(1)) + (m.group(2) or "")
    return u.lower()


CODE_TOKEN = re.compile(r"[_(){}\[\]=<>/\\]|\.\w")


def words(text):
    """Prose words only: code spans and code-like tokens (identifiers, paths, calls) dropped."""
    text = re.sub(r"`[^`]*`", " ", text)
    out = []
    for tok in text.lower().split():
        tok = tok.strip(".,;:!?\"'()[]")
        if not tok or CODE_TOKEN.search(tok):
            continue
        out.extend(re.findall(r"[a-z0-9']+", tok))
    return out


def shingles(ws, n=N_WORDS):
    return {" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)}


def project_files():
    own = HERE
    for dirpath, dirnames, filenames in os.walk(ROOT):
        p = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and (p / d).resolve() != own]
        for f in filenames:
            fp = p / f
            if fp.suffix.lower() in TEXT_EXT:
                yield fp


def main():
    items = []
    for name in ("sealed.yaml", "dev.yaml"):
        data = yaml.safe_load((HERE / name).read_text(encoding="utf-8")) or []
        for it in data:
            it["_file"] = name
            items.append(it)

    urls, refs, grams = set(), set(), set()
    nfiles = 0
    for fp in project_files():
        try:
            t = fp.read_text(encoding="utf-8", errors="ignore")
        except OSError:
            continue
        nfiles += 1
        for u in URL_RX.findall(t):
            urls.add(norm_url(u))
        for r, n in REF_RX.findall(t):
            refs.add((canon_repo(r), n))
        ws = words(t)
        for i in range(len(ws) - N_WORDS + 1):
            grams.add(hash(" ".join(ws[i:i + N_WORDS])))

    overlaps = 0
    originals = [i for i in items if not i.get("translated_from")]
    for it in items:
        u = norm_url(it["url"])
        if tidy_url(it["url"]) != it["url"]:
            print(f"NOT-NORMALISED {it['id']}: {it['url']}")
            overlaps += 1
        if u in urls:
            print(f"URL-OVERLAP {it['id']}: {u}")
            overlaps += 1
            continue
        m = ITEM_RX.match(it["url"])
        if m and (canon_repo(m.group(1)), m.group(3)) in refs:
            print(f"REF-OVERLAP {it['id']}: {m.group(1)}#{m.group(3)}")
            overlaps += 1
    for it in originals:
        shared = [g for g in shingles(words(it["q"])) if hash(g) in grams]
        if len(shared) >= MIN_SHARED:
            print(f"CONTENT-OVERLAP {it['id']}: {len(shared)} shared {N_WORDS}-word runs, e.g. '{shared[0]}'")
            overlaps += 1

    # within-set checks
    ids, url_split = {}, {}
    for it in items:
        if it["id"] in ids:
            print(f"DUPLICATE-ID {it['id']}")
            overlaps += 1
        ids[it["id"]] = it
        want = "sealed" if int(hashlib.sha1(it["url"].encode()).hexdigest(), 16) % 3 != 0 else "dev"
        if it["split"] != want or it["_file"] != f"{want}.yaml":
            print(f"SPLIT-RULE {it['id']}: split={it['split']} file={it['_file']} rule={want}")
            overlaps += 1
        url_split.setdefault(it["url"], set()).add(it["split"])
    for u, s in url_split.items():
        if len(s) > 1:
            print(f"URL-IN-BOTH-SPLITS {u}")
            overlaps += 1
    seen_orig_urls = {}
    for it in originals:
        seen_orig_urls.setdefault(it["url"], []).append(it["id"])
    for _u, l in seen_orig_urls.items():
        if len(l) > 1:
            print(f"NOTE same thread, several originals (allowed only for distinct questions): {l}")
    for it in items:
        src = it.get("translated_from")
        if src:
            o = ids.get(src)
            if not o or o.get("translated_from") or o["url"] != it["url"] or o["split"] != it["split"]:
                print(f"BAD-TRANSLATION {it['id']} -> {src}")
                overlaps += 1

    print(f"scanned {nfiles} project files; {len(urls)} thread urls, {len(refs)} repo#number refs, "
          f"{len(grams)} {N_WORDS}-word runs")
    print(f"checked {len(items)} items ({len(originals)} originals)")
    print(f"overlaps: {overlaps}")
    return 0 if overlaps == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
