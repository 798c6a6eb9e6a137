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
