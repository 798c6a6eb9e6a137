# Writes a fake transfer-guard line straight onto fd 2 through libc, past every os.* wrapper.
import ctypes

libc = ctypes.CDLL(None)
line = b"W1130 11:16:47.229349    7153 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[4])\n"
for _ in range(10):
    libc.write(2, line, len(line))
