"""Database outages (issue 14, item 4) and readiness (issue 13, item 9).

PostgreSQL: a private cluster of this module (never the session's shared one), reached through
a TCP proxy, so a test can stop the server (refused connections) or black-hole the network
(silence). While it is away, requests that need the database answer 503
`{"error": "Service unavailable"}` with Retry-After within 2 seconds, GET /health stays 200,
GET /ready answers 503, background work waits and nothing is lost; within 5 seconds of the
database's return the service answers 200 again, without a restart.

SQLite: a database locked by another process past DB_BUSY_TIMEOUT_MS, a database opened
read-only, and a database on a full disk (a small tmpfs, when the tests run as root) give the
same 503 and lose nothing that was acknowledged.
"""
import concurrent.futures
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import Api, PgCluster, Server, _fail_on, _stop_all, unique_email
from flow_helpers import customer, ok, post_job, private_zip, provider
from helpers import error_body, eventually
from tcp_proxy import TcpProxy
from test_system import db_rows

pytestmark = pytest.mark.pooler

UNAVAILABLE = error_body(503, "Service unavailable")
SECRET = "outage-tests-secret-0123456789abcdef"


def timed(call):
    t0 = time.monotonic()
    r = call()
    return r, time.monotonic() - t0


def assert_unavailable(r, elapsed, limit=2.0):
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.json() == UNAVAILABLE
    assert int(r.headers["Retry-After"]) >= 1
    assert elapsed < limit, f"503 after {elapsed:.2f} s"


def assert_not_leaking(reason):
    for word in ("postgres://", "postgresql://", "127.0.0.1", "password", "@"):
        assert word not in reason, reason


def eventually_ok(call, within):
    """Polls call until it answers 2xx; returns the seconds it took (fails past `within`)."""
    t0 = time.monotonic()
    eventually(call, within, "a 2xx answer", until=lambda r: r.status_code < 300)
    return time.monotonic() - t0


# ================================================================ readiness

def test_ready_answers_200_when_the_database_answers(api):
    r = api.get("/ready")
    assert (r.status_code, r.json()) == (200, {"status": "ready"})
    assert r.headers["Cache-Control"] == "no-store"


def test_ready_reports_a_migration_not_applied(server_factory):
    srv = server_factory()
    url, data = srv.env["DATABASE_URL"], srv.data_dir
    (row,) = db_rows(url, data, "SELECT version, name, applied_at FROM schema_migrations ORDER BY version DESC LIMIT 1")
    db_rows(url, data, f"DELETE FROM schema_migrations WHERE version = {row[0]}")
    r = requests.get(srv.url + "/ready", timeout=10)
    assert (r.status_code, r.json()) == (503, {"status": "unavailable", "reason": "1 database migration not applied"})
    assert requests.get(srv.url + "/health", timeout=10).status_code == 200
    db_rows(url, data, f"INSERT INTO schema_migrations (version, name, applied_at) VALUES ({row[0]}, '{row[1]}', {row[2]})")
    assert requests.get(srv.url + "/ready", timeout=10).json() == {"status": "ready"}


# ================================================================ PostgreSQL

@pytest.fixture(scope="module")
def own_pg(engine):
    if engine != "postgres":
        pytest.skip("PostgreSQL only (the SQLite outages are below)")
    cluster = PgCluster()
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def behind_proxy(request, own_pg):
    """start(**env) -> (server, proxy): a server whose database is reached through a proxy."""
    started, proxies = [], []

    def start(**env):
        proxy = TcpProxy(own_pg.port)
        proxies.append(proxy)
        url = own_pg.new_database().replace(f":{own_pg.port}/", f":{proxy.port}/")
        srv = Server(request.config.getoption("--binary"), url, {"DB_POOL_SIZE": "4", **env})
        started.append(srv)
        return srv.start(), proxy

    yield start
    reports = _stop_all(started)
    for p in proxies:
        p.close()
    try:
        own_pg.resume()  # a failed test may have left it stopped
    except subprocess.CalledProcessError:
        pass
    _fail_on(reports)


def burst(srv, token, n=16):
    """n concurrent reads and writes; [(response, seconds)]."""
    auth = {"Authorization": f"Bearer {token}"}

    def one(i):
        if i % 4 == 3:
            return timed(lambda: requests.patch(srv.url + "/users/me", json={"lat": 10 + i, "lng": -70}, headers=auth,
                                                timeout=30))
        return timed(lambda: requests.get(srv.url + "/users/me", headers=auth, timeout=30))

    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        return list(ex.map(one, range(n)))


def check_down(srv, token, seconds=3.0):
    """While the database is away: every request that needs it answers 503 within 2 s, again
    and again, while /health answers 200 and /ready 503."""
    for r, elapsed in burst(srv, token):
        assert_unavailable(r, elapsed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r, elapsed = timed(lambda: requests.get(srv.url + "/users/me", headers={"Authorization": f"Bearer {token}"},
                                                timeout=30))
        assert_unavailable(r, elapsed)
        h, elapsed = timed(lambda: requests.get(srv.url + "/health", timeout=30))
        assert h.status_code == 200 and elapsed < 0.5
        r, elapsed = timed(lambda: requests.get(srv.url + "/ready", timeout=30))
        assert r.status_code == 503 and elapsed < 2.0, (r.status_code, r.text, elapsed)
        body = r.json()
        assert body["status"] == "unavailable" and body["reason"], body
        assert_not_leaking(body["reason"])
        time.sleep(0.2)


def check_back(srv, user):
    auth = {"Authorization": f"Bearer {user['token']}"}
    took = eventually_ok(lambda: requests.get(srv.url + "/users/me", headers=auth, timeout=30), within=5)
    assert took < 5
    # every pooled connection works again, reads and writes alike
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        codes = list(ex.map(lambda i: requests.patch(srv.url + "/users/me", json={"lat": 50 + i / 100, "lng": -70},
                                                     headers=auth, timeout=30).status_code, range(16)))
    assert codes == [200] * 16
    assert requests.get(srv.url + "/ready", timeout=10).json() == {"status": "ready"}
    # nothing written while the database was away
    assert requests.get(srv.url + "/users/me", headers=auth, timeout=10).json()["lat"] >= 50


@pytest.mark.parametrize("outage", ["stopped", "unreachable"])
def test_postgres_away_answers_503_fast_and_recovers_without_a_restart(own_pg, behind_proxy, outage):
    """stopped: the server is shut down (connections refused); unreachable: the network drops
    everything, no refusal, only silence, on old and new connections."""
    srv, proxy = behind_proxy()
    api = Api(srv)
    user = api.register_user()
    assert api.get("/ready").json() == {"status": "ready"}
    away, back = (own_pg.pause, own_pg.resume) if outage == "stopped" else (proxy.blackhole, proxy.restore)
    away()
    try:
        check_down(srv, user["token"])
    finally:
        back()
    check_back(srv, user)
    assert srv.proc.poll() is None


class SlowPush:
    """An Expo-compatible push endpoint: answers[i] is (seconds to wait, status) for the i-th
    request (then 200 at once); records every request as it arrives."""

    def __init__(self, answers):
        self.answers, self.requests, self.lock = list(answers), [], threading.Lock()
        self.answered = 0  # requests answered so far
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with fake.lock:
                    wait, status = fake.answers.pop(0) if fake.answers else (0, 200)
                    fake.requests.append((body["to"], status))
                time.sleep(wait)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                with fake.lock:
                    fake.answered += 1

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/--/api/v2/push/send"

    def received(self):
        with self.lock:
            return list(self.requests)

    def wait(self, n, timeout=20):
        return eventually(self.received, timeout, f"{n} push requests", interval=0.02, until=lambda got: len(got) >= n)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_background_work_waits_for_the_database_and_runs_once(own_pg, behind_proxy):
    """Two pushes are in flight when the database stops: one is answered 200 after the stop, the
    other 500. Once the database is back, the first is recorded done (not sent again) and the
    second is retried and delivered: each device gets exactly one push."""
    push = SlowPush([(2.5, 200), (0, 500)])
    try:
        srv, _ = behind_proxy(PUSH_URL=push.url, QUEUE_WORKERS="2")
        api = Api(srv)
        z = private_zip()
        pros = [provider(api, [z], verified=False) for _ in range(2)]
        for i, pro in enumerate(pros):
            ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": f"ExponentPushToken[o{i}]"}))
        post_job(api, customer(api, z), isAsap=True)
        push.wait(2)  # both sent: one waits for its answer, the other was refused
        own_pg.pause()
        try:  # while the database is away, the 200 arrives (2.5 s late) and the retry falls due
            eventually(lambda: push.answered == 2, 10, "both pushes answered")
            api.advance_clock(60 * 1000)  # past the first retry's backoff (1 s and jitter)
        finally:
            own_pg.resume()
        got = push.wait(3)
        eventually_ok(lambda: api.get("/__test/queue"), within=10)
        api.wait_queue_idle()
        with push.lock:
            delivered = sorted(to for to, status in push.requests if status == 200)
            assert len(push.requests) == 3, push.requests
        assert delivered == ["ExponentPushToken[o0]", "ExponentPushToken[o1]"], got
        rows = db_rows(srv.env["DATABASE_URL"], srv.data_dir, "SELECT status, attempts FROM job_queue WHERE kind = 'push' ORDER BY attempts")
        assert rows == [("done", "1"), ("done", "2")], rows
        done = srv.wait_log(lambda line: line.get("msg") == "background job done" and line["kind"] == "push", count=2)
        assert len(done) == 2 and all(line["outcome"] == "done" and line["ms"] >= 0 for line in done), done
    finally:
        push.close()


# ================================================================ SQLite

@pytest.fixture
def sqlite_only(engine):
    if engine != "sqlite":
        pytest.skip("SQLite only (the PostgreSQL outages are above)")


def test_sqlite_locked_past_its_timeout_answers_503_and_loses_nothing(sqlite_only, server_factory):
    srv = server_factory(DB_BUSY_TIMEOUT_MS="300")
    api = Api(srv)
    user = api.register_user()
    ok(api.patch("/users/me", token=user["token"], json={"lat": 1.5, "lng": 2.5}))
    holder = sqlite3.connect(os.path.join(srv.data_dir, "marketplace.db"), timeout=5, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process (an operator's shell) holds the write lock
    try:
        auth = {"Authorization": f"Bearer {user['token']}"}
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            results = list(ex.map(lambda i: timed(lambda: requests.patch(
                srv.url + "/users/me", json={"lat": 9, "lng": i}, headers=auth, timeout=30)), range(6)))
        for r, elapsed in results:
            assert_unavailable(r, elapsed)
        r, elapsed = timed(lambda: requests.post(srv.url + "/auth/register", json={
            "email": unique_email(), "password": "password123", "name": "N", "address": "1 Main St", "zip": "10001"},
            timeout=30))
        assert_unavailable(r, elapsed)
        # reads go on (WAL)
        assert api.get("/users/me", token=user["token"]).json()["lat"] == 1.5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ok(api.patch("/users/me", token=user["token"], json={"lat": 3.5, "lng": 4.5}))["lat"] == 3.5
    assert api.get("/users/me", token=user["token"]).json()["lat"] == 3.5


def test_sqlite_read_only_database_answers_503_to_writes(sqlite_only, server_factory):
    first = server_factory(JWT_SECRET=SECRET)
    user = Api(first).register_user(name="Kept")
    ok(Api(first).patch("/users/me", token=user["token"], json={"lat": 1.5, "lng": 2.5}))
    db = os.path.join(first.data_dir, "marketplace.db")
    first.stop()
    srv = server_factory(JWT_SECRET=SECRET, DATABASE_URL=f"sqlite:file:{db}?mode=ro")
    api = Api(srv)
    assert api.get("/users/me", token=user["token"]).json()["name"] == "Kept"
    r, elapsed = timed(lambda: api.patch("/users/me", token=user["token"], json={"lat": 7, "lng": 7}))
    assert_unavailable(r, elapsed)
    r, elapsed = timed(lambda: api.post("/auth/register", json={
        "email": unique_email(), "password": "password123", "name": "N", "address": "1 Main St", "zip": "10001"}))
    assert_unavailable(r, elapsed)
    assert api.get("/users/me", token=user["token"]).json()["lat"] == 1.5
    assert api.get("/ready").json() == {"status": "ready"}  # it can serve reads


@pytest.fixture
def small_disk():
    """A 3 MiB tmpfs (root only), unmounted after the test's servers stopped."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs mount, which needs root")
    where = tempfile.mkdtemp(prefix="mp-full-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", where], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", where], check=False)
    shutil.rmtree(where, ignore_errors=True)


def fill(where):
    """Fills the filesystem; returns the filler's path."""
    path = os.path.join(where, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):  # to the last byte
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return path


def test_sqlite_on_a_full_disk_answers_503_and_loses_nothing(sqlite_only, small_disk, server_factory):
    srv = server_factory(DATABASE_URL=f"sqlite:{small_disk}/marketplace.db")
    api = Api(srv)
    user = api.register_user()
    ok(api.patch("/users/me", token=user["token"], json={"lat": 1.5, "lng": 2.5}))
    filler = fill(small_disk)
    try:
        failures = 0
        for i in range(20):  # the WAL may hold a page or two: writes fail once it cannot grow
            r, elapsed = timed(lambda: api.post("/auth/register", json={
                "email": unique_email("full"), "password": "password123", "name": "x" * 100, "address": "1 Main St",
                "zip": "10001"}))
            if r.status_code == 201:
                continue
            assert_unavailable(r, elapsed)
            failures += 1
        assert failures >= 10, f"only {failures} writes failed on a full disk"
        r, elapsed = timed(lambda: api.patch("/users/me", token=user["token"], json={"lat": 9, "lng": 9}))
        assert_unavailable(r, elapsed)
        assert api.get("/users/me", token=user["token"]).json()["lat"] == 1.5
    finally:
        os.unlink(filler)
    assert ok(api.patch("/users/me", token=user["token"], json={"lat": 3.5, "lng": 4.5}))["lat"] == 3.5
    assert api.get("/users/me", token=user["token"]).json()["lat"] == 3.5
    assert api.get("/ready").json() == {"status": "ready"}
