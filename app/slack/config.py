"""Slack credentials and endpoints: the Slack part of the settings (`ingest.config.Settings`,
SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN, SLACK_API_URL), checked for a mode."""
from __future__ import annotations

from dataclasses import dataclass

from jaxmem.core.errors import UsageError
from jaxmem.core.settings import Settings

DEFAULT_API_URL = "https://slack.com/api/"


@dataclass(kw_only=True)
class SlackConfig:
    bot_token: str | None = None
    signing_secret: str | None = None
    app_token: str | None = None
    api_url: str = DEFAULT_API_URL

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackConfig:
        return cls(bot_token=settings.secret("slack_bot_token"), signing_secret=settings.secret("slack_signing_secret"),
                   app_token=settings.secret("slack_app_token"), api_url=settings.slack_api_url)

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
