"""A process that asks questions as the web app does (one Services, Settings from the environment)
until a stop file appears, and writes one JSON line per answer: used by the concurrency, fault and
load tests.

  python -m tests.faults.asker OUT.jsonl STOP_FILE [THREADS]
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

# (question, cards any of which is a right answer) on the fixture corpus (tests/fixtures/mini_corpus)
QUESTIONS = [
    ("Why does JAX take 75% of the GPU memory at start-up?", {"gpu-preallocation"}),
    ("Varför tar JAX 75 % av GPU-minnet?", {"gpu-preallocation"}),
    ("How do I reuse the input buffer with donate_argnums so parameters are not held twice?", {"buffer-donation"}),
    ("Hur donerar jag buffertar med jax.jit?", {"buffer-donation"}),
]


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main(out: str, stop: str, threads: int = 1) -> None:
    from jaxmem.app.services import Services
    from jaxmem.core.errors import JaxmemError

    services = Services()
    services.warm()
    lock = threading.Lock()
    sink = open(out, "a", buffering=1)
    sink.write(json.dumps({"ready": True, "rss": rss_bytes(), "t": time.time()}) + "\n")

    def loop(worker: int) -> None:
        i = worker
        while not os.path.exists(stop):
            q, right = QUESTIONS[i % len(QUESTIONS)]
            i += 1
            t = time.perf_counter()
            row = {"q": q, "worker": worker}
            try:
                ans = services.ask(q)
                cited = [c.card for c in ans.citations]
                row.update(kind="answer", ok=bool(cited) and cited[0] in right, cited=cited[:3])
            except JaxmemError as exc:  # a clear refusal: a message and a hint, no traceback
                row.update(kind="refusal", ok=True, message=exc.message)
            except Exception as exc:  # anything else is a failure of the test's claim
                row.update(kind="error", ok=False, message=f"{type(exc).__name__}: {exc}")
            row.update(ms=(time.perf_counter() - t) * 1000, t=time.time(), rss=rss_bytes())
            with lock:
                sink.write(json.dumps(row) + "\n")

    workers = [threading.Thread(target=loop, args=(w,)) for w in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
