"""Put a reading's vendored files back from git mirrors (they are git-ignored, never committed).

    python benchmarks/review/restore.py benchmarks/review/unseen-2026-12y [--mirrors /work/.mirror]

For every `repository:`/`commit:` pair in the reading's SOURCES.txt, finds the mirror of that
repository (`<mirrors>/<owner>+<name>/...`, a bare git directory as the fetch tool leaves it), and
writes each FILES.txt (and EXTRA.txt, where present) path of that repository, byte for byte from the recorded commit, with the
licence file beside it. A repository with no mirror, or whose mirror lacks the commit, is named and
skipped; the files already there are left alone. Prints one line per repository.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def sources(reading: Path) -> list[dict]:
    out, cur = [], {}
    for line in (reading / "SOURCES.txt").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key == "repository":
            cur = {"repository": value.strip()}
            out.append(cur)
        elif key.strip() == "commit" and cur:
            cur["commit"] = value.strip().split()[0] if value.strip() else ""
        elif key.strip() == "licence_file" and cur:
            # `LICENSE, LICENSE-APACHE`: a dual-licensed repository lists both files
            # `licence_file: none`: a repository read in place without a licence file
            # (`none (a note in parentheses)`: still none; the note's words are no file names)
            text = value.strip()
            cur["licence_files"] = [] if text.split(" ", 1)[0] == "none" else [
                f for f in text.replace(",", " ").split() if f]
    return out


def git_dir(mirrors: Path, slug: str) -> Path | None:
    base = mirrors / slug.replace("/", "+")
    if not base.exists():
        return None
    if (base / "HEAD").exists():
        return base
    found = sorted(p.parent for p in base.rglob("HEAD") if (p.parent / "objects").is_dir())
    return found[0] if found else None


def show(gd: Path, commit: str, path: str) -> bytes | None:
    r = subprocess.run(["git", f"--git-dir={gd}", "show", f"{commit}:{path}"], capture_output=True)
    return r.stdout if r.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reading", type=Path)
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = ap.parse_args(argv)
    files = defaultdict(list)
    # EXTRA.txt (readings from 12zzzzc on) lists the requirement files vendored beside the code
    # (pyproject.toml, requirements*.txt, ...): not reviewed files, but what pins.py reads.
    for listing in ("FILES.txt", "EXTRA.txt"):
        path = args.reading / listing
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            folder, _, rel = line.partition("/")
            if rel:
                files[folder].append(rel)
    missing = 0
    for src in sources(args.reading):
        slug = "/".join(src["repository"].rstrip("/").split("/")[-2:])
        folder = slug.replace("/", "__")
        gd = git_dir(args.mirrors, slug)
        if gd is None:
            print(f"{slug}: no mirror under {args.mirrors}; fetch github:{slug} first")
            missing += 1
            continue
        commit = src.get("commit", "HEAD")
        wanted = files.get(folder, [])
        wanted = [*wanted, *src.get("licence_files", [])]
        written = absent = 0
        for rel in wanted:
            data = show(gd, commit, rel)
            if data is None:
                absent += 1
                continue
            out = args.reading / folder / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            written += 1
        missing += bool(absent)
        print(f"{slug}: {written} written, {absent} not in {commit[:7]}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
