"""Counting transfer-guard lines: only inside the snippet, explicit ones told apart."""
from __future__ import annotations

from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.runner import parse_stderr

H2D = "W1130 11:16:47.229349    7153 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[4])"
H2D_FAST = "W1130 11:16:47.229380    7153 guard_lib.cc:125] host-to-device transfer: "
D2H = "W1130 11:16:47.229380    7153 guard_lib.cc:125] device-to-host transfer: "


def test_counts_only_inside_the_snippet_and_separates_explicit():
    text = "\n".join([
        H2D,                                # before the snippet: the probe's own set-up
        probe.MARK_BEGIN, H2D, H2D_FAST, "user warning line",
        probe.MARK_EXPLICIT_BEGIN, H2D, probe.MARK_EXPLICIT_END,
        D2H,
        "partial line without newline" + probe.MARK_END,
        H2D,                                # after: the entry-point analysis
    ])
    counts, stderr = parse_stderr(text)
    assert (counts.h2d, counts.h2d_explicit, counts.d2h) == (3, 1, 1)
    assert stderr == "user warning line\npartial line without newline"
