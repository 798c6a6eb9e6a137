"""Text (ruff-like), JSON, SARIF 2.1.0 and Markdown renderings of one list of findings."""
from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from jaxmem.evaluators.review.finding import Finding, Note
from jaxmem.evaluators.review.measured import RULES as MEASURED_RULES
from jaxmem.evaluators.review.parse_errors import PARSE_ERROR_CODE
from jaxmem.evaluators.review.rule import Rule

FORMATS = ("text", "json", "sarif", "markdown")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _plural(n: int, word: str) -> str:
    # "info" is a mass noun: "2 info", not "2 infos".
    return f"{n} {word}{'' if n == 1 or word == 'info' else 's'}"


# 2: findings carry `confidence` and `runtime` (after a run: status confirmed / not-seen / not-run /
# not-measurable, or measured for JM011-JM014, with per_step and first_step counts); the summary
# counts hidden possible ones, and after a run the findings by runtime status. Findings carry
# `fix_applicability` (safe / unsafe / null: what `--fix` can do), the summary `fixable`; with --fix or
# --diff the document adds `fixes` (what was applied, the diff) and, with a run, `fix_run` (the table).
JSON_VERSION = 3  # 3: findings carry `proven` (the model proved the premises; calibration.py)


def summary_line(findings: Sequence[Finding], files: int | None = None, hidden: int = 0) -> str:
    more = (f" {_plural(hidden, 'possible finding')} not shown (--show-possible shows "
            f"{'it' if hidden == 1 else 'them'})." if hidden else "")
    if not findings:
        return ("No findings." if files is None else f"No findings in {_plural(files, 'file')}.") + more
    sev = Counter(f.severity for f in findings)
    parts = ", ".join(_plural(sev[s], s) for s in ("error", "warning", "info") if sev[s])
    where = f" in {_plural(files, 'file')}" if files is not None else ""
    possible = sum(f.confidence != "sure" for f in findings)
    which = f", {possible} of them possible" if possible else ""
    return f"Found {_plural(len(findings), 'finding')} ({parts}{which}){where}." + more


def _tag(f: Finding) -> str:
    return "" if f.confidence == "sure" else "[possible] "


_METRIC_WORDS = {"host_syncs": "host syncs", "implicit_h2d_transfers": "implicit host->device transfers",
                 "explicit_h2d_transfers": "device_put transfers", "d2h_transfers": "device->host transfers",
                 "compiles": "compilations"}


def runtime_text(f: Finding) -> str:
    """What the run showed at a finding's line, in words ("" when nothing ran, or for a measured
    finding, whose message says it)."""
    rt = f.runtime
    if not rt or rt.get("status") == "measured":
        return ""
    status = rt.get("status")
    if status == "not-run":
        return "run: this line did not run"
    if status == "not-measurable":
        why = rt.get("why", "")
        mib = rt.get("peak_rss_mib")
        return f"run: not measurable per line ({why}{f'; peak RSS {mib} MiB' if mib else ''})"
    counts = []
    for metric, per in (rt.get("per_step") or {}).items():
        first = (rt.get("first_step") or {}).get(metric, 0)
        counts.append(f"{per:g} {_METRIC_WORDS.get(metric, metric)}/step (step 1: {first})" if per is not None
                      else f"{first} {_METRIC_WORDS.get(metric, metric)} in step 1")
    for metric, per in (rt.get("per_run_of_line") or {}).items():
        if metric not in (rt.get("per_step") or {}):
            counts.append(f"{per:g} {_METRIC_WORDS.get(metric, metric)} per run of the line")
    where = f" over {rt['steps']} steps of the loop at {rt['loop']}" if rt.get("loop") else ""
    lead = "run: confirmed" if status == "confirmed" else "run: not seen"
    if status == "not-seen" and rt.get("why"):
        lead += f" ({rt['why']})"
    return lead + (f", {'; '.join(counts)}{where}" if counts else "")


def fixable(f: Finding, unsafe_fixes: bool = False) -> bool:
    """`jaxmem review --fix` (with --unsafe-fixes for the unsafe ones) would rewrite this finding."""
    return f.fix_applicability == "safe" or (unsafe_fixes and f.fix_applicability == "unsafe")


def fix_hint(findings: Sequence[Finding], unsafe_fixes: bool = False) -> str:
    """ruff's footer: how many findings `--fix` would fix, and how many more `--unsafe-fixes` would."""
    safe = sum(f.fix_applicability == "safe" for f in findings)
    unsafe = sum(f.fix_applicability == "unsafe" for f in findings)
    if unsafe_fixes:
        safe, unsafe = safe + unsafe, 0
        flag = "`--fix --unsafe-fixes`"
    else:
        flag = "`--fix`"
    if not safe and not unsafe:
        return ""
    if not safe:
        return (f"{unsafe} fixable with `--fix --unsafe-fixes` (unsafe fixes may change what the code prints or "
                "computes: `--diff --unsafe-fixes` shows them first).")
    line = f"[*] {safe} fixable with {flag}"
    if unsafe:
        line += f" ({unsafe} more with `--unsafe-fixes`; `--diff` shows them first)"
    return line + "."


def format_text(findings: Sequence[Finding], notes: Sequence[Note] = (), *, verbose: bool = False,
                files: int | None = None, summary: bool = True, hidden: int = 0, unsafe_fixes: bool = False) -> str:
    """`path:line:col: CODE message`; verbose adds the source line, the fix and the card link; `[*]`
    marks a finding `--fix` can rewrite (as ruff does)."""
    out = []
    for f in findings:
        measured = f" [measured: {_measured(f)}]" if f.measured else ""
        ran = runtime_text(f)
        star = "[*] " if fixable(f, unsafe_fixes) else ""
        out.append(f"{f.location}: {f.code} {star}{_tag(f)}{f.message}{measured}" + (f" [{ran}]" if ran else ""))
        if verbose:
            if f.source_line:
                out.append(f"    | {f.source_line}")
            out.append(f"    = fix: {f.fix}")
            # The card's page where the web app has a public URL; else its name (`jaxmem ask` finds it).
            out.append(f"    = see: {f.url}" if f.url else f"    = card: {f.topic}")
    out.extend(f"note: {n.path}: {n.message}" for n in notes)
    if summary:
        out.append(summary_line(findings, files, hidden))
        hint = fix_hint(findings, unsafe_fixes)
        if hint:
            out.append(hint)
    return "\n".join(out) + "\n"


def _measured(f: Finding) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(f.measured.items()))


def format_json(findings: Sequence[Finding], notes: Sequence[Note] = (), *, files: int | None = None,
                run: dict | None = None, hidden: int = 0) -> str:
    """`run`: the verifier's result for `--run`, included as it came (counts, backend, errors)."""
    doc = {
        "version": JSON_VERSION,
        "summary": {"findings": len(findings), "files": files,
                    "by_severity": dict(Counter(f.severity for f in findings)),
                    "by_confidence": dict(Counter(f.confidence for f in findings)),
                    "possible_not_shown": hidden,
                    "by_code": dict(sorted(Counter(f.code for f in findings).items())),
                    # Findings `--fix` (safe) or `--fix --unsafe-fixes` can rewrite; where they were looked up.
                    **({"fixable": dict(Counter(f.fix_applicability for f in findings if f.fix_applicability))}
                       if any(f.fix_applicability for f in findings) else {}),
                    **({"by_runtime": dict(Counter(f.runtime["status"] for f in findings if f.runtime))}
                       if any(f.runtime for f in findings) else {})},
        "findings": [f.to_dict() for f in findings],
        "notes": [n.to_dict() for n in notes],
    }
    if run is not None:
        doc["run"] = run
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


def _uri(path: str) -> str:
    """Relative to the working directory (the checkout in CI), as code scanning expects."""
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    return quote(path.replace("\\", "/").removeprefix("./"), safe="/")


def fingerprints(findings: Sequence[Finding]) -> list[str]:
    """Stable across runs and line shifts: code, file, the line's text, and its occurrence."""
    seen: Counter = Counter()
    out = []
    for f in findings:
        key = (f.code, f.path, " ".join(f.source_line.split()))
        seen[key] += 1
        raw = "\0".join([*key, str(seen[key])])
        out.append(hashlib.sha256(raw.encode()).hexdigest()[:32])
    return out


def _section(doc: str, title: str) -> str:
    """One section of a rule's docstring (What it does / Why is this bad / ...), dedented."""
    lines = doc.splitlines()
    if title not in lines:
        return ""
    out = []
    for line in lines[lines.index(title) + 1:]:
        if line and not line.startswith(" "):
            break
        out.append(line.strip())
    return " ".join(x for x in out if x)


def _sarif_rule(rule: Rule, card: str = "") -> dict:
    what = _section(rule.doc, "What it does") or rule.name
    why = _section(rule.doc, "Why is this bad")
    about = f" Card {rule.topic}: {card}" if card else ""
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.name.replace("-", " ").capitalize()},
        "fullDescription": {"text": what},
        "help": {"text": f"{why} Fix: {rule.fix}{about}".strip(),
                 "markdown": (f"{why}\n\n**Fix:** {rule.fix}" + (f"\n\n**Card `{rule.topic}`:** {card}" if card else "")
                              ).strip()},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {"tags": ["jax", "memory", rule.topic], "topic": rule.topic},
    }


def format_sarif(findings: Sequence[Finding], notes: Sequence[Note] = (), *, rules: Iterable[Rule] = (),
                 card_url=None, card_help=None, version: str = "0.1.0") -> str:
    """One run; one rule entry per code, whose help carries the fix and the card's summary (and a
    link to the card where the web app has a public URL); partialFingerprints per result."""
    rule_list = sorted({r.code: r for r in rules}.values(), key=lambda r: r.code)
    entries = []
    for r in rule_list:
        e = _sarif_rule(r, card_help(r.topic) if card_help is not None else "")
        url = card_url(r.topic) if card_url is not None else ""
        if url:
            e["helpUri"] = url
        entries.append(e)
    # Codes only a run produces (JM011-JM014) are described when a run produced them.
    listed = {e["id"] for e in entries}
    for rule in MEASURED_RULES:
        if rule.code not in listed and any(f.code == rule.code for f in findings):
            e = _sarif_rule(rule, card_help(rule.topic) if card_help is not None else "")
            e["properties"]["measured"] = True
            entries.append(e)
    if any(f.code == PARSE_ERROR_CODE for f in findings):
        entries.append({"id": PARSE_ERROR_CODE, "name": "syntax-error",
                        "shortDescription": {"text": "The file could not be parsed"},
                        "defaultConfiguration": {"level": "error"}})
    index = {e["id"]: i for i, e in enumerate(entries)}
    results = []
    for f, fp in zip(findings, fingerprints(findings)):
        region = {"startLine": f.line if f.cell is None else 1, "startColumn": f.col if f.cell is None else 1}
        text = f.message if f.cell is None else f"cell {f.cell}, line {f.line}: {f.message}"
        result = {
            "ruleId": f.code,
            "level": SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f"{text} Fix: {f.fix}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                                                "region": region}}],
            "partialFingerprints": {"jaxmemFingerprint/v1": fp},
            "properties": {"topic": f.topic, "confidence": f.confidence,
                           **({"cell": f.cell, "cellLine": f.line} if f.cell is not None else {}),
                           **({"measured": f.measured} if f.measured else {}),
                           **({"runtime": f.runtime} if f.runtime else {}),
                           **({"fixApplicability": f.fix_applicability} if f.fix_applicability else {})},
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if f.fix_edits is not None and f.cell is None:
            title, edits = f.fix_edits
            result["fixes"] = [{
                "description": {"text": f"{title} ({f.fix_applicability} fix; `jaxmem review --fix` applies it)"},
                "artifactChanges": [{
                    "artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                    "replacements": [{"deletedRegion": {"charOffset": at, "charLength": n},
                                      "insertedContent": {"text": text}} for at, n, text in edits],
                }],
            }]
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "jaxmem", "version": version, "rules": entries}},
            "results": results,
            "invocations": [{
                "executionSuccessful": True,
                "toolExecutionNotifications": [
                    {"level": "note", "message": {"text": n.message},
                     "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(n.path)}}}]}
                    for n in notes
                ],
            }],
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def format_markdown(findings: Sequence[Finding], notes: Sequence[Note] = (), *, files: int | None = None,
                    hidden: int = 0) -> str:
    """For chat and Slack: a summary line, then one bullet per finding with its fix and card."""
    out = [f"**jaxmem review**: {summary_line(findings, files, hidden)}"]
    if findings:
        out.append("")
    for f in findings:
        link = f" ([{f.topic}]({f.url}))" if f.url else f" (card `{f.topic}`)"
        out.append(f"- `{f.location}` **{f.code}** {'_(possible)_ ' if f.confidence != 'sure' else ''}{f.message}{link}")
        if f.source_line:
            out.append(f"  `{f.source_line.replace('`', chr(39))}`")
        out.append(f"  Fix: {f.fix}" + (f" (`jaxmem review --fix` rewrites it{'' if f.fix_applicability == 'safe' else ' with --unsafe-fixes'})"
                                         if f.fix_applicability else ""))
        if f.measured:
            out.append(f"  Measured: {_measured(f)}")
        ran = runtime_text(f)
        if ran:
            out.append(f"  {ran[0].upper()}{ran[1:]}")
    if notes:
        out.append("")
        out.extend(f"- _note_: `{n.path}`: {n.message}" for n in notes)
    return "\n".join(out) + "\n"
