"""HTTP over a raw socket, for tests that need control over what reaches the server and when:
a body sent in two TCP segments, repeated header lines, slow or stalled clients.

- `multipart(parts)`: a multipart/form-data body from [(name, filename or None, bytes)], with
  the offsets where each part and each part's data begin.
- `send(server, method, path, headers, body, split=None)`: one request on a fresh connection;
  with `split`, the body goes in two writes (TCP_NODELAY, a short pause between them), so the
  server reads two segments. Returns (status, headers dict with lowercase names, body bytes).
- `connect(server, source="127.0.0.1")`: a connected socket (TCP_NODELAY), optionally from
  another loopback address, so a client can be told apart from the test's other traffic.
- `closed_by_peer(sock, timeout)`: True when the server closed the connection within timeout.
"""
import http.client
import json
import socket
import time
import uuid

BOUNDARY = "----mp-raw-" + uuid.uuid4().hex[:16]


def multipart(parts, boundary=BOUNDARY):
    """parts: [(name, filename or None for a text field, data bytes)]. Returns (body, starts)
    where starts[i] = (offset of part i's boundary line, offset of its first data byte)."""
    out, starts = b"", []
    for name, filename, data in parts:
        part_start = len(out)
        out += b"--" + boundary.encode() + b"\r\n"
        disposition = f'Content-Disposition: form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += disposition.encode() + b"\r\n"
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n"
        starts.append((part_start, len(out)))
        out += data + b"\r\n"
    out += b"--" + boundary.encode() + b"--\r\n"
    return out, starts


def connect(server, source="127.0.0.1", timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", server.port))
    return s


def head(method, path, headers, body_len=None):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for k, v in headers:
        lines.append(f"{k}: {v}")
    if body_len is not None:
        lines.append(f"Content-Length: {body_len}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_response(sock):
    r = http.client.HTTPResponse(sock, method="GET")
    r.begin()
    body = r.read()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def send(server, method, path, headers=(), body=b"", split=None, pause=0.02, timeout=30, source="127.0.0.1"):
    """headers: [(name, value)] (a name may repeat). Returns (status, headers, body bytes)."""
    s = connect(server, source=source, timeout=timeout)
    try:
        request = head(method, path, list(headers), len(body)) + body
        cut = len(request) - len(body) + split if split is not None else len(request)
        s.sendall(request[:cut])
        if cut < len(request):
            time.sleep(pause)
            s.sendall(request[cut:])
        return read_response(s)
    finally:
        s.close()


def send_json(server, method, path, headers=(), body=b"", **kw):
    status, h, data = send(server, method, path, headers, body, **kw)
    return status, json.loads(data) if data else None


def closed_by_peer(sock, timeout):
    """True when the server closes the connection (EOF or reset) within timeout seconds;
    whatever the server sends before closing is read and ignored."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        sock.settimeout(max(0.05, deadline - time.time()))
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False
