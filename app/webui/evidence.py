"""Verifier evidence for a cited card: stored records drawn as before/after bars, and a button that
runs the card's snippet pair through the service layer (this machine's queue, or the cluster).
The verifier does the work; this only draws it."""
from __future__ import annotations

import html
import queue
from concurrent.futures import ThreadPoolExecutor

import streamlit as st

from jaxmem.app.webui import shared


@st.cache_data(ttl=60, show_spinner=False)
def pair_topics() -> set[str]:
    """Topics with a runnable snippet pair; empty (and logged) when the pairs cannot be read."""
    try:
        return set(shared.services().verify_topics())
    except Exception:  # a broken manifest hides the button; `jaxmem corpus check` names the file
        shared.log.exception("reading snippet pairs failed")
        return set()


def section(topic: str, stored, key: str) -> None:
    """Evidence for one cited card: this session's run if any, else the stored Evidence."""
    runs = st.session_state.setdefault("verified", {})
    where = "on the cluster" if shared.services().settings.ray_address else "on this machine"
    if topic in pair_topics() and st.button(f"Verify {where}", key=key, icon=":material/science:"):
        evidence = _run(topic)
        if evidence is not None:
            runs[topic] = evidence
    evidence = runs.get(topic) or stored
    if evidence:
        show_record(evidence)
    elif topic in pair_topics():
        st.caption(f"No stored evidence for this card yet: verify it {where}.")


def _run(topic: str):
    with st.status(f"Verifying {topic}...", expanded=True) as status:
        try:
            bar = st.progress(0.0, text="waiting for the verifier")
            updates: queue.Queue = queue.Queue()
            # The verifier reports from its own threads, which cannot draw on the page: it runs in
            # a thread of its own and this script thread draws the progress it reports.
            with ThreadPoolExecutor(max_workers=1) as pool:
                future = pool.submit(shared.services().verify_card, topic, on_progress=updates.put)
                while not future.done() or not updates.empty():
                    try:
                        p = updates.get(timeout=0.2)
                    except queue.Empty:
                        continue
                    if p.stage == "queued":
                        bar.progress(0.0, text=f"waiting in the queue: {p.position} ahead ({p.where})")
                    else:
                        bar.progress(p.fraction, text=f"{p.message} ({p.where})" if p.where else p.message)
                evidence = future.result()  # fresh: the button promises a run, not a cached answer
        except Exception as exc:
            status.update(label=f"Verification of {topic} failed", state="error", expanded=True)
            shared.show_error(exc, f"verify {topic}")
            return None
        if evidence.verdict == "error":  # e.g. a snippet run past the time limit: the reason is below
            status.update(label=f"Verification of {topic} failed", state="error", expanded=False)
        else:
            status.update(label=f"Verified {topic}: {evidence.verdict}", state="complete", expanded=False)
    return evidence


def show_record(evidence) -> None:
    from jaxmem.evaluators.verify.api import metric_rows

    about = [evidence.origin, evidence.date[:16].replace("T", " ")]
    if evidence.repeats:  # recorded evidence files leave it out
        about.append(f"{evidence.repeats} repeat(s)")
    if evidence.node:
        about.append(f"ran on {evidence.node}")
    st.markdown(f"**Evidence: {evidence.verdict}** on {evidence.where} ({', '.join(a for a in about if a)})")
    for row in metric_rows(evidence):
        if row.state == "not measurable":
            st.info(row.text + ".")
        elif row.state == "error":
            st.error(row.text)
        else:
            bars(row, evidence.where)
            st.caption(f"{row.label}: {row.before_text} -> {row.after_text}; expected to {row.expect}: "
                       f"**{row.verdict}**" + (f" ({row.reason})" if row.reason else ""))
    for err in evidence.errors:
        st.error(f"The {err.get('side')} snippet failed: {err.get('error')}")
    machines = evidence.all_machines
    if len(machines) > 1:  # e.g. GPU evidence recorded elsewhere, shown on a CPU server
        st.caption("Evidence by machine kind:\n" + "\n".join(f"- {line}" for line in machines))


def bars(row, where_: str) -> None:
    """Before/after as two plain HTML bars: a chart library per cited card made every chat rerun
    measurably slower in the browser (about 0.2 s with a few answers on the page)."""
    top = max(row.before, row.after, 0) or 1
    rows = "".join(
        f'<div><span style="display:inline-block;width:4.5em">{side}</span>'
        f'<span class="jm-bar" style="display:inline-block;height:0.85em;vertical-align:middle;'
        f'width:{max(value, 0) / top * 65 + 0.5:.1f}%;background:{color}"></span> {html.escape(text)}</div>'
        for side, value, text, color in (("before", row.before, row.before_text, "#9aa5b1"),
                                         ("after", row.after, row.after_text, "#1f77b4")))
    st.html(f'<div class="jm-evidence" style="font-size:0.85rem;margin:0.3em 0">'
            f'<div><b>{html.escape(row.label)}</b> · {html.escape(where_)}</div>{rows}</div>')
