"""Verifier evidence for a cited card: stored records drawn as before/after bars, and a button that
runs the card's snippet pair on this machine. The verifier does the work; this only draws it."""
from __future__ import annotations

import html
import queue
import re
from concurrent.futures import ThreadPoolExecutor

import streamlit as st

from app.pages import shared
from ingest.config import Settings


@st.cache_data(ttl=60, show_spinner=False)
def pair_topics() -> set[str]:
    """Topics with a runnable snippet pair; empty (and logged) when the pairs cannot be read."""
    try:
        from evaluators.verify.api import pairs

        return {p.topic for p in pairs(Settings()).values()}
    except Exception:  # a broken manifest hides the button; `jaxmem corpus check` names the file
        shared.log.exception("reading snippet pairs failed")
        return set()


def section(topic: str, stored: dict | None, key: str) -> None:
    """Evidence for one cited card: this session's run if any, else the stored record."""
    runs = st.session_state.setdefault("verified", {})
    if topic in pair_topics() and st.button("Verify on this machine", key=key, icon=":material/science:"):
        record = _run(topic)
        if record is not None:
            runs[topic] = record
    record = runs.get(topic) or stored
    if record:
        show_record(record)
    elif topic in pair_topics():
        st.caption("No stored evidence for this card yet: verify it on this machine.")


def _run(topic: str) -> dict | None:
    from evaluators.verify.api import verify_topic

    with st.status(f"Verifying {topic} on this machine...", expanded=True) as status:
        try:
            opts = shared.verify_options()
            bar = st.progress(0.0, text="measuring the empty-snippet baseline")
            messages: queue.Queue[str] = queue.Queue()
            # The verifier may report from its worker threads, which cannot draw on the page:
            # it runs in a thread of its own and this script thread draws its progress.
            with ThreadPoolExecutor(max_workers=1) as pool:
                future = pool.submit(verify_topic, topic, repeats=opts["repeats"], fresh=True,
                                     limits=opts["limits"], progress=messages.put)
                done = 0
                while not future.done() or not messages.empty():
                    try:
                        message = messages.get(timeout=0.2)
                    except queue.Empty:
                        continue
                    done += 1
                    # "<pair>: before 1/3": the verifier may run fewer repeats than asked (exact
                    # metrics need one), so the total comes from its message when it says one.
                    runs = re.search(r"/(\d+)$", message)
                    total = 2 * (int(runs.group(1)) if runs else opts["repeats"])
                    bar.progress(min(done / total, 1.0), text=message)
                record = future.result()  # fresh: the button promises a run here, not a cached answer
        except Exception as exc:
            status.update(label=f"Verification of {topic} failed", state="error", expanded=True)
            shared.show_error(exc, f"verify {topic}")
            return None
        if record.get("verdict") == "error":  # e.g. a snippet run past the time limit: the reason is below
            status.update(label=f"Verification of {topic} failed", state="error", expanded=False)
        else:
            status.update(label=f"Verified {topic}: {record['verdict']}", state="complete", expanded=False)
    return record


def where(record: dict) -> str:
    from evaluators.verify.report import where as _where

    return _where(record)


def show_record(record: dict) -> None:
    from evaluators.verify.metrics import METRICS, format_value
    from evaluators.verify.verdicts import ERROR, NOT_MEASURABLE

    about = [record.get("origin") or "run in this session", str(record.get("date") or "")[:16].replace("T", " ")]
    if record.get("repeats"):  # recorded evidence files leave it out
        about.append(f"{record['repeats']} repeat(s)")
    st.markdown(f"**Evidence: {record.get('verdict')}** on {where(record)} ({', '.join(a for a in about if a)})")
    backend = record.get("backend") or "this backend"
    for m in record.get("metrics", []):
        metric = METRICS.get(m["metric"])
        label = m.get("label") or m["metric"]
        if m["verdict"] == NOT_MEASURABLE:
            st.info(f"{label}: not measurable on {backend}; needs {' or '.join(m.get('backends') or ['another backend'])}.")
            continue
        if m["verdict"] == ERROR or m.get("before") is None or m.get("after") is None:
            st.error(f"{label}: {m.get('reason') or 'no measurement'}")
            continue
        fmt = (lambda v: format_value(metric, v)) if metric else str
        bars(label, m["before"], m["after"], fmt, where(record))
        st.caption(f"{label}: {fmt(m['before'])} -> {fmt(m['after'])}; expected to {m.get('expect')}: "
                   f"**{m['verdict']}**" + (f" ({m['reason']})" if m.get("reason") else ""))
    for err in record.get("errors") or []:
        st.error(f"The {err.get('side')} snippet failed: {err.get('error')}")
    machines = record.get("all_machines") or []
    if len(machines) > 1:  # e.g. GPU evidence recorded elsewhere, shown on a CPU server
        st.caption("Evidence by machine kind:\n" + "\n".join(f"- {line}" for line in machines))


def bars(label: str, before: float, after: float, fmt, where_: str) -> None:
    """Before/after as two plain HTML bars: a chart library per cited card made every chat rerun
    measurably slower in the browser (about 0.2 s with a few answers on the page)."""
    top = max(before, after, 0) or 1
    rows = "".join(
        f'<div><span style="display:inline-block;width:4.5em">{side}</span>'
        f'<span class="jm-bar" style="display:inline-block;height:0.85em;vertical-align:middle;'
        f'width:{max(value, 0) / top * 65 + 0.5:.1f}%;background:{color}"></span> {html.escape(fmt(value))}</div>'
        for side, value, color in (("before", before, "#9aa5b1"), ("after", after, "#1f77b4")))
    st.html(f'<div class="jm-evidence" style="font-size:0.85rem;margin:0.3em 0">'
            f'<div><b>{html.escape(label)}</b> · {html.escape(where_)}</div>{rows}</div>')
