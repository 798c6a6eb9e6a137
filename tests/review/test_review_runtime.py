"""Static meets dynamic (issue 24): a run's per-line attribution marks every static finding on a file
that ran (confirmed with its count per step, not seen, not run, not measurable), and the per-step
syncs, transfers and recompiles no rule flagged become measured findings JM011-JM014, in every format.

The first tests feed `attach` a hand-written run result; the slow ones run the issue's example."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmem.evaluators.review import api, registry
from jaxmem.evaluators.review.cli import command
from jaxmem.evaluators.review.dynamic import attach
from jaxmem.evaluators.review.finding import Finding

ISSUE_EXAMPLE = (Path(__file__).resolve().parents[1] / "verify" / "test_verify_attribution.py").read_text() \
    .split("ISSUE_EXAMPLE = '''\\\n", 1)[1].split("'''", 1)[0]


def stats(total, first, per, steps=19, loop="train.py:17"):
    return {"total": total, "loop": loop, "first_step": first, "steady_steps": steps, "steady_total": total - first,
            "steps_with": steps if per else 0, "per_step": per}


def finding(path: str, line: int, code: str, topic: str) -> Finding:
    return Finding(path=path, line=line, col=5, code=code, name="x", message="m", severity="warning", topic=topic,
                   fix="f", url="")


def run_result(script: Path) -> dict:
    """What verify_script returns for the issue's example (the numbers a run measured)."""
    a = str(script)
    lines = [
        {"path": "train.py", "abspath": a, "line": 7, "source": "return {...}",
         "metrics": {"host_syncs": {**stats(40, 2, 2.0), "how": {"tolist": 40}}},
         "called_from": ["train.py:20"], "via": [[a, 20]]},
        {"path": "train.py", "abspath": a, "line": 19, "source": "w, metrics = step(w, x)",
         "metrics": {"implicit_h2d_transfers": stats(20, 1, 1.0), "compiles": stats(1, 1, 0.0)}},
    ]
    inclusive = [*lines, {"path": "train.py", "abspath": a, "line": 20, "source": "history = log_metrics(metrics)",
                          "metrics": {"host_syncs": stats(40, 2, 2.0)}}]
    return {"script": str(script), "script_path": a, "tree": str(script.parent), "ok": True, "backend": "cpu",
            "jax": "0.10.2", "host_syncs": 40, "h2d_transfers": 21, "compile_count": 3, "peak_rss": 300 * 2**20,
            "host_sync_lines": [{"line": 7, "source": "return {...}", "count": 40}],
            "attribution": {"lines": lines, "inclusive": inclusive, "loops": [], "unattributed": {},
                            "ran": {a: [1, 2, 6, 7, 16, 17, 18, 19, 20, 30]}}}


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(ISSUE_EXAMPLE + "\n" * 10)
    return path


def test_static_findings_are_confirmed_not_seen_not_run_or_not_measurable(script):
    p = str(script)
    transfer = finding(p, 19, "JM201", "batch-transfers")
    at_call = finding(p, 20, "JM101", "implicit-host-sync")      # the call site of the helper that syncs
    quiet = finding(p, 18, "JM101", "implicit-host-sync")        # ran, nothing measured there
    dead = finding(p, 25, "JM301", "jit-compilation")            # never ran
    memory = finding(p, 19, "JM401", "buffer-donation")
    added = attach([transfer, at_call, quiet, dead, memory], p, run_result(script))
    assert transfer.runtime["status"] == "confirmed"
    assert transfer.runtime["per_step"]["implicit_h2d_transfers"] == 1.0
    assert transfer.runtime["first_step"] == {"implicit_h2d_transfers": 1, "compiles": 1}
    assert at_call.runtime["status"] == "confirmed" and at_call.runtime["per_step"] == {"host_syncs": 2.0}
    assert quiet.runtime["status"] == "not-seen"
    assert dead.runtime == {"status": "not-run", "metric": "compiles"}
    assert memory.runtime["status"] == "not-measurable" and memory.runtime["peak_rss_mib"] == 300.0
    # The helper's syncs are explained by the finding at its call site: no measured finding repeats them.
    assert added == []


def test_unflagged_per_step_costs_become_measured_findings(script):
    p = str(script)
    added = attach([], p, run_result(script), card_url=lambda t: f"card?topic={t}")
    by_code = {f.code: f for f in added}
    assert sorted(by_code) == ["JM011", "JM012"]
    sync = by_code["JM011"]
    assert (sync.path, sync.line, sync.confidence, sync.topic) == (p, 7, "sure", "implicit-host-sync")
    assert sync.message == ("measured: 2 host syncs per step (tolist) on 19 of 19 steady steps; "
                            "called from train.py:20")
    assert sync.runtime["status"] == "measured" and sync.runtime["per_step"] == {"host_syncs": 2.0}
    assert sync.runtime["first_step"] == {"host_syncs": 2} and sync.url == "card?topic=implicit-host-sync"
    assert by_code["JM012"].line == 19
    # Compiled in the first step only: no JM014. --ignore JM011 drops that code.
    assert [f.code for f in attach([], p, run_result(script), keep=lambda c: c != "JM011")] == ["JM012"]


def test_a_tampered_or_unattributed_run_marks_nothing(script):
    f = finding(str(script), 19, "JM201", "batch-transfers")
    assert attach([f], str(script), {**run_result(script), "tampered": ["x"]}) == [] and f.runtime is None
    assert attach([f], str(script), {"ok": False, "error": "boom"}) == [] and f.runtime is None


def test_every_format_carries_runtime_and_measured_findings(script):
    p = str(script)
    static = finding(p, 19, "JM201", "batch-transfers")
    findings = [static, *api.attach_run([static], p, run_result(script))]
    text = api.format_text(findings)
    assert f"{p}:7:1: JM011 measured: 2 host syncs per step" in text
    assert "[run: confirmed, 1 implicit host->device transfers/step (step 1: 1)" in text
    doc = json.loads(api.format_json(findings))
    assert doc["version"] == 3 and doc["summary"]["by_runtime"] == {"confirmed": 1, "measured": 1}
    assert next(f for f in doc["findings"] if f["code"] == "JM011")["runtime"]["per_step"] == {"host_syncs": 2.0}
    sarif = json.loads(api.format_sarif(findings, rules=registry.select()))
    run = sarif["runs"][0]
    assert "JM011" in [r["id"] for r in run["tool"]["driver"]["rules"]]
    result = next(r for r in run["results"] if r["ruleId"] == "JM011")
    assert result["properties"]["runtime"]["status"] == "measured"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "JM011"
    md = api.format_markdown(findings)
    assert "**JM011** measured: 2 host syncs per step" in md and "Run: confirmed" in md


def test_measured_codes_are_registered_but_never_static():
    by_code = registry.by_code()
    for code, topic in (("JM011", "implicit-host-sync"), ("JM012", "batch-transfers"),
                        ("JM013", "implicit-host-sync"), ("JM014", "jit-compilation")):
        rule = by_code[code]
        assert rule.topic == topic and rule.doc.startswith(f"{code} {rule.name}")
        assert all(f"\n{s}\n" in rule.doc for s in ("What it does", "Why is this bad", "Example", "Use instead"))
    assert not {"JM011", "JM012", "JM013", "JM014"} & {r.code for r in registry.all_rules()}
    assert not [f for f in api.review_source(ISSUE_EXAMPLE, "train.py", select=["ALL"], show_possible=True)
                if f.code.startswith("JM01")]
    res = CliRunner().invoke(command, ["--explain", "JM011"])
    assert "What it does" in res.output and "topic: implicit-host-sync" in res.output
    assert "| JM014 | measured-recompile-per-step |" in CliRunner().invoke(command, ["--list-rules"]).output
    assert [r.code for r in registry.select_measured(["JM1"], [])] == []
    assert [r.code for r in registry.select_measured([], ["JM011"])] == ["JM012", "JM013", "JM014"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "markdown"])
def test_the_issue_example_is_found_at_the_helper_call_and_confirmed_in_every_format(script, fmt):
    """Before issue 24: "No findings in 1 file" and host_syncs=40; then a measured JM011 at the
    helper's line. Now the model reads the helper (`log_metrics` calls `.tolist()` on what it is
    handed): a static JM101 at the call site, which the run confirms with its count per step, for
    --run and --run-cmd alike; the helper's syncs are explained by it, so no JM011 repeats them."""
    for args in (["--run", str(script)], ["--run-cmd", "python train.py", str(script.parent)]):
        res = CliRunner().invoke(command, [str(script), *args, "--format", fmt])
        assert res.exit_code == 1, res.output
        if fmt == "text":
            assert ":20:15: JM101 [possible] `log_metrics` is handed JAX array `metrics`" in res.output
            assert "[run: confirmed, 2 host syncs/step (step 1: 2)" in res.output and "JM011" not in res.output
            assert "train.py:7: host syncs 2/step after 2 in step 1" in res.output
        elif fmt == "json":
            doc = json.loads(res.output)
            jm101 = next(f for f in doc["findings"] if f["code"] == "JM101")
            assert jm101["line"] == 20 and jm101["runtime"]["status"] == "confirmed"
            assert jm101["runtime"]["per_step"] == {"host_syncs": 2.0}
            assert not any(f["code"] == "JM011" for f in doc["findings"])
        elif fmt == "sarif":
            results = json.loads(res.output)["runs"][0]["results"]
            jm101 = next(r for r in results if r["ruleId"] == "JM101")
            assert jm101["locations"][0]["physicalLocation"]["region"]["startLine"] == 20
            assert jm101["properties"]["runtime"]["per_step"] == {"host_syncs": 2.0}
        else:
            assert "**JM101**" in res.output and "JM011" not in res.output


def test_the_run_summary_names_donated_bytes_or_why_they_cannot_be_measured():
    from jaxmem.evaluators.review.dynamic import run_summary

    base = {"script": "train.py", "ok": True, "backend": "cpu", "jax": "0.10.2", "h2d_transfers": 2,
            "host_syncs": 0, "compile_count": 4, "peak_rss": 700 << 20}
    donated = run_summary({**base, "alias_bytes": 5 * (256 << 20), "aliased_calls": 5})
    assert "donated=1.2 GiB in 5 calls" in donated.splitlines()[0]
    assert "donated" not in run_summary({**base, "alias_bytes": 0, "aliased_calls": 0})
    why = "donation cannot be measured with this JAX (AttributeError: x)"
    assert f"donated bytes: {why}" in run_summary({**base, "alias_error": why})
