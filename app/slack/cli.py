"""`jaxmem slack`: run the Slack bot (loaded lazily by app/cli.py)."""
from __future__ import annotations

import logging
import socket

import click

from jaxmem.core.errors import UsageError, friendly, needs


@click.command("slack")
@click.option("--http", "http_mode", is_flag=True,
              help="Serve the Events API over HTTP (needs SLACK_SIGNING_SECRET) instead of Socket Mode.")
@click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True,
              help="HTTP mode: port to listen on; Slack posts to /slack/events.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="HTTP mode: address to bind; put a TLS reverse proxy in front (Slack requires https).")
@click.option("--no-warm", is_flag=True, help="Skip loading the model and index before connecting (faster start, slow first answer).")
@click.option("-v", "--verbose", is_flag=True, help="Log every request and answer.")
@friendly
@needs("chat")
def command(http_mode: bool, port: int, host: str, no_warm: bool, verbose: bool) -> None:
    """Answer questions, review code and verify advice in Slack.

    Socket Mode (default) needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN and no public URL, so it runs
    behind a firewall. HTTP mode (--http) needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET and a
    public https URL ending in /slack/events. SLACK_API_URL overrides the Web API base URL.

    Example: SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-... jaxmem slack
    """
    from jaxmem.app.services import Services
    from jaxmem.app.slack.app import build_app
    from jaxmem.app.slack.config import SlackConfig
    from jaxmem.app.slack.flows import Bot
    from jaxmem.core.settings import Settings

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    mode = "http" if http_mode else "socket"
    settings = Settings()  # read once, here; everything below gets it
    config = SlackConfig.from_settings(settings)
    config.check(mode)  # before minutes of model loading, fail on a missing token
    if http_mode:
        _check_port(host, port)
    bot = Bot(Services(settings))
    if not no_warm:
        click.echo("loading the knowledge base...", err=True)
        bot.services.warm()
    app = build_app(config, bot, mode=mode)
    if http_mode:
        from jaxmem.app.slack.server import EVENTS_PATH, make_server

        server = make_server(app, host, port)
        click.echo(f"jaxmem slack: listening on http://{host}:{port}{EVENTS_PATH} (Ctrl-C stops it)", err=True)
        try:
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    click.echo("jaxmem slack: connecting to Slack in Socket Mode (Ctrl-C stops it)", err=True)
    try:
        SocketModeHandler(app, config.app_token).start()
    except KeyboardInterrupt:
        pass


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}.",
                             "Stop what uses it, or pick another: jaxmem slack --http --port 3001") from None
