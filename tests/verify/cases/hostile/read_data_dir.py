# Reads a file of the server's data directory (its path arrives in TARGET).
import json
import os

try:
    data = open(os.environ["TARGET"], "rb").read()
    print(json.dumps({"read": len(data)}))
except OSError as exc:
    print(json.dumps({"error": type(exc).__name__}))
