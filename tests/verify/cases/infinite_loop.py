import subprocess
import time

# A grandchild that must die with the run. Its sleep length is unique, so the test can find it
# among the host's processes (inside the sandbox's PID namespace its own pid means nothing outside).
marker = f"300.{time.time_ns() % 10**9:09d}"
child = subprocess.Popen(["sleep", marker])
print(marker, flush=True)
while True:
    pass
