# Listens on a port for the host (or anyone) to connect, until the run ends.
import os
import socket
import time

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(os.environ["PORT"])))
s.listen()
print("listening", flush=True)
time.sleep(float(os.environ.get("HOLD", "6")))
