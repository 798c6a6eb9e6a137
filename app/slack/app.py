"""The Bolt app: a client for the Web API, the retry filter, and the listeners.

`process_before_response=False` lets Bolt return each ack at once and run the lazy listeners
(the slow work) on its thread pool afterwards, which keeps every request under Slack's 3 s.
"""
from __future__ import annotations

from urllib.error import URLError

from slack_bolt import App
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from jaxmem.app.slack.config import SlackConfig
from jaxmem.app.slack.dedupe import retry_middleware
from jaxmem.app.slack.flows import Bot
from jaxmem.app.slack.listeners import register
from jaxmem.core.errors import JaxmemError, UsageError


def build_app(config: SlackConfig, bot: Bot, *, mode: str = "http") -> App:
    config.check(mode)
    client = WebClient(token=config.bot_token, base_url=config.base_url)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))  # honours Retry-After
    try:
        # Bolt checks the token with auth.test here, so a bad one fails at start, not per message.
        app = App(client=client, signing_secret=config.signing_secret or "", process_before_response=False,
                  # Socket Mode frames are authenticated by the app token, not signed.
                  request_verification_enabled=mode == "http", name="jaxmem")
    except BoltError as exc:
        raise UsageError(f"Slack rejected SLACK_BOT_TOKEN: {exc}", "Reinstall the app to the workspace and copy "
                         "the Bot User OAuth Token (xoxb-...) again.") from None
    except (URLError, OSError) as exc:
        raise JaxmemError(f"cannot reach the Slack Web API at {config.base_url}: {exc}",
                          "Check the network/proxy, or SLACK_API_URL if you set it.") from None
    app.use(retry_middleware(bot.seen))
    register(app, bot)
    return app
