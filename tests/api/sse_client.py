"""A Server-Sent Events client for the tests of GET /events: a raw socket, HTTP/1.1 with chunked
decoding, and the event stream parsed as the WHATWG HTML standard says (fields `id`, `event`,
`data`, `retry`; comment lines; an event dispatched at a blank line; the last event ID kept
across events, and taken from an event's id only when the event is dispatched, so an event cut
off by the end of the connection moves nothing, as in a browser). A reader thread collects
everything; tests wait on it with `eventually()`.

Every event received is checked against the StreamEvent schema of the server's OpenAPI
document (`problems` lists what did not match), so the document's description of each event is
tested by every test that reads a stream.
"""
import json
import socket
import threading
import time
import urllib.parse

from helpers import eventually


class Stream:
    def __init__(self, base_url, token=None, ticket=None, last_event_id=None, query=None, rcvbuf=None,
                 headers=None, schema=None, paused=False):
        """paused: nothing is read until resume() (a reader that falls behind)."""
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        params = dict(query or {})
        if ticket:
            params["ticket"] = ticket
        path = "/events" + ("?" + urllib.parse.urlencode(params) if params else "")
        lines = [f"GET {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Accept: text/event-stream"]
        if token:
            lines.append(f"Authorization: Bearer {token}")
        if last_event_id is not None:
            lines.append(f"Last-Event-ID: {last_event_id}")
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connect, so the window stays that small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(60)
        self.sock.connect((self.host, self.port))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.schema = schema
        self.status = None
        self.headers = {}
        self.events = []      # dispatched events: {"id", "event", "data", "json"}
        self.comments = []    # comment lines, without the colon
        self.ids = []         # the id field of every event dispatched, in order (lone ids included)
        self.retry = None
        self.last_event_id = ""
        self.body = b""       # a non-stream answer's body (errors)
        self.ended = False    # the server ended the stream (the last chunk) or closed the socket
        self.clean_end = False  # ended with the terminating chunk
        self.problems = []
        self.lock = threading.Lock()
        self.head_ready = threading.Event()
        self.go = threading.Event()
        if not paused:
            self.go.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    # -- reading

    def _recv(self):
        try:
            data = self.sock.recv(65536)
        except OSError:
            data = b""
        return data

    def resume(self):
        self.go.set()

    def _run(self):
        self.go.wait()
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = self._recv()
            if not data:
                self._end(False)
                self.head_ready.set()
                return
            buf += data
        head, buf = buf.split(b"\r\n\r\n", 1)
        head_lines = head.decode("latin-1").split("\r\n")
        self.status = int(head_lines[0].split()[1])
        for line in head_lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.head_ready.set()
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            length = int(self.headers.get("content-length", "0"))
            while len(buf) < length:
                data = self._recv()
                if not data:
                    break
                buf += data
            self.body = buf[:length]
            self._end(True)
            return
        pending = b""  # decoded stream text not yet split into lines
        while True:
            while b"\r\n" not in buf:
                data = self._recv()
                if not data:
                    return self._end(False)
                buf += data
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                data = self._recv()
                if not data:
                    return self._end(False)
                buf += data
            chunk, buf = buf[:size], buf[size + 2:]
            if size == 0:
                return self._end(True)
            pending += chunk
            while True:
                cut = min([i for i in (pending.find(b"\n"), pending.find(b"\r")) if i >= 0], default=-1)
                if cut < 0:
                    break
                line, pending = pending[:cut], pending[cut + 1:]
                if pending.startswith(b"\n") and line.endswith(b"\r"):
                    pending = pending[1:]
                self._line(line.decode("utf-8"))

    def _end(self, clean):
        with self.lock:
            self.ended, self.clean_end = True, clean

    _event = None
    _id_buffer = ""  # the standard's last event ID buffer: kept across events, not reset

    def _line(self, line):
        if self._event is None:
            self._event = {"data": [], "event": None}
        if line == "":  # dispatch: only now does an id become the one a reconnect sends
            ev, self._event = self._event, None
            with self.lock:
                self.last_event_id = self._id_buffer
                if ev.get("id") is not None:
                    self.ids.append(ev["id"])
            if not ev["data"]:
                return  # nothing to dispatch (a lone id still moved the last event ID)
            out = {"id": self.last_event_id or None, "event": ev["event"] or "message", "data": "\n".join(ev["data"])}
            out["explicit_id"] = ev.get("id")
            try:
                out["json"] = json.loads(out["data"])
            except ValueError:
                out["json"] = None
            self._check(out)
            with self.lock:
                self.events.append(out)
            return
        if line.startswith(":"):
            with self.lock:
                self.comments.append(line[1:].strip())
            return
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._event["data"].append(value)
        elif field == "event":
            self._event["event"] = value
        elif field == "id" and "\0" not in value:
            self._event["id"] = self._id_buffer = value
        elif field == "retry" and value.isdigit():
            self.retry = int(value)

    def _check(self, ev):
        if self.schema is None:
            return
        obj = {"event": ev["event"], "data": ev["json"]}
        if ev["explicit_id"] is not None:
            obj["id"] = ev["explicit_id"]
        errors = list(self.schema.iter_errors(obj))
        if errors:
            self.problems.append(f"{ev['event']}: {errors[0].message[:300]}")

    # -- waiting

    def wait_head(self, timeout=15):
        assert self.head_ready.wait(timeout), "no answer to GET /events"
        return self.status

    def of(self, kind, where=lambda data: True):
        with self.lock:
            return [e for e in self.events if e["event"] == kind and where(e["json"])]

    def wait(self, kind, where=lambda data: True, timeout=15, count=1):
        """The events of kind whose data matches, once there are count of them."""
        return eventually(lambda: self.of(kind, where), timeout, f"{count} {kind} event(s)",
                          until=lambda found: len(found) >= count)

    def wait_ended(self, timeout=15):
        eventually(lambda: self.ended, timeout, "the stream's end")

    def kinds(self):
        with self.lock:
            return [e["event"] for e in self.events]

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def ended_within(*opened, limit=1.0):
    """Waits for every stream to end and checks each did within `limit` seconds of now (the
    action that ended their token has just returned), with `token.expired` as its last event."""
    start = time.monotonic()
    while not all(s.ended for s in opened) and time.monotonic() - start < limit + 10:
        time.sleep(0.01)
    took = time.monotonic() - start
    for s in opened:
        assert s.ended, "the stream is still open"
        assert s.clean_end and s.kinds()[-1] == "token.expired", s.kinds()
    assert took < limit, f"the streams ended {took:.2f} s after the action"


def still_open(*kept):
    """Checks that the streams whose token the action did not end are still open once the
    checks it caused are over."""
    time.sleep(0.2)
    for s in kept:
        assert not s.ended and not s.of("token.expired"), s.kinds()
