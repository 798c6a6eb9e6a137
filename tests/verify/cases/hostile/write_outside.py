# Writes outside its working directory: next to the server's home, into the project, into /tmp.
import json
import os

outcome = {}
for name in ("HOME_TARGET", "PROJECT_TARGET", "TMP_TARGET"):
    try:
        with open(os.environ[name], "a") as f:
            f.write("written by a snippet\n")
        outcome[name] = "written"
    except OSError as exc:
        outcome[name] = type(exc).__name__
print(json.dumps(outcome))
