"""Review page parts: turning pasted text and uploads into sources, and drawing the results.

Input checks live here because they are about what a browser can send (bytes of any kind, any
size); what counts as a problem in the code is the reviewer's business.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

import streamlit as st

MAX_SOURCE_BYTES = 1_000_000  # the reviewer's own per-file limit (evaluators/review/config.py)
CONTEXT_LINES = 2
MAX_SHOWN_LINES = 400
SUFFIXES = ("py", "ipynb")


@dataclass
class Source:
    name: str
    text: str
    cells: list[str] | None = None  # code cells of a notebook, as the reviewer numbers them
    problems: list[str] = field(default_factory=list)


def _too_big(size: int) -> bool:
    return size > MAX_SOURCE_BYTES


def from_paste(text: str) -> Source:
    src = Source("<pasted>", text)
    size = len(text.encode("utf-8", "surrogatepass"))
    if _too_big(size):
        src.problems.append(f"The pasted code is {size / 1e6:.1f} MB; at most {MAX_SOURCE_BYTES / 1e6:.1f} MB "
                            "is reviewed at once. Paste the part you want reviewed, or upload the files.")
    return src


def from_upload(name: str, data: bytes) -> Source:
    src = Source(name, "")
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix not in SUFFIXES:
        src.problems.append(f"{name}: only .py and .ipynb files can be reviewed; got '.{suffix}'.")
        return src
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\x00"), data.index(b"\x00") + 1, "NUL byte")
        src.text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        src.problems.append(f"{name} is not a text file (byte {exc.start}: {exc.reason}); "
                            "upload Python source (.py) or a Jupyter notebook (.ipynb) saved as UTF-8.")
        return src
    if _too_big(len(data)):
        src.problems.append(f"{name} is {len(data) / 1e6:.1f} MB; at most {MAX_SOURCE_BYTES / 1e6:.1f} MB is reviewed per file.")
    elif suffix == "ipynb":
        src.cells = _notebook_cells(src)
    return src


def _notebook_cells(src: Source) -> list[str] | None:
    try:
        nb = json.loads(src.text)
        cells = nb["cells"]
        return ["".join(c.get("source", "")) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                for c in cells]
    except json.JSONDecodeError as exc:
        src.problems.append(f"{src.name} is not a valid notebook: broken JSON at line {exc.lineno}, column "
                            f"{exc.colno} ({exc.msg}). Open and re-save it in Jupyter, or upload it as .py.")
    except (KeyError, TypeError, AttributeError):
        src.problems.append(f"{src.name} is JSON but not a Jupyter notebook (no 'cells' list).")
    return None


def findings_table(findings: list[dict]) -> None:
    from jaxmem.app.webui import shared

    # Inside the web app a finding's card is this app's own card page.
    card_url = shared.services().settings.card_url
    rows = [{"file": f["path"], "cell": f.get("cell"), "line": f["line"], "rule": f"{f['code']} {f['name']}",
             "severity": f["severity"], "confidence": f.get("confidence", "sure"), "message": f["message"],
             "card": f.get("url") or card_url(f["topic"]),
             # What the run showed at this line: confirmed (per step), not seen, not run, measured.
             "run": run_text(f.get("runtime")),
             "measured": ", ".join(f"{k}={v}" for k, v in (f.get("measured") or {}).items())} for f in findings]
    optional = {"cell": any(r["cell"] is not None for r in rows), "measured": any(r["measured"] for r in rows),
                "run": any(r["run"] for r in rows)}
    # "possible": the reviewer could not prove one of the rule's premises from this code (a pasted
    # fragment rarely shows the whole loop); "sure": it did.
    st.dataframe(rows, hide_index=True, width="stretch", column_order=[
        c for c in ("file", "cell", "line", "rule", "severity", "confidence", "message", "run", "measured", "card")
        if optional.get(c, True)],
        column_config={"card": st.column_config.LinkColumn("card", display_text="open card")})


_WORDS = {"host_syncs": "host syncs", "implicit_h2d_transfers": "host->device", "explicit_h2d_transfers": "device_put",
          "d2h_transfers": "device->host", "compiles": "compiles", "aliased_calls": "donated (aliased) calls"}


def run_text(runtime: dict | None) -> str:
    """A finding's runtime in a few words for the table."""
    if not runtime:
        return ""
    status = runtime.get("status", "")
    per = ", ".join(f"{v:g} {_WORDS.get(k, k)}/step" for k, v in (runtime.get("per_step") or {}).items() if v)
    if not per:
        per = ", ".join(f"{v:g} {_WORDS.get(k, k)}/run of line" for k, v in (runtime.get("per_run_of_line") or {}).items())
    return f"{status}: {per}" if per and status in ("confirmed", "measured") else status


def highlighted(lines: list[str], marks: dict[int, str]) -> None:
    """The offending lines with a little context, marked; long files show only the windows."""
    keep = sorted({n for line in marks for n in range(line - CONTEXT_LINES, line + CONTEXT_LINES + 1)
                   if 1 <= n <= len(lines)})[:MAX_SHOWN_LINES]
    out, prev = [], 0
    for n in keep:
        if prev and n != prev + 1:
            out.append('<span style="display:block;opacity:.5">   ...</span>')
        text = html.escape(lines[n - 1]) or " "
        if n in marks:
            out.append(f'<span class="jm-hit" title="{html.escape(marks[n])}" style="background:#ffe08a;'
                       f'display:block;color:#000">{n:>5}  {text}</span>')
        else:
            out.append(f'<span style="display:block">{n:>5}  {text}</span>')
        prev = n
    st.html(f'<pre class="jm-code" style="font-size:0.8rem;line-height:1.35;overflow-x:auto">{"".join(out)}</pre>')


def show_source(src: Source, findings: list[dict]) -> None:
    mine = [f for f in findings if f["path"] == src.name]
    if not mine:
        return
    if src.cells is None:
        highlighted(src.text.splitlines(), {f["line"]: f["code"] for f in mine})
        return
    for cell in sorted({f.get("cell") or 0 for f in mine}):
        if 1 <= cell <= len(src.cells):
            st.caption(f"cell {cell}")
            highlighted(src.cells[cell - 1].splitlines(),
                        {f["line"]: f["code"] for f in mine if f.get("cell") == cell})


def show_run(name: str, result: dict) -> None:
    from jaxmem.evaluators.verify.api import script_rows, where

    st.markdown(f"**Run of {name}** on {where(result)}")
    if result.get("error"):
        st.error(f"The code failed when run: {result['error']}")
    rows = [{"metric": row.label, "value": row.after_text if row.state == "measured" else row.text.split(": ", 1)[1]}
            for row in script_rows(result)]
    st.dataframe(rows, hide_index=True)
    syncs = result.get("host_sync_lines") or []
    if syncs:
        st.markdown("Host sync points by line:\n" + "\n".join(
            f"- line {s['line'] or '?'}: {s['count']}x `{(s.get('source') or '').strip()}`" for s in syncs))
    attribution = result.get("attribution") or {}
    per_line = [{"line": f"{r['path']}:{r['line']}", "what": _WORDS.get(metric, metric), "total": stats["total"],
                 "step 1": stats.get("first_step"), "per steady step": stats.get("per_step"),
                 "steps": (stats.get("steady_steps") or 0) + 1 if stats.get("loop") else None,
                 "loop": stats.get("loop") or ("outside loops" if stats.get("outside_loops") else "")}
                for r in attribution.get("lines", []) for metric, stats in r["metrics"].items()]
    if per_line:
        st.markdown("Per line (the first, compiling step apart from the steady ones):")
        st.dataframe(per_line, hide_index=True)
    if attribution.get("unattributed"):
        st.caption("Not attributed to a line (per run only): " + ", ".join(
            f"{_WORDS.get(k, k)} {v}" for k, v in attribution["unattributed"].items()))
    if result.get("backend") == "cpu":
        st.caption("Device->host transfers: not measurable here (CPU); host syncs are counted instead.")


def review(api, src: Source) -> list:
    """The reviewer's findings for one source; notebooks go through its notebook reader."""
    if src.cells is None:
        return list(api.review_source(src.text, src.name, show_possible=True))
    return list(api.review_notebook(src.text, src.name, api.default_rules(), api.card_url_factory()))


def sarif(api, findings: list) -> str:
    return api.format_sarif(findings, rules=api.default_rules(), card_url=api.card_url_factory(),
                            card_help=api.card_help_factory())


def review_all(sources: list[Source], run_it: bool) -> dict:
    """Review every readable source (and run .py ones when asked); failures are kept per file."""
    from jaxmem.app.webui import shared

    result = {"sources": sources, "findings": [], "objects": [], "runs": {}, "failed": []}
    readable = [s for s in sources if not s.problems]
    api = shared.review_api() if readable else None
    for src in readable if api else []:
        try:
            found = review(api, src)
            if run_it and src.cells is None:
                with st.spinner(f"Running {src.name} in the sandbox (waits for a free slot of this machine)..."):
                    run = shared.services().run_script(src.text)
                result["runs"][src.name] = run.result
                # The same attribution as `jaxmem review --run`: findings confirmed, not seen or not run,
                # and the per-step costs no rule flagged as measured findings (JM011-JM014).
                found = found + api.attach_run(found, src.name, run.result)
            result["objects"] += found  # the formatters take the reviewer's own objects
            result["findings"] += [f.to_dict() for f in found]
        except Exception as exc:
            result["failed"].append((src.name, exc))
    return result


# ---- "Fix and measure" ---------------------------------------------------------------------------
def fix_all(sources: list[Source], *, unsafe: bool, interval: int, measure: bool) -> dict:
    """The reviewer's fixes of every readable source and, for .py sources where running code is on,
    the run before and after them; failures are kept per file, as `review_all` keeps them."""
    from jaxmem.app.webui import shared

    out = {"fixes": [], "failed": []}
    for src in (s for s in sources if not s.problems):
        try:
            runs = measure and src.cells is None
            label = f"Fixing {src.name}" + (" and running it before and after in the sandbox (waits for a free "
                                            "slot of this machine)..." if runs else "...")
            with st.spinner(label):
                out["fixes"].append(shared.services().fix_and_measure(
                    src.text, src.name, unsafe=unsafe, interval=interval, measure=runs,
                    notebook=src.cells is not None))
        except Exception as exc:
            out["failed"].append((src.name, exc))
    return out


def show_fix(fix: dict) -> None:
    """One source's fixes: what each did, the unified diff, the fixed file to download, and the
    measured table (metric, before, after, per step, verdict) when it ran."""
    name = fix["path"]
    if not fix["changed"]:
        more = (f" {fix['unsafe_available']} unsafe fix(es) exist: tick \"Include unsafe fixes\" to see them."
                if fix["unsafe_available"] else "")
        st.info(f"{name}: no fix applies." + more)
        return
    lines = []
    for a in fix["applied"]:
        where = f"cell {a['cell']}, line {a['line']}" if a.get("cell") else f"line {a['line']}"
        lines.append(f"- {where}: {a['code']} [{a['applicability']}] {a['title']}")
    st.markdown(f"**Fixes for {name}**\n" + "\n".join(lines))
    st.code(fix["diff"], language="diff")
    st.download_button(f"Download fixed {name.strip('<>')}", fix["after"],
                       file_name=("fixed.py" if name.startswith("<") else name), on_click="ignore",
                       icon=":material/download:", key=f"fixed-{name}")
    for note in fix.get("notes") or []:
        st.caption(note)
    run = fix.get("run")
    if not run:
        return
    header, *rows = fix["table"]
    runs = "one run per side (counts repeat exactly)" if run["repeats"] == 1 else f"{run['repeats']} runs per side"
    steps = f", per step over {run['steps']} steps" if run.get("steps") else ""
    st.markdown(f"**Fix measured** on {run.get('backend') or 'an unknown backend'}: {runs}{steps}. "
                f"Verdict: **{run['verdict']}**")
    st.dataframe([dict(zip(header, r)) for r in rows], hide_index=True, key=f"fix-table-{name}")
    for side, why in (run.get("errors") or {}).items():
        st.caption(f"{side}: {why}")
    for note in run.get("notes") or []:
        st.caption(note)
