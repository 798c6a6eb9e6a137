"""Review: paste code or upload .py / .ipynb files; findings by line, linked to the cards; optionally
run the code in the verifier's sandbox to count transfers; JSON and SARIF to download; "Fix and
measure": the reviewer's fixes as a diff and, where running code is on, the code measured before and
after them."""
import streamlit as st

from jaxmem.app.webui import review_view as view
from jaxmem.app.webui import shared

st.title("Review code for memory and transfer problems")
paste_tab, upload_tab = st.tabs(["Paste code", "Upload files"])
pasted = paste_tab.text_area("Python code", height=260, key="paste",
                             placeholder="for x in batches:\n    loss = float(step(x))")
uploads = upload_tab.file_uploader("Python files or notebooks", type=list(view.SUFFIXES),
                                   accept_multiple_files=True, key="uploads")
if shared.services().user_code:
    run_it = st.checkbox("Also run it and count transfers and host syncs (in the verifier's sandbox)", key="run")
else:
    run_it = False
    st.caption("Running your code is switched off on this server (JAXMEM_USER_CODE=false); the review below "
               "is static and always available.")

with st.expander("Fix options"):
    unsafe = st.checkbox("Include unsafe fixes (they may change what the code prints or computes: read the diff)",
                         value=True, key="fix_unsafe")
    interval = st.number_input("Log the loss every N steps (fixes of per-step reads)", min_value=1,
                               max_value=1_000_000_000, value=100, step=1, key="fix_interval")
review_col, fix_col = st.columns([1, 1])
reviewing = review_col.button("Review", type="primary", icon=":material/search:")
fixing = fix_col.button("Fix and measure", icon=":material/build:",
                        help="The reviewer's fixes as a diff (nothing is written) and, where running code is on, "
                             "the code run before and after them in the sandbox, measured.")
if reviewing or fixing:
    sources = ([view.from_paste(pasted)] if pasted.strip() else []) + \
              [view.from_upload(u.name, u.getvalue()) for u in uploads or []]
    result = view.review_all(sources, run_it and reviewing)
    if fixing:
        result["fix"] = view.fix_all(sources, unsafe=unsafe, interval=int(interval),
                                     measure=shared.services().user_code)
    st.session_state["review"] = result
    if not sources:
        st.warning("Nothing to review: paste code or upload .py / .ipynb files first.")

result = st.session_state.get("review")
if result:
    for src in result["sources"]:
        for problem in src.problems:
            st.error(problem)
    for name, exc in result["failed"]:
        shared.show_error(exc, f"review {name}")
    findings = result["findings"]
    reviewed = [s for s in result["sources"] if not s.problems]
    if reviewed:
        st.subheader(f"{len(findings)} finding(s) in {len(reviewed)} file(s)")
    if findings:
        view.findings_table(findings)
        for src in reviewed:
            view.show_source(src, findings)
        api = shared.review_api()
        if api is not None:
            left, right = st.columns(2)
            left.download_button("Download JSON", api.format_json(result["objects"], files=len(reviewed)),
                                 "jaxmem-review.json",
                                 "application/json", on_click="ignore", icon=":material/download:")
            right.download_button("Download SARIF", view.sarif(api, result["objects"]), "jaxmem-review.sarif",
                                  "application/sarif+json", on_click="ignore", icon=":material/download:")
    elif reviewed:
        st.success("No findings: nothing in this code matches a known memory or transfer problem.")
    for name, run in result["runs"].items():
        view.show_run(name, run)
    if run_it and any(s.cells is not None for s in reviewed):
        st.caption("Notebooks are reviewed but not run; export one as .py to run it.")
    fix = result.get("fix")
    if fix:
        st.subheader("Fixes")
        for name, exc in fix["failed"]:
            shared.show_error(exc, f"fix {name}")
        for one in fix["fixes"]:
            view.show_fix(one)
        if not shared.services().user_code:
            st.caption("Measuring the fix means running your code, which is switched off on this server "
                       "(JAXMEM_USER_CODE=false): the diff above is static.")
