"""Durable background work and email (decisions sections 2 and 6): the .eml outbox, real SMTP
delivery, retries that survive a restart, and the PostgreSQL pool surviving a database
restart."""
import base64
import concurrent.futures
import datetime
import email.utils
import os
import re
import socketserver
import threading

import pytest
import requests

from conftest import Api, free_port, mail_parts, unique_email, unique_ip
from helpers import eventually

pytestmark = pytest.mark.pooler

RESET_LINK = re.compile(r"http://app\.test/reset-password\?token=([0-9a-f]{64})(?![0-9A-Za-z])")


def forgot(url, email, role="user"):
    r = requests.post(url + "/auth/forgot-password", json={"email": email, "role": role},
                      headers={"X-Forwarded-For": unique_ip()}, timeout=10)
    assert r.status_code == 200, r.text
    return r


def register(url, **over):
    body = {"email": unique_email("q"), "password": "password123", "name": "Queue Test", "address": "1 Main St",
            "zip": "10001"}
    body.update(over)
    r = requests.post(url + "/auth/register", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return body["email"], r.json()["token"]


# ---------------------------------------------------------------- the .eml outbox

def test_forgot_password_writes_an_eml_with_a_reset_link(server, api):
    u = api.register_user()
    forgot(server.url, u["email"])
    (mail,) = server.wait_mail(u["email"])
    h = mail["headers"]
    assert h["to"] == u["email"]
    assert mail["subject"]
    assert h["from"]
    sent = email.utils.parsedate_to_datetime(h["date"])
    assert sent.tzinfo is not None
    assert re.fullmatch(r"<[^<>@\s]+@[^<>@\s]+>", h["message-id"]), h["message-id"]
    tokens = RESET_LINK.findall(mail["body"])
    assert len(tokens) == 1, mail["body"]
    assert "\r\n" in mail["raw"] and "\n" not in mail["raw"].replace("\r\n", "")
    # the link's token is the live one
    r = api.post("/auth/reset-password", json={"token": tokens[0], "newPassword": "brand-new-pass"})
    assert r.status_code == 200, r.text
    assert r.json()["role"] == "user"
    r = api.post("/auth/login", json={"email": u["email"], "password": "brand-new-pass"})
    assert r.status_code == 200


def test_each_forgot_password_mails_a_fresh_token(server, api):
    u = api.register_user()
    forgot(server.url, u["email"])
    server.wait_mail(u["email"], count=1)
    forgot(server.url, u["email"])
    got = server.wait_mail(u["email"], count=2)
    assert len(got) == 2
    t1, t2 = (RESET_LINK.findall(m["body"])[0] for m in got)
    assert t1 != t2
    assert got[0]["headers"]["message-id"] != got[1]["headers"]["message-id"]
    # only the newest token works
    r = api.post("/auth/reset-password", json={"token": t1, "newPassword": "brand-new-pass"})
    assert r.status_code == 400
    r = api.post("/auth/reset-password", json={"token": t2, "newPassword": "brand-new-pass"})
    assert r.status_code == 200


def test_no_mail_for_an_unknown_account(server):
    missing = unique_email("ghost")
    forgot(server.url, missing)
    Api(server).wait_queue_idle()  # a message queued by the request would have been sent
    assert server.mails(missing) == []


def test_a_burst_of_mail_is_delivered_once_each(server, api):
    """Workers claim queued rows in batches under a backlog: every message of a burst still goes
    out exactly once, to its own recipient, and the queue ends idle."""
    users = [api.register_user() for _ in range(40)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda u: forgot(server.url, u["email"]), users))
    for u in users:
        (mail,) = server.wait_mail(u["email"], timeout=20)
        assert mail["headers"]["to"] == u["email"]
        assert len(RESET_LINK.findall(mail["body"])) == 1
    Api(server).wait_queue_idle()
    for u in users:
        assert len(server.mails(u["email"])) == 1, "delivered exactly once"


# ---------------------------------------------------------------- real SMTP

class FakeSMTP:
    """Just enough SMTP for libcurl: records the envelope and the data of each message."""

    def __init__(self, auth=False):
        self.messages = []
        self.commands = []
        self.logins = []
        self.lock = threading.Lock()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line):
                self.wfile.write(line.encode() + b"\r\n")
                self.wfile.flush()

            def handle(self):
                self.reply("220 fake.smtp.test ESMTP ready")
                mail_from, rcpts = None, []
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    cmd = line.decode(errors="replace").rstrip("\r\n")
                    with outer.lock:
                        outer.commands.append(cmd)
                    verb = cmd.split(" ", 1)[0].split(":", 1)[0].upper()
                    if verb == "EHLO":
                        self.reply("250-fake.smtp.test")
                        if auth:
                            self.reply("250-AUTH PLAIN")
                        self.reply("250 8BITMIME")
                    elif verb == "AUTH" and auth:
                        parts = cmd.split(" ")
                        if len(parts) < 3:
                            self.reply("334 ")
                            parts.append(self.rfile.readline().decode().strip())
                        _, user, password = base64.b64decode(parts[2]).decode().split("\0")
                        with outer.lock:
                            outer.logins.append((user, password))
                        self.reply("235 Authentication successful")
                    elif verb == "HELO":
                        self.reply("250 fake.smtp.test")
                    elif verb == "MAIL":
                        mail_from, rcpts = cmd[len("MAIL FROM:"):].strip().split(" ")[0], []
                        self.reply("250 OK")
                    elif verb == "RCPT":
                        rcpts.append(cmd[len("RCPT TO:"):].strip())
                        self.reply("250 OK")
                    elif verb == "DATA":
                        self.reply("354 End data with <CR><LF>.<CR><LF>")
                        lines = []
                        while True:
                            dl = self.rfile.readline()
                            if not dl or dl == b".\r\n":
                                break
                            lines.append(dl[1:] if dl.startswith(b"..") else dl)
                        with outer.lock:
                            outer.messages.append({"from": mail_from, "rcpts": rcpts,
                                                   "data": b"".join(lines).decode("utf-8", errors="replace")})
                        self.reply("250 OK queued")
                    elif verb in ("RSET", "NOOP"):
                        self.reply("250 OK")
                    elif verb == "QUIT":
                        self.reply("221 Bye")
                        return
                    else:  # STARTTLS, AUTH, anything else
                        self.reply("502 Command not implemented")

        class TCPServer(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = TCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def received(self, rcpt):
        with self.lock:
            return [m for m in self.messages if f"<{rcpt}>" in m["rcpts"]]

    def wait(self, rcpt, timeout=10):
        try:
            return eventually(lambda: self.received(rcpt), timeout, f"an SMTP message for {rcpt}")
        except AssertionError as e:
            raise AssertionError(f"{e}; commands seen: {self.commands[-20:]}") from None

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_smtp():
    s = FakeSMTP()
    yield s
    s.close()


def test_smtp_delivery(make_server, fake_smtp):
    srv = make_server(SMTP_URL=f"smtp://127.0.0.1:{fake_smtp.port}", MAIL_FROM="robot@mail.example")
    addr, _ = register(srv.url)
    forgot(srv.url, addr)
    (msg,) = fake_smtp.wait(addr)
    assert msg["rcpts"] == [f"<{addr}>"]
    assert msg["from"] == "<robot@mail.example>"
    head, _, body = msg["data"].partition("\r\n\r\n")
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in head.split("\r\n"))}
    assert headers["to"] == addr
    assert headers["from"] == "robot@mail.example"
    assert headers["subject"] and headers["date"] and headers["message-id"]
    assert headers["content-type"].startswith("multipart/alternative; boundary=")
    parts = mail_parts(msg["data"])  # the same email as the outbox's: its text part, and the HTML part
    assert len(RESET_LINK.findall(parts["text/plain"])) == 1, body
    assert set(RESET_LINK.findall(parts["text/html"])) == set(RESET_LINK.findall(parts["text/plain"]))
    # delivered once, and nothing went to the file outbox
    Api(srv).wait_queue_idle()
    assert len(fake_smtp.wait(addr)) == 1
    assert srv.mails() == []
    assert not os.path.isdir(os.path.join(srv.data_dir, "mail")) or not os.listdir(os.path.join(srv.data_dir, "mail"))


def test_smtp_with_credentials_in_the_url(make_server):
    """smtp://user:pass@host:port authenticates with those credentials."""
    fake = FakeSMTP(auth=True)
    try:
        srv = make_server(SMTP_URL=f"smtp://mailer:s3cret@127.0.0.1:{fake.port}")
        addr, _ = register(srv.url)
        forgot(srv.url, addr)
        (msg,) = fake.wait(addr)
        assert len(RESET_LINK.findall(mail_parts(msg["data"])["text/plain"])) == 1
        assert fake.logins == [("mailer", "s3cret")]
    finally:
        fake.close()


# ---------------------------------------------------------------- durability

def _ms(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000


def _wait_log(srv, needle, timeout, count=1):
    try:
        return srv.wait_log(lambda line: needle in (line.get("msg") or ""), count, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}: no log line with {needle!r}:\n{srv.read_log()[-3000:]}") from None


def test_failed_delivery_is_retried_and_survives_a_restart(make_server):
    closed = free_port()
    srv = make_server(SMTP_URL=f"smtp://127.0.0.1:{closed}")
    addr, _ = register(srv.url)
    forgot(srv.url, addr)
    api = Api(srv)
    first, = _wait_log(srv, "will retry", timeout=5)  # the first attempt failed ...
    assert first["attempt"] == 1 and first["level"] == "warn"
    assert "smtp" in first["error"].lower()
    # ... and is retried after a backoff of a second (and up to 250 ms of jitter) of the service
    # clock, failing again: not before the clock moved past it
    api.wait_queue_idle()
    assert len(_wait_log(srv, "will retry", timeout=5)) == 1
    api.advance_clock(1250)
    retries = _wait_log(srv, "will retry", timeout=5, count=2)
    assert retries[1]["attempt"] == 2 and retries[1]["jobId"] == first["jobId"]
    assert _ms(retries[1]["time"]) - _ms(first["time"]) >= 1000  # log times are the service clock's
    assert srv.mails() == []
    srv.env.pop("SMTP_URL")
    srv.restart()
    # the restarted process's clock has no offset: past the second backoff (2 s) and the first move
    api.advance_clock(60 * 1000)
    (mail,) = srv.wait_mail(addr, timeout=15)
    assert len(RESET_LINK.findall(mail["body"])) == 1
    Api(srv).wait_queue_idle()
    assert len(srv.mails(addr)) == 1, "delivered exactly once"


def test_queued_mail_is_sent_after_a_restart(make_server):
    """Work queued right before a shutdown is not lost."""
    srv = make_server()
    addrs = [register(srv.url)[0] for _ in range(3)]
    for a in addrs:
        forgot(srv.url, a)
    srv.restart()
    for a in addrs:
        assert len(srv.wait_mail(a, timeout=15)) == 1
    Api(srv).wait_queue_idle()
    assert sorted(m["to"] for m in srv.mails()) == sorted(addrs)


# ---------------------------------------------------------------- PostgreSQL restarts
# These restart the session's whole cluster, so every running server loses its connections.
# `heal_shared_server` then drives traffic through the shared server until it answers cleanly,
# so the bug below cannot leak a stray 500 into tests that run later.

@pytest.fixture
def pg_restart(engine, pg_cluster, request):
    if engine != "postgres":
        pytest.skip("PostgreSQL only: SQLite has no database server to restart")
    yield pg_cluster
    shared = getattr(request.config, "_marketplace_server", None)
    if shared is not None and shared.proc.poll() is None:
        _heal(shared)


def _heal(srv, rounds=10):
    def one(_):
        return requests.post(srv.url + "/auth/forgot-password", json={"email": unique_email("heal"), "role": "user"},
                             headers={"X-Forwarded-For": unique_ip()}, timeout=10).status_code

    for _ in range(rounds):
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            if all(code == 200 for code in ex.map(one, range(64))):
                return


def _restart_under_traffic(pg_cluster, call, stop_at_first_failure):
    """Stops the database while 8 clients keep calling, until some call has failed (so the
    checks of failed answers always have something to check), then starts it again; returns
    the failed responses."""
    stop, failed, lock = threading.Event(), [], threading.Lock()

    def caller():
        while not stop.is_set():
            try:
                r = call()
            except requests.RequestException:
                return
            if r.status_code != 200:
                with lock:
                    failed.append(r)
                if stop_at_first_failure:
                    return

    callers = [threading.Thread(target=caller) for _ in range(8)]
    for t in callers:
        t.start()
    try:
        pg_cluster.pause()
        eventually(lambda: failed, 15, "a call failed while the database was stopped")
    finally:
        pg_cluster.resume()
        stop.set()
        for t in callers:
            t.join(timeout=15)
    return failed


def _recovered(call, what, timeout=5):
    return eventually(call, timeout, f"{what}: recovery", interval=0.1, until=lambda r: r.status_code in (200, 201))


def test_pool_recovers_after_a_database_restart(pg_restart, make_server):
    """While the database is away, requests fail cleanly (a 5xx with the generic body); shortly
    after it is back, reads, writes, the hashing routes and the queue all work again."""
    srv = make_server()
    addr, token = register(srv.url)
    auth = {"Authorization": f"Bearer {token}"}
    me = lambda: requests.get(srv.url + "/users/me", headers=auth, timeout=10)
    failed = _restart_under_traffic(pg_restart, me, stop_at_first_failure=False)
    assert failed  # the checks below run
    for r in failed:
        assert 500 <= r.status_code < 600, (r.status_code, r.text)
        body = r.json()
        if r.status_code == 500:
            assert body == {"error": "Internal server error", "code": "internal_error",
                            "requestId": r.headers["X-Request-Id"]}
        # nothing internal leaks (the request id is random, so only the message is checked)
        message = body["error"].lower()
        assert not any(w in message for w in ("postgres", "sql", "connection", "libpq", "server closed")), body
    r = _recovered(me, "read")
    assert r.json()["email"] == addr
    _recovered(lambda: requests.patch(srv.url + "/users/me", json={"lat": 40.7, "lng": -74.0}, headers=auth,
                                       timeout=10), "write")
    _recovered(lambda: requests.post(srv.url + "/auth/login", json={"email": addr, "password": "password123"},
                                      timeout=10), "login")
    _recovered(lambda: requests.post(srv.url + "/auth/forgot-password", json={"email": addr, "role": "user"},
                                      headers={"X-Forwarded-For": unique_ip()}, timeout=10), "forgot-password")
    (mail,) = srv.wait_mail(addr, timeout=10)
    assert len(RESET_LINK.findall(mail["body"])) == 1


def test_pool_survives_a_database_restart(pg_restart, make_server):
    """After the first successful call, every call succeeds on every pooled connection."""
    srv = make_server()
    addr, token = register(srv.url)
    auth = {"Authorization": f"Bearer {token}"}
    me = lambda t=None: requests.get(srv.url + "/users/me", timeout=10,
                                     headers={"Authorization": f"Bearer {t}"} if t else auth)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        assert all(r.status_code == 200 for r in ex.map(lambda _: me(), range(32)))
    # clients that see a failure back off, as real ones would
    _restart_under_traffic(pg_restart, me, stop_at_first_failure=True)
    r = _recovered(me, "read")
    assert r.json()["email"] == addr

    def patch(i):
        return requests.patch(srv.url + "/users/me", json={"lat": 40.0 + i / 1000, "lng": -73.9}, headers=auth,
                              timeout=10).status_code

    # reads and writes in parallel (the hashing routes go one at a time: the bounded bcrypt
    # pool answers a burst with 503 by design)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(lambda i: me().status_code if i % 2 else patch(i), range(64)))
    assert codes == [200] * 64, codes
    for _ in range(3):
        a, t = register(srv.url)
        assert me(t).status_code == 200
        r = requests.post(srv.url + "/auth/login", json={"email": a, "password": "password123"}, timeout=10)
        assert r.status_code == 200, r.text
    forgot(srv.url, addr)
    assert len(srv.wait_mail(addr, timeout=10)) == 1
