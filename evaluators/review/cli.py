"""`jaxmem review`: a thin adapter from the command line to `evaluators.review.api`."""
from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import click

from jaxmem.core.errors import debugging, friendly
from jaxmem.evaluators.review import api, baseline, config, registry
from jaxmem.evaluators.review.registry import SelectionError


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def rules_table() -> str:
    """The rule list, generated from the rule modules (never written by hand elsewhere), with each
    rule's precision as measured on code nobody tuned the rules on (registry.measured_precision)."""
    measured = registry.measured_precision()
    rows = ["| code | name | topic | severity | default | precision on unseen code (sure) | message |",
            "|---|---|---|---|---|---|---|"]
    static = registry.all_rules()
    for r in (*static, *registry.measured_rules()):
        on = "on" if r.default else "opt-in"
        if r not in static:
            shown = "a measurement, not a guess (`--run`)"
        else:
            shown = measured.get(r.code, "no sure finding there" if measured else "not measured")
        rows.append(f"| {r.code} | {r.name} | {r.topic} | {r.severity} | {on} | {shown} | {r.message} |")
    note = measured.get("_reading")
    return "\n".join(rows) + "\n" + (f"\nPrecision: {note}\n" if note else "")


def runner():
    """The verifier's isolated script run: the review command runs code, the reviewer never does."""
    from jaxmem.evaluators.verify.api import verify_script

    return verify_script


def command_runner():
    """The verifier's isolated run of a command in the reviewed tree (--run-cmd)."""
    from jaxmem.evaluators.verify.api import verify_command

    return verify_command


def _run(run_path, run_cmd, paths, timeout, python) -> dict:
    """Run the script or the command in the sandbox with the settings' limits and interpreter."""
    from jaxmem.core.settings import Settings
    from jaxmem.evaluators.verify.api import Limits

    settings = Settings()
    opts = {"limits": Limits(timeout_s=timeout or settings.run_timeout), "sandbox": settings.sandbox,
            "python": python or settings.run_python, "hidden": [settings.data_dir]}
    if run_path:
        return runner()(run_path, **opts)
    disk = [Path(p).resolve() for p in paths if p != "-"]
    if not disk:
        raise click.UsageError("--run-cmd runs in the reviewed folder: give the folder (or its files) to review")
    tree = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in disk]))
    return command_runner()(run_cmd, tree, **opts)


@click.command("review")
@click.argument("paths", nargs=-1, type=str)
@click.option("--format", "fmt", type=click.Choice(api.FORMATS), default="text", show_default=True,
              help="Output format: text (path:line:col: CODE message), json, sarif (GitHub code scanning), markdown.")
@click.option("--select", multiple=True, help="Only these codes or prefixes (comma-separated, repeatable), e.g. JM1,JM401.")
@click.option("--ignore", multiple=True, help="Skip these codes or prefixes (comma-separated, repeatable).")
@click.option("--exclude", multiple=True, help="Glob of paths to skip inside directories (repeatable).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
              help="pyproject.toml to read [tool.jaxmem] from (default: the nearest one).")
@click.option("--no-gitignore", is_flag=True, help="Review files that .gitignore excludes too.")
@click.option("--include-tests", is_flag=True,
              help="Review test files inside directories too (tests/, test_*.py, *_test.py, conftest.py); skipped by default.")
@click.option("--show-fixes", is_flag=True, help="Text format: print the source line, the fix and the card link.")
@click.option("--show-possible", is_flag=True,
              help="Also show findings whose premises the reviewer could not prove (marked possible); they then "
                   "count for the exit status too.")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False),
              help="Leave out the findings recorded in this baseline file (see --write-baseline).")
@click.option("--write-baseline", "write_baseline", type=click.Path(dir_okay=False, writable=True),
              help="Record every finding shown now as accepted, in this file, and exit 0.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="Write the report to a file.")
@click.option("--run", "run_path", type=click.Path(dir_okay=False),
              help="Also run this script in the verifier's sandbox: each finding is marked confirmed (with its "
                   "count per step), not seen or not run, and per-step syncs, transfers and recompiles no rule "
                   "flagged become measured findings (JM011-JM014).")
@click.option("--run-cmd", "run_cmd", metavar="COMMAND",
              help="Like --run, for a command run in the reviewed folder (mounted read-only, the working "
                   "directory): \"python train.py --steps 5\", \"python -m pkg.train\", NAME=VALUE first to set "
                   "environment variables. `python` is JAXMEM_RUN_PYTHON (or --run-python).")
@click.option("--run-timeout", type=click.FloatRange(1, 86400), default=None,
              help="Seconds the run may take (default: JAXMEM_RUN_TIMEOUT).")
@click.option("--run-python", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The interpreter to run with, e.g. a virtual environment with the code's packages "
                   "(default: JAXMEM_RUN_PYTHON, else the one running jaxmem).")
@click.option("--fix", "fix", is_flag=True,
              help="Rewrite the findings that have a safe fix, in place (files, and notebooks' code cells with their "
                   "outputs kept); then report what is left. Exit 1 when findings are left.")
@click.option("--unsafe-fixes", is_flag=True,
              help="With --fix or --diff, also apply the fixes that may change what the code prints or computes "
                   "(a read moved to a logging interval, a loop variable made an argument); marks them [*] too.")
@click.option("--diff", "show_diff", is_flag=True,
              help="Print what --fix would change as a unified diff and write nothing; exit 1 when there is "
                   "something to fix. With --run/--run-cmd, the table compares the code before and after.")
@click.option("--fix-interval", type=click.IntRange(1, 1_000_000_000), default=100, show_default=True,
              help="Steps between two reads of the loss when a fix moves a per-step read to a logging interval "
                   "(JM101-JM103).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="Worker processes for large batches.")
@click.option("--list-rules", is_flag=True, help="Print the rule table (Markdown) and exit.")
@click.option("--explain", metavar="CODE", help="Print one rule's documentation and exit.")
@friendly
def command(paths, fmt, select, ignore, exclude, config_path, no_gitignore, include_tests, show_fixes, show_possible,
            baseline_path, write_baseline, output, run_path, run_cmd, run_timeout, run_python, fix, unsafe_fixes,
            show_diff, fix_interval, jobs, list_rules, explain):
    """Review Python files, directories and notebooks for JAX memory and transfer anti-patterns.

    Each finding links to the advice card that explains it. Use `-` (or no path with piped
    input) to review code from standard input. Exit status: 0 no findings, 1 findings,
    2 usage or internal error.

    \b
    Examples:
      jaxmem review train.py notebooks/
      pbpaste | jaxmem review -
      jaxmem review src/ --format sarif -o jaxmem.sarif
      jaxmem review --select JM1 --ignore JM104 train.py
      jaxmem review --run train.py          # review it and attach measured counts
      jaxmem review src/ --run-cmd "python -m src.train --steps 5"
      jaxmem review train.py --diff         # what --fix would change
      jaxmem review train.py --fix --run train.py   # fix it, measured before and after
      jaxmem review src/ --write-baseline .jaxmem-baseline.json   # accept what is there now
      jaxmem review src/ --baseline .jaxmem-baseline.json         # then see only new findings
    """
    try:
        if list_rules:
            click.echo(rules_table(), nl=False)
            return
        if explain:
            rule = registry.by_code().get(explain.strip().upper())
            if rule is None:
                raise click.UsageError(f"unknown rule {explain!r}; valid codes: {', '.join(registry.by_code())}")
            click.echo(textwrap.dedent(rule.doc))
            click.echo(f"\ntopic: {rule.topic}    severity: {rule.severity}")
            return
        paths = list(paths)
        if run_path and run_path not in paths:
            paths.append(run_path)
        if not paths:
            if sys.stdin.isatty():
                raise click.UsageError("give files, directories or notebooks to review, or `-` for standard input")
            paths = ["-"]
        # A path that does not exist is a mistake on the command line, not "0 findings": say so and
        # exit 2, after reviewing whatever else was given.
        missing = [p for p in paths if p != "-" and not Path(p).exists()]
        for p in missing:
            click.echo(f"error: {p}: no such file or directory", err=True)
        paths = [p for p in paths if p not in missing]
        if not paths:
            sys.exit(2)
        cfg_file = Path(config_path) if config_path else config.find_pyproject(Path(paths[0] if paths[0] != "-" else "."))
        cfg = config.load(cfg_file)
        sel = _split(select) or cfg.select
        ign = [*cfg.ignore, *_split(ignore)]
        result = api.review_paths(paths, select=sel, ignore=ign, exclude=[*cfg.exclude, *exclude],
                                  max_file_size=cfg.max_file_size, respect_gitignore=not no_gitignore,
                                  jobs=jobs, include_tests=include_tests or cfg.include_tests,
                                  show_possible=show_possible or cfg.show_possible)
        notes = list(result.notes)
        if write_baseline:
            n = baseline.write(result.findings, Path(write_baseline))
            click.echo(f"Wrote {n} finding{'s' if n != 1 else ''} to {write_baseline}; review with "
                       f"--baseline {write_baseline} to see only new ones.")
            sys.exit(2 if missing or result.errors else 0)
        baseline_path = baseline_path or cfg.baseline
        if baseline_path:
            result.findings, known = baseline.apply(result.findings, baseline.load(Path(baseline_path)))
            if known:
                notes.append(api.Note(baseline_path, f"{known} finding{'s' if known != 1 else ''} left out: "
                                                     "recorded in this baseline"))
        run_line = run_result = None
        if run_path and run_cmd:
            raise click.UsageError("give --run FILE or --run-cmd COMMAND, not both")
        if fix or show_diff:
            _fix(result, notes, fmt=fmt, output=output, rules=registry.select(sel, ign), sel=sel, ign=ign,
                 show_possible=show_possible or cfg.show_possible, baseline_path=baseline_path, write_files=fix,
                 unsafe=unsafe_fixes, interval=fix_interval, paths=paths, run=(run_path, run_cmd, run_timeout,
                                                                             run_python), failed=bool(missing))
        if run_path or run_cmd:
            from jaxmem.evaluators.review import dynamic

            run_result = _run(run_path, run_cmd, paths, run_timeout, run_python)
            added = api.attach_run([*result.findings, *result.possible], run_path or "", run_result, select=sel,
                                   ignore=ign)
            # A possible finding the run confirmed is shown too (its premise was not proven, its cost was).
            seen = [f for f in result.possible if (f.runtime or {}).get("status") == "confirmed"]
            result.hidden -= len(seen)
            result.findings = sorted([*result.findings, *seen, *added], key=api.Finding.sort_key)
            run_line = dynamic.run_summary(run_result)
            run_result = {k: v for k, v in run_result.items() if k not in ("stdout", "stderr")}
        _annotate_fixes(result.findings, fix_interval, jobs)
        report = _render(fmt, result, notes, sel, ign, show_fixes, run_result, unsafe_fixes)
        if run_line and fmt in ("text", "markdown"):
            report += run_line + "\n"
        if output:
            Path(output).write_text(report, encoding="utf-8")
        else:
            click.echo(report, nl=False)
        sys.exit(2 if missing else result.exit_code)
    except (SelectionError, config.ConfigError, baseline.BaselineError) as exc:
        raise click.UsageError(str(exc)) from None


def _render(fmt: str, result: api.ReviewResult, notes, sel, ign, show_fixes: bool, run: dict | None,
            unsafe_fixes: bool = False) -> str:
    if fmt == "json":
        return api.format_json(result.findings, notes, files=result.files, run=run, hidden=result.hidden)
    if fmt == "sarif":
        return api.format_sarif(result.findings, notes, rules=registry.select(sel, ign),
                                card_url=api.card_url_factory(), card_help=api.card_help_factory())
    if fmt == "markdown":
        return api.format_markdown(result.findings, notes, files=result.files, hidden=result.hidden)
    return api.format_text(result.findings, notes, verbose=show_fixes, files=result.files, hidden=result.hidden,
                           unsafe_fixes=unsafe_fixes)


# ---- --fix / --diff -----------------------------------------------------------------------------
def _annotate_fixes(findings, interval: int, jobs: int | None = None) -> None:
    """Mark the findings a fix exists for ([*] in text); a fix that fails to compute is just no fix."""
    from jaxmem.evaluators.review import workers
    from jaxmem.evaluators.review.fixes import session
    from jaxmem.evaluators.review.fixes.base import Options

    try:
        session.annotate_findings(findings, options=Options(interval),
                                  jobs=jobs if jobs is not None else workers.default_jobs())
    except Exception:  # the review stands without the marks
        if debugging():
            raise


def _fix(result: api.ReviewResult, notes, *, fmt, output, rules, sel, ign, show_possible, baseline_path,
         write_files: bool, unsafe: bool, interval: int, paths, run, failed: bool) -> None:
    """Fix (or show the diff of) every file with a fixable finding; with a run, measure the code
    before and after the whole fix. Prints the report and exits: --diff 1 when there is something to
    fix, --fix 1 when findings are left, 2 on errors."""
    import json

    from jaxmem.evaluators.review.fixes import measure_table, session
    from jaxmem.evaluators.review.fixes.base import Options

    if "-" in paths:
        raise click.UsageError("--fix and --diff work on files: save standard input to a file first")
    keep = None
    if baseline_path:
        accepted = baseline.load(Path(baseline_path))
        keep = lambda found: baseline.apply(found, accepted)[0]  # noqa: E731
    outcomes = session.plan(result.findings, rules, unsafe=unsafe, options=Options(interval),
                            show_possible=show_possible, keep=keep)
    table = None
    run_path, run_cmd = run[0], run[1]
    if run_path or run_cmd:
        try:
            table = _measure_fix(outcomes, paths, *run)
        except session.FixError as exc:
            raise click.UsageError(str(exc)) from None
    if write_files:
        for problem in session.write(outcomes):
            click.echo(f"error: {problem}", err=True)
            failed = True
    fixed = {o.path for o in outcomes}
    left = sorted([*(f for f in result.findings if f.path not in fixed), *(f for o in outcomes for f in o.remaining)],
                  key=api.Finding.sort_key)
    changed = any(o.changed for o in outcomes)
    diff = session.diff_text(outcomes)
    lines = session.fix_lines(outcomes)
    summary = session.summary(outcomes, written=write_files, unsafe=unsafe)
    if fmt == "json":
        doc = json.loads(api.format_json(left, notes, files=result.files, hidden=result.hidden))
        doc["fixes"] = {"written": write_files, "unsafe_fixes": unsafe, "interval": interval,
                        "applied": [a.to_dict() for o in outcomes for a in o.applied],
                        "files_changed": [o.path for o in outcomes if o.changed],
                        "unsafe_available": sum(o.skipped_unsafe for o in outcomes), "diff": diff,
                        "notes": [n for o in outcomes for n in o.notes], "summary": summary}
        if table is not None:
            doc["fix_run"] = table.to_dict()
        report = json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
    elif fmt == "sarif":
        report = api.format_sarif(left, notes, rules=registry.select(sel, ign), card_url=api.card_url_factory(),
                                  card_help=api.card_help_factory())
    else:
        parts = []
        if not write_files and diff:
            parts.append(diff)
        if write_files:
            parts.append(api.format_markdown(left, notes, files=result.files, hidden=result.hidden) if fmt == "markdown"
                         else api.format_text(left, notes, files=result.files, hidden=result.hidden))
        parts.append("".join(f"{line}\n" for line in lines) + summary + "\n")
        if table is not None:
            parts.append(measure_table.format_table(table, markdown=fmt == "markdown"))
        elif run_path or run_cmd:
            parts.append("No fix applies, so nothing was run.")
        report = "\n".join(p.rstrip("\n") + "\n" for p in parts if p)
    if output:
        Path(output).write_text(report, encoding="utf-8")
    else:
        click.echo(report, nl=False)
    if failed or result.errors:
        sys.exit(2)
    sys.exit(int(changed) if not write_files else int(bool(left)))


def _measure_fix(outcomes, paths, run_path, run_cmd, timeout, python):
    """Run the code as it is and with every fix in it (a copy of the run's folder), in the sandbox,
    interleaved and repeated as the verifier's noise rules need."""
    import tempfile

    from jaxmem.core.settings import Settings
    from jaxmem.evaluators.review.fixes import measure, session

    codes = sorted({a.finding.code for o in outcomes for a in o.applied})
    if not any(o.changed for o in outcomes):
        return None
    if run_path:
        root = Path(run_path).resolve().parent
    else:
        disk = [Path(p).resolve() for p in paths if p != "-"]
        root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in disk]))
    with tempfile.TemporaryDirectory(prefix="jaxmem-fix-") as tmp:
        copy, outside = session.fixed_copy(root, outcomes, Path(tmp))
        for p in outside:
            click.echo(f"note: {p} is outside the run's folder {root}: the after-run does not include its fixes",
                       err=True)

        def before():
            return _run(run_path, run_cmd, paths, timeout, python)

        def after():
            if run_path:
                return _run(str(copy / Path(run_path).resolve().relative_to(root)), None, [str(copy)], timeout, python)
            return _run(None, run_cmd, [str(copy)], timeout, python)

        return measure.measure(before, after, codes, repeats=Settings().verify_repeats)


if __name__ == "__main__":  # `python -m evaluators.review.cli`, without the jaxmem entry point
    command()
