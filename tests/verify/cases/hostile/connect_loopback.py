# Opens a TCP connection to a service the host runs on 127.0.0.1.
import json
import os
import socket

s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", int(os.environ["PORT"])))
    s.sendall(b"hello from a snippet")
    print(json.dumps({"connect": "connected"}))
except OSError as exc:
    print(json.dumps({"connect": type(exc).__name__}))
