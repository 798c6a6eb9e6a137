"""Counting transfer-guard lines: only inside the snippet, explicit ones told apart, and only
between this run's markers (a marker without the run's nonce is tampering, not a boundary)."""
from __future__ import annotations

from jaxmem.evaluators.verify import probe
from jaxmem.evaluators.verify.runner import parse_stderr

H2D = "W1130 11:16:47.229349    7153 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[4])"
H2D_FAST = "W1130 11:16:47.229380    7153 guard_lib.cc:125] host-to-device transfer: "
D2H = "W1130 11:16:47.229380    7153 guard_lib.cc:125] device-to-host transfer: "
NONCE = "0123456789abcdef"


def m(name: str, nonce: str = NONCE) -> str:
    return probe.marker(nonce, name)


def test_counts_only_inside_the_snippet_and_separates_explicit():
    text = "\n".join([
        H2D,                                # before the snippet: the probe's own set-up
        m(probe.BEGIN), H2D, H2D_FAST, "user warning line",
        m(probe.EXPLICIT_BEGIN), H2D, m(probe.EXPLICIT_END),
        D2H,
        "partial line without newline" + m(probe.END),
        H2D,                                # after: the entry-point analysis
    ])
    counts, stderr, problems = parse_stderr(text, NONCE)
    assert (counts.h2d, counts.h2d_explicit, counts.d2h) == (3, 1, 1)
    assert stderr == "user warning line\npartial line without newline"
    assert problems == []


def test_a_marker_of_another_nonce_is_tampering_and_no_boundary():
    """A snippet that prints its own end marker early (to hide what follows) does not end the region."""
    text = "\n".join([m(probe.BEGIN), H2D, m(probe.END, nonce="guessed"), H2D, m(probe.END)])
    counts, _, problems = parse_stderr(text, NONCE)
    assert counts.h2d == 2
    assert problems == ["a marker that is not this run's appeared on file descriptor 2"]


def test_a_second_begin_marker_is_tampering():
    text = "\n".join([m(probe.BEGIN), H2D, m(probe.END), m(probe.BEGIN), m(probe.END)])
    assert parse_stderr(text, NONCE)[2]
