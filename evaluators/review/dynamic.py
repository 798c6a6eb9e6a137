"""`jaxmem review --run FILE` / `--run-cmd CMD`: static meets dynamic.

The verifier runs the code in its sandbox and puts every host sync, transfer and compilation on the
line of the user's code that caused it, the first (compiling) step apart from the steady ones
(`evaluators.verify.api.verify_script` / `verify_command`, its `attribution`). This module only
reads that result (the reviewer never runs code):

- every static finding on a file that ran gets `Finding.runtime`: "confirmed" (the metric its rule
  is about was measured at that line, or below it in the user's calls, on the steady steps, with
  the counts per step), "not-seen" (the line ran and the metric was not measured there after the
  first step), "not-run" (the line never ran), or "not-measurable" (what the rule is about is not
  counted per line, e.g. memory, which is measured per run);
- every per-step sync, transfer or recompile that no finding explains becomes a measured finding
  (JM011-JM014, evaluators/review/measured.py) at its line.
"""
from __future__ import annotations

import ast
import linecache
import os
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

from jaxmem.evaluators.review import astutil
from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.measured import BY_METRIC

SYNC_TOPICS = frozenset({"implicit-host-sync"})
TRANSFER_TOPICS = frozenset({"batch-transfers", "prefetch-to-device", "explicit-device-put"})
COMPILE_TOPICS = frozenset({"jit-compilation", "scan-over-loops"})
MEMORY_TOPICS = frozenset({"buffer-donation", "live-arrays-cleanup", "in-place-updates"})

# What a run counts per line, in the order reports list it.
LINE_METRICS = ("host_syncs", "implicit_h2d_transfers", "explicit_h2d_transfers", "d2h_transfers", "compiles")
# A static finding about transfers is confirmed by either kind (a per-step device_put is one too).
CONFIRMED_BY = {"h2d_transfers": ("implicit_h2d_transfers", "explicit_h2d_transfers")}
# The metric that confirms a static finding, by its rule's topic (rules about settings, removed
# APIs or memory have none: what they are about is not counted per line).
METRIC_OF_TOPIC = {
    "implicit-host-sync": "host_syncs", "host-callbacks": "host_syncs", "host-value-caching": "host_syncs",
    "batch-transfers": "h2d_transfers", "prefetch-to-device": "h2d_transfers",
    "explicit-device-put": "h2d_transfers", "pinned-host-memory": "h2d_transfers",
    "host-offloading": "h2d_transfers", "jit-compilation": "compiles", "scan-over-loops": "compiles",
}
# Codes whose topic names a metric but whose finding is about a setting or an API, not a per-line cost.
NOT_PER_LINE = frozenset({"JM204", "JM205"})
WHAT = {"host_syncs": "host sync", "implicit_h2d_transfers": "implicit host->device transfer",
        "explicit_h2d_transfers": "explicit host->device transfer (device_put)",
        "d2h_transfers": "device->host transfer", "compiles": "compilation"}


def metric_for(f: Finding) -> str | None:
    if f.code in NOT_PER_LINE or f.code in {r.code for r in BY_METRIC.values()}:
        return None
    return METRIC_OF_TOPIC.get(f.topic)


def attach(findings: Sequence[Finding], path: str, result: dict, card_url: Callable[[str], str] | None = None,
           keep: Callable[[str], bool] | None = None) -> list[Finding]:
    """Mark the findings the run explains and return the measured findings it adds.

    `path`: how the findings name the run's script (a file given to `--run`, `<pasted>`);
    `card_url(topic)`: the link a new finding carries; `keep(code)`: whether the selection keeps
    a measured code (--select/--ignore)."""
    _legacy(findings, path, result)
    attribution = result.get("attribution")
    if not attribution or result.get("tampered"):
        return []
    run = _Run(attribution, path, result)
    for f in findings:
        if f.cell is None and run.covers(f.path):
            f.runtime = run.runtime_for(f)
    return run.measured_findings(findings, card_url or (lambda _t: ""), keep or (lambda _c: True))


class _Run:
    """One attributed run, indexed by (absolute path, line)."""

    def __init__(self, attribution: dict, script: str, result: dict):
        self.script = script
        self.script_path = os.path.realpath(result["script_path"]) if result.get("script_path") else None
        self.tree = os.path.realpath(result.get("tree") or ".")
        self.peak_rss = result.get("peak_rss")
        # Lines of one statement (a call over several lines) are one place: the finding's line.
        self.own = _by_statement(attribution.get("lines", []))
        self.under = _by_statement(attribution.get("inclusive", []))
        self.ran = {os.path.realpath(p): {_start(p, n) for n in lines}
                    for p, lines in (attribution.get("ran") or {}).items()}
        self.files = {p for p, _line in self.own} | {p for p, _line in self.under} | set(self.ran)

    def real(self, path: str) -> str:
        """The file a finding's path names, as the run knows it."""
        if self.script and path == self.script and self.script_path:
            return self.script_path
        return os.path.realpath(path)

    def covers(self, path: str) -> bool:
        real = self.real(path)
        return real in self.files or real.startswith(os.path.join(self.tree, ""))

    def shown(self, abspath: str, findings: Sequence[Finding]) -> str:
        """How the report names a file: as the findings name it, else relative to where it runs."""
        if self.script and abspath == self.script_path:
            return self.script
        for f in findings:
            if f.cell is None and self.real(f.path) == abspath:
                return f.path
        rel = os.path.relpath(abspath)
        return abspath if rel.startswith("..") else rel

    def runtime_for(self, f: Finding) -> dict:
        key = (self.real(f.path), _start(self.real(f.path), f.line))
        metric = metric_for(f)
        row = self.under.get(key)
        measured = _per_step(row)
        if metric is None:
            why = "memory is measured per run, not per line" if f.topic in MEMORY_TOPICS else \
                "what this rule is about is not counted per line"
            out = {"status": "not-measurable", "why": why}
            if f.topic in MEMORY_TOPICS and self.peak_rss:
                out["peak_rss_mib"] = round(self.peak_rss / 2**20, 1)
            return {**out, **measured}
        found = [(row or {}).get("metrics", {}).get(m) for m in CONFIRMED_BY.get(metric, (metric,))]
        stats = _merge([x for x in found if x])
        if stats and (stats.get("steady_total") or stats.get("outside_loops")):
            return {"status": "confirmed", "metric": metric, **measured}
        if stats:
            return {"status": "not-seen", "metric": metric, "why": "only in the first step", **measured}
        if f.line in self.ran.get(key[0], set()) or not self.ran:
            return {"status": "not-seen", "metric": metric, **measured}
        return {"status": "not-run", "metric": metric}

    def measured_findings(self, findings: Sequence[Finding], card_url, keep) -> list[Finding]:
        explained: dict[str, set] = {}
        for f in findings:
            metric = metric_for(f)
            if metric and f.cell is None and f.runtime and f.runtime.get("status") == "confirmed":
                for m in CONFIRMED_BY.get(metric, (metric,)):
                    explained.setdefault(m, set()).add((self.real(f.path), _start(self.real(f.path), f.line)))
        out = []
        for (abspath, line), row in sorted(self.own.items()):
            via = {(p, _start(p, n)) for p, n in row.get("via", [])}
            for metric in LINE_METRICS:
                stats = row["metrics"].get(metric)
                rule = BY_METRIC.get(metric)
                if not stats or rule is None or not keep(rule.code) or not _is_per_step(stats, metric):
                    continue
                if ({(abspath, line)} | via) & explained.get(metric, set()):
                    continue  # a confirmed static finding on this line or on a call on the way here
                out.append(self._finding(rule, abspath, line, row, stats, findings, card_url))
        return out

    def _finding(self, rule, abspath: str, line: int, row: dict, stats: dict, findings, card_url) -> Finding:
        per = stats.get("per_step")
        steps = stats.get("steady_steps") or 0
        if per is not None and steps:
            count = f"{per:g}"
            steps_with, steps_text = stats.get("steps_with", 0), steps
        else:  # a loop inside a library call: per run of the line
            count = f"{stats.get('per_run', 0):g}"
            steps_with, steps_text = stats.get("runs_of_line", 1), stats.get("runs_of_line", 1)
        names = list(stats.get("how", {}))   # most frequent first
        how = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") or rule.what
        nbytes = stats.get("bytes")
        shown = stats.get("total", 0) - stats.get("bytes_not_shown", 0)
        byte_text = (f" ({_size(nbytes / shown)} each" + (" where JAX shows the shape" if shown < stats["total"] else "")
                     + ")") if nbytes and shown > 0 else ""
        message = rule.message.format(count=count, s="" if count == "1" else "s", how=how, bytes=byte_text,
                                      steps_with=steps_with, steps=steps_text)
        if per is None or not steps:
            message = message.replace(" per step", " per run of this line").replace(
                "steady steps", "runs of this line") + f" (a loop inside {', '.join(stats.get('inside', []))})"
        callers = row.get("called_from") or []
        if callers:
            message += f"; called from {', '.join(callers)}"
        source = row.get("source") or linecache.getline(abspath, line).strip()
        runtime = {"status": "measured", "metric": rule.metric, **_per_step(row)}
        return Finding(path=self.shown(abspath, findings), line=line, col=1, code=rule.code, name=rule.name,
                       message=message, severity=rule.severity, topic=rule.topic, fix=rule.fix,
                       url=card_url(rule.topic), source_line=source, confidence="sure", runtime=runtime)


@lru_cache(maxsize=256)
def _statements(path: str) -> dict[int, int]:
    """Each line of a file -> the first line of the innermost statement holding it (a compound
    statement's header only); {} when the file cannot be read or parsed."""
    try:
        tree = ast.parse(open(path, "rb").read())
    except (OSError, SyntaxError, ValueError):
        return {}
    starts: dict[int, int] = {}
    for node in astutil.walk(tree):   # breadth first: inner statements come later and win
        if isinstance(node, ast.stmt):
            body = getattr(node, "body", None)
            end = (body[0].lineno - 1 if isinstance(body, list) and body and hasattr(body[0], "lineno")
                   else node.end_lineno or node.lineno)
            for line in range(node.lineno, max(node.lineno, end) + 1):
                starts[line] = node.lineno
    return starts


def _start(path: str, line: int) -> int:
    return _statements(path).get(line, line)


def _by_statement(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """Rows keyed by (file, first line of their statement), rows of one statement merged."""
    out: dict[tuple[str, int], dict] = {}
    for row in rows:
        key = (row["abspath"], _start(row["abspath"], row["line"]))
        if key not in out:
            out[key] = {**row, "line": key[1], "metrics": dict(row["metrics"])}
            continue
        merged = out[key]
        for metric, stats in row["metrics"].items():
            merged["metrics"][metric] = _add(merged["metrics"].get(metric), stats)
        for field in ("called_from", "via"):
            if row.get(field):
                merged[field] = [*merged.get(field, []), *(x for x in row[field] if x not in merged.get(field, []))]
    return out


def _add(a: dict | None, b: dict) -> dict:
    """One metric's counts at two lines of one statement, as one."""
    if a is None:
        return dict(b)
    out = dict(a)
    for key in ("total", "first_step", "steady_total", "outside_loops", "bytes_not_shown", "explicit"):
        if key in a or key in b:
            out[key] = (a.get(key) or 0) + (b.get(key) or 0)
    for key in ("steady_steps", "steps_with", "runs_of_line"):
        if key in a or key in b:
            out[key] = max(a.get(key) or 0, b.get(key) or 0)
    for key in ("per_step", "per_run", "per_run_of_busiest_library_line"):
        if a.get(key) is not None or b.get(key) is not None:
            out[key] = round((a.get(key) or 0) + (b.get(key) or 0), 3)
    if "bytes" in a or "bytes" in b:
        out["bytes"] = None if a.get("bytes") is None and b.get("bytes") is None else \
            (a.get("bytes") or 0) + (b.get("bytes") or 0)
    if a.get("how") or b.get("how"):
        out["how"] = dict(Counter(a.get("how") or {}) + Counter(b.get("how") or {}))
    if a.get("inside") or b.get("inside"):
        out["inside"] = list(dict.fromkeys([*(a.get("inside") or []), *(b.get("inside") or [])]))
    out.setdefault("loop", b.get("loop"))
    return out


def _merge(stats: list[dict]) -> dict | None:
    """Two metrics' counts at one line as one (implicit and explicit transfers)."""
    if len(stats) < 2:
        return stats[0] if stats else None
    return {"total": sum(s["total"] for s in stats), "steady_total": sum(s.get("steady_total", 0) for s in stats),
            "outside_loops": sum(s.get("outside_loops", 0) for s in stats)}


def _is_per_step(stats: dict, metric: str = "") -> bool:
    """In at least half of the steady steps of its loop (3 or more iterations), or, for syncs and
    transfers, at least 10 times from one library line in every run of a line outside the user's
    loops (that library's loop; a library converting a few arrays once, or compiling its pieces
    once, is not one). The same rule as evaluators.verify.attribution.per_step, which the reviewer
    cannot import."""
    steady = stats.get("steady_steps") or 0
    if steady >= 2 and stats.get("steps_with", 0) * 2 >= steady and stats.get("steady_total"):
        return True
    return metric != "compiles" and (stats.get("per_run_of_busiest_library_line") or 0) >= 10


def _per_step(row: dict | None) -> dict:
    """The measured counts at a line: per steady step, in the first step, and about the loop."""
    if not row:
        return {}
    per_step, first_step, total, extra = {}, {}, {}, {}
    for metric in LINE_METRICS:
        stats = row["metrics"].get(metric)
        if not stats:
            continue
        total[metric] = stats["total"]
        if stats.get("loop"):
            per_step[metric] = stats.get("per_step")
            first_step[metric] = stats.get("first_step", 0)
            extra.setdefault("loop", stats["loop"])
            extra.setdefault("steps", (stats.get("steady_steps") or 0) + 1)
        if stats.get("outside_loops"):
            extra.setdefault("per_run_of_line", {})[metric] = stats.get("per_run")
        if stats.get("bytes") is not None:
            extra.setdefault("bytes", {})[metric] = stats["bytes"]
        if stats.get("bytes_not_shown"):
            extra.setdefault("bytes_not_shown", {})[metric] = stats["bytes_not_shown"]
        if stats.get("inside"):
            extra.setdefault("inside", stats["inside"])
    return {"per_step": per_step, "first_step": first_step, "total": total, **extra}


def _size(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _legacy(findings: Sequence[Finding], path: str, result: dict) -> None:
    """The run's counts on the findings of `path` they explain (`Finding.measured`, JSON version 1's
    view, kept): syncs at the line, transfer and compile totals, peak RSS."""
    per_line = {s.get("line"): s.get("count") for s in result.get("host_sync_lines") or []
                if s.get("line") and not s.get("path")}
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


def confirm(findings: Sequence[Finding], path: str, runner: Callable[[str], dict], **kwargs) -> tuple[dict, list[Finding]]:
    """Run `path` once with `runner` (the verifier's isolated run: the caller passes it, since the
    reviewer itself never runs code); returns its result and the measured findings it adds."""
    result = runner(path)
    return result, attach(findings, path, result, **kwargs)


def run_summary(result: dict) -> str:
    """The review output's lines about the run: whether it worked, its totals, peak memory, what
    was per step at which line, and what could not be measured here."""
    name = result.get("command") or result.get("script")
    flag = "--run-cmd" if result.get("command") else "--run"
    where = f"{result.get('backend') or 'unknown backend'}, jax {result.get('jax') or '?'}"
    if result.get("tampered"):
        return (f"{flag} {name}: not measurable on {where}: the code touched what measures it "
                f"({'; '.join(result['tampered'])})")
    parts = [f"{k}={result[k]}" for k in ("h2d_transfers", "host_syncs", "compile_count") if result.get(k) is not None]
    if result.get("peak_rss") is not None:
        parts.append(f"peak_rss={result['peak_rss'] / 2**20:.0f} MiB")
    if result.get("aliased_calls"):
        # what donation really saved: bytes the compiled calls wrote into their donated inputs
        parts.append(f"donated={_size(result.get('alias_bytes') or 0)} in {result['aliased_calls']} calls")
    if not result.get("ok"):
        failed = f"{flag} {name}: the script failed on {where}: {result.get('error') or 'unknown error'}"
        return failed + (f"; measured until then: {', '.join(parts)}" if parts and result.get("attribution") else "")
    lines = [f"{flag} {name}: ran on {where}: " + ", ".join(parts)]
    attribution = result.get("attribution") or {}
    for loop in attribution.get("loops", [])[:3]:
        lines.append(f"  loop {loop['path']}:{loop['line']}: {loop['iterations']} iterations "
                     f"(step 1 = the first, compiling one; the rest steady)")
    for row in attribution.get("lines", []):
        for metric in LINE_METRICS:
            stats = row["metrics"].get(metric)
            if stats and _is_per_step(stats, metric):
                per = stats.get("per_step")
                text = (f"{per:g}/step after {stats.get('first_step', 0)} in step 1" if per is not None
                        else f"{stats.get('per_run', 0):g} per run of the line")
                lines.append(f"  {row['path']}:{row['line']}: {WHAT[metric]}s {text}")
    if result.get("attribution_error"):
        lines.append(f"  {result['attribution_error']}")
    missing = attribution.get("unattributed") or {}
    if missing:
        lines.append("  not attributed to a line (per run only): " + ", ".join(f"{k}={v}" for k, v in missing.items()))
    if result.get("alias_error"):
        lines.append(f"  donated bytes: {result['alias_error']}")
    if result.get("backend") == "cpu":
        lines.append("  device->host transfers: not measurable here (cpu: the transfer guard logs none; host "
                     "syncs are counted instead)")
    return "\n".join(lines)
