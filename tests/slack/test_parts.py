"""The bot's small parts: rate limiter, retry memory, command parsing, rendering limits, config."""
from __future__ import annotations

import threading

import pytest

from jaxmem.app.answer import Answer, Citation
from jaxmem.app.slack import render
from jaxmem.app.slack.config import SlackConfig
from jaxmem.app.slack.dedupe import SeenCache
from jaxmem.app.slack.flows import clean, is_review_only
from jaxmem.app.slack.format import BLOCKS_PER_MESSAGE, SECTION_LIMIT
from jaxmem.app.slack.listeners.command import parse
from jaxmem.app.slack.post import ChannelRateLimiter, Poster


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_rate_limiter_spaces_messages_per_channel_not_across_channels():
    clock = FakeClock()
    limiter = ChannelRateLimiter(1.0, clock=clock, sleep=clock.sleep)
    assert [limiter.wait("C1") for _ in range(3)] == [0, 1.0, 1.0]
    assert limiter.wait("C2") == 0  # another channel has its own budget
    clock.now += 5
    assert limiter.wait("C1") == 0  # an idle channel does not wait


def test_rate_limiter_hands_out_distinct_slots_to_concurrent_threads():
    clock = FakeClock()  # frozen: each thread's wait is exactly its slot's distance from now
    limiter = ChannelRateLimiter(1.0, clock=clock, sleep=lambda s: None)
    waited = []
    threads = [threading.Thread(target=lambda: waited.append(limiter.wait("C"))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(waited) == [0, 1, 2, 3, 4, 5]


def test_seen_cache_claims_once_and_forgets_after_the_ttl():
    clock = FakeClock()
    seen = SeenCache(ttl_s=60, clock=clock)
    assert seen.claim("Ev1") and not seen.claim("Ev1") and "Ev1" in seen
    clock.now += 61
    assert "Ev1" not in seen and seen.claim("Ev1")


def test_seen_cache_is_bounded():
    seen = SeenCache(max_keys=3)
    for k in "abcde":
        seen.claim(k)
    assert "a" not in seen and "e" in seen


@pytest.mark.parametrize("text, expected", [
    ("ask Why 75%?", ("ask", "Why 75%?", None)),
    ("Why 75%?", ("ask", "Why 75%?", None)),  # no keyword: a question
    ("verify buffer-donation", ("verify", "buffer-donation", None)),
    ("review\n```\nx = 1\n```", ("review", "```\nx = 1\n```", None)),
    ("REVIEW ```x```", ("review", "```x```", None)),
])
def test_command_parsing(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text, problem", [
    ("", "/jaxmem ask QUESTION"),
    ("help", "/jaxmem verify TOPIC"),
    ("ask", "Ask something"),
    ("review x = 1", "Paste the code in a ``` block"),
    ("verify", "Name a topic"),
])
def test_command_mistakes_name_the_valid_choices(text, problem):
    assert problem in parse(text)[2]


def _answer(body: str, n_citations: int = 1) -> Answer:
    cites = [Citation(card=f"topic-{i}", title=f"Title {i}", language="en", score=0.9, sources=[],
                      url=f"https://example.org/{i}") for i in range(n_citations)]
    return Answer(question="q" * 5000, language="en", answer=body, citations=cites, abstained=False)


def test_a_huge_answer_becomes_several_messages_within_slacks_limits():
    body = "\n\n".join(f"Paragraph {i} " + "lorem ipsum " * 200 for i in range(400))  # ~1 MB
    messages = render.answer_messages(_answer(body), "id1")
    assert len(messages) > 1
    for m in messages:
        assert len(m["blocks"]) <= BLOCKS_PER_MESSAGE and len(m["text"]) <= 40_000
        assert all(len(b["text"]["text"]) <= SECTION_LIMIT for b in m["blocks"] if b["type"] == "section")
    # Sources and feedback close the reply; metadata marks the first message (the thread's turn).
    assert messages[-1]["blocks"][-1]["type"] == "actions" and messages[-1]["blocks"][-2]["type"] == "context"
    assert "metadata" in messages[0] and all("metadata" not in m for m in messages[1:])
    for button in messages[-1]["blocks"][-1]["elements"]:
        assert len(button["value"]) <= 2000  # Slack's cap on a button value


def test_feedback_value_round_trips_and_a_foreign_value_is_named():
    block = render.feedback_block("sv", "abc", "fråga", ["buffer-donation"])
    value = block["elements"][0]["value"]
    assert render.parse_feedback_value(value) == {"answer_id": "abc", "lang": "sv", "cards": ["buffer-donation"],
                                                  "question": "fråga"}
    with pytest.raises(ValueError, match="'thumbs-up' is not jaxmem's JSON"):
        render.parse_feedback_value("thumbs-up")


def test_every_bot_string_exists_in_english_and_no_language_has_unknown_keys():
    table = render._strings()
    for lang, strings in table.items():
        assert set(strings) <= set(table["en"]), lang
    assert render.t("xx", "thinking") == "Thinking…"  # unknown language: English


@pytest.mark.parametrize("env, mode, message", [
    ({}, "socket", "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set (needed for Socket Mode)"),
    ({"SLACK_BOT_TOKEN": "xoxb-1"}, "http", "SLACK_SIGNING_SECRET is not set (needed for HTTP mode)"),
    ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"}, "socket",
     "SLACK_APP_TOKEN starts with 'xoxb-'; it should start with 'xapp-'"),
    ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "SLACK_API_URL": "localhost:9"}, "socket",
     "SLACK_API_URL='localhost:9' is not valid (not an http(s) URL); valid: an http(s) URL"),
    ({"SLACK_BOT_TOKEN": "xoxb-1"}, "websocket", "Slack mode 'websocket' is not valid"),
])
def test_config_errors_name_the_variable(monkeypatch, env, mode, message):
    for var in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from jaxmem.core.errors import JaxmemError
    from jaxmem.core.settings import Settings

    with pytest.raises(JaxmemError) as err:  # a UsageError from the check, a ConfigError from the settings
        SlackConfig.from_settings(Settings()).check(mode)
    assert message in err.value.message


def test_verify_message_shows_the_verdict_and_each_metric_in_units():
    record = {"topic": "buffer-donation", "verdict": "confirmed", "backend": "cpu", "origin": "cache", "metrics": [
        {"metric": "alias_bytes", "label": "donated (aliased) bytes", "verdict": "confirmed", "before": 0,
         "after": 262144, "backends": ["cpu", "gpu", "tpu"]},
        {"metric": "device_peak_bytes", "label": "device peak memory", "verdict": "not measurable here",
         "before": None, "after": None, "backends": ["gpu", "tpu"]}]}
    from jaxmem.evaluators.verify.records import Evidence

    (msg,) = render.verify_messages(Evidence(record), "https://example.org/buffer-donation/en.md")
    text = "\n".join(b["text"]["text"] if b["type"] == "section" else b["elements"][0]["text"] for b in msg["blocks"])
    assert ":white_check_mark: *buffer-donation*: confirmed" in text
    assert "• donated (aliased) bytes: 0 B → 256.0 KiB (confirmed)" in text
    assert "• device peak memory: not measurable on cpu; needs gpu or tpu" in text
    assert "<https://example.org/buffer-donation/en.md|buffer-donation> · cache" in text


@pytest.mark.parametrize("text, expected", [
    ("<@U0BOT> why 75%?", "why 75%?"),
    ("<@U0BOT|jaxmem> a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"),
    # Slack's composer: the code starts right after the fence; the advisor needs it on its own line.
    ("review ```import jax\nx = 1```", "review ```\nimport jax\nx = 1\n```"),
    ("```python\nimport jax\n```", "```python\nimport jax\n```"),
])
def test_clean_text_from_slack(text, expected):
    assert clean(text) == expected


@pytest.mark.parametrize("text, review_only", [
    ("review this:\n```\nx = 1\n```", True),
    ("```\nx = 1\n```", True),
    ("why does this use two copies of my params?\n```\nx = 1\n```", False),
    ("review this please", False),
])
def test_review_only_when_code_comes_with_little_prose(text, review_only):
    assert is_review_only(text) is review_only


class RecordingClient:
    def __init__(self):
        self.calls = []

    def _call(self, method, **kw):
        self.calls.append((method, kw))
        return type("Resp", (), {"data": {"ok": True, "ts": f"{len(self.calls)}.0"}})()

    def chat_postMessage(self, **kw):
        return self._call("chat.postMessage", **kw)

    def chat_update(self, **kw):
        return self._call("chat.update", **kw)


def test_new_messages_wait_for_the_channel_but_updates_do_not():
    clock = FakeClock()
    poster = Poster(ChannelRateLimiter(1.0, clock=clock, sleep=clock.sleep))
    client = RecordingClient()
    start = clock.now
    placeholder = poster.post(client, "C1", "thinking")
    poster.update(client, "C1", placeholder["ts"], "the answer")
    assert clock.now == start  # the answer replaced the placeholder without waiting
    poster.deliver(client, "C1", [{"text": "part 1"}, {"text": "part 2"}], thread_ts="1.0")
    assert clock.now == start + 2.0  # two more new messages: each one second after the last
    assert [m for m, _ in client.calls] == ["chat.postMessage", "chat.update", "chat.postMessage", "chat.postMessage"]
    assert client.calls[-1][1]["thread_ts"] == "1.0" and client.calls[-1][1]["unfurl_links"] is False


def test_thread_turns_come_from_the_bots_answer_metadata_only():
    from slack_sdk.errors import SlackApiError

    from jaxmem.app.slack.history import thread_turns

    def answer(ts, question, cards):
        return {"ts": ts, "text": f"answer to {question}", "bot_id": "B1", "metadata": {
            "event_type": render.ANSWER_EVENT, "event_payload": {"question": question, "language": "sv",
                                                                 "answer_language": "sv", "cards": cards}}}

    replies = [{"ts": "1.0", "text": "<@U0BOT> first?", "user": "U1"}, answer("2.0", "first?", ["a"]),
               {"ts": "3.0", "text": "people chatting", "user": "U2"}, answer("4.0", "second?", ["b"]),
               answer("6.0", "later?", ["c"])]

    class Client:
        def conversations_replies(self, **kw):
            assert kw["include_all_metadata"] is True  # without it Slack leaves the metadata out
            return {"messages": replies}

    turns = thread_turns(Client(), "C1", "1.0", before_ts="5.0")
    assert [(t.role, t.content if t.role == "user" else t.cards, t.language) for t in turns] == [
        ("user", "first?", "sv"), ("assistant", ["a"], "sv"), ("user", "second?", "sv"), ("assistant", ["b"], "sv")]
    assert thread_turns(Client(), "C1", None) == []  # a top-level message has no thread yet

    class NoScope:
        def conversations_replies(self, **kw):
            raise SlackApiError("missing_scope", {"ok": False, "error": "missing_scope"})

    assert thread_turns(NoScope(), "C1", "1.0") == []  # answered without context, not not at all
