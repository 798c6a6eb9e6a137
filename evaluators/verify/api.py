"""The verifier's library surface: what the CLI, the advisor, the web app and the Slack bot call.

    verify_topic("buffer-donation")        -> record (cached until snippet/jax/backend change)
    verify_script("train.py")              -> transfers, sync points by line, compiles, peak RSS
    verify_command("python train.py --steps 5", tree)  -> the same for a command run in its tree,
                                             each sync, transfer and compile on its line, first step apart
    latest_evidence("buffer-donation")     -> newest stored record, or None
    summary(record)                        -> "verified on cpu, jax 0.10.2: ..."
    evidence_summaries("buffer-donation")  -> one labelled line per machine kind with evidence
    evidence_with_summaries("buffer-donation") -> the newest record with those lines, one read
"""
from __future__ import annotations

import platform
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from jaxmem.core.settings import Settings
from jaxmem.evaluators.verify.command import CommandError, parse  # noqa: F401  (CommandError: the door's error)
from jaxmem.evaluators.verify.manifest import Pair, load_pairs
from jaxmem.evaluators.verify.records import Evidence, ScriptRun  # noqa: F401  (the door's view types)
from jaxmem.evaluators.verify.report import summary, where  # noqa: F401
from jaxmem.evaluators.verify.runner import SnippetRun, isolation_for, run_command, run_snippet
from jaxmem.evaluators.verify.sandbox import InterpreterError, Limits  # noqa: F401
from jaxmem.evaluators.verify.store import RUN, cache_key, load_cached, records_for, save_cached
from jaxmem.evaluators.verify.suite import Baselines, Progress, sync_lines, verify_pair
from jaxmem.evaluators.verify.view import MetricRow, metric_rows, script_rows  # noqa: F401


class UnknownTopicError(ValueError):
    pass


def pairs(settings: Settings | None = None) -> dict[str, Pair]:
    return load_pairs((settings or Settings()).corpus_dir)


def pair_for(topic: str, available: dict[str, Pair]) -> Pair:
    by_topic = {p.topic: p for p in available.values()}
    if topic in available:
        return available[topic]
    if topic in by_topic:
        return by_topic[topic]
    raise UnknownTopicError(f"no snippet pair for topic {topic!r}; valid: {', '.join(sorted(available))}")


def verify_topics(topics: Iterable[str], *, repeats: int = 3, fresh: bool = False,
                  limits: Limits | None = None, settings: Settings | None = None,
                  progress: Progress | None = None, on_record=None, jobs: int = 1) -> list[dict]:
    """Verify several topics sharing one empty-snippet baseline per environment.

    `jobs` pairs run at once (each pair's own runs stay sequential and interleaved, so before
    and after see the same machine). Peak RSS and counts are per process and unaffected;
    wall time, information only, then includes the contention. Records come back in the
    order asked; `on_record` is called in the calling thread as each pair finishes.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    settings = settings or Settings()
    limits = limits or Limits()
    available = pairs(settings)
    selected = [pair_for(t, available) for t in topics]   # fail on a bad name before running anything
    isolation = isolation_for(False, settings.sandbox)
    baselines = Baselines(limits)
    for env in {tuple(sorted(p.env.items())) for p in selected}:
        baselines.get(dict(env), isolation)      # first, serially: every worker then reads the same floor

    def one(pair: Pair) -> dict:
        base = baselines.get(pair.env, isolation)
        if not fresh and base.ok:
            d = base.device
            key = cache_key(pair.snippet_hash(), d["jax"], d["jaxlib"], d["backend"], d["device_kind"])
            cached = load_cached(pair.topic, key, settings)
            if cached is not None:
                return {**cached, "origin": "cache"}
        record = verify_pair(pair, repeats=repeats, limits=limits, baselines=baselines,
                             progress=progress, isolation=isolation)
        save_cached(record, settings)
        return record

    records: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(one, pair): pair.id for pair in selected}
        for future in as_completed(futures):
            record = future.result()
            records[futures[future]] = record
            if on_record:
                on_record(record)
    return [records[pair.id] for pair in selected]


def verify_topic(topic: str, repeats: int = 3, progress: Progress | None = None, **kwargs) -> dict:
    return verify_topics([topic], repeats=repeats, progress=progress, **kwargs)[0]


def verify_script(path_or_source: str | Path, *, limits: Limits | None = None, sandbox: str = "bwrap",
                  python: str | None = None, hidden: list[Path] = ()) -> dict:
    """Run a user's script in the sandbox and report its dynamic behaviour, each host sync,
    transfer and compilation on the line of the script's folder that caused it (`attribution`).

    Raises SandboxUnavailable where the sandbox cannot start (unless `sandbox="process"`, the
    JAXMEM_SANDBOX setting). `python`: the interpreter (JAXMEM_RUN_PYTHON); `hidden`: folders the
    run must not see even inside the script's folder (the data directory)."""
    limits = limits or Limits()
    baselines = Baselines(limits)
    candidate = Path(path_or_source) if isinstance(path_or_source, Path) or "\n" not in str(path_or_source) else None
    with tempfile.TemporaryDirectory(prefix="jaxmem-script-") as tmp:
        if candidate is not None and candidate.is_file():
            path, name = candidate.resolve(), str(candidate)
        elif candidate is not None and str(path_or_source).endswith(".py"):
            raise FileNotFoundError(f"script {path_or_source!r} does not exist")
        else:
            path, name = Path(tmp) / "script.py", "<source>"
            path.write_text(str(path_or_source))
        isolation = isolation_for(True, sandbox)  # refuses before anything runs
        baseline = baselines.get({}, isolation) if python is None else None
        run = run_snippet(path, limits=limits, baseline=baseline, isolation=isolation, attribute=True,
                          python=python, hidden=list(hidden))
    return {"script": name, "script_path": str(path), "tree": str(path.parent), **_run_result(run, limits, path)}


def verify_command(command: str, tree: str | Path, *, limits: Limits | None = None, sandbox: str = "bwrap",
                   python: str | None = None, hidden: list[Path] = ()) -> dict:
    """Run a user's command (`python train.py --steps 5`, `python -m pkg.train`) with `tree`
    mounted read-only as its working directory, and report what `verify_script` reports.

    Raises CommandError for a command it does not run (only Python), SandboxUnavailable where the
    sandbox cannot start, InterpreterError for an unusable `python`."""
    limits = limits or Limits()
    tree = Path(tree).resolve()
    if tree == Path(tree.anchor):
        raise CommandError("--run-cmd needs a project folder to run in, not the file system's root")
    cmd = parse(command, tree)
    isolation = isolation_for(True, sandbox)
    try:
        run = run_command(tree, script=cmd.script, module=cmd.module, argv=list(cmd.argv), env=cmd.env,
                          limits=limits, isolation=isolation, python=python, hidden=list(hidden))
    except ValueError as exc:  # a denied environment name (a secret) in the command
        raise CommandError(f"--run-cmd: {exc}") from None
    return {"command": command, "script": cmd.target, "script_path": str(cmd.script) if cmd.script else None,
            "tree": str(tree), **_run_result(run, limits, cmd.script)}


def _run_result(run: SnippetRun, limits: Limits, script: Path | None) -> dict:
    d = run.device
    attribution = run.attribution
    return {"ok": run.ok and not run.tampered, "error": run.error, "traceback": run.traceback,
            # The code touched what measures it: its counts are "not measurable", never numbers.
            "tampered": run.tampered,
            "backend": d.get("backend"), "device_kind": d.get("device_kind"), "jax": d.get("jax"),
            **{k: run.values.get(k) for k in ("h2d_transfers", "implicit_h2d_transfers",
                                              "d2h_transfers", "host_syncs", "compile_count",
                                              "peak_rss", "device_peak_bytes", "wall_time")},
            # Donation that took effect: bytes of donated inputs that calls consumed and XLA aliased to
            # outputs (per device, summed over the run's calls), the calls, the largest call's bytes.
            "alias_bytes": run.values.get("aliased_bytes"), "aliased_calls": run.values.get("aliased_calls"),
            "alias_max_call_bytes": run.values.get("aliased_max_call_bytes"), "alias_error": run.alias_error,
            "host_sync_lines": attributed_sync_lines(attribution, script) if attribution is not None else sync_lines(run),
            # Per line of the user's code: syncs, transfers (bytes where JAX logs them) and compiles,
            # the first step apart from the steady ones; see evaluators/verify/attribution.py.
            "attribution": attribution, "attribution_error": run.attribution_error, "timeout_s": limits.timeout_s,
            "stdout": run.stdout[-4000:], "stderr": run.stderr[-4000:], "isolation": run.isolation,
            "node": platform.node()}


def attributed_sync_lines(attribution: dict, script: Path | None = None) -> list[dict]:
    """`host_sync_lines` (line, source, count) from an attributed run: the script's own lines as
    before, other files' lines with their path."""
    out = []
    for row in attribution.get("lines", []):
        syncs = row["metrics"].get("host_syncs")
        if syncs:
            entry = {"line": row["line"], "source": row.get("source", ""), "count": syncs["total"]}
            if script is None or Path(row["abspath"]).resolve() != Path(script).resolve():
                entry["path"] = row["path"]
            out.append(entry)
    return out


def latest_evidence(topic: str, settings: Settings | None = None, records: list[dict] | None = None) -> dict | None:
    """Newest record for `topic`: a measured run if one exists, else committed evidence."""
    records = records_for(topic, settings) if records is None else records
    local = [r for r in records if r["origin"] == RUN]
    return (local or records or [None])[0]


def evidence_summaries(topic: str, settings: Settings | None = None, records: list[dict] | None = None) -> list[str]:
    """One line per machine kind with evidence for `topic` (newest each, measured runs first),
    each saying where it was measured: GPU evidence shows on a CPU machine, labelled as GPU."""
    best: dict[tuple, dict] = {}
    records = records_for(topic, settings) if records is None else records
    for r in sorted(records, key=lambda r: r["origin"] != RUN):
        best.setdefault((r.get("backend"), r.get("device_kind")), r)
    return [f"{summary(r)} [{r['origin']}, {str(r.get('date', ''))[:10]}"
            + (f", ran on {r['node']}" if r.get("origin") == RUN and r.get("node") else "") + "]"
            for r in best.values()]


def evidence_with_summaries(topic: str, settings: Settings | None = None) -> dict | None:
    """The newest record of `topic` with `all_machines` (its per-machine lines), from one read of
    the stored records: what an answer and the web app's evidence panel show."""
    records = records_for(topic, settings)
    record = latest_evidence(topic, settings, records)
    return None if record is None else {**record, "all_machines": evidence_summaries(topic, settings, records)}


def options(settings: Settings) -> dict:
    """Limits and repeats of runs the web app and the Slack bot start, from the settings
    (JAXMEM_VERIFY_TIMEOUT, JAXMEM_VERIFY_REPEATS, JAXMEM_SANDBOX; JAXMEM_RUN_TIMEOUT for users' code)."""
    return {"limits": Limits(timeout_s=settings.verify_timeout), "repeats": settings.verify_repeats,
            "run_limits": Limits(timeout_s=settings.run_timeout)}


def run_options(settings: Settings) -> dict:
    """How users' scripts and commands run: their time limit, the interpreter, what stays hidden."""
    return {"limits": Limits(timeout_s=settings.run_timeout), "sandbox": settings.sandbox,
            "python": settings.run_python, "hidden": [settings.data_dir]}
