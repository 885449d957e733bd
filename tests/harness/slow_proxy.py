"""An ssh ``ProxyCommand`` that waits, then relays stdin/stdout to HOST:PORT: a host that is
``DELAY`` seconds away, for the fleet's wall-time test (no netcat needed).

    ProxyCommand python3 slow_proxy.py DELAY HOST PORT [LOG]

With ``LOG``, each connection appends ``START END`` (``time.time()``: from the moment it is
relayed, after the delay, to its end or ssh's SIGHUP at its exit) to that file: which
connections were open at once.
"""

import os
import select
import signal
import socket
import sys
import time


def main() -> None:
    delay, host, port = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    time.sleep(delay)
    s = socket.create_connection((host, port))
    if len(sys.argv) > 4:
        start = time.time()

        def hup(*_):
            raise SystemExit(0)
        signal.signal(signal.SIGHUP, hup)         # ssh's at its exit
        try:
            relay(s)
        finally:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            with open(sys.argv[4], "a") as f:
                f.write(f"{start} {time.time()}\n")
    else:
        relay(s)


def relay(s: socket.socket) -> None:
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
