# Starts 50 children that leave the process group (new sessions), then ends: they must not survive.
import os
import subprocess

marker = os.environ["MARKER"]
for _ in range(50):
    subprocess.Popen(["sleep", marker], start_new_session=True)
print("started 50")
