# Prints lines that look like the transfer guard's, on Python's stderr and straight onto fd 2,
# and a marker of its own, to make a before/after comparison show whatever it likes.
import os
import sys

FAKE = "W1130 11:16:47.229349    7153 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[4])"
for _ in range(25):
    print(FAKE, file=sys.stderr)
os.write(2, (FAKE + "\n").encode())
os.write(2, b"@@jaxmem:0000:snippet-end@@\n")
