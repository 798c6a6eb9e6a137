"""`jaxmem web`: options, a busy port, and a real start-up on 127.0.0.1."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner

from app.cli import main


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
def test_jaxmem_web_serves_on_localhost(web_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "web", "--port", str(port)],
                            env={**os.environ, **web_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.read().strip() == b"ok"
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "jaxmem web did not answer within 60 s"
                time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert b"<html" in r.read().lower()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
