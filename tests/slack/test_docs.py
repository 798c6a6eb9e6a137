"""The manifest and the Slack guide (docs/slack.md) agree with the code: nothing documented twice by hand drifts."""
from __future__ import annotations

from pathlib import Path

import yaml

from jaxmem.app.slack.cli import command
from jaxmem.app.slack.listeners.command import COMMAND

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = yaml.safe_load((ROOT / "slack-manifest.yaml").read_text(encoding="utf-8"))
SECTION = (ROOT / "docs" / "slack.md").read_text(encoding="utf-8")


def env_vars() -> set[str]:
    """The Slack settings of the one settings model."""
    from jaxmem.core.settings import fields

    return {meta["env"] for _, meta in fields() if meta["env"].startswith("SLACK_") or meta["env"] == "JAXMEM_SLACK_USER_RUNS"}


def test_every_setting_and_option_is_documented():
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL"} <= env_vars()
    for var in env_vars():
        assert f"`{var}`" in SECTION, var
    for param in command.params:
        for opt in param.opts:
            assert f"`{opt}" in SECTION, opt


def test_manifest_matches_what_the_bot_handles_and_calls():
    (slash,) = MANIFEST["features"]["slash_commands"]
    assert slash["command"] == COMMAND
    events = set(MANIFEST["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_mention", "message.im"} <= events  # mentions and DMs
    assert MANIFEST["settings"]["interactivity"]["is_enabled"]  # feedback buttons
    scopes = set(MANIFEST["oauth_config"]["scopes"]["bot"])
    # chat.postMessage/update/postEphemeral, the slash command, and conversations.replies per kind of channel.
    assert {"chat:write", "commands", "app_mentions:read", "im:history", "channels:history"} <= scopes
    # Every message.* event needs the matching *:history scope, or Slack refuses the manifest.
    for event in events - {"app_mention"}:
        kind = event.split(".")[1]
        assert f"{kind}:history" in scopes, event
    for scope in scopes:
        assert f"`{scope}`" in SECTION, scope
    for event in events:
        assert f"`{event}`" in SECTION, event
