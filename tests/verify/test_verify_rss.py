"""Peak RSS belongs to the snippet, not to whoever started it.

Linux carries a parent's RSS into the child's `ru_maxrss` at exec, so measured from `wait4` a
child of a large process (this test session after loading models, the web server) reports at
least the parent's size, and a before/after pair looks the same. The probe reads its own VmHWM."""
from __future__ import annotations

import pytest

from jaxmem.evaluators.verify.runner import run_snippet

pytestmark = pytest.mark.slow


def test_peak_rss_of_a_small_snippet_ignores_a_large_parent(tmp_path, baseline):
    ballast = bytearray(1200 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):  # touch every page: resident, not just reserved
        ballast[i] = 1
    snippet = tmp_path / "small.py"
    snippet.write_text("import jax.numpy as jnp\nx = jnp.ones(10)\nprint(float(x.sum()))\n")
    run = run_snippet(snippet, baseline=baseline)
    assert run.ok, run.error
    assert run.values["peak_rss"] < 800 * 1024 * 1024, run.values["peak_rss"]
    del ballast
