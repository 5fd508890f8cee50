"""A TCP proxy on a free loopback port in front of another local port, for network faults.

- `TcpProxy(target_port)`: starts forwarding at once; `.port` is the proxy's port.
- `.blackhole()`: from now on nothing is forwarded in either direction and new connections are
  accepted but never connected upstream, as when a network path silently drops packets (the
  client sees no error, only silence).
- `.restore()`: forwards again; the connections that lived through the black hole are reset
  (as after a partition, when both ends have long given up on each other).
- `.close()`: stops the proxy and closes everything.
"""
import socket
import threading


class TcpProxy:
    def __init__(self, target_port, target_host="127.0.0.1"):
        self.target = (target_host, target_port)
        self.lock = threading.Lock()
        self.dark = False
        self.sockets = []  # every socket of every connection, for restore() and close()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.port = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.sockets.append(client)
                dark = self.dark
            if dark:
                continue  # accepted, never answered
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self.lock:
                    dark = self.dark
                if dark:
                    continue  # swallowed: the other end hears nothing
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def blackhole(self):
        with self.lock:
            self.dark = True

    def restore(self):
        with self.lock:
            self.dark = False
            doomed, self.sockets = self.sockets, []
        for s in doomed:
            self._reset(s)

    @staticmethod
    def _reset(s):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def close(self):
        self.open = False
        self.listener.close()
        self.restore()
