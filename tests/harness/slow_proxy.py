"""An ssh ``ProxyCommand`` that waits, then relays stdin/stdout to HOST:PORT: a host that is
``DELAY`` seconds away, for the fleet's wall-time test (no netcat needed).

    ProxyCommand python3 slow_proxy.py DELAY HOST PORT
"""

import os
import select
import socket
import sys
import time


def main() -> None:
    delay, host, port = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    time.sleep(delay)
    s = socket.create_connection((host, port))
    watch = [0, s]
    while True:
        ready, _, _ = select.select(watch, [], [])
        if 0 in ready:
            data = os.read(0, 65536)
            if data:
                s.sendall(data)
            else:
                s.shutdown(socket.SHUT_WR)
                watch.remove(0)
        if s in ready:
            data = s.recv(65536)
            if not data:
                return
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]


if __name__ == "__main__":
    main()
