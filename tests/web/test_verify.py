"""Evidence in the chat: stored records drawn without a run, the Verify button, timeouts."""
from __future__ import annotations

import pytest

from tests.web.helpers import SWEDISH_QUESTION, ask, texts


def charts(at) -> list:
    """The before/after bar blocks (one per measured metric)."""
    return [h for h in at.get("html") if 'class="jm-evidence"' in h.proto.body]


def donation_button(at):
    return next(b for b in at.button if b.key and b.key.endswith("-buffer-donation"))


def test_stored_evidence_shows_without_running(app):
    ask(app, SWEDISH_QUESTION)
    page = texts(app)
    # The recorded evidence (tests/web/fixtures/evidence/cpu.json) is drawn as soon as the card
    # is cited: a before/after chart for alias bytes, labelled with where it was measured.
    assert "Evidence: confirmed" in page and "jax 0.10.2" in page
    assert "donated (aliased) bytes: 0 B -> 256.0 KiB" in page
    (chart,) = charts(app)
    assert "donated (aliased) bytes" in chart.proto.body and "cpu, jax 0.10.2" in chart.proto.body
    assert chart.proto.body.count('class="jm-bar"') == 2
    assert "device peak memory: not measurable on cpu; needs gpu or tpu" in page
    assert not app.session_state["verified"]  # nothing ran


@pytest.mark.slow
def test_verify_button_runs_the_pair_here_and_draws_the_result(app):
    ask(app, SWEDISH_QUESTION)
    donation_button(app).click().run(timeout=300)
    assert not app.exception and not app.main.error
    evidence = app.session_state["verified"]["buffer-donation"]
    assert evidence.verdict == "confirmed" and evidence.backend == "cpu"
    assert evidence.record.get("origin") is None  # measured now, not read from a cache or evidence file
    assert evidence.node  # the machine it ran on
    statuses = [s.label for s in app.get("status")]
    assert any("Verified buffer-donation: confirmed" in s for s in statuses), statuses
    assert "run in this session" in texts(app)
    assert len(charts(app)) == 1


@pytest.mark.slow
def test_verifier_timeout_is_shown_and_the_app_keeps_working(app, monkeypatch):
    from jaxmem.app.webui import shared

    monkeypatch.setattr(shared.services().settings, "verify_timeout", 0.01)  # JAXMEM_VERIFY_TIMEOUT
    ask(app, SWEDISH_QUESTION)
    donation_button(app).click().run(timeout=300)
    assert not app.exception
    (error,) = app.main.error
    assert "Could not verify buffer-donation" in error.value and "timed out" in error.value, error.value
    ask(app, "och på TPU?")
    assert len([t for t in app.session_state["turns"] if t["role"] == "assistant"]) == 2
