"""`jaxmem web`: options, a busy port, and a real start-up on 127.0.0.1."""
from __future__ import annotations

import os
import signal
import socket
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner

from jaxmem.app.cli import main
from tests.helpers import background, free_port, port_open, running_with, wait_http


def test_web_is_a_jaxmem_command_with_a_port_option():
    result = CliRunner().invoke(main, ["web", "--help"])
    assert result.exit_code == 0, result.output
    assert "--port" in result.output and "8501" in result.output


def test_bad_port_names_the_valid_range():
    result = CliRunner().invoke(main, ["web", "--port", "70000"])
    assert result.exit_code == 2 and "70000" in result.output and "1<=x<=65535" in result.output


def test_busy_port_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = CliRunner().invoke(main, ["web", "--port", str(port)])
    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.output and "--port" in result.output


@pytest.mark.slow
def test_jaxmem_web_serves_on_localhost_and_stops_on_sigterm(web_env, tmp_path, capsys):
    """Stopped as a service manager or container runtime stops it (SIGTERM to the process it
    started): within seconds, nothing left serving on the port, no Streamlit left behind."""
    port = free_port()
    log = tmp_path / "web.log"
    with background([sys.executable, "-m", "jaxmem.app.cli", "web", "--port", str(port)], env={**os.environ, **web_env},
                    log=log) as proc:
        wait_http(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=60, expect=b"ok", log=log)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert b"<html" in r.read().lower()
        start = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)  # the pid the service manager knows, not its group
        proc.wait(timeout=20)
        stopped = time.monotonic() - start
    assert not port_open(port), "something still serves on the port"
    assert not running_with(f"--server.port\0{port}\0"), "a Streamlit server survived"
    assert stopped < 10
    with capsys.disabled():
        print(f"\n[shutdown] jaxmem web: stopped {stopped:.1f} s after SIGTERM; port {port} closed, no process left")
