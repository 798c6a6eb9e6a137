"""`jaxmem review --fix / --diff / --unsafe-fixes / --fix-interval`: exit statuses, what is
written, the [*] marks, JSON, bad input, and `--fix --run` with the run faked and real."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmem.evaluators.review import cli as review_cli
from jaxmem.evaluators.review.cli import command

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
TIMING = (CASES / "JM701" / "waits.py").read_text()              # safe fixes only
# An unsafe fix only; JM301's record on unseen code shows its findings as possible
# (calibration.py), so the tests that use it review with --show-possible.
SWEEP = (CASES / "JM301" / "unsafe_loop_variable.py").read_text()
CLEAN = "import jax.numpy as jnp\nx = jnp.ones(3)\n"


# Tiers, exit status and formats are exercised with a finding the model proves (JM101 in a
# training loop), apart from the current record on unseen code (conftest.py).
pytestmark = pytest.mark.usefixtures("calibration_apart")


def run(*args, input=None):
    return CliRunner().invoke(command, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "timing.py").write_text(TIMING)
    (tmp_path / "sweep.py").write_text(SWEEP)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_review_marks_fixable_findings(tree: Path):
    res = run(str(tree), "--show-possible")
    assert res.exit_code == 1
    assert "JM701 [*] this timing stops" in res.output
    assert "JM301 [*]" not in res.output                       # unsafe: not marked without --unsafe-fixes
    assert "[*] 3 fixable with `--fix` (1 more with `--unsafe-fixes`" in res.output
    res = run(str(tree), "--show-possible", "--unsafe-fixes")
    assert "JM301 [*]" in res.output and "[*] 4 fixable with `--fix --unsafe-fixes`" in res.output
    doc = json.loads(run(str(tree), "--show-possible", "--format", "json").output)
    assert doc["version"] == 3 and doc["summary"]["fixable"] == {"safe": 3, "unsafe": 1}
    assert {f["fix_applicability"] for f in doc["findings"]} == {"safe", "unsafe"}
    sarif = json.loads(run(str(tree), "--show-possible", "--format", "sarif").output)
    assert {r["properties"].get("fixApplicability") for r in sarif["runs"][0]["results"]} == {"safe", "unsafe"}


def test_diff_writes_nothing_and_exits_1(tree: Path):
    before = {p.name: p.read_text() for p in tree.iterdir()}
    res = run(str(tree), "--show-possible", "--diff")
    assert res.exit_code == 1
    assert "+    jax.block_until_ready((y, z))" in res.output and "--- a/" in res.output
    assert "Would fix 3 findings (3 safe) in 1 file" in res.output
    assert "1 more fix available with --unsafe-fixes" in res.output
    assert "step(w, x, lr)" not in res.output                  # the unsafe one is not in the diff
    assert {p.name: p.read_text() for p in tree.iterdir()} == before
    res = run(str(tree), "--show-possible", "--diff", "--unsafe-fixes")
    assert res.exit_code == 1 and "step(w, x, lr)" in res.output
    assert run(str(tree / "clean.py"), "--diff").exit_code == 0


def test_fix_writes_safe_fixes_and_exits_by_what_is_left(tree: Path):
    res = run(str(tree), "--show-possible", "--fix")
    assert res.exit_code == 1                                  # the unsafe JM301 is left
    assert "Fixed 3 findings (3 safe) in 1 file" in res.output
    assert "jax.block_until_ready((y, z))" in (tree / "timing.py").read_text()
    assert (tree / "sweep.py").read_text() == SWEEP
    assert "sweep.py:13:16: JM301" in res.output               # what is left is reported
    res = run(str(tree), "--show-possible", "--fix", "--unsafe-fixes")
    assert res.exit_code == 0 and "Fixed 1 finding (1 unsafe)" in res.output
    assert "step(w, x, lr)" in (tree / "sweep.py").read_text()
    # Idempotent: nothing left to fix, nothing written.
    fixed = {p.name: p.read_text() for p in tree.iterdir()}
    res = run(str(tree), "--show-possible", "--fix", "--unsafe-fixes")
    assert res.exit_code == 0 and "Nothing fixed." in res.output
    assert {p.name: p.read_text() for p in tree.iterdir()} == fixed


def test_a_file_that_cannot_be_written_is_one_error_line(tree: Path, monkeypatch):
    from jaxmem.evaluators.review.fixes import session

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(session.Path, "write_text", refuse)
    res = CliRunner().invoke(command, [str(tree / "timing.py"), "--fix"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "timing.py: not written (Permission denied)" in res.output
    assert (tree / "timing.py").read_text() == TIMING


# ---- only the reviewed files are written ---------------------------------------------------------
def test_fix_never_writes_through_a_link_to_a_file_outside(tmp_path: Path):
    """A link named on the command line is not written through: its target lies outside what was
    reviewed. A link inside a reviewed folder to a file of that folder: the file is fixed under its
    own name, the link stays a link."""
    outside, project = tmp_path / "outside", tmp_path / "project"
    outside.mkdir()
    project.mkdir()
    (outside / "timing.py").write_text(TIMING)
    (project / "link.py").symlink_to(outside / "timing.py")
    res = CliRunner().invoke(command, [str(project / "link.py"), "--fix"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "link.py: not written (it is a symbolic link to" in res.output
    assert (outside / "timing.py").read_text() == TIMING and (project / "link.py").is_symlink()
    (project / "link.py").unlink()
    (project / "own.py").write_text(TIMING)
    (project / "alias.py").symlink_to("own.py")
    res = CliRunner().invoke(command, [str(project), "--fix"])
    assert res.exit_code == 0 and "not written" not in res.output
    assert "Fixed 3 findings (3 safe) in 1 file." in res.output and "alias.py: a link to" in res.output
    assert "jax.block_until_ready((y, z))" in (project / "own.py").read_text()
    assert (project / "alias.py").is_symlink() and os.readlink(project / "alias.py") == "own.py"
    assert (outside / "timing.py").read_text() == TIMING


def test_fix_never_writes_a_file_with_other_hard_links(tmp_path: Path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "timing.py").write_text(TIMING)
    (tmp_path / "timing.py").hardlink_to(tmp_path / "elsewhere" / "timing.py")
    res = CliRunner().invoke(command, [str(tmp_path / "timing.py"), "--fix"])
    assert res.exit_code == 2 and "it has 1 other hard link, which writing it would change too" in res.output
    assert (tmp_path / "elsewhere" / "timing.py").read_text() == TIMING


def test_fix_never_writes_over_a_file_that_changed_since_it_was_reviewed(tmp_path: Path):
    from jaxmem.evaluators.review import registry
    from jaxmem.evaluators.review.fixes import session
    from jaxmem.evaluators.review.fixes.apply import fix_source
    from jaxmem.evaluators.review.fixes.base import Options

    path = tmp_path / "timing.py"
    path.write_text(TIMING)
    out = fix_source(TIMING, str(path), registry.select([], []), unsafe=False, options=Options(100),
                     show_possible=False)
    assert out.changed
    path.write_text(TIMING + "# edited meanwhile\n")
    assert session.write([out]) == [f"{path}: not written (it changed since it was reviewed; review it again); "
                                    "its fixes are not applied"]
    assert path.read_text().endswith("# edited meanwhile\n")


def test_fix_json(tree: Path):
    doc = json.loads(run(str(tree / "timing.py"), "--diff", "--format", "json").output)
    fixes = doc["fixes"]
    assert fixes["written"] is False and fixes["files_changed"] == [str(tree / "timing.py")]
    assert [a["applicability"] for a in fixes["applied"]] == ["safe", "safe", "safe"]
    assert fixes["diff"].startswith("--- a/") and doc["findings"] == []


def test_fix_interval_option(tmp_path: Path):
    src = (CASES / "JM102" / "logged_every_step.py").read_text()
    (tmp_path / "log.py").write_text(src)
    res = run(str(tmp_path / "log.py"), "--diff", "--unsafe-fixes", "--show-possible", "--fix-interval", "500")
    assert "if i % 500 == 0:" in res.output


@pytest.mark.parametrize("bad", ["0", "-3", "ten"])
def test_bad_interval_is_a_clear_usage_error(tmp_path: Path, bad: str):
    (tmp_path / "x.py").write_text(CLEAN)
    res = run(str(tmp_path / "x.py"), "--fix", "--fix-interval", bad)
    assert res.exit_code == 2
    assert "--fix-interval" in res.output and bad in res.output and "Traceback" not in res.output


def test_fix_on_standard_input_is_refused_clearly():
    res = run("-", "--fix", input=TIMING)
    assert res.exit_code == 2 and "--fix and --diff work on files" in res.output and "Traceback" not in res.output


def test_fix_notebook_from_the_command_line(tmp_path: Path):
    from tests.review.fixes.test_fixes import _notebook

    nb = tmp_path / "t.ipynb"
    nb.write_text(_notebook(True))
    res = run(str(nb), "--fix")
    assert res.exit_code == 0 and "t.ipynb:cell 3:7: JM701 [safe]" in res.output
    assert "jax.block_until_ready(y)" in json.loads(nb.read_text())["cells"][2]["source"][6]


# ---- --fix --run --------------------------------------------------------------------------------
def _result(syncs: int, ok: bool = True, stdout: str = "1.0\n") -> dict:
    return {"ok": ok, "error": None if ok else "AttributeError: x", "tampered": [], "backend": "cpu",
            "jax": "0.10.2", "h2d_transfers": 4, "implicit_h2d_transfers": 0, "d2h_transfers": None,
            "host_syncs": syncs, "compile_count": 2, "peak_rss": 300 << 20, "wall_time": 1.0, "stdout": stdout,
            "attribution": {"loops": [{"path": "log.py", "line": 17, "iterations": 200, "most_in_one_run": 200}]}}


def test_fix_run_measures_before_and_after(tmp_path: Path, monkeypatch):
    """The original runs in place, the fixed copy in a folder of its own; one run per side when
    only counts decide; the table judges the metric the fix should move."""
    src = (CASES / "JM101" / "running_total_and_list.py").read_text()
    (tmp_path / "log.py").write_text(src)
    (tmp_path / "helper.py").write_text("X = 1\n")
    calls = []

    def fake_runner(path, **opts):
        calls.append(path)
        fixed = "float(loss)" not in Path(path).read_text()
        assert (Path(path).parent / "helper.py").is_file()    # the run's folder comes along
        return _result(2 if fixed else 200)

    monkeypatch.setattr(review_cli, "runner", lambda: fake_runner)
    res = run(str(tmp_path / "log.py"), "--diff", "--unsafe-fixes", "--select", "JM1", "--run", str(tmp_path / "log.py"))
    assert calls[0] == str(tmp_path / "log.py") and calls[1] != calls[0] and len(calls) == 2
    assert "Fix measured on cpu, one run per side" in res.output
    row = next(line for line in res.output.splitlines() if line.strip().startswith("host sync points"))
    assert "200" in row and "2" in row and "1 -> 0.01" in row and "confirmed (expected to decrease)" in row
    assert "float(loss)" in (tmp_path / "log.py").read_text()  # --diff: nothing written


def test_fix_run_repeats_for_peak_rss(tmp_path: Path, monkeypatch):
    src = (CASES / "JM401" / "safe_made_for_the_loop.py").read_text()
    (tmp_path / "don.py").write_text(src)
    seen = []

    def fake_runner(path, **opts):
        fixed = "donate_argnums" in Path(path).read_text()
        seen.append(fixed)
        r = _result(1)
        r["peak_rss"] = (250 if fixed else 420) << 20
        return r

    monkeypatch.setattr(review_cli, "runner", lambda: fake_runner)
    monkeypatch.setenv("JAXMEM_VERIFY_REPEATS", "3")
    res = run(str(tmp_path / "don.py"), "--fix", "--show-possible", "--run", str(tmp_path / "don.py"), "--format", "json")
    doc = json.loads(res.output)
    assert seen == [False, True] * 3                            # interleaved, three per side
    table = doc["fix_run"]
    rss = next(r for r in table["rows"] if r["metric"] == "peak_rss")
    assert rss["verdict"] == "confirmed" and table["verdict"] == "confirmed" and table["repeats"] == 3
    assert "donate_argnums=0" in (tmp_path / "don.py").read_text()


def test_fix_run_confirms_a_small_donation_by_its_aliased_bytes(tmp_path: Path, monkeypatch):
    """A donated state too small for peak RSS to show (4 MiB here, noise margin 20 MiB): the
    aliased bytes decide, once per side; the peak-RSS row says why it cannot."""
    (tmp_path / "don.py").write_text((CASES / "JM401" / "safe_made_for_the_loop.py").read_text())
    seen = []

    def fake_runner(path, **opts):
        fixed = "donate_argnums" in Path(path).read_text()
        seen.append(fixed)
        r = _result(1)
        r.update(alias_bytes=100 * (4 << 20) if fixed else 0, aliased_calls=100 if fixed else 0,
                 alias_max_call_bytes=(4 << 20) if fixed else 0, peak_rss=(262 if fixed else 270) << 20,
                 attribution={"loops": [{"path": "don.py", "line": 15, "iterations": 100, "most_in_one_run": 100}]})
        return r

    monkeypatch.setattr(review_cli, "runner", lambda: fake_runner)
    monkeypatch.setenv("JAXMEM_VERIFY_REPEATS", "3")
    res = run(str(tmp_path / "don.py"), "--diff", "--show-possible", "--run", str(tmp_path / "don.py"))
    assert seen == [False, True]
    head = next(line for line in res.output.splitlines() if line.startswith("Fix measured"))
    assert "one run per side" in head and head.endswith(": confirmed")
    row = next(line for line in res.output.splitlines() if line.strip().startswith("donated (aliased) bytes"))
    assert "0 B" in row and "400.0 MiB" in row and "0 B -> 4.0 MiB" in row and "confirmed (expected to increase)" in row
    rss = next(line for line in res.output.splitlines() if line.strip().startswith("peak RSS  "))
    assert "not measurable here" in rss
    assert "peak RSS: the largest call donates 4.0 MiB" in res.output


@pytest.mark.slow
def test_fix_run_donation_with_the_real_verifier(tmp_path: Path):
    """A JM401 fix run in the sandbox: no aliased bytes before, 4 MiB per step after."""
    (tmp_path / "don.py").write_text((CASES / "JM401" / "safe_made_for_the_loop.py").read_text())
    res = CliRunner().invoke(command, [str(tmp_path / "don.py"), "--diff", "--show-possible", "--run",
                                       str(tmp_path / "don.py"), "--format", "json"])
    doc = json.loads(res.output)
    rows = {r["metric"]: r for r in doc["fix_run"]["rows"]}
    alias = rows["alias_bytes"]
    assert (alias["before"], alias["after"], alias["per_step_after"]) == (0, 100 * 4 * 2**20, 4 * 2**20), alias
    assert alias["verdict"] == "confirmed" and rows["peak_rss"]["verdict"] == "not measurable here"
    assert doc["fix_run"]["verdict"] == "confirmed" and doc["fix_run"]["output_same"] is True


@pytest.mark.slow
def test_fix_run_with_the_real_verifier(tmp_path: Path):
    """The corpus's implicit-host-sync snippet, fixed and run in the sandbox: 200 syncs -> 1."""
    root = HERE.parents[2]
    src = (root / "corpus" / "snippets" / "implicit-host-sync" / "before.py").read_text()
    (tmp_path / "sync.py").write_text(src)
    res = CliRunner().invoke(command, [str(tmp_path / "sync.py"), "--diff", "--unsafe-fixes", "--run",
                                       str(tmp_path / "sync.py"), "--format", "json"])
    doc = json.loads(res.output)
    rows = {r["metric"]: r for r in doc["fix_run"]["rows"]}
    assert rows["host_syncs"]["before"] == 200 and rows["host_syncs"]["after"] == 1, rows["host_syncs"]
    assert rows["host_syncs"]["verdict"] == "confirmed" and doc["fix_run"]["output_same"] is True


def test_sarif_carries_each_fix_as_replacements_that_reproduce_it(tree: Path):
    import jsonschema

    from jaxmem.evaluators.review import registry
    from jaxmem.evaluators.review.fixes.apply import fix_source
    from jaxmem.evaluators.review.fixes.base import Options

    schema = json.loads((HERE.parent / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    doc = json.loads(run(str(tree / "sweep.py"), "--show-possible", "--format", "sarif").output)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    results = doc["runs"][0]["results"]
    fixed = [r for r in results if "fixes" in r]
    assert fixed and all(r["properties"]["fixApplicability"] in ("safe", "unsafe") for r in fixed)
    for r in fixed:
        (change,) = r["fixes"][0]["artifactChanges"]
        text = SWEEP
        # Replacements address the original text: apply them from the last to the first.
        for rep in sorted(change["replacements"], key=lambda x: -x["deletedRegion"]["charOffset"]):
            at, n = rep["deletedRegion"]["charOffset"], rep["deletedRegion"]["charLength"]
            text = text[:at] + rep["insertedContent"]["text"] + text[at + n:]
        one = fix_source(SWEEP, str(tree / "sweep.py"), registry.select([r["ruleId"]], []), unsafe=True,
                         options=Options(100), show_possible=True)
        assert text == one.after
    # JSON keeps its contract: the applicability only, no edits.
    js = json.loads(run(str(tree / "sweep.py"), "--show-possible", "--format", "json").output)
    assert all("fix_edits" not in f for f in js["findings"])
