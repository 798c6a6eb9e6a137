"""One short-lived "replica" for the database tests: a fresh process that builds its settings from
the environment (JAXMEM_DATABASE_URL, JAXMEM_DATA_DIR, JAXMEM_CORPUS_DIR) the way `jaxmem web`
does, does one thing through the service layer and prints the result as JSON.

    python -m tests.cluster.replica migrate
    python -m tests.cluster.replica feedback-record ID RATING COMMENT
    python -m tests.cluster.replica feedback-get ID
    python -m tests.cluster.replica verify TOPIC
    python -m tests.cluster.replica evidence TOPIC
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    from jaxmem.app.services import Services
    from jaxmem.core import db
    from jaxmem.core.settings import Settings

    settings = Settings()
    svc = Services(settings)
    cmd, *args = argv
    if cmd == "migrate":
        from sqlalchemy import text

        with db.engine(settings).connect() as con:
            out = {"version": con.execute(text("SELECT version_num FROM alembic_version")).scalars().all()}
    elif cmd == "feedback-record":
        answer_id, rating, comment = args
        svc.feedback(answer_id, rating, source="web", question="q", cards=["buffer-donation"], comment=comment)
        out = {"ok": True}
    elif cmd == "feedback-get":
        out = svc.feedback_store.get(args[0], "web") or {}
    elif cmd == "verify":
        ev = svc.verify_card(args[0])
        out = {"verdict": ev.verdict, "node": ev.node}
    elif cmd == "evidence":
        ev = svc.evidence(args[0])
        out = {} if ev is None else {"verdict": ev.verdict, "node": ev.node, "origin": ev.origin}
    else:
        raise SystemExit(f"unknown command {cmd!r}")
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
