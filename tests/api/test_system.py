"""Health, the test clock, environments, production start-up checks, the bootstrap
administrator and graceful shutdown (decisions sections 1, 2 and 6)."""
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from conftest import PG_ENV, Api, contract_observe, free_port, unique_email, unique_ip
from fake_stripe import FakeStripe
from helpers import SANITIZER_MARKERS, error_body, eventually, serving

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def parse_iso(s):
    assert ISO_MS.match(s), s
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)


def db_rows(database_url, data_dir, sql):
    """Rows of a query against a server's database (SQLite file or PostgreSQL via psql)."""
    if database_url.startswith("sqlite:"):
        with sqlite3.connect(os.path.join(data_dir, "marketplace.db")) as c:
            return [tuple(str(v) for v in row) for row in c.execute(sql).fetchall()]
    psql = shutil.which("psql")
    if not psql:
        pytest.skip("psql is not installed: cannot read the PostgreSQL database")
    out = subprocess.run([psql, database_url, "-X", "-A", "-t", "-F", "\t", "-c", sql],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return [tuple(line.split("\t")) for line in out.splitlines() if line]


# ---------------------------------------------------------------- health

def test_health(api):
    r = api.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.headers["X-Request-Id"]


def test_head_health_for_health_checkers(api):
    r = api.session.head(api.url + "/health", timeout=10)
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == "15" and r.headers["X-Request-Id"]
    # other routes do not answer HEAD (a GET may have effects: the banner poll clears it)
    u = api.register_user()
    r = api.session.head(api.url + "/users/me", headers={"Authorization": "Bearer " + u["token"]}, timeout=10)
    assert r.status_code == 404


# ---------------------------------------------------------------- the test clock

@pytest.fixture(scope="module")
def clock_server(make_server):
    """A private server, so moving its clock does not disturb the shared one."""
    return make_server()


def _advance(srv, ms):
    r = requests.post(srv.url + "/__test/clock", json={"advanceMs": ms}, timeout=10)
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["now"]
    return parse_iso(r.json()["now"])


def test_clock_answers_now_in_iso_utc_milliseconds(clock_server):
    before = datetime.datetime.now(datetime.timezone.utc)
    now = _advance(clock_server, 0)
    # never behind the real clock (the offset only moves forward)
    assert now >= before - datetime.timedelta(seconds=2)


@pytest.mark.parametrize("ms", [1, 60_000, 3 * 24 * 3600 * 1000])
def test_clock_moves_forward_by_at_least_n(clock_server, ms):
    t0 = _advance(clock_server, 0)
    t1 = _advance(clock_server, ms)
    delta = (t1 - t0) / datetime.timedelta(milliseconds=1)
    assert ms <= delta < ms + 5000, delta
    # and it stays moved
    t2 = _advance(clock_server, 0)
    assert t2 >= t1


def test_clock_moves_token_expiry(clock_server):
    """Rules that read time follow the moved clock: a 7-day customer token expires."""
    body = {"email": unique_email("clock"), "password": "password123", "name": "Clock", "address": "1 Main St",
            "zip": "10001"}
    r = requests.post(clock_server.url + "/auth/register", json=body, timeout=10)
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    me = lambda: requests.get(clock_server.url + "/users/me", headers={"Authorization": f"Bearer {token}"},
                              timeout=10)
    assert me().status_code == 200
    _advance(clock_server, 6 * 24 * 3600 * 1000)
    assert me().status_code == 200
    _advance(clock_server, 24 * 3600 * 1000 + 60_000)
    r = me()
    assert r.status_code == 401
    assert r.json() == error_body(401, "Unauthorized")


def test_clock_moves_rate_limit_windows(clock_server):
    ip = unique_ip()
    post = lambda: requests.post(clock_server.url + "/auth/forgot-password", headers={"X-Forwarded-For": ip},
                                 json={"email": unique_email("rl"), "role": "user"}, timeout=10)
    for _ in range(5):
        assert post().status_code == 200
    r = post()
    assert r.status_code == 429
    assert r.json() == error_body(429, "Too many requests")
    _advance(clock_server, 15 * 60 * 1000 + 1000)
    assert post().status_code == 200


@pytest.mark.parametrize("body", [
    {}, {"advanceMs": None}, {"advanceMs": -1}, {"advanceMs": -86400000}, {"advanceMs": "1000"},
    {"advanceMs": 1.5}, {"advanceMs": True}, {"advanceMs": [1]}, {"advanceMs": {"ms": 1}}, {"advanceMS": 1000},
])
def test_clock_validation(api, body):
    r = api.post("/__test/clock", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err.startswith("advanceMs: "), err


def test_clock_freezes_and_runs_on_from_where_it_stood(server_factory):
    """A frozen clock stands still (tokens, windows, createdAt all read it) and moves only when
    advanced; let go, it runs on from where it stood, not from the wall clock."""
    from helpers import eventually
    api = Api(server_factory())
    iso = lambda body: api.post("/__test/clock", json=body).json()["now"]
    at = lambda text: datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    frozen = api.freeze_clock()
    time.sleep(1.5)  # the wall clock moves; the frozen one must not
    assert iso({"advanceMs": 0}) == frozen
    assert iso({"advanceMs": 0, "freeze": True}) == frozen  # freezing again keeps it where it is
    u = api.register_user()
    assert api.get("/users/me", token=u["token"]).status_code == 200
    later = iso({"advanceMs": 60000})
    assert at(later) - at(frozen) == datetime.timedelta(seconds=60) and iso({"advanceMs": 0}) == later
    assert api.freeze_clock(False) == later
    eventually(lambda: iso({"advanceMs": 0}) > later, what="the clock runs again")
    # from where it stood: the 1.5 s it was frozen are not added back
    assert at(iso({"advanceMs": 0})) - at(later) < datetime.timedelta(seconds=1)


def test_clock_freeze_must_be_a_boolean(api):
    r = api.post("/__test/clock", json={"advanceMs": 0, "freeze": "yes"})
    assert r.status_code == 400 and r.json()["error"].startswith("freeze: "), r.text


@pytest.fixture(scope="module")
def dev_server(make_server):
    return make_server(APP_ENV="development")


@pytest.fixture(scope="module")
def prod_server(make_server):
    return make_server(APP_ENV="production", JWT_SECRET="s" * 48, BCRYPT_COST="12")


@pytest.mark.parametrize("which", ["dev_server", "prod_server"])
def test_test_routes_are_404_outside_test_env(request, which):
    srv = request.getfixturevalue(which)
    assert requests.get(srv.url + "/health", timeout=10).json() == {"status": "ok"}
    r = requests.post(srv.url + "/__test/clock", json={"advanceMs": 1000}, timeout=10)
    assert r.status_code == 404
    assert r.json() == error_body(404, "Not found")
    for path in ("/__test/routes", "/__test/queue", "/__test/load"):
        r = requests.get(srv.url + path, timeout=10)
        assert r.status_code == 404
        assert r.json() == error_body(404, "Not found")
    # an invalid body does not reveal the route either
    r = requests.post(srv.url + "/__test/clock", json={}, timeout=10)
    assert r.status_code == 404


def test_test_routes_exist_in_test_env(api):
    r = api.get("/__test/routes")
    assert r.status_code == 200
    paths = {(x["method"], x["path"]) for x in r.json()["routes"]}
    assert ("GET", "/health") in paths and ("POST", "/__test/clock") in paths


def test_queue_depth_counts_due_work_until_it_has_run(server, api):
    r = api.get("/__test/queue")
    assert r.status_code == 200
    assert set(r.json()) == {"ready", "running"}
    assert all(isinstance(v, int) and v >= 0 for v in r.json().values())
    for lane in ("general", "heavy"):  # document recognition's lane, or every other kind's
        r = api.get("/__test/queue", params={"lane": lane})
        assert r.status_code == 200 and set(r.json()) == {"ready", "running"}, r.text
    assert api.get("/__test/queue", params={"lane": "slow"}).status_code == 400
    u = api.register_user()
    r = api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=unique_ip())
    assert r.status_code == 200
    api.wait_queue_idle()
    # idle means the email queued by that request has been written
    assert len(server.mails(u["email"])) == 1


def test_load_shows_requests_in_flight_and_handlers_running(server, api):
    """GET /__test/load: requests in flight (itself not counted), handlers running and whether
    the hashing pool is full, so tests wait for a condition instead of sleeping."""
    r = api.get("/__test/load")
    assert r.status_code == 200
    load = r.json()
    assert set(load) == {"inFlight", "handlersRunning", "hashingPoolFull"}
    assert load["inFlight"] >= 0 and load["handlersRunning"] >= 0 and load["hashingPoolFull"] in (True, False)
    # a request whose body has not finished arriving is in flight
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        s.sendall(b"POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 2\r\n\r\n{")
        api.wait_load(lambda load: load["inFlight"] >= 1, "the unfinished request in flight")
        s.sendall(b"}")
        assert _read_response(s).startswith(b"HTTP/1.1 400")
    finally:
        s.close()


def _route_counts(url):
    return {(x["method"], x["path"]): x for x in requests.get(url + "/__test/routes", timeout=10).json()["routes"]}


def _after_counted(url, fn):
    """Runs fn(session) then a sentinel POST /auth/login (400) on the same keep-alive
    connection, and waits until the sentinel is counted: by then fn's requests are too."""
    key = ("POST", "/auth/login")
    before = _route_counts(url)
    with requests.Session() as s:
        fn(s)
        assert s.post(url + "/auth/login", json={}, timeout=10).status_code == 400
    after = eventually(lambda: _route_counts(url), 5, "the sentinel counted", interval=0.02,
                       until=lambda after: after[key]["hits"] > before[key]["hits"])
    return before, after


def test_route_counts_track_answers(clock_server):
    url = clock_server.url
    before, after = _after_counted(url, lambda s: s.get(url + "/health", timeout=10))
    login = ("POST", "/auth/login")
    assert after[login]["hits"] == before[login]["hits"] + 1
    assert after[login]["ok"] == before[login]["ok"]  # a 400 is not a success
    health = ("GET", "/health")
    assert after[health]["hits"] >= before[health]["hits"] + 1
    assert after[health]["ok"] >= before[health]["ok"] + 1


def test_route_counts_ignore_preflights(clock_server):
    url = clock_server.url

    def preflight(s):
        r = s.options(url + "/users/me", headers={"Origin": "https://web.example",
                                                  "Access-Control-Request-Method": "PATCH"}, timeout=10)
        assert r.status_code == 204

    before, after = _after_counted(url, preflight)
    key = ("PATCH", "/users/me")
    assert (after[key]["hits"], after[key]["ok"]) == (before[key]["hits"], before[key]["ok"]), (before[key], after[key])


# ---------------------------------------------------------------- production start-up checks

@pytest.fixture
def run_env(request, pg_cluster):
    """A fresh environment for running the binary directly (own DATA_DIR, database, port)."""
    d = tempfile.mkdtemp(prefix="mp-sys-")
    data = os.path.join(d, "data")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DATA_DIR": data, "PORT": str(free_port()),
           "BIND": "127.0.0.1",
           "DATABASE_URL": pg_cluster.new_database() if pg_cluster else f"sqlite:{data}/marketplace.db",
           "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23", **(PG_ENV if pg_cluster else {})}
    yield env
    shutil.rmtree(d, ignore_errors=True)


def _run(binary, env, timeout=20):
    try:
        p = subprocess.run([binary, "serve"], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("the server started (or hung) instead of refusing to start")
    assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr[-5000:]
    return p


@pytest.mark.parametrize("secret", [None, "", "s" * 31, "short"])
def test_production_refuses_to_start_without_a_strong_jwt_secret(request, run_env, secret):
    env = dict(run_env, APP_ENV="production")
    if secret is not None:
        env["JWT_SECRET"] = secret
    p = _run(request.config.getoption("--binary"), env)
    assert p.returncode != 0
    assert "JWT_SECRET" in p.stderr, p.stderr


def test_production_starts_with_a_32_byte_secret(request, run_env):
    env = dict(run_env, APP_ENV="production", JWT_SECRET="k" * 32)
    log_path = os.path.join(os.path.dirname(env["DATA_DIR"]), "serve.log")
    url = f"http://127.0.0.1:{env['PORT']}"
    with serving([request.config.getoption("--binary"), "serve"], env, url, log_path) as r:
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert requests.post(url + "/__test/clock", json={"advanceMs": 1}, timeout=10).status_code == 404


def test_serve_refuses_to_start_without_the_media_library_beside_it(request, run_env):
    """The image and document libraries are in marketplace-media.so beside the binary, loaded on
    first use (docs/decisions.md): a binary copied alone refuses to serve, naming the file,
    before it touches the database; a command that needs no image still runs."""
    alone = os.path.join(os.path.dirname(run_env["DATA_DIR"]), "marketplace")
    shutil.copy(request.config.getoption("--binary"), alone)
    p = _run(alone, dict(run_env, APP_ENV="test"))
    assert p.returncode != 0
    assert "marketplace-media.so is missing" in p.stderr, p.stderr
    assert not os.path.exists(run_env["DATA_DIR"] + "/marketplace.db")
    m = subprocess.run([alone, "migrate"], env=run_env, capture_output=True, text=True, timeout=60)
    assert m.returncode == 0, m.stderr


# ---------------------------------------------------------------- bootstrap administrator

def test_bootstrap_admin_is_created(make_server):
    email = unique_email("boot")
    srv = make_server(BOOTSTRAP_ADMIN_EMAIL=email, BOOTSTRAP_ADMIN_PASSWORD="bootstrap-pass-1")
    rows = db_rows(srv.env["DATABASE_URL"], srv.data_dir, "SELECT email, password_hash FROM admins")
    assert [r[0] for r in rows] == [email]
    assert rows[0][1].startswith("$2") and "bootstrap-pass-1" not in rows[0][1]
    # a restart with the same settings keeps exactly one administrator
    srv.restart()
    rows = db_rows(srv.env["DATABASE_URL"], srv.data_dir, "SELECT email FROM admins")
    assert [r[0] for r in rows] == [email]


def test_bootstrap_admin_email_is_lowercased(make_server):
    email = unique_email("boot")
    srv = make_server(BOOTSTRAP_ADMIN_EMAIL=email.replace("boot", "Boot").replace("example", "EXAMPLE"),
                      BOOTSTRAP_ADMIN_PASSWORD="bootstrap-pass-1")
    rows = db_rows(srv.env["DATABASE_URL"], srv.data_dir, "SELECT email FROM admins")
    assert [r[0] for r in rows] == [email]


def test_no_bootstrap_admin_without_both_variables(make_server):
    srv = make_server(BOOTSTRAP_ADMIN_EMAIL=unique_email("boot"))
    assert db_rows(srv.env["DATABASE_URL"], srv.data_dir, "SELECT email FROM admins") == []


# ---------------------------------------------------------------- graceful shutdown

def _register(srv, email):
    body = {"email": email, "password": "password123", "name": "Slow", "address": "1 Main St", "zip": "10001"}
    r = requests.post(srv.url + "/auth/register", json=body, timeout=120)
    assert r.status_code == 201, r.text


def test_sigterm_finishes_requests_in_flight_and_exits_0(make_server):
    # a grace longer than any hash takes on a loaded machine: what is checked is that the login
    # in flight finishes, not how long the grace is
    srv = make_server(BCRYPT_COST="13", SHUTDOWN_GRACE="120")
    email = unique_email("slow")
    _register(srv, email)
    result, sent_login = {}, threading.Event()

    def login():
        # one keep-alive connection: a first answer proves the server has accepted it, so the
        # login that follows is in flight on a served connection when SIGTERM arrives
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=150)
        try:
            conn.request("GET", "/health")
            conn.getresponse().read()
            conn.request("POST", "/auth/login", body=json.dumps({"email": email, "password": "password123"}),
                         headers={"Content-Type": "application/json"})
            sent_login.set()
            r = conn.getresponse()
            data = r.read()
            contract_observe(f"127.0.0.1:{srv.port}", "POST", "/auth/login", r.status, r.getheader("Content-Type"), data)
            result["status"], result["body"] = r.status, json.loads(data)
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = repr(e)
        finally:
            sent_login.set()
            conn.close()
        result["done"] = time.time()

    t = threading.Thread(target=login)
    t.start()
    assert sent_login.wait(timeout=10)
    Api(srv).wait_load(lambda load: load["inFlight"] >= 1, "the login in flight")
    sent = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    t.join(timeout=150)
    assert "error" not in result, result
    assert result["status"] == 200, result
    assert result["body"]["user"]["email"] == email
    assert result["done"] > sent
    assert srv.proc.wait(timeout=30) == 0
    # nobody answers any more
    with pytest.raises(requests.ConnectionError):
        requests.get(srv.url + "/health", timeout=2)


def test_sigterm_answers_held_refusals_too(make_server):
    # a login hashing at cost 13 (about half a second; several on a loaded machine, still within
    # the 10 s grace) fills the one hashing thread; a second login is refused, and its 503 is
    # being held (200 ms) when SIGTERM arrives: both are answered
    srv = make_server(BCRYPT_COST="13", BCRYPT_THREADS="1", BCRYPT_QUEUE="0", SHUTDOWN_GRACE="90")
    email = unique_email("held")
    _register(srv, email)
    body = json.dumps({"email": email, "password": "password123"})
    conns = [http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120) for _ in range(2)]
    for conn in conns:  # accepted and served before the signal
        conn.request("GET", "/health")
        assert conn.getresponse().read()
    results = {}

    def login(i):
        conns[i].request("POST", "/auth/login", body=body, headers={"Content-Type": "application/json"})
        r = conns[i].getresponse()
        data = r.read()
        contract_observe(f"127.0.0.1:{srv.port}", "POST", "/auth/login", r.status, r.getheader("Content-Type"), data)
        results[i] = (r.status, json.loads(data), r.getheader("Retry-After"))

    hashing = threading.Thread(target=login, args=(0,))
    hashing.start()
    Api(srv).wait_load(lambda load: load["hashingPoolFull"], "the first login hashing")
    refused = threading.Thread(target=login, args=(1,))
    refused.start()
    Api(srv).wait_load(lambda load: load["inFlight"] >= 2, "the second login in flight")
    srv.proc.send_signal(signal.SIGTERM)
    hashing.join(120)
    refused.join(30)
    assert results[1] == (503, error_body(503, "Server busy"), "1"), results
    assert results[0][0] == 200 and results[0][1]["user"]["email"] == email, results
    assert srv.proc.wait(timeout=120) == 0
    for conn in conns:
        conn.close()


def test_sigint_also_exits_0(make_server):
    srv = make_server()
    srv.proc.send_signal(signal.SIGINT)
    assert srv.proc.wait(timeout=15) == 0


def _start_slow_upload(srv):
    """A request that stays in flight until we finish its chunked body."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    # a first answer on this keep-alive connection proves the server has accepted it
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _read_response(s).startswith(b"HTTP/1.1 200")
    s.sendall(b"POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n" + b"2\r\n{}\r\n")
    return s


def _read_response(s):
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _sigterm_during_slow_upload(make_server):
    """A fresh server sent SIGTERM while a slow upload is in flight: (server, the upload's socket)."""
    srv = make_server()
    s = _start_slow_upload(srv)
    Api(srv).wait_load(lambda load: load["inFlight"] >= 1, "the upload in flight")
    srv.proc.send_signal(signal.SIGTERM)
    return srv, s


def _assert_upload_answered(srv, answer):
    """The slow upload (a login without an email) was answered in full, then the server exited 0."""
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert b'{"error":"email: is required","code":"validation_failed","field":"email"}' in answer
    assert srv.proc.wait(timeout=15) == 0


def test_sigterm_refuses_new_connections_while_draining(make_server):
    srv, s = _sigterm_during_slow_upload(make_server)
    try:
        eventually(lambda: "shutting down" in srv.read_log(), 2, "the shutdown log line", interval=0.02)
        time.sleep(0.05)  # a server that does not drain would be gone by now
        assert srv.proc.poll() is None, "the server must still be draining the request in flight"
        with pytest.raises(ConnectionRefusedError):
            probe = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
            probe.close()
    finally:
        # the request in flight still completes
        s.sendall(b"0\r\n\r\n")
        answer = _read_response(s)
        s.close()
    _assert_upload_answered(srv, answer)


def test_sigterm_lets_a_slow_upload_finish(make_server):
    srv, s = _sigterm_during_slow_upload(make_server)
    try:
        time.sleep(0.3)
        assert srv.proc.poll() is None, "the server exited with a request in flight"
        s.sendall(b"0\r\n\r\n")
        answer = _read_response(s)
    finally:
        s.close()
    _assert_upload_answered(srv, answer)


def test_sigterm_past_the_grace_period_answers_the_waiting_and_cuts_a_busy_handler(server_factory):
    """SHUTDOWN_GRACE=1 and one slow-lane worker, held by a processor call that takes 8 s.
    A second request waits for that worker. After the grace period the waiting request gets
    503, and the process exits 0 at once without stopping the HTTP daemon under the running
    handler (which would abort, or touch a freed connection when the handler ends)."""
    fake = FakeStripe(api_key="sk_test_fake").start()
    try:
        srv = server_factory(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake.url, SHUTDOWN_GRACE="1",
                             HTTP_SLOW_WORKERS="1")
        api = Api(srv)
        busy_user, waiting_user = api.register_user(), api.register_user()
        fake.delay("POST", "/v1/customers", 8)
        busy = []
        t = threading.Thread(target=lambda: busy.append(_post_or_error(srv, "/payments/setup-intent", busy_user)))
        t.start()
        eventually(lambda: fake.calls("POST", "/v1/customers"), 10, "the processor call started", interval=0.01)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/health")  # an accepted connection, served before the signal
        assert conn.getresponse().read()
        conn.request("POST", "/payments/setup-intent", headers={"Authorization": f"Bearer {waiting_user['token']}"})
        sent = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        r = conn.getresponse()
        assert (r.status, json.loads(r.read()), r.getheader("Retry-After")) == (
            503, error_body(503, "Service unavailable"), "1")
        assert srv.proc.wait(timeout=10) == 0
        assert time.time() - sent < 5, "exited long after the grace period"
        assert "requests still running after the grace period were cut off" in srv.read_log()
        t.join(15)
        assert busy and busy[0] == "error", busy  # cut off: no answer
        conn.close()
    finally:
        fake.stop()


def _post_or_error(srv, path, user):
    try:
        return requests.post(srv.url + path, headers={"Authorization": f"Bearer {user['token']}"}, timeout=30).status_code
    except requests.RequestException:
        return "error"


def test_housekeeping_deletes_expired_counters_and_old_finished_work(server_factory):
    srv = server_factory()
    api = Api(srv)
    url, data = srv.env["DATABASE_URL"], srv.data_dir
    u = api.register_user()
    ip = unique_ip()
    assert api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=ip).status_code == 200
    api.wait_queue_idle()
    key = f"forgot-password:{ip}"

    def counters():
        return db_rows(url, data, f"SELECT count(*) FROM rate_limits WHERE key LIKE '%{ip}'")[0][0]

    def done_mail_work():
        return db_rows(url, data, "SELECT count(*) FROM job_queue WHERE kind = 'email' AND status = 'done'")[0][0]

    assert int(counters()) == 1, key
    assert int(done_mail_work()) >= 1
    # two hours on: the counter's 15-minute window is long over, the sent email is kept a week
    api.advance_clock(2 * 3600 * 1000)
    eventually(counters, 15, "the expired rate-limit counter deleted", until=lambda n: int(n) == 0)
    assert int(done_mail_work()) >= 1
    api.advance_clock(8 * 24 * 3600 * 1000)
    eventually(done_mail_work, 15, "the week-old finished work deleted", until=lambda n: int(n) == 0)
    # keyed work (the periodic slots) goes too once two periods of the longest periodic task (a
    # day) have passed: the current slot's row, which keeps it from running twice, stays
    slots = db_rows(url, data, "SELECT dedupe_key FROM job_queue WHERE kind = 'housekeeping'")
    assert len(slots) == 1 and slots[0][0].startswith("housekeeping@"), slots


@pytest.mark.parametrize("password, reason", [
    ("a", "password: must be at least 8 characters"),
    ("1234567", "password: must be at least 8 characters"),
    ("x" * 73, "password: must be at most 72 characters"),
    ("\u00e9" * 40, "password: must be at most 72 bytes"),
])
def test_a_weak_bootstrap_password_stops_the_start(server_factory, password, reason):
    """The attack: BOOTSTRAP_ADMIN_PASSWORD accepted "a"."""
    with pytest.raises(RuntimeError) as failed:
        server_factory(BOOTSTRAP_ADMIN_EMAIL=unique_email("boot"), BOOTSTRAP_ADMIN_PASSWORD=password)
    assert f"BOOTSTRAP_ADMIN_PASSWORD is refused: {reason}" in str(failed.value)


def test_bootstrap_never_overwrites_a_password_set_since(server_factory):
    """The attack: BOOTSTRAP_ADMIN_PASSWORD was applied again at every start, silently undoing a
    password changed with `marketplace admin create`."""
    email = unique_email("boot")
    srv = server_factory(BOOTSTRAP_ADMIN_EMAIL=email, BOOTSTRAP_ADMIN_PASSWORD="bootstrap-pass-1")
    assert srv.wait_log(lambda x: x.get("msg") == f"bootstrap administrator {email} created")
    p = subprocess.run([srv.binary, "admin", "create", "--email", email], input="changed-pass-2\n", env=srv.env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    srv.restart()
    assert srv.wait_log(lambda x: x.get("msg") == f"bootstrap administrator {email} exists: "
                                                  "BOOTSTRAP_ADMIN_PASSWORD is not applied to it")
    login = lambda pw: requests.post(srv.url + "/admin/login", json={"email": email, "password": pw}, timeout=30)
    assert login("changed-pass-2").status_code == 200
    assert login("bootstrap-pass-1").status_code == 401
