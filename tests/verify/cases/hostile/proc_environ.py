# Reads the environment of pid 1 and of its parent through /proc.
import json
import os

out = {}
for pid in ("1", str(os.getppid()), "self"):
    try:
        out[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError as exc:
        out[pid] = type(exc).__name__
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps(out))
