# A symlink in the working directory pointing at the server's data file, then read through it.
import json
import os

os.symlink(os.environ["TARGET"], "link")
try:
    print(json.dumps({"read": len(open("link", "rb").read())}))
except OSError as exc:
    print(json.dumps({"error": type(exc).__name__}))
