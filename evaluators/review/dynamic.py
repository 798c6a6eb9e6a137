"""`jaxmem review --run FILE`: run the script in the verifier's isolation and attach what was
measured to the findings it explains.

Static findings say "this may sync every iteration"; the run says "line 17 synced 100 times".
The verifier (`evaluators.verify.api.verify_script`) does the isolation and measurement; this
module only matches its numbers to findings.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxmem.evaluators.review.finding import Finding

SYNC_TOPICS = frozenset({"implicit-host-sync"})
TRANSFER_TOPICS = frozenset({"batch-transfers", "prefetch-to-device", "explicit-device-put"})
COMPILE_TOPICS = frozenset({"jit-compilation", "scan-over-loops"})
MEMORY_TOPICS = frozenset({"buffer-donation", "live-arrays-cleanup", "in-place-updates"})


def attach(findings: Sequence[Finding], path: str, result: dict) -> list[Finding]:
    """Copy the measured counts onto the findings of `path` they explain; returns those findings."""
    per_line = {s.get("line"): s.get("count") for s in result.get("host_sync_lines") or [] if s.get("line")}
    touched = []
    for f in findings:
        if f.path != path or f.cell is not None:
            continue
        measured = {}
        if f.topic in SYNC_TOPICS:
            measured["host_syncs_at_line"] = per_line.get(f.line, 0)
            if result.get("host_syncs") is not None:
                measured["host_syncs_total"] = result["host_syncs"]
        elif f.topic in TRANSFER_TOPICS and result.get("h2d_transfers") is not None:
            measured["h2d_transfers_total"] = result["h2d_transfers"]
        elif f.topic in COMPILE_TOPICS and result.get("compile_count") is not None:
            measured["compile_count"] = result["compile_count"]
        elif f.topic in MEMORY_TOPICS and result.get("peak_rss") is not None:
            measured["peak_rss_mib"] = round(result["peak_rss"] / 2**20, 1)
        if measured:
            measured["backend"] = result.get("backend") or "unknown"
            f.measured.update(measured)
            touched.append(f)
    return touched


def confirm(findings: Sequence[Finding], path: str, runner: Callable[[str], dict]) -> tuple[dict, list[Finding]]:
    """Run `path` once with `runner` (the verifier's isolated run: the caller passes it, since the
    reviewer itself never runs code); returns its result and the annotated findings."""
    result = runner(path)
    return result, attach(findings, path, result)


def run_summary(result: dict) -> str:
    """One line for the review output: whether the run worked and the totals it measured."""
    where = f"{result.get('backend') or 'unknown backend'}, jax {result.get('jax') or '?'}"
    if result.get("tampered"):
        return (f"--run {result.get('script')}: not measurable on {where}: the code touched what measures it "
                f"({'; '.join(result['tampered'])})")
    if not result.get("ok"):
        return f"--run {result.get('script')}: the script failed on {where}: {result.get('error') or 'unknown error'}"
    parts = [f"{k}={result[k]}" for k in ("h2d_transfers", "host_syncs", "compile_count") if result.get(k) is not None]
    if result.get("peak_rss") is not None:
        parts.append(f"peak_rss={result['peak_rss'] / 2**20:.0f} MiB")
    return f"--run {result.get('script')}: ran on {where}: " + ", ".join(parts)
