# Writes 2 GB to stdout.
import sys

block = "x" * (1 << 20)
for _ in range(2048):
    sys.stdout.write(block)
