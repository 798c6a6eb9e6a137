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
        except KeyboardInterrupt:
            click.echo("interrupted: the previous index (if any) is still usable; run the command again to finish.", err=True)
            sys.exit(130)
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
