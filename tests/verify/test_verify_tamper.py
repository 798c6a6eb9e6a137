"""Code that hides or fakes its own counts gets its true counts or "not measurable", never the
numbers it wanted: fd 2 silenced, fake guard lines and markers, a fake result file. Run the way
user code runs (untrusted, in the sandbox), next to an honest run of the same work."""
from __future__ import annotations

from pathlib import Path

import pytest

from jaxmem.evaluators.verify.api import verify_script
from jaxmem.evaluators.verify.runner import run_snippet
from jaxmem.evaluators.verify.sandbox import Limits

pytestmark = pytest.mark.slow
HOSTILE = Path(__file__).parent / "cases" / "hostile"


def run(name: str):
    return run_snippet(HOSTILE / f"{name}.py", limits=Limits(timeout_s=60), untrusted=True)


def test_silencing_fd2_is_not_measurable_instead_of_zero_transfers(tmp_path, capsys):
    honest = tmp_path / "honest.py"
    honest.write_text((HOSTILE / "silence_fd2.py").read_text().replace(
        "os.dup2(os.open(os.devnull, os.O_WRONLY), 2)", "pass"))
    counted = verify_script(str(honest))
    assert counted["h2d_transfers"] >= 40 and not counted["tampered"]
    hidden = verify_script(str(HOSTILE / "silence_fd2.py"))
    assert hidden["h2d_transfers"] is None and hidden["host_syncs"] is None and not hidden["ok"]
    assert any("file descriptor 2" in t for t in hidden["tampered"])
    with capsys.disabled():
        print(f"\n[tamper] fd 2 silenced: honest run {counted['h2d_transfers']} h2d transfers; silenced run "
              f"not measurable ({'; '.join(hidden['tampered'])})")


def test_fake_guard_lines_and_markers_do_not_count():
    r = run("fake_guard_lines")
    # Python's stderr is the snippet's own file: its 25 prints never reach the guard's stream; the
    # bytes it wrote straight onto fd 2, and its forged marker, are tampering.
    assert r.tampered and all(v is None for v in r.values.values())
    assert "os.write on file descriptor 2" in "; ".join(r.tampered)
    assert r.stderr.count("host-to-device transfer") >= 25  # still shown to the user as their output


def test_a_fake_result_file_is_not_the_probes():
    r = run("fake_result")
    assert r.tampered and all(v is None for v in r.values.values())
    assert any("result file" in t or "end marker" in t for t in r.tampered)


def test_an_honest_script_is_not_flagged(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("import sys, warnings\nimport jax.numpy as jnp\nprint('to stderr', file=sys.stderr)\n"
                      "warnings.warn('a warning')\nx = jnp.ones(3) * 2\nprint(float(x.sum()))\n")
    result = verify_script(str(script))
    assert result["ok"] and result["tampered"] == [] and result["host_syncs"] == 1
    assert "to stderr" in result["stderr"] and "a warning" in result["stderr"]


# ---- per-line counts (issue 24): true counts, or "not measurable" -------------------------------
def attributed(name: str) -> dict:
    return verify_script(str(HOSTILE / f"{name}.py"), limits=Limits(timeout_s=60))


def assert_not_measurable(result: dict, why: str) -> None:
    assert not result["ok"] and result["host_syncs"] is None and result["h2d_transfers"] is None
    assert result["attribution"] is None and result["host_sync_lines"] == []
    assert any(why in t for t in result["tampered"]), result["tampered"]


def test_per_line_counts_of_an_honest_loop_are_its_true_counts(tmp_path):
    honest = tmp_path / "honest.py"
    honest.write_text((HOSTILE / "unhook_syncs.py").read_text().split("\nx = jnp.ones(3)", 1)[0]
                      .replace("setattr(ArrayImpl, name, value)", "pass") + "\nx = jnp.ones(3)\ntotal = 0.0\n"
                      "for i in range(20):\n    x = x + 1\n    total += float(x.sum())\nprint(total)\n")
    result = verify_script(str(honest))
    line = next(r for r in result["attribution"]["lines"] if r["metrics"].get("host_syncs"))
    assert (line["line"], line["metrics"]["host_syncs"]["total"], line["metrics"]["host_syncs"]["per_step"]) == \
        (20, 20, 1.0)


def test_putting_the_original_read_methods_back_is_not_measurable(capsys):
    result = attributed("unhook_syncs")
    assert_not_measurable(result, "replaced one of the probe's hooks")
    with capsys.disabled():
        print(f"\n[tamper] read methods put back: not measurable ({'; '.join(result['tampered'])})")


def test_switching_off_the_line_tracer_is_not_measurable():
    assert_not_measurable(attributed("stop_tracer"), "set its own trace function")


def test_forged_sync_markers_with_the_real_nonce_are_not_measurable(capsys):
    result = attributed("forge_markers")
    assert_not_measurable(result, "markers it wrote on file descriptor 2 disagree")
    with capsys.disabled():
        print(f"\n[tamper] 30 sync markers forged with the nonce read from memory: not measurable "
              f"({'; '.join(result['tampered'])})")


def test_erasing_the_probes_records_is_not_measurable():
    assert_not_measurable(attributed("erase_records"), "disagree")


def test_writing_fd2_through_libc_is_not_measurable():
    assert_not_measurable(attributed("ctypes_write"), "through ctypes")


def test_a_subprocess_writes_to_the_users_stderr_but_one_handed_fd2_is_tampering(tmp_path):
    """matplotlib asks fc-list for fonts: a process started through subprocess gets the user's stderr
    file, so it cannot pass for the guard and the run still counts; handing it fd 2 (or dup'ing fd 2
    to write under another number) is tampering."""
    fake = "W1130 11:16:47.229349    7153 guard_lib.cc:125] host-to-device transfer: "
    cases = {"polite": f"import subprocess\nsubprocess.run(['sh', '-c', 'echo \"{fake}\" >&2'])\n",
             "handed": f"import subprocess\nsubprocess.run(['sh', '-c', 'echo \"{fake}\" >&2'], stderr=2)\n",
             "dup": f"import os\nos.write(os.dup(2), b'{fake}\\n')\n"}
    results = {}
    for name, code in cases.items():
        (tmp_path / f"{name}.py").write_text(code)
        results[name] = verify_script(str(tmp_path / f"{name}.py"))
    assert results["polite"]["ok"] and results["polite"]["h2d_transfers"] == 0
    assert fake.strip() in results["polite"]["stderr"]
    assert_not_measurable(results["handed"], "started a process")
    assert_not_measurable(results["dup"], "os.dup on file descriptor 2")


# ---- donated (aliased) bytes (the fix measured): true counts, or "not measurable" ----------------
def test_faking_deleted_arrays_sizes_and_modules_leaves_the_true_zero(capsys):
    """The probe reads what it bound before the code ran: rebinding `is_deleted`, `nbytes`, the
    executable's `hlo_modules` and XLA's `alias_size_in_bytes` changes nothing it counts (no
    donation: 0 bytes aliased)."""
    result = attributed("fake_aliasing")
    assert result["ok"] and result["tampered"] == []
    assert (result["alias_bytes"], result["aliased_calls"]) == (0, 0)
    assert not any(r["metrics"].get("aliased_calls") for r in result["attribution"]["lines"])
    with capsys.disabled():
        print("\n[tamper] is_deleted/nbytes/hlo_modules faked: 0 B aliased, as without the fakes")


def test_hiding_a_donation_leaves_its_true_bytes():
    """Donated arrays made to look alive, XLA's memory analysis and the module text made to show no
    aliasing: the probe's bound references still see 20 calls of 4,000 bytes."""
    result = attributed("hide_aliasing")
    assert result["ok"] and result["tampered"] == []
    assert (result["alias_bytes"], result["aliased_calls"], result["alias_max_call_bytes"]) == (80000, 20, 4000)


def test_putting_jaxs_own_dispatch_back_is_not_measurable():
    """Donating calls that would run through the C++ fast path, unseen: not measurable."""
    result = attributed("unhook_donation")
    assert_not_measurable(result, "execution of donating programs")
    assert result["alias_bytes"] is None and result["aliased_calls"] is None


def test_raising_the_probes_alias_count_in_memory_is_not_measurable():
    result = attributed("raise_alias_count")
    assert_not_measurable(result, "disagree")
    assert result["alias_bytes"] is None
