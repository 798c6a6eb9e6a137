"""The real-code benchmark stays judged: every finding the reviewer makes on the vendored
repositories has a hand label, so a rule change that adds findings cannot go unread."""
from __future__ import annotations

from pathlib import Path

from tests.helpers import load_benchmark

realcode = load_benchmark("review/realcode/run.py")


def test_every_finding_on_vendored_code_is_labelled():
    labels = {realcode.key(x["path"], x.get("cell"), x["line"], x["code"])
              for x in realcode.load_items(realcode.HERE / "labels.yaml")}
    assert all(x["label"] in realcode.LABELS for x in realcode.load_items(realcode.HERE / "labels.yaml"))
    unlabeled = []
    for repo in realcode.repos():
        for f in realcode.review([str(repo)], jobs=1).findings:
            rel = Path(f.path).resolve().relative_to(realcode.HERE).as_posix()
            if realcode.key(rel, f.cell, f.line, f.code) not in labels:
                unlabeled.append(f"{rel}:{f.cell or ''}:{f.line} {f.code}")
    assert not unlabeled, "label these findings in benchmarks/review/realcode/labels.yaml: " + ", ".join(unlabeled)


def test_recall_cases_name_vendored_files_and_real_codes():
    from jaxmem.evaluators.review.registry import all_rules

    codes = {r.code for r in all_rules()}
    for case in realcode.load_items(realcode.HERE / "recall.yaml"):
        assert (realcode.HERE / case["path"]).is_file(), case["id"]
        assert set(case["codes"]) <= codes, case["id"]
