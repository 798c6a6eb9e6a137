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


def friendly(fn):
    """Decorator for command functions: library errors become a message and an exit status."""
    import click

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except JaxmemError as exc:
            click.echo(f"error: {exc.message}", err=True)
            if exc.hint:
                click.echo(f"  {exc.hint}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:
            click.echo(f"{'stopped' if isinstance(exc, Terminated) else 'interrupted'}: what was saved stays usable "
                       "(an index keeps answering); run the command again to finish.", err=True)
            sys.exit(143 if isinstance(exc, Terminated) else 130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # the last line of defence: no traceback reaches a user
            # Read here, not from Settings: this also reports a failure to read the settings.
            if os.environ.get("JAXMEM_DEBUG", "").lower() in ("1", "true", "yes", "on"):
                raise
            click.echo(f"internal error: {type(exc).__name__}: {str(exc)[:300]}", err=True)
            click.echo("  Set JAXMEM_DEBUG=1 for the traceback and report it.", err=True)
            sys.exit(2)

    return wrapper
