"""Slack credentials and endpoints, read from the environment when asked for (never at import)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ingest.errors import UsageError

DEFAULT_API_URL = "https://slack.com/api/"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


@dataclass(kw_only=True)
class SlackConfig:
    bot_token: str | None = field(default_factory=lambda: _env("SLACK_BOT_TOKEN"))
    """SLACK_BOT_TOKEN: the bot's `xoxb-` token, for every Web API call."""
    signing_secret: str | None = field(default_factory=lambda: _env("SLACK_SIGNING_SECRET"))
    """SLACK_SIGNING_SECRET: verifies that HTTP requests come from Slack (HTTP mode only)."""
    app_token: str | None = field(default_factory=lambda: _env("SLACK_APP_TOKEN"))
    """SLACK_APP_TOKEN: the app-level `xapp-` token with connections:write (Socket Mode only)."""
    api_url: str = field(default_factory=lambda: _env("SLACK_API_URL") or DEFAULT_API_URL)
    """SLACK_API_URL: Web API base URL; tests point it at a local stand-in server."""

    def check(self, mode: str) -> None:
        """Raise a UsageError naming every missing or malformed variable for `mode` (http|socket)."""
        if mode not in ("http", "socket"):
            raise UsageError(f"Slack mode {mode!r} is not valid.", "Valid modes: http, socket.")
        needed = {"SLACK_BOT_TOKEN": (self.bot_token, "xoxb-")}
        if mode == "http":
            needed["SLACK_SIGNING_SECRET"] = (self.signing_secret, "")
        else:
            needed["SLACK_APP_TOKEN"] = (self.app_token, "xapp-")
        missing = [name for name, (value, _) in needed.items() if not value]
        if missing:
            raise UsageError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set "
                             f"(needed for {'Socket Mode' if mode == 'socket' else 'HTTP mode'}).",
                             "Copy them from the app's settings at https://api.slack.com/apps "
                             "(see README: Slack bot).")
        for name, (value, prefix) in needed.items():
            if prefix and not value.startswith(prefix):
                raise UsageError(f"{name} starts with {value[:5]!r}; it should start with {prefix!r}.",
                                 "Bot tokens are xoxb-..., app-level tokens xapp-...; check which one you copied.")
        if not self.api_url.startswith(("http://", "https://")):
            raise UsageError(f"SLACK_API_URL={self.api_url!r} is not an http(s) URL.",
                             f"Unset it for Slack's own {DEFAULT_API_URL}.")

    @property
    def base_url(self) -> str:
        return self.api_url if self.api_url.endswith("/") else self.api_url + "/"
