"""`jaxmem web`: start the Streamlit chat on 127.0.0.1 (loaded lazily by app/cli.py)."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from jaxmem.core.errors import UsageError, friendly, needs

ENTRY = Path(__file__).with_name("web.py")
HOST = "127.0.0.1"  # local only: the app runs code for anyone who can reach it (Review > run)


def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def streamlit_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(ENTRY), "--server.address", HOST,
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            # No "Deploy" button: this is a local tool, not a Streamlit Cloud app.
            "--client.toolbarMode", "viewer",
            # A server, not a dev loop: a source edit must not offer users a "Rerun".
            "--server.fileWatcherType", "none"]


@click.command("web")
@click.option("--port", type=click.IntRange(1, 65535), default=8501, show_default=True,
              help="Port on 127.0.0.1 to serve the app on.")
@friendly
@needs("chat")
def command(port: int) -> None:
    """Start the web chat (ask, verify, review) at http://127.0.0.1:PORT.

    Uses the embedded store under JAXMEM_DATA_DIR and builds the index on first start.

    Example: jaxmem web --port 8502
    """
    if not port_free(port):
        raise UsageError(f"port {port} on {HOST} is already in use.", "Stop what uses it, or pick another: jaxmem web --port 8502")
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.api import ensure_index

    # Build the index here, with a progress bar in the terminal, rather than behind a spinner in
    # the browser: the first start embeds the whole corpus (minutes on 2 cores).
    built = ensure_index(Settings())
    if built:
        click.echo(f"built the index: {built['chunks']} chunks from {built['cards']} cards in {built['seconds']} s", err=True)
    click.echo(f"jaxmem web: http://{HOST}:{port}  (Ctrl-C stops it)", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Become the Streamlit server rather than its parent: SIGTERM from a service manager or a
    # container runtime then reaches the server itself, which shuts down cleanly. (A parent that
    # died on SIGTERM used to leave Streamlit running, reparented to PID 1, still on its port.)
    argv = streamlit_argv(port)
    os.execv(argv[0], argv)
