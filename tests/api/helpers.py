"""Helpers for every API test file (conftest.py included, so nothing here imports it).

- `eventually(fn, ...)`: the one way to wait for something the service does on its own time
  (a queue drains, a log line or an email arrives, a check finishes). No test sleeps a fixed
  time and then asserts: it waits for the observable outcome, and fails with what it waited
  for and the last value it saw. Time a rule reads (windows, expiries, the order of
  timestamps) is moved with the test clock (`api.advance_clock(ms)`) instead.
- `health_once_up(proc, url)`: for the tests that start the binary themselves;
  `serving(args, env, url, log_path)` runs it for the length of a `with` block and checks that
  SIGTERM then stops it cleanly (exit 0, none of the SANITIZER_MARKERS in its output).
- `png_bytes(...)`: the one image maker: a valid PNG of pseudo-random pixels.
- `error_body(status, message, code=None, field=None)`: the whole error body the service answers
  (`{error, code, field?}`), and `assert_error(r, status, message, code=None, field=None)`,
  which compares an answer's status and whole body with it. The code defaults to the status's
  (DEFAULT_CODES); a 400 whose message is `<field>: <text>` is a validation error
  (`validation_failed`, with that field). Name the code where the service names a more precise
  one (invalid_state, email_taken, ...). `send_raw_json(api, method, path, token, raw)` sends text
  that need not be JSON as a JSON body.
- `server_seconds(api)`: the service clock's now (it may run ahead of the real one), in epoch
  seconds.
- `pages(api, path, token, params, wrap=None, between=None)`: follows a paged list's
  `Link: <...>; rel="next"` from its first page to its last, checking that every page but the
  last announces the next (and, for a wrapped answer, that `nextCursor` is the Link's cursor),
  and returns the pages; `between(i)` runs after page i, so rows can arrive meanwhile.
"""
import contextlib
import datetime
import random
import re
import signal
import struct
import subprocess
import urllib.parse
import time
import zlib

import requests


def eventually(fn, timeout=10, what="the condition", interval=0.05, until=bool, retry=(AssertionError,)):
    """Calls fn() every interval seconds until until(value) is true, and returns that value.
    fn may also raise one of `retry` (AssertionError by default) to mean "not yet". After
    timeout seconds it fails: an AssertionError naming `what`, with the last value or the last
    error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value, error = fn(), None
            if until(value):
                return value
        except retry as e:
            value, error = None, e
        if time.monotonic() >= deadline:
            last = f"{type(error).__name__}: {error}" if error is not None else repr(value)
            raise AssertionError(f"{what}: not reached within {timeout} s; last: {last[:2000]}") from error
        time.sleep(interval)


def health_once_up(proc, url, timeout=20, read_log=lambda: ""):
    """GET url/health once the process proc (started by the test) answers it; fails at once if
    proc exits first (with read_log() in the message)."""
    def health():
        assert proc.poll() is None, f"exited with {proc.returncode}: {read_log()}"
        try:
            return requests.get(url + "/health", timeout=1)
        except requests.RequestException:
            return None

    return eventually(health, timeout, f"{url} answers /health", until=lambda r: r is not None, retry=())


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


@contextlib.contextmanager
def serving(args, env, url, log_path):
    """Runs args (the binary, serving at url, its output in log_path) and yields its first /health
    answer; after the block, SIGTERM must stop it with exit 0 and no sanitizer report."""
    with open(log_path, "wb") as log:
        p = subprocess.Popen(args, env=env, stdout=log, stderr=log)

    def read_log():
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    try:
        yield health_once_up(p, url, read_log=read_log)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 0
        assert not any(m in read_log() for m in SANITIZER_MARKERS), read_log()[-5000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(seed=1, width=16, height=12, gray=False, extra_chunks=()):
    """A valid PNG (RGB, or 8-bit grey with gray=True) of pseudo-random pixels from seed, with no
    ancillary chunk but extra_chunks [(type, data)], written between IHDR and IDAT; without
    them the service's metadata stripping leaves it byte for byte."""
    rnd = random.Random(seed)
    bpp = 1 if gray else 3
    raw = b"".join(b"\0" + bytes(rnd.randrange(256) for _ in range(width * bpp)) for _ in range(height))
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0 if gray else 2, 0, 0, 0))
    for kind, data in extra_chunks:
        out += png_chunk(kind, data)
    return out + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


# The code an error of each status carries unless the service names a more precise one.
DEFAULT_CODES = {400: "bad_request", 401: "unauthorized", 402: "payment_failed", 403: "forbidden", 404: "not_found",
                 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable",
                 429: "rate_limited", 431: "header_fields_too_large", 500: "internal_error",
                 503: "service_unavailable", 504: "gateway_timeout", 507: "insufficient_storage"}
_FIELD = re.compile(r"^([A-Za-z][\w.\[\]-]*): ")


def error_body(status, message, code=None, field=None):
    """The error body the service answers with status and message: `code` given, else the
    status's default (a 400 `<field>: <text>` is validation_failed with that field); `field`
    given, or read from a validation message."""
    match = _FIELD.match(message) if status == 400 else None
    if code is None:
        code = "validation_failed" if match else DEFAULT_CODES[status]
    body = {"error": message, "code": code}
    if field is None and code == "validation_failed" and match:
        field = match.group(1)
    if field is not None:
        body["field"] = field
    return body


def assert_error(r, status, message, code=None, field=None):
    """Asserts the answer r is status with exactly error_body(status, message, code, field)."""
    assert (r.status_code, r.json()) == (status, error_body(status, message, code, field)), r.text


def send_raw_json(api, method, path, token, raw):
    """method path with raw (text, JSON or not) as its body, declared application/json."""
    return api.request(method, path, token=token, data=raw, headers={"Content-Type": "application/json"})


def server_seconds(api):
    """The service clock's now, in epoch seconds (POST /__test/clock moving it by nothing)."""
    return datetime.datetime.fromisoformat(api.advance_clock(0).replace("Z", "+00:00")).timestamp()


LINK_NEXT = re.compile(r'^<([^>]+)>; rel="next"$')


def bcrypt_runs(api):
    """How many bcrypt hashes and checks the server has run (marketplace_password_hashes_total in
    GET /metrics; the harness talks from the loopback)."""
    r = api.get("/metrics")
    assert r.status_code == 200, r.text
    (line,) = [x for x in r.text.splitlines() if x.startswith("marketplace_password_hashes_total ")]
    return int(line.split()[1])


def next_link(r):
    """The next page's URL of a paged answer (its Link header), or None on the last page."""
    link = r.headers.get("Link")
    if link is None:
        return None
    m = LINK_NEXT.match(link)
    assert m, link
    return m.group(1)


def pages(api, path, token, params=None, wrap=None, between=None, limit=100):
    """Every page of the list at path (params: its other query arguments; each page asks for
    `limit` items), following the Link headers; returns [[item, ...], ...]."""
    out = []
    r = api.get(path, token=token, params={**(params or {}), "limit": limit})
    while True:
        assert r.status_code == 200, r.text
        body = r.json()
        items = body[wrap] if wrap else body
        assert isinstance(items, list), body
        out.append(items)
        url = next_link(r)
        if wrap:
            cursor = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["cursor"][0] if url else None
            assert body.get("nextCursor") == cursor, (body.get("nextCursor"), url)
        if url is None:
            return out
        assert len(items) == limit, (len(items), url)
        parts = urllib.parse.urlsplit(url)
        assert parts.path == path, url
        if between:
            between(len(out) - 1)
        r = api.get(parts.path + "?" + parts.query, token=token)
        assert len(out) < 1000, "a list that never ends"
