"""End to end: signed Events API and slash-command requests to the real Bolt app over HTTP; the
local Web API stand-in records what the bot posts."""
from __future__ import annotations

import json
import time

import pytest

from tests.slack.conftest import mention, message, post, send_action, send_command, send_event

pytestmark = pytest.mark.slow

SWEDISH = "Varför reserverar JAX 75 procent av grafikkortets minne direkt när programmet startar?"
DONATION_CODE = """```
import jax

@jax.jit
def update(params, grads):
    return params - 0.1 * grads

def train(params, grads):
    for _ in range(100):
        params = update(params, grads)
    return params
```"""


def bot_messages(standin, channel: str) -> list[dict]:
    """The bot's messages in `channel` as Slack now stores them, placeholders included."""
    with standin._lock:
        msgs = [m for (ch, _), m in standin.messages.items() if ch == channel and m.get("bot_id")]
    return sorted(msgs, key=lambda m: float(m["ts"]))


def is_placeholder(msg: dict) -> bool:
    return ":hourglass_flowing_sand:" in json.dumps(msg.get("blocks"))


def finished(standin, channel: str, n: int = 1) -> list[dict]:
    def done():
        msgs = bot_messages(standin, channel)
        return msgs if len(msgs) >= n and not any(is_placeholder(m) for m in msgs) else None

    return standin.wait_for(done)


def block_text(msg: dict) -> str:
    out = []
    for b in msg.get("blocks") or []:
        if b["type"] == "section":
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out.extend(e.get("text", "") for e in b["elements"])
        elif b["type"] == "actions":
            out.extend(e["text"]["text"] for e in b["elements"])
    return "\n".join(out)


def test_swedish_mention_is_answered_in_swedish_in_the_thread_with_citations(bot_server, standin, channel):
    event = mention(standin, channel, SWEDISH)
    reply = send_event(bot_server.url, event)
    assert reply.status == 200
    (answer,) = finished(standin, channel)
    assert answer["thread_ts"] == event["ts"]  # in the question's thread, not the channel
    text = block_text(answer)
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in text and "Källor" in text  # the Swedish card, its sources label
    # No public web app configured: the whole card is its summary, not a link to a page nobody serves.
    assert ":page_facing_up: *" in text and "card?topic=" not in text and "github.com" not in text
    assert "**" not in text and "](" not in text  # mrkdwn, not Markdown
    meta = answer["metadata"]["event_payload"]
    assert meta["language"] == "sv" and meta["answer_language"] == "sv" and meta["cards"][0] == "gpu-preallocation"
    assert ":+1: Till hjälp" in text  # feedback buttons in the answer's language
    # The thinking indication came first, in the thread, and was replaced by the answer.
    first_post = standin.of("chat.postMessage", channel)[0]
    assert "Tänker" in first_post.params["text"] and first_post.params["thread_ts"] == event["ts"]
    assert standin.of("chat.update", channel)[0].params["ts"] == answer["ts"]
    assert all(c.token == "xoxb-test-token" for c in standin.in_channel(channel))


def test_follow_up_in_the_thread_uses_the_earlier_turns(bot_server, standin, channel):
    first = mention(standin, channel, SWEDISH)
    send_event(bot_server.url, first)
    finished(standin, channel, 1)
    # No mention: a plain reply in a thread the bot answered in is a follow-up. On its own,
    # "and on TPU?" reads as English and retrieves the donation card; in this thread it
    # continues the Swedish conversation about preallocation.
    follow = message(standin, channel, "and on TPU?", thread_ts=first["ts"])
    assert send_event(bot_server.url, follow).status == 200
    msgs = finished(standin, channel, 2)
    second = msgs[-1]
    assert second["thread_ts"] == first["ts"]
    payload = second["metadata"]["event_payload"]
    assert payload["cards"][0] == "gpu-preallocation" and payload["language"] == "sv"
    assert standin.of("conversations.replies", channel)[-1].params["ts"] == first["ts"]
    alone = bot_server.bot.services.ask("and on TPU?")  # the same words without the thread
    assert (alone.language, alone.citations[0].card) != ("sv", "gpu-preallocation")


def test_plain_channel_message_outside_answered_threads_is_ignored(bot_server, standin, channel):
    event = message(standin, channel, "Lunch at noon, anyone?")
    assert send_event(bot_server.url, event).status == 200
    time.sleep(1.5)
    assert bot_messages(standin, channel) == []


def test_direct_message_is_answered_in_a_thread(bot_server, standin, channel):
    event = message(standin, channel, "How do I donate buffers with jax.jit so the update does not keep two copies?",
                    channel_type="im")
    assert send_event(bot_server.url, event).status == 200
    (answer,) = finished(standin, channel)
    assert answer["thread_ts"] == event["ts"]
    assert answer["metadata"]["event_payload"]["cards"][0] == "buffer-donation"


def test_code_block_in_a_mention_is_reviewed_as_a_compact_list_with_card_links(bot_server, standin, channel):
    # As Slack's composer sends a code block: no newline after the opening fence, `<` escaped.
    slack_style = DONATION_CODE.replace("```\n", "```", 1).replace("\n```", "```").replace("<", "&lt;")
    send_event(bot_server.url, mention(standin, channel, "review this:\n" + slack_style))
    (answer,) = finished(standin, channel)
    text = block_text(answer)
    assert "Granskar" not in text and "Reviewing" not in text  # the placeholder was replaced
    assert "`JM401` line 9" in text
    assert "→ buffer-donation" in text
    assert "card?topic=" not in text and "github.com" not in text
    assert standin.of("chat.postMessage", channel)[0].params["text"].startswith("Reviewing")


def test_slash_command_ask_is_acked_at_once_and_answered_in_the_channel(bot_server, standin, channel):
    reply = send_command(bot_server.url, "ask How do I stop JAX from preallocating GPU memory?", channel,
                         standin.response_url("ask"))
    assert reply.status == 200 and "Thinking" in reply.body
    (answer,) = finished(standin, channel)
    assert "thread_ts" not in answer  # a new message the team sees; its thread takes follow-ups
    text = block_text(answer)
    assert "<@UHUMAN01> asked: How do I stop JAX" in text
    assert answer["metadata"]["event_payload"]["cards"][0] == "gpu-preallocation"


def test_slash_command_review_posts_findings(bot_server, standin, channel):
    slack_style = DONATION_CODE.replace("```\n", "```", 1)  # as Slack's composer sends it
    reply = send_command(bot_server.url, "review " + slack_style, channel, standin.response_url("review"))
    assert reply.status == 200
    (answer,) = finished(standin, channel)
    assert "`JM401`" in block_text(answer) and "/jaxmem review" in block_text(answer)


def test_slash_command_mistakes_get_usage_and_nothing_is_posted(bot_server, standin, channel):
    reply = send_command(bot_server.url, "verify", channel, standin.response_url("v"))
    assert reply.status == 200 and "Name a topic" in reply.body
    # an unknown topic is found after the ack (which reads no corpus) and told to the user only
    send_command(bot_server.url, "verify no-such-topic", channel, standin.response_url(channel))
    (call,) = standin.wait_for(lambda: [c for c in standin.of("response_url") if c.params["name"] == channel])
    assert call.params["response_type"] == "ephemeral" and "Valid topics" in json.dumps(call.params)
    reply = send_command(bot_server.url, "review no code here", channel, standin.response_url("r"))
    assert "Paste the code in a ``` block" in reply.body
    time.sleep(1.0)
    assert standin.in_channel(channel) == []


def test_answer_falls_back_to_response_url_where_the_bot_cannot_post(bot_server, standin, channel):
    standin.fail["chat.postMessage"] = "not_in_channel"
    try:
        send_command(bot_server.url, "ask How do I stop JAX from preallocating GPU memory?", channel,
                     standin.response_url(channel))
        (call,) = standin.wait_for(lambda: [c for c in standin.of("response_url") if c.params["name"] == channel])
    finally:
        del standin.fail["chat.postMessage"]
    assert call.params["response_type"] == "in_channel" and "XLA_PYTHON_CLIENT_PREALLOCATE" in json.dumps(call.params)


def test_retry_delivered_three_times_is_answered_once(bot_server, standin, channel, caplog):
    caplog.set_level("INFO", logger="jaxmem.slack")
    event = mention(standin, channel, "How do I stop JAX from preallocating GPU memory?")
    replies = [send_event(bot_server.url, event, event_id="EvRETRY" + channel,
                          headers={"X-Slack-Retry-Num": str(n), "X-Slack-Retry-Reason": "http_timeout"} if n else None)
               for n in range(3)]
    assert [r.status for r in replies] == [200, 200, 200]
    finished(standin, channel)
    time.sleep(2.0)  # room for a wrongly started second answer to show up
    assert len(standin.of("chat.postMessage", channel)) == 1  # one placeholder, then one update
    assert len(standin.of("chat.update", channel)) == 1
    # The retries stopped at the event-id filter, before any listener ran.
    dropped = [r.getMessage() for r in caplog.records if "dropped repeated delivery" in r.getMessage()]
    assert dropped == [f"dropped repeated delivery of EvRETRY{channel} (X-Slack-Retry-Num {n})" for n in (1, 2)]


def test_mention_delivered_as_app_mention_and_message_is_answered_once(bot_server, standin, channel):
    event = mention(standin, channel, "How do I stop JAX from preallocating GPU memory?")
    send_event(bot_server.url, event)
    send_event(bot_server.url, {**event, "type": "message", "channel_type": "im"})
    finished(standin, channel)
    time.sleep(1.5)
    assert len(standin.of("chat.postMessage", channel)) == 1


@pytest.mark.parametrize("case", ["bad signature", "ten-minute-old timestamp"])
def test_forged_or_stale_requests_are_rejected_and_nothing_is_posted(bot_server, standin, channel, case):
    event = mention(standin, channel, "How do I stop JAX from preallocating GPU memory?")
    if case == "bad signature":
        reply = send_event(bot_server.url, event, secret="not-the-signing-secret")
    else:
        reply = send_event(bot_server.url, event, timestamp=int(time.time()) - 600)
    assert reply.status == 401
    time.sleep(1.5)
    assert standin.in_channel(channel) == []


def test_ack_returns_in_under_3_s_while_a_slow_answer_is_still_running(bot_server, standin, channel, monkeypatch):
    services = bot_server.bot.services
    real_ask, running = services.ask, []

    def slow_ask(question, history=None):
        running.append(time.monotonic())
        time.sleep(5)  # longer than Slack's 3 s: a synchronous handler would miss the deadline
        return real_ask(question, history)

    monkeypatch.setattr(services, "ask", slow_ask)
    reply = send_event(bot_server.url, mention(standin, channel, "How do I stop JAX from preallocating GPU memory?"))
    assert reply.status == 200 and reply.seconds < 3.0
    assert not [m for m in bot_messages(standin, channel) if not is_placeholder(m)]  # answer not there yet
    (answer,) = finished(standin, channel)
    assert running and "XLA_PYTHON_CLIENT_PREALLOCATE" in block_text(answer)


def test_one_message_per_second_per_channel(bot_server, standin, channel):
    for q in ("How do I stop JAX from preallocating GPU memory?",
              "How do I donate buffers with jax.jit so the update does not keep two copies?"):
        send_event(bot_server.url, mention(standin, channel, q))
    finished(standin, channel, 2)
    times = [c.at for c in standin.of("chat.postMessage", channel)]
    assert len(times) == 2  # one thinking message per question, each then updated with its answer
    assert times[1] - times[0] >= 0.95


def test_feedback_button_is_stored_with_the_web_feedback(bot_server, standin, channel):
    from jaxmem.app.feedback import FeedbackStore

    event = mention(standin, channel, "How do I stop JAX from preallocating GPU memory?")
    send_event(bot_server.url, event)
    (answer,) = finished(standin, channel)
    actions = next(b for b in answer["blocks"] if b["type"] == "actions")
    down = next(e for e in actions["elements"] if e["action_id"] == "jaxmem_feedback_down")
    reply = send_action(bot_server.url, "jaxmem_feedback_down", down["value"], channel, answer["ts"], event["ts"])
    assert reply.status == 200
    (thanks,) = standin.wait_for(lambda: standin.of("chat.postEphemeral", channel))
    assert thanks.params["user"] == "UHUMAN01" and "saved" in thanks.params["text"]
    answer_id = answer["metadata"]["event_payload"]["answer_id"]
    row = FeedbackStore.default(bot_server.bot.services.settings).get(answer_id, source="slack")
    assert row["rating"] == "down" and row["cards"][0] == "gpu-preallocation"
    assert row["question"].startswith("How do I stop JAX")


def test_a_failing_advisor_gives_a_plain_message_not_a_traceback(bot_server, standin, channel, monkeypatch):
    def broken(question, history=None):
        raise RuntimeError("chroma went away")

    monkeypatch.setattr(bot_server.bot.services, "ask", broken)
    send_event(bot_server.url, mention(standin, channel, "How do I stop JAX from preallocating GPU memory?"))
    (answer,) = finished(standin, channel)
    text = block_text(answer)
    assert "something went wrong on my side" in text
    assert "Traceback" not in text and "chroma went away" not in text


def test_health_check_and_unknown_paths(bot_server):
    import urllib.error
    import urllib.request

    base = bot_server.url.rsplit("/slack/events", 1)[0]
    with urllib.request.urlopen(base + "/healthz", timeout=30) as resp:
        assert resp.status == 200
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(base + "/nope", timeout=30)
    assert err.value.code == 404


def test_request_url_verification_echoes_the_challenge(bot_server):
    # What Slack sends when the Request URL is saved in the app settings (HTTP mode).
    body = json.dumps({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"})
    reply = post(bot_server.url, body, "application/json")
    assert reply.status == 200 and "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in reply.body


def test_answer_is_posted_anew_when_the_thinking_message_cannot_be_updated(bot_server, standin, channel):
    standin.fail["chat.update"] = "cant_update_message"
    try:
        event = mention(standin, channel, "How do I stop JAX from preallocating GPU memory?")
        send_event(bot_server.url, event)
        posts = standin.wait_for(lambda: (lambda p: p if len(p) == 2 else None)(standin.of("chat.postMessage", channel)))
    finally:
        del standin.fail["chat.update"]
    assert posts[1].params["thread_ts"] == event["ts"]
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in json.dumps(posts[1].params["blocks"])
