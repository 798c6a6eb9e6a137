"""`jaxmem verify`: a thin adapter from the command line to `evaluators.verify.api`."""
from __future__ import annotations

import json
import os
import sys
import time

import click

from jaxmem.core.errors import friendly, needs
from jaxmem.core.layout import writable_corpus
from jaxmem.core.settings import Settings
from jaxmem.evaluators.verify import api
from jaxmem.evaluators.verify.manifest import ManifestError
from jaxmem.evaluators.verify.report import script_report, summary, table
from jaxmem.evaluators.verify.sandbox import GiB, Limits
from jaxmem.evaluators.verify.store import write_evidence


def on_cluster(topics, *, repeats, fresh, limits, jobs, settings, on_record=None) -> list[dict]:
    """`api.verify_topics`, but each pair is a job on the Ray pool (JAXMEM_RAY_ADDRESS): the record
    names the worker node it ran on. `jobs` pairs are in flight at once."""
    from concurrent.futures import ThreadPoolExecutor

    from jaxmem.evaluators.verify.jobs import Request
    from jaxmem.evaluators.verify.pool import verifier_for

    available = api.pairs(settings)
    for topic in topics:  # a bad name fails before anything is submitted
        api.pair_for(topic, available)
    verifier = verifier_for(settings)
    verifier.connect()

    def one(topic: str) -> dict:
        record = verifier.run(Request("card", topic=topic, repeats=repeats, limits=limits, fresh=fresh)).record
        return record

    records = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for record in pool.map(one, topics):
            if on_record is not None:
                on_record(record)
            records.append(record)
    return records


@click.command("verify")
@click.argument("topics", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Verify every snippet pair in the corpus.")
@click.option("--script", "script", type=click.Path(exists=True, dir_okay=False),
              help="Run your own script in isolation; report transfers, sync points, compiles, memory.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON records instead of a table.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1, 20),
              help="Runs per side of pairs with a noisy metric (peak RSS must change in every "
                   "one); exact counts and compiled sizes need one run.")
@click.option("--fresh", is_flag=True, help="Ignore cached results and measure again.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1, 3600),
              help="Seconds per child run before it is killed.")
@click.option("--memory-gib", default=8.0, show_default=True, type=click.FloatRange(0.5, 1024),
              help="Memory ceiling per child run, GiB.")
@click.option("--jobs", default=min(2, os.cpu_count() or 1), show_default=True, type=click.IntRange(1, 64),
              help="Pairs verified at once (each pair's runs stay sequential).")
@click.option("--record", is_flag=True,
              help="With --all: write the results to corpus/evidence/<backend>.json.")
@friendly
@needs("verify")
def command(topics, all_, script, as_json, repeats, fresh, timeout, memory_gib, jobs, record):
    """Run before/after snippet pairs in isolation and check that the advice holds here.

    \b
    Examples:
      jaxmem verify buffer-donation implicit-host-sync
      jaxmem verify --all --json
      jaxmem verify --script train.py
    """
    settings = Settings()
    limits = Limits(timeout_s=timeout, memory_bytes=int(memory_gib * GiB))
    if script:
        if topics or all_:
            raise click.UsageError("--script runs one file; do not combine it with topics or --all")
        if settings.ray_address:  # the same cluster the web app and the Slack bot verify on
            from jaxmem.evaluators.verify.jobs import Request
            from jaxmem.evaluators.verify.pool import verifier_for

            source = open(script, encoding="utf-8").read()
            result = verifier_for(settings).run(Request("script", source=source, limits=limits)).result
        else:
            result = api.verify_script(script, limits=limits, sandbox=settings.sandbox,
                                       python=settings.run_python, hidden=[settings.data_dir])
        click.echo(json.dumps(result, indent=1) if as_json else script_report(result))
        sys.exit(0 if result["ok"] else 1)
    try:
        available = api.pairs(settings)
    except ManifestError as e:
        raise click.ClickException(str(e)) from None
    if all_ == bool(topics):
        raise click.UsageError(f"name topics or pass --all (not both); topics: {', '.join(sorted(available))}")
    if record and not all_:
        raise click.UsageError("--record writes evidence for the whole suite: use it with --all")
    if record:  # before the runs, not after them: say now that the evidence could not be written
        writable_corpus(settings.corpus_dir, "`jaxmem verify --all --record`")
    selected = sorted(available) if all_ else list(topics)
    started = time.monotonic()
    run = dict(repeats=repeats, fresh=fresh, limits=limits, jobs=jobs, settings=settings)
    verify_topics = on_cluster if settings.ray_address else api.verify_topics
    if settings.ray_address:
        click.echo(f"verifying on the Ray cluster at {settings.ray_address} "
                   f"(workers with {settings.ray_accelerator})", err=True)
    try:
        if all_ and not as_json and sys.stderr.isatty():
            with click.progressbar(length=len(selected), label="verifying", file=sys.stderr) as bar:
                records = verify_topics(selected, on_record=lambda r: bar.update(1), **run)
        elif all_:
            # Not a terminal: one line per finished pair is the progress report logs can keep.
            def log(r: dict) -> None:
                click.echo(f"[{time.monotonic() - started:5.1f} s] {r['topic']}: {r['verdict']}", err=True)
            records = verify_topics(selected, on_record=log, **run)
        else:
            records = verify_topics(selected, **run)
    except (api.UnknownTopicError, ManifestError, RuntimeError) as e:
        raise click.ClickException(str(e)) from None
    elapsed = time.monotonic() - started
    if as_json:
        click.echo(json.dumps({"elapsed_s": round(elapsed, 1), "records": records}, indent=1))
    else:
        click.echo(table(records))
        click.echo("")
        for r in records:
            click.echo(f"{r['topic']}: {summary(r)}")
        click.echo(f"\n{len(records)} pair(s) in {elapsed:.1f} s on {records[0]['backend'] if records else '?'}")
    if record:
        click.echo(f"evidence written to {write_evidence(records, settings)}", err=True)
    # Fails (for CI) when a claim did not hold or could not be checked; "not measurable here"
    # is an honest answer, not a failure.
    sys.exit(1 if any(r["verdict"] in ("error", "not confirmed") for r in records) else 0)


if __name__ == "__main__":
    command()
