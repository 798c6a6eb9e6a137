import subprocess
import sys

child = subprocess.Popen(["sleep", "300"])     # a grandchild that must die with the group
print(child.pid, flush=True)
while True:
    pass
