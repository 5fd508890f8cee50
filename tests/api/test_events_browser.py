"""Live updates in a browser (issue 33 item 1): POST /events/session sets an HttpOnly cookie,
scoped to /events, that stands for the token that asked for it, so a page's native
`new EventSource(url, { withCredentials: true })` keeps receiving events across drops and
restarts, nothing lost or repeated, for as long as the token is valid; CORS answers credentialed
requests from the origins CORS_ORIGINS lists (never with `*`) and lets Last-Event-ID through.

The cookie and CORS rules run over HTTP on both engines; the browser itself (headless Chromium,
Debian's, through playwright-core: tests/api/browser/events_page.mjs) once, in the release SQLite
pass, across a restart of the binary on the same port and data.
"""
import json
import os
import re
import subprocess
import time

import pytest
import requests

from conftest import ROOT, Api, free_port
from flow_helpers import ok, post_job
from helpers import eventually
from sse_client import Stream, ended_within

APP = "http://app.example"  # the origin CORS_ORIGINS lists for these servers
OTHER = "http://elsewhere.example"


def session_cookie(api, token, origin=APP):
    """POST /events/session with token: (the answer, the cookie's value, its Set-Cookie line)."""
    r = api.post("/events/session", token=token, headers={"Origin": origin})
    assert r.status_code == 200, r.text
    line = r.headers["Set-Cookie"]
    value = re.match(r"events_session=([0-9a-f]{64});", line).group(1)
    return r, value, line


def raw_get(srv, path, headers, timeout=5):
    """A GET with exactly these headers (no session's cookie jar), its body not read."""
    return requests.get(srv.url + path, headers=headers, stream=True, timeout=timeout)


@pytest.fixture(scope="module")
def srv(request, make_server):
    return make_server(CORS_ORIGINS=f"{APP}, http://127.0.0.1:1")


def test_the_session_cookie_and_its_attributes(srv):
    api = Api(srv)
    u = api.register_user()
    r, value, line = session_cookie(api, u["token"])
    attrs = [a.strip() for a in line.split(";")]
    assert attrs[0] == f"events_session={value}"
    assert "Path=/events" in attrs and "HttpOnly" in attrs
    # APP_ENV=test: not development, so Secure; SameSite=None (the default outside development),
    # which browsers take only with Secure, and Partitioned (the asking page's site keeps it)
    assert "Secure" in attrs and "SameSite=None" in attrs and "Partitioned" in attrs
    max_age = int(next(a for a in attrs if a.startswith("Max-Age="))[8:])
    assert 7 * 86400 - 60 <= max_age <= 7 * 86400  # the token's 7 days, no more
    assert set(r.json()) == {"expiresAt"}
    # credentialed CORS for the listed origin
    assert r.headers["Access-Control-Allow-Origin"] == APP
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Origin" in r.headers["Vary"]
    # no token, no cookie
    r = api.post("/events/session", headers={"Origin": APP})
    assert r.status_code == 401 and "Set-Cookie" not in r.headers
    # a ticket or the cookie itself is no way to ask for one
    r = raw_get(srv, "/events/session", {"Cookie": f"events_session={value}"})
    assert r.status_code == 404


def test_the_cookie_on_the_shared_server(api):
    """CORS_ORIGINS=* (as in development): the cookie works from the service's own pages and
    programs (no Origin), and no other origin is answered with credentials."""
    u = api.register_user()
    r = api.post("/events/session", token=u["token"])
    assert r.status_code == 200 and "Access-Control-Allow-Credentials" not in r.headers
    value = re.match(r"events_session=([0-9a-f]{64});", r.headers["Set-Cookie"]).group(1)
    s = Stream(api.server.url, headers={"Cookie": f"events_session={value}"})
    try:
        assert s.wait_head() == 200
        job = post_job(api, u)
        s.wait("job.created", lambda d: d["id"] == job["id"])
    finally:
        s.close()
    r = raw_get(api.server, "/events", {"Cookie": f"events_session={value}", "Origin": OTHER})
    assert r.status_code == 401


def test_get_events_with_the_cookie(srv):
    api = Api(srv)
    u = api.register_user()
    _, value, _ = session_cookie(api, u["token"])
    s = Stream(srv.url, headers={"Cookie": f"events_session={value}", "Origin": APP})
    try:
        assert s.wait_head() == 200, s.body
        assert s.headers["access-control-allow-origin"] == APP
        assert s.headers["access-control-allow-credentials"] == "true"
        eventually(lambda: s.ids, 10, "the stream's position")
        job = post_job(api, u)
        s.wait("job.created", lambda d: d["id"] == job["id"])
    finally:
        s.close()
    # again and again: the cookie is no ticket (a reconnect sends it once more), with the
    # Last-Event-ID header or the lastEventId parameter, which replay what was missed
    first = post_job(api, u)
    for extra, query in (({"Last-Event-ID": "1"}, None), ({}, {"lastEventId": "1"})):
        s = Stream(srv.url, headers={"Cookie": f"events_session={value}", **extra}, query=query)
        try:
            assert s.wait_head() == 200, s.body
            s.wait("job.created", lambda d: d["id"] == first["id"])
        finally:
            s.close()
    # the same origin as the service's own (PUBLIC_URL), and no Origin at all, are welcome
    r = raw_get(srv, "/events", {"Cookie": f"events_session={value}", "Origin": f"http://localhost:{srv.port}"})
    assert r.status_code == 200
    r.close()


def test_the_cookie_is_refused_from_elsewhere_and_when_wrong(srv):
    api = Api(srv)
    u = api.register_user()
    _, value, _ = session_cookie(api, u["token"])
    cookie = f"other=1; events_session={value}; more=2"
    # an origin CORS_ORIGINS does not list: the cookie is not looked at, and no CORS answer
    r = raw_get(srv, "/events", {"Cookie": cookie, "Origin": OTHER})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert "Access-Control-Allow-Origin" not in r.headers and "Access-Control-Allow-Credentials" not in r.headers
    # a navigation or a frame from another site (no Origin; the browser says where it came from)
    for site in ("cross-site", "same-site"):
        r = raw_get(srv, "/events", {"Cookie": cookie, "Sec-Fetch-Site": site})
        assert r.status_code == 401, site
    r = raw_get(srv, "/events", {"Cookie": cookie, "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200
    r.close()
    # an unknown or malformed value
    for bad in ("0" * 64, "xyz", value.upper(), value[:-1]):
        r = raw_get(srv, "/events", {"Cookie": f"events_session={bad}"})
        assert r.status_code == 401 and r.json() == {"error": "Invalid or expired session", "code": "unauthorized"}
    # only /events takes it: another route wants the bearer token
    r = raw_get(srv, "/users/me", {"Cookie": cookie})
    assert r.status_code == 401
    # a bearer token, when sent, decides (an invalid one is not saved by a valid cookie)
    r = raw_get(srv, "/events", {"Cookie": cookie, "Authorization": "Bearer nope"})
    assert r.status_code == 401 and "invalid_token" in r.headers["WWW-Authenticate"]


def test_the_cookie_ends_with_its_token(srv):
    api = Api(srv)
    u = api.register_user()
    other = ok(api.post("/auth/login", json={"email": u["email"], "password": u["password"]}))
    _, value, _ = session_cookie(api, u["token"])
    _, kept, _ = session_cookie(api, other["token"])
    s = Stream(srv.url, headers={"Cookie": f"events_session={value}"})
    assert s.wait_head() == 200
    eventually(lambda: s.ids, 10, "the stream's position")
    ok(api.post("/auth/logout", token=u["token"]))
    ended_within(s)  # the open stream ends (token.expired) ...
    s.close()
    r = raw_get(srv, "/events", {"Cookie": f"events_session={value}"})  # ... and it opens no other
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"  # a cookie is no bearer token
    r = raw_get(srv, "/events", {"Cookie": f"events_session={kept}"})  # the other login's lives on
    assert r.status_code == 200
    r.close()
    # the token's expiry ends it too
    u2 = api.register_user()
    _, value2, _ = session_cookie(api, u2["token"])
    api.advance_clock(7 * 86400 * 1000 + 1000)
    r = raw_get(srv, "/events", {"Cookie": f"events_session={value2}"})
    assert r.status_code == 401 and r.json()["error"] == "Invalid or expired session"


def test_an_erased_account_takes_its_sessions(srv):
    api = Api(srv)
    u = api.register_user()
    _, value, _ = session_cookie(api, u["token"])
    r = api.delete("/users/me", token=u["token"], json={"password": u["password"]})
    assert r.status_code == 204, r.text
    r = raw_get(srv, "/events", {"Cookie": f"events_session={value}"})
    assert r.status_code == 401 and r.json()["error"] == "Invalid or expired session"


def test_cors_credentials_only_for_listed_origins(srv, server):
    api = Api(srv)
    for origin, listed in ((APP, True), (OTHER, False)):
        pre = requests.options(srv.url + "/events", timeout=10, headers={
            "Origin": origin, "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "last-event-id"})
        assert pre.status_code == 204
        if listed:
            assert pre.headers["Access-Control-Allow-Origin"] == origin
            assert pre.headers["Access-Control-Allow-Credentials"] == "true"
            assert "Last-Event-ID" in [h.strip() for h in pre.headers["Access-Control-Allow-Headers"].split(",")]
        else:
            assert "Access-Control-Allow-Origin" not in pre.headers
            assert "Access-Control-Allow-Credentials" not in pre.headers
        r = api.get("/health", headers={"Origin": origin})
        assert r.headers.get("Access-Control-Allow-Credentials") == ("true" if listed else None)
    # CORS_ORIGINS=* (the shared server, as in development): any origin, never with credentials
    r = requests.get(server.url + "/health", headers={"Origin": OTHER}, timeout=10)
    assert r.headers["Access-Control-Allow-Origin"] == "*" and "Access-Control-Allow-Credentials" not in r.headers
    pre = requests.options(server.url + "/events", timeout=10, headers={
        "Origin": OTHER, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "last-event-id"})
    assert pre.headers["Access-Control-Allow-Origin"] == "*" and "Access-Control-Allow-Credentials" not in pre.headers
    assert "Last-Event-ID" in pre.headers["Access-Control-Allow-Headers"]
    # POST /waitlist answers any origin, without credentials, even for a listed one
    r = api.post("/waitlist", headers={"Origin": APP}, json={"name": "A", "email": "wait@example.com"})
    assert r.headers["Access-Control-Allow-Origin"] == "*" and "Access-Control-Allow-Credentials" not in r.headers


@pytest.mark.once
def test_development_sets_a_lax_cookie_without_secure(server_factory):
    srv = server_factory(APP_ENV="development", CORS_ORIGINS=APP)
    api = Api(srv)
    u = api.register_user()
    _, _, line = session_cookie(api, u["token"])
    attrs = [a.strip() for a in line.split(";")]
    assert "SameSite=Lax" in attrs and "Secure" not in attrs and "Partitioned" not in attrs and "HttpOnly" in attrs


def test_a_bad_samesite_setting_stops_the_start(request, tmp_path):
    p = subprocess.run([request.config.getoption("--binary"), "serve"], capture_output=True, text=True, timeout=30,
                       env={"PATH": os.environ.get("PATH", ""), "APP_ENV": "test", "DATA_DIR": str(tmp_path),
                            "PORT": str(free_port()), "EVENTS_COOKIE_SAMESITE": "lax"})
    assert p.returncode != 0 and "EVENTS_COOKIE_SAMESITE must be Strict, Lax or None" in p.stdout + p.stderr


# ---------------------------------------------------------------- in Chromium


class Page:
    """tests/api/browser/events_page.mjs: a page on http://127.0.0.1:<page_port> in headless
    Chromium, following the API at api_url with a native EventSource."""

    def __init__(self, api_url, page_port, token):
        env = dict(os.environ, API=api_url, PAGE_PORT=str(page_port), TOKEN=token)
        self.proc = subprocess.Popen(["node", os.path.join(ROOT, "tests", "api", "browser", "events_page.mjs")],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line and json.loads(line) == {"ready": True}, line + self.proc.stderr.read()

    def state(self):
        self.proc.stdin.write('{"cmd": "state"}\n')
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        try:
            self.proc.stdin.write('{"cmd": "quit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


@pytest.mark.once
def test_native_event_source_across_a_restart(server_factory):
    page_port = free_port()
    page_origin = f"http://127.0.0.1:{page_port}"
    srv = server_factory(CORS_ORIGINS=page_origin)
    api = Api(srv)
    u = api.register_user()
    # the page is on 127.0.0.1, the API on localhost: two sites, so this is the cross-site case
    page = Page(f"http://localhost:{srv.port}", page_port, u["token"])
    try:
        opened = eventually(lambda: (lambda s: s if s["readyState"] == 1 and s["opens"] == 1 else None)(page.state()),
                            20, "the page's EventSource open")
        assert opened["sessionStatus"] == 200 and not opened["cookieSeen"]  # HttpOnly: no script reads it
        posted = [post_job(api, u)["id"] for _ in range(3)]
        eventually(lambda: len(page.state()["got"]) == 3, 20, "three events before the restart")
        port = srv.port
        srv.stop()
        # while the server is away the page keeps trying (a refused connection is no failure)
        eventually(lambda: page.state()["errors"] >= 1, 20, "the page sees the drop")
        srv.start()
        assert srv.port == port, "the port was taken meanwhile"
        # events written before the page is back are replayed (Last-Event-ID), later ones live
        posted += [post_job(api, u)["id"] for _ in range(2)]
        eventually(lambda: page.state()["opens"] >= 2, 30, "the page's EventSource open again")
        posted += [post_job(api, u)["id"] for _ in range(2)]
        state = eventually(lambda: (lambda s: s if len(s["got"]) >= 7 else None)(page.state()), 20,
                           "every event after the restart")
        time.sleep(0.3)  # nothing more arrives: no event twice
        state = page.state()
        got = state["got"]
        assert [g["data"]["id"] for g in got] == posted, got
        ids = [int(g["id"]) for g in got]
        assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
        assert state["readyState"] == 1
    finally:
        page.close()
