"""Words and tables for verification records: the one-line summary answers show, the CLI table."""
from __future__ import annotations

from jaxmem.evaluators.verify.metrics import METRICS, format_value
from jaxmem.evaluators.verify.verdicts import CONFIRMED, ERROR, NOT_CONFIRMED, NOT_MEASURABLE
from jaxmem.evaluators.verify.view import script_rows

_LEAD = {CONFIRMED: "verified", NOT_CONFIRMED: "not confirmed", ERROR: "verification failed",
         NOT_MEASURABLE: "not measurable"}


def where(record: dict) -> str:
    backend = record.get("backend") or "unknown backend"
    kind = record.get("device_kind")
    device = f"{backend} ({kind})" if kind and kind.lower() != backend else backend
    return f"{device}, jax {record.get('jax') or '?'}"


def _change(m: dict) -> str:
    metric = METRICS[m["metric"]]
    return f"{m['label']} {format_value(metric, m['before'])} -> {format_value(metric, m['after'])}"


def summary(record: dict) -> str:
    """E.g. "verified on cpu, jax 0.10.2: host->device transfers 101 -> 1"."""
    verdict = record.get("verdict")
    lead = f"{_LEAD.get(verdict, verdict)} on {where(record)}"
    if verdict == ERROR:
        reason = next((m["reason"] for m in record["metrics"] if m["verdict"] == ERROR), None)
        return f"{lead}: {reason or 'see the record'}"
    if verdict == NOT_MEASURABLE:
        needs = sorted({b for m in record["metrics"] for b in m["backends"]})
        return f"{lead}: needs {' or '.join(needs)}"
    shown = [m for m in record["metrics"] if m["verdict"] in (CONFIRMED, NOT_CONFIRMED)]
    text = f"{lead}: " + "; ".join(_change(m) for m in shown)
    pending = [m["label"] for m in record["metrics"] if m["verdict"] == NOT_MEASURABLE]
    if pending:
        text += f" ({', '.join(pending)}: not measurable on {record.get('backend')})"
    return text


def table(records: list[dict]) -> str:
    """One row per declared metric of each record, then the overall verdict per card."""
    rows = [("topic", "metric", "expect", "before", "after", "verdict")]
    for r in records:
        for m in r["metrics"]:
            metric = METRICS[m["metric"]]
            verdict = m["verdict"]
            if verdict == NOT_MEASURABLE:
                verdict = f"not measurable on {r.get('backend')}"
            rows.append((r["topic"], m["metric"], m["expect"], format_value(metric, m["before"]),
                         format_value(metric, m["after"]), verdict))
        rows.append((r["topic"], "(overall)", "", "", "", r["verdict"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def script_report(result: dict) -> str:
    lines = [f"script: {result['script']}", f"ran on {where(result)}"]
    if result.get("error"):
        lines.append(f"error: {result['error']}")
        if result.get("traceback"):
            lines.append(result["traceback"].rstrip())
    lines += [row.text for row in script_rows(result)]
    for s in result.get("host_sync_lines") or []:
        where_ = f"line {s['line']}" if s["line"] else "outside the script"
        lines.append(f"  {where_}: {s['count']}x  {s['source'] or ''}")
    attribution = result.get("attribution") or {}
    if attribution.get("lines"):
        lines.append("per line (step 1 is the first, compiling step of the loop; the rest are steady):")
    for row in attribution.get("lines", []):
        for metric, stats in row["metrics"].items():
            if stats.get("loop"):
                per = stats.get("per_step")
                text = f"{'-' if per is None else f'{per:g}'}/step, {stats.get('first_step', 0)} in step 1 " \
                       f"(loop {stats['loop']})"
            else:
                text = f"{stats['total']} outside loops"
            if metric == "aliased_calls" and stats.get("bytes") is not None:
                text += f", {format_value(METRICS['alias_bytes'], stats['bytes'])} donated and aliased in all"
            lines.append(f"  {row['path']}:{row['line']}: {metric.replace('_', ' ')} {text}")
    for metric, n in (attribution.get("unattributed") or {}).items():
        lines.append(f"  not attributed to a line: {metric.replace('_', ' ')} {n}")
    if result.get("attribution_error"):
        lines.append(result["attribution_error"])
    return "\n".join(lines)
