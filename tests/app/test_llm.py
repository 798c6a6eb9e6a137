"""The optional LLM composer against a stand-in OpenAI-compatible server on loopback.

The stand-in only speaks the chat-completions protocol and replays what each test tells it to
say; the product code is the real langchain-openai client and the real citation check."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jaxmem.app.advisor import Advisor
from jaxmem.ingest.pipeline import ingest


class FakeOpenAI:
    def __init__(self):
        self.reply, self.delay, self.requests = "", 0.0, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                time.sleep(outer.delay)
                payload = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": outer.reply}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def llm(mini_settings, nano, monkeypatch):
    from jaxmem.core.settings import Settings

    fake = FakeOpenAI()
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("JAXMEM_LLM_TIMEOUT", "2")
    monkeypatch.setenv("JAXMEM_LLM", "openai/test-model")
    ingest(mini_settings, embeddings=nano, show_progress=False)
    # read from the environment, as a front end reads its settings at start-up
    settings = Settings(data_dir=mini_settings.data_dir, corpus_dir=mini_settings.corpus_dir)
    assert settings.openai_base_url == fake.url and settings.llm_timeout == 2
    yield fake, Advisor(settings, embeddings=nano)
    fake.server.shutdown()


Q = "Varför tar JAX 75 % av GPU-minnet när programmet startar?"


def test_llm_answer_citing_retrieved_cards_is_used(llm):
    fake, advisor = llm
    fake.reply = "JAX förallokerar 75 % av GPU-minnet [gpu-preallocation]."
    ans = advisor.ask(Q)
    assert ans.composer == "llm:openai/test-model"
    assert ans.answer.startswith("JAX förallokerar") and [c.card for c in ans.citations] == ["gpu-preallocation"]
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in ans.more and "Källor" in ans.more  # the card, folded after it
    path, body = fake.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "test-model"
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    assert "'sv'" in prompt and 'card id=\\"gpu-preallocation\\"' in prompt


def test_llm_answer_citing_an_unretrieved_card_is_discarded(llm):
    fake, advisor = llm
    fake.reply = "Use sharding [sharding-memory]."
    ans = advisor.ask(Q)
    assert ans.composer == "offline" and "Källor" in ans.more
    assert any("cited cards retrieval did not return" in n for n in ans.notes)


def test_llm_timeout_falls_back_to_the_offline_answer(llm):
    fake, advisor = llm
    fake.reply, fake.delay = "late [gpu-preallocation]", 5
    ans = advisor.ask(Q)
    assert ans.composer == "offline" and len(fake.requests) == 1  # no retries against a hung endpoint
    assert any("LLM composer unavailable" in n for n in ans.notes)


def test_unknown_llm_provider_names_the_choices(mini_settings, monkeypatch):
    from jaxmem.core.errors import ConfigError
    from jaxmem.core.settings import Settings

    monkeypatch.setenv("JAXMEM_LLM", "gpt4all/x")
    with pytest.raises(ConfigError) as err:
        Settings()
    assert "JAXMEM_LLM='gpt4all/x'" in err.value.message and "openai/<model>" in err.value.message
