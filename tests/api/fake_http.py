"""How the test fakes (fake_geo.py, fake_s3.py, fake_stripe.py) serve HTTP: a threading server on
a free port of 127.0.0.1, answered from a daemon thread, so a fake never outlives the session."""
import http.server
import threading


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.1 request handler that logs nothing; `fake` is the fake it answers for."""

    protocol_version = "HTTP/1.1"
    fake = None

    def log_message(self, *args):
        pass


class ServedFake:
    """Base of a fake served over HTTP: its start() calls serve(Handler, name); stop() and url."""

    httpd = None
    thread = None

    def serve(self, handler, name, poll_interval=0.5):
        """Serves handler (a BaseHTTPRequestHandler class) on a free port of 127.0.0.1; returns self."""
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(poll_interval,), name=name, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        """Stops serving and frees the port (nothing when not serving)."""
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"
