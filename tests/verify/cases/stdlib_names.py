"""Imports standard-library modules whose names the verifier's own modules also use (queue, ...):
PyTorch imports `queue` this way, and a project module found first broke it."""
import json
import queue

q = queue.Queue()
q.put(1)
print(json.dumps({"queue": q.get(), "from": queue.__file__}))
