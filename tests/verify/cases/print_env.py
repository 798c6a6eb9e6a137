import json
import os

print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
