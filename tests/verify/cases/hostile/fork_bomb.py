# A bounded fork bomb: up to 2**11 processes, each sleeping. The task cap stops it early, and
# none may outlive the run.
import os
import time

marker = float(os.environ["MARKER"])
refused = 0


def spread(depth):
    global refused
    for _ in range(2):
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            return
        if pid == 0:
            if depth < 10:
                spread(depth + 1)
            time.sleep(marker)
            os._exit(0)


spread(0)
print(f"refused {refused}", flush=True)
time.sleep(marker)
