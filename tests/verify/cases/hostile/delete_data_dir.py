# Deletes a file of the server's data directory, and the directory's other files.
import json
import os
import shutil

outcome = {}
try:
    os.remove(os.environ["TARGET"])
    outcome["remove"] = "done"
except OSError as exc:
    outcome["remove"] = type(exc).__name__
try:
    shutil.rmtree(os.path.dirname(os.environ["TARGET"]))
    outcome["rmtree"] = "done"
except OSError as exc:
    outcome["rmtree"] = type(exc).__name__
print(json.dumps(outcome))
