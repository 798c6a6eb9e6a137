"""Feedback: the SQLite store's API (shared with Slack) and the chat's thumbs + comment."""
from __future__ import annotations

import csv
import io
import threading

import pytest

from jaxmem.app.feedback import FeedbackStore
from jaxmem.core.errors import UsageError
from tests.web.helpers import SWEDISH_QUESTION, ask


@pytest.fixture
def store(tmp_path):
    return FeedbackStore(tmp_path / "feedback.sqlite")


def test_record_and_export(store):
    store.record("a1", "up", source="web", question="q1", cards=["gpu-preallocation"])
    store.record("a2", "down", "wrong card", source="slack", question="q2", cards=[])
    rows = {r["answer_id"]: r for r in store.export()}
    assert rows["a1"]["rating"] == "up" and rows["a1"]["cards"] == ["gpu-preallocation"]
    assert rows["a2"]["source"] == "slack" and rows["a2"]["comment"] == "wrong card"


def test_changing_a_rating_updates_the_row(store):
    store.record("a1", "up", question="q")
    store.record("a1", "down", "changed my mind")
    (row,) = store.export()
    assert row["rating"] == "down" and row["comment"] == "changed my mind" and row["question"] == "q"


def test_the_same_answer_rated_in_web_and_slack_is_two_rows(store):
    store.record("a1", "up", source="web")
    store.record("a1", "down", source="slack")
    assert sorted(r["source"] for r in store.export()) == ["slack", "web"]


def test_durable_across_store_objects(store):
    store.record("a1", "up")
    assert FeedbackStore(store.path).get("a1")["rating"] == "up"


def test_csv_export_has_every_field(store):
    store.record("a1", "down", 'says "90%", which is old', cards=["gpu-preallocation", "buffer-donation"])
    (row,) = list(csv.DictReader(io.StringIO(store.export_csv())))
    assert row["comment"] == 'says "90%", which is old'
    assert row["cards"] == "gpu-preallocation buffer-donation"


def test_export_of_a_missing_store_is_empty_and_creates_nothing(tmp_path):
    store = FeedbackStore(tmp_path / "none" / "feedback.sqlite")
    assert store.export() == [] and not store.path.exists()


@pytest.mark.parametrize("kwargs, words", [
    ({"answer_id": "a", "rating": "meh"}, ["'meh'", "up, down"]),
    ({"answer_id": "a", "rating": "up", "source": "email"}, ["'email'", "web, slack"]),
    ({"answer_id": " ", "rating": "up"}, ["answer id"]),
    ({"answer_id": "a", "rating": "up", "comment": "x" * 5000}, ["5,000"]),
])
def test_bad_values_are_named_with_the_valid_choices(store, kwargs, words):
    with pytest.raises(UsageError) as err:
        store.record(**kwargs)
    said = err.value.message + " " + err.value.hint
    assert all(w in said for w in words), said


def test_concurrent_writers_lose_nothing(store):
    def write(n):
        for i in range(25):
            FeedbackStore(store.path).record(f"t{n}-{i}", "up")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.export()) == 100


def test_thumbs_and_comment_in_the_chat_are_stored(app, web_env):
    ask(app, SWEDISH_QUESTION)
    answer_id = app.session_state["turns"][-1]["id"]
    app.feedback[0].set_value(0).run()  # thumbs down
    assert not app.exception
    from jaxmem.core.settings import Settings

    db = FeedbackStore.default(Settings())
    row = db.get(answer_id)
    assert row["rating"] == "down" and row["question"] == SWEDISH_QUESTION
    assert row["cards"][0] == "gpu-preallocation"
    app.text_input(key=f"fbc-{answer_id}").input("should mention memory_stats on CPU")
    app.button[[b.label for b in app.button].index("Send comment")].click().run()
    assert FeedbackStore.default(Settings()).get(answer_id)["comment"] == "should mention memory_stats on CPU"
    assert "Feedback saved (thumbs down)" in "\n".join(c.value for c in app.caption)


def test_status_page_lists_feedback_and_offers_csv(app):
    ask(app, SWEDISH_QUESTION)
    answer_id = app.session_state["turns"][-1]["id"]
    app.feedback[0].set_value(1).run()
    app.switch_page("webui/pages/status.py").run()
    assert not app.exception
    table = app.dataframe[0].value
    assert answer_id in set(table["answer_id"])
    assert any("rated answer" in m.value for m in app.markdown)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics == {"Cards": "4", "Topics": "2", "Chunks": str(metrics["Chunks"]), "Languages": "2"}
    assert int(metrics["Chunks"]) > 4
    assert any("JAX 0." in m.value and "cpu:0" in m.value for m in app.markdown)
