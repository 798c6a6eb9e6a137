"""The one service layer both front ends (web pages, Slack handlers) call: answers, code review,
verification, feedback. Built once per process from one `Settings`; everything heavy is built on
first use (or by `warm()` at start-up), never at import.

Handlers and pages stay thin: they call these methods and draw what comes back. Verification
goes through the verifier (`evaluators.verify.jobs`): this machine's queue, or a Ray cluster
when JAXMEM_RAY_ADDRESS is set. User code runs only when JAXMEM_USER_CODE allows it, in the
sandbox, with a per-user allowance for Slack users.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict, deque
from functools import cached_property

from jaxmem.app.answer import Answer, Turn
from jaxmem.core.errors import UsageError
from jaxmem.core.settings import Settings

log = logging.getLogger("jaxmem.services")

USER_CODE_OFF = ("Running your own code is switched off on this server (JAXMEM_USER_CODE=false); "
                 "static review of the code works.")
USER_CODE_HINT = "The operator can enable it with JAXMEM_USER_CODE=true (runs in the sandbox: README, Security)."


class Allowance:
    """At most `per_hour` runs per user in any hour, and one at a time (Slack's per-user limit)."""

    def __init__(self, per_hour: int):
        self.per_hour = per_hour
        self._runs: dict[str, deque[float]] = defaultdict(deque)
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    def check(self, who: str) -> None:
        """Raise the UsageError `take` would raise, without taking anything."""
        with self._lock:
            self._refusal(who, time.monotonic())

    def take(self, who: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._refusal(who, now)
            self._runs[who].append(now)
            self._busy.add(who)

    def _refusal(self, who: str, now: float) -> None:
        """Raise why `who` may not start a run now (the caller holds the lock)."""
        runs = self._runs[who]
        while runs and now - runs[0] > 3600:
            runs.popleft()
        if who in self._busy:
            raise UsageError("you already have a verification running or waiting.",
                             "Wait for its result; then start the next one.")
        if len(runs) >= self.per_hour:
            wait_min = max(1, int((3600 - (now - runs[0])) / 60) + 1) if runs else 60
            raise UsageError(f"you have started {len(runs)} verification(s) in the last hour; the limit is "
                             f"{self.per_hour} (JAXMEM_SLACK_USER_RUNS).", f"Try again in about {wait_min} min.")

    def release(self, who: str) -> None:
        with self._lock:
            self._busy.discard(who)


class Services:
    def __init__(self, settings: Settings | None = None, advisor=None, verifier=None):
        self.settings = settings or Settings()
        self._advisor, self._verifier = advisor, verifier
        # One answer at a time per process: on a small machine two concurrent model passes only
        # make both slower, and the embedder is not documented as thread-safe.
        self._ask_lock = threading.Lock()
        self.allowance = Allowance(self.settings.slack_user_runs)

    # ---- answers ------------------------------------------------------------------------------
    @cached_property
    def advisor(self):
        if self._advisor is not None:
            return self._advisor
        from jaxmem.app.advisor import Advisor
        from jaxmem.ingest.pipeline import ensure_index

        built = ensure_index(self.settings, show_progress=False)
        if built:
            log.info("built the index: %s chunks from %s cards", built.get("chunks"), built.get("cards"))
        return Advisor(self.settings)

    def warm(self) -> None:
        """Load the model, the index and the language models before the first question."""
        with self._ask_lock:
            self.advisor.warm()
            self.advisor.ask("How do I stop JAX preallocating GPU memory?")

    def ask(self, question: str, history: list[Turn] | None = None) -> Answer:
        with self._ask_lock:
            return self.advisor.ask(question, history=history or [])

    def card_topics(self) -> dict[str, str]:
        """Every topic id with its one-line scope."""
        from jaxmem.core.layout import CorpusLayout

        return dict(CorpusLayout(self.settings.corpus_dir).topics)

    def card_page(self, topic: str, lang: str = "en") -> dict:
        """A card as the web app's card page shows it: read from the corpus, no index needed.

        Links between cards point at their card pages; a language without that card falls back
        to English and says so. An unknown topic or language is a UsageError naming the valid ones."""
        from jaxmem.app.compose import card_links
        from jaxmem.core.layout import CorpusLayout
        from jaxmem.ingest.cards import load_card

        layout = CorpusLayout(self.settings.corpus_dir)
        if topic not in layout.topics:
            raise UsageError(f"no card {topic!r}.", f"Valid: {', '.join(sorted(layout.topics))}.")
        if lang not in layout.languages:
            raise UsageError(f"no card language {lang!r}.", f"Valid: {', '.join(sorted(layout.languages))}.")
        langs = [code for code in layout.languages if layout.card_path(topic, code).is_file()]
        shown = lang if lang in langs else "en"
        card = load_card(layout.card_path(topic, shown), layout)
        return {"topic": topic, "lang": shown, "asked_lang": lang, "languages": langs, "title": card.meta.title,
                "summary": card.meta.summary, "body": card_links(card.body, self.settings.card_url),
                "sources": list(card.meta.sources), "applies_to": list(card.meta.applies_to),
                "url": self.settings.card_url(topic, shown)}

    def language(self, text: str) -> str:
        from jaxmem.app.language import detect

        return detect(text)[0]

    def index_status(self) -> dict | None:
        return self.advisor.store.info()

    # ---- review -------------------------------------------------------------------------------
    def review(self, text: str) -> list[dict]:
        """Findings for the fenced code in `text` (or `text` itself when it is code), as dicts."""
        from jaxmem.evaluators.review.api import review_question

        return [f.to_dict() for f in review_question(text, card_url=self.settings.card_url)]

    # ---- verification -------------------------------------------------------------------------
    @cached_property
    def verifier(self):
        if self._verifier is not None:
            return self._verifier
        from jaxmem.evaluators.verify.pool import verifier_for

        return verifier_for(self.settings)

    def verify_topics(self) -> list[str]:
        from jaxmem.evaluators.verify.api import pairs

        return sorted({p.topic for p in pairs(self.settings).values()})

    def verify_card(self, topic: str, *, on_progress=None, who: str | None = None):
        """Run a card's snippet pair (fresh) and return its Evidence. Unknown topics raise a
        UsageError listing the valid ones."""
        from jaxmem.evaluators.verify.jobs import Request

        valid = self.verify_topics()
        if topic not in valid:
            raise UsageError(f"no snippet pair to verify for topic {topic!r}.",
                             f"Valid topics: {', '.join(valid) or '(none in this corpus)'}.")
        return self._run(Request("card", topic=topic, **self._limits()), on_progress, who)

    @property
    def user_code(self) -> bool:
        return self.settings.user_code

    def run_script(self, source: str, *, on_progress=None, who: str | None = None):
        """Run a user's script in the sandbox and return its ScriptRun; refused unless enabled."""
        from jaxmem.evaluators.verify.jobs import Request

        if not self.settings.user_code:
            raise UsageError(USER_CODE_OFF, USER_CODE_HINT)
        if not source.strip():
            raise UsageError("there is no code to run.", "Paste a Python script (a ``` block in Slack).")
        from jaxmem.evaluators.verify.api import options

        # Users' code runs under JAXMEM_RUN_TIMEOUT (a card's pair under JAXMEM_VERIFY_TIMEOUT), with
        # each sync, transfer and compile put on its line (the same attribution as `review --run`).
        return self._run(Request("script", source=source, limits=options(self.settings)["run_limits"]),
                         on_progress, who)

    def queues(self) -> list[dict]:
        return self.verifier.queues()

    def fix_and_measure(self, source: str, name: str = "<pasted>", *, unsafe: bool = True, interval: int = 100,
                        measure: bool = True, notebook: bool = False, on_progress=None, who: str | None = None) -> dict:
        """The reviewer's fixes of `source` (nothing is written anywhere) and, where running users'
        code is switched on and a fix applied, the code run before and after them in the sandbox,
        repeated as the verifier's noise rules need, with the table of what moved (`table`: rows,
        header first; `run`: the whole record). Notebooks are fixed, not run."""
        from jaxmem.evaluators.review import api

        fixed = api.fix_code(source, name, unsafe=unsafe, interval=interval, notebook_file=notebook)
        fixed["remaining"] = [f.to_dict() for f in fixed["remaining"]]
        fixed["run"] = fixed["table"] = fixed["table_text"] = None
        if not (measure and fixed["changed"]) or notebook:
            return fixed
        if not self.settings.user_code:
            raise UsageError(USER_CODE_OFF, USER_CODE_HINT)
        from jaxmem.evaluators.verify.api import options

        run = api.measure_fix(lambda: self.run_script(source, on_progress=on_progress, who=who).result,
                              lambda: self.run_script(fixed["after"], on_progress=on_progress, who=who).result,
                              fixed["codes"], repeats=options(self.settings)["repeats"])
        fixed["run"], fixed["table"], fixed["table_text"] = run.to_dict(), api.fix_table(run), api.fix_table(run, False)
        return fixed

    def evidence(self, topic: str):
        """The newest stored Evidence of a card (any machine), or None."""
        from jaxmem.evaluators.verify.api import evidence_with_summaries
        from jaxmem.evaluators.verify.records import Evidence

        record = evidence_with_summaries(topic, self.settings)
        return None if record is None else Evidence(record)

    def _limits(self) -> dict:
        from jaxmem.evaluators.verify.api import options

        opts = options(self.settings)
        return {"limits": opts["limits"], "repeats": opts["repeats"]}

    def _run(self, request, on_progress, who: str | None):
        if who is not None:  # a Slack user: the per-user allowance applies
            self.allowance.take(who)
        try:
            return self.verifier.run(request, on_progress)
        finally:
            if who is not None:
                self.allowance.release(who)

    # ---- feedback -----------------------------------------------------------------------------
    @cached_property
    def feedback_store(self):
        from jaxmem.app.feedback import FeedbackStore

        return FeedbackStore.default(self.settings)

    def feedback(self, answer_id: str, rating: str, *, source: str, question: str = "", cards=(),
                 comment: str | None = None) -> None:
        self.feedback_store.record(answer_id, rating, comment, source=source, question=question, cards=list(cards))
