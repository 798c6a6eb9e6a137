"""The advisor, reviewer, verifier and feedback store, as the Slack handlers see them.

Handlers call these methods and nothing else, so they stay thin and never touch Chroma or a
model. Everything heavy is built on first use (or by `warm()` at start-up), never at import.
One answer and one verification run at a time: on a small machine two concurrent model passes
or two snippet runs only make both slower, and the embedder is not documented as thread-safe.
"""
from __future__ import annotations

import logging
import threading
from functools import cached_property

from app.answer import Answer, Turn
from ingest.config import Settings
from ingest.errors import UsageError

log = logging.getLogger("jaxmem.slack")


class Services:
    def __init__(self, settings: Settings | None = None, advisor=None):
        self.settings = settings or Settings()
        self._advisor = advisor
        self._ask_lock = threading.Lock()
        self._verify_lock = threading.Lock()

    @cached_property
    def advisor(self):
        if self._advisor is not None:
            return self._advisor
        from app.advisor import Advisor
        from ingest.pipeline import ensure_index

        built = ensure_index(self.settings, show_progress=False)
        if built:
            log.info("built the index: %s chunks from %s cards", built.get("chunks"), built.get("cards"))
        return Advisor(self.settings)

    def warm(self) -> None:
        """Load the model, the index and the language detector before the first question."""
        with self._ask_lock:
            self.advisor.warm()
            # lingua loads its n-gram models on the first detection: pay that here, not in an answer.
            self.language("How do I stop JAX preallocating GPU memory?")

    def ask(self, question: str, history: list[Turn] | None = None) -> Answer:
        with self._ask_lock:
            return self.advisor.ask(question, history=history or [])

    def language(self, text: str) -> str:
        from app.language import detect

        return detect(text)[0]

    def review(self, text: str) -> list[dict]:
        """Findings for the fenced code in `text`, as dicts (the advisor's finding shape)."""
        from evaluators.review.api import review_question

        return [f.to_dict() for f in review_question(text, card_url=self.settings.card_url)]

    def verify_topics(self) -> list[str]:
        from evaluators.verify.api import pairs

        return sorted({p.topic for p in pairs(self.settings).values()})

    def verify(self, topic: str) -> tuple[dict, str]:
        """(record, one-line summary). Unknown topics raise UsageError listing the valid ones."""
        from evaluators.verify import api

        valid = self.verify_topics()
        if topic not in valid:
            raise UsageError(f"no snippet pair to verify for topic {topic!r}.",
                             f"Valid topics: {', '.join(valid) or '(none in this corpus)'}.")
        options = verify_options()
        with self._verify_lock:
            record = api.verify_topic(topic, settings=self.settings, **options)
        return record, api.summary(record)

    def feedback(self, answer_id: str, rating: str, *, question: str = "", cards=()) -> None:
        from app.feedback import FeedbackStore

        FeedbackStore.default(self.settings).record(answer_id, rating, source="slack", question=question,
                                                    cards=list(cards))


def verify_options() -> dict:
    """Verifier limits from the environment (one definition, in the verifier's API)."""
    from evaluators.verify.api import options_from_env

    return options_from_env()
