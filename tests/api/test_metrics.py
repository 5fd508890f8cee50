"""GET /metrics (docs/decisions.md, operations): Prometheus text for loopback callers (the client
address as TRUST_PROXY defines it) or the METRICS_TOKEN bearer, 404 for anyone else. Each test
scrapes, acts, scrapes again and checks that the counters moved by exactly what it did."""
import re
import threading
import time
import uuid

import pytest
import requests

from conftest import Api, unique_email, unique_ip
from helpers import error_body, eventually, png_bytes
from flow_helpers import Flow, customer, feed, get_job, image_files, post_job, private_zip, provider, quote, step

NOT_FOUND = error_body(404, "Not found")
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value} plus the set of declared TYPEs, checking the syntax."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = LINE.match(line)
        assert m, f"not an exposition line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        key = (m.group(1), labels)
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(m.group(4))
    return samples, types


def scrape(api, **kw):
    r = api.get("/metrics", **kw)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-store"
    assert "(null)" not in r.text, r.text  # every label has a value
    return parse(r.text)


def value(samples, name, **labels):
    return samples[0].get((name, frozenset(labels.items())), 0.0)


def test_loopback_only_without_a_token(api):
    samples, types = scrape(api)  # the harness talks from 127.0.0.1
    assert types["http_requests_total"] == "counter"
    assert types["http_request_duration_seconds"] == "histogram"
    r = api.get("/metrics", ip=unique_ip())  # a client behind the trusted proxy
    assert (r.status_code, r.json()) == (404, NOT_FOUND)
    r = api.get("/metrics", ip=unique_ip(), token="anything")
    assert (r.status_code, r.json()) == (404, NOT_FOUND)
    # the forwarded address counts, not the proxy's: a loopback client behind it is let in
    assert api.get("/metrics", ip="127.0.0.1").status_code == 200


def test_request_counters_and_histograms_move(api):
    user = customer(api)
    before = scrape(api)
    for _ in range(3):
        assert api.get("/users/me", token=user["token"]).status_code == 200
    missing = f"/jobs/c{uuid.uuid4().hex[:24]}"
    assert api.get(missing, token=user["token"]).status_code == 404
    assert api.get("/no/such/route").status_code == 404
    after = scrape(api)
    text = api.get("/metrics").text
    me = {"method": "GET", "route": "/users/me", "status": "200"}
    assert value(after, "http_requests_total", **me) - value(before, "http_requests_total", **me) == 3
    job404 = {"method": "GET", "route": "/jobs/:id", "status": "404"}
    assert value(after, "http_requests_total", **job404) - value(before, "http_requests_total", **job404) == 1
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert value(after, "http_requests_total", **unmatched) - value(before, "http_requests_total", **unmatched) == 1
    assert missing not in text and "/no/such/route" not in text  # patterns only, never raw paths
    # the histogram of GET /users/me: cumulative buckets, +Inf = count, sum > 0
    h = {"method": "GET", "route": "/users/me"}
    count = value(after, "http_request_duration_seconds_count", **h)
    assert count - value(before, "http_request_duration_seconds_count", **h) == 3
    les = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]
    buckets = [value(after, "http_request_duration_seconds_bucket", le=le, **h) for le in les]
    assert buckets == sorted(buckets) and buckets[-1] == count
    assert value(after, "http_request_duration_seconds_sum", **h) > 0


def test_pools_queue_limits_and_process(api, server):
    ip = unique_ip()
    email = unique_email("metrics")
    before = scrape(api)
    for _ in range(6):  # the sixth is refused (5 per 15 minutes per address)
        r = api.post("/waitlist", ip=ip, json={"name": "M", "email": email, "zip": "10001", "role": "customer"})
    assert r.status_code == 429
    server.wait_mail(email, 5)
    api.wait_queue_idle(lane="general")  # the emails' runs counted (not earlier files' recognitions)
    after = scrape(api)
    rule = {"rule": "waitlist"}
    assert (value(after, "marketplace_rate_limit_refusals_total", **rule)
            - value(before, "marketplace_rate_limit_refusals_total", **rule)) == 1
    done = {"kind": "email", "outcome": "done"}
    assert value(after, "marketplace_queue_runs_total", **done) - value(before, "marketplace_queue_runs_total", **done) >= 5
    for outcome in ("retried", "failed"):
        assert ("marketplace_queue_runs_total", frozenset({"kind": "email", "outcome": outcome}.items())) in after[0]
    assert value(after, "marketplace_db_pool_connections", lane="requests") == 16  # the shared server's DB_POOL_SIZE
    assert value(after, "marketplace_db_pool_connections", lane="slow") >= 1
    # SQLite's read connections of the HTTP event threads (none on PostgreSQL)
    event = value(after, "marketplace_db_pool_connections", lane="event")
    assert event >= 1 if server.env["DATABASE_URL"].startswith("sqlite:") else event == 0
    for lane in ("requests", "slow"):
        assert 1 <= value(after, "marketplace_db_pool_open", lane=lane) <= \
            value(after, "marketplace_db_pool_connections", lane=lane)
    assert 0 <= value(after, "marketplace_db_pool_in_use", lane="requests") <= 16
    for name in ("marketplace_db_pool_waiting", "marketplace_db_pool_waits_total"):
        assert value(after, name, lane="requests") >= 0
    assert after[1]["marketplace_queue_jobs"] == "gauge"
    assert value(after, "marketplace_password_hash_queue_depth") >= 0
    assert value(after, "process_cpu_seconds_total") > 0
    assert value(after, "process_resident_memory_bytes") > 1 << 20
    assert value(after, "process_open_fds") > 3
    assert value(after, "process_max_fds") >= value(after, "process_open_fds")
    assert abs(value(after, "process_start_time_seconds") - time.time()) < 24 * 3600


def test_the_slow_lanes_pool(server_factory, engine):
    """On SQLite each slow-lane worker has a connection (DB_SLOW_POOL_SIZE defaults to
    HTTP_SLOW_WORKERS); on PostgreSQL, where each is a server process, 16. On both, 4 are
    opened at start and the rest as a burst first needs them (tests/unit/db/test_pool.c)."""
    srv = server_factory(HTTP_SLOW_WORKERS="12")
    m = scrape(Api(srv))
    assert value(m, "marketplace_db_pool_connections", lane="slow") == (12 if engine == "sqlite" else 16)
    # the first 4 at start; a start's background work (queue, pump, audit) may need a few more
    assert 4 <= value(m, "marketplace_db_pool_open", lane="slow") <= 8
    srv = server_factory(HTTP_SLOW_WORKERS="12", DB_SLOW_POOL_SIZE="3")
    m = scrape(Api(srv))
    assert value(m, "marketplace_db_pool_connections", lane="slow") == value(m, "marketplace_db_pool_open", lane="slow") == 3


def test_queue_backlog_by_kind_and_state(server_factory):
    """Work that cannot be delivered shows as pending, then as retried runs."""
    srv = server_factory(SMTP_URL="smtp://127.0.0.1:9")  # nothing listens: every email fails
    api = Api(srv)
    r = api.post("/auth/forgot-password", json={"email": api.register_user()["email"], "role": "user"})
    assert r.status_code == 200
    samples = eventually(lambda: scrape(api), 20, "a retried email run", interval=0.1,
                         until=lambda s: value(s, "marketplace_queue_runs_total", kind="email", outcome="retried") >= 1)
    # the email waits for its next attempt (or is in it): one row, not failed for good
    waiting = sum(value(samples, "marketplace_queue_jobs", kind="email", state=s) for s in ("pending", "running"))
    assert waiting == 1 and value(samples, "marketplace_queue_jobs", kind="email", state="failed") == 0


def test_token_and_hashing_refusals(server_factory):
    token = f"metrics-{uuid.uuid4().hex}"
    srv = server_factory(METRICS_TOKEN=token, BCRYPT_COST="12", BCRYPT_THREADS="1", BCRYPT_QUEUE="0")
    api = Api(srv)
    remote = unique_ip()
    assert api.get("/metrics", ip=remote).status_code == 404
    assert api.get("/metrics", ip=remote, token=token + "x").status_code == 404
    assert api.get("/metrics", ip=remote, headers={"Authorization": f"Basic {token}"}).status_code == 404
    before = scrape(api, ip=remote, token=token)
    answers = []

    def register():
        body = {"email": unique_email("busy"), "password": "password123", "name": "B", "address": "1 St", "zip": "10001"}
        answers.append(requests.post(srv.url + "/auth/register", json=body, timeout=30).status_code)

    threads = [threading.Thread(target=register) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = answers.count(503)
    assert refused >= 1, answers
    after = scrape(api, ip=remote, token=token)
    assert (value(after, "marketplace_password_hash_refusals_total")
            - value(before, "marketplace_password_hash_refusals_total")) == refused
    busy = {"method": "POST", "route": "/auth/register", "status": "503"}
    assert value(after, "http_requests_total", **busy) == refused


TRIP_LES = ["0", "1", "2", "3", "4", "5", "6", "8", "10", "15", "20", "30", "50", "+Inf"]


def trips(before, after, method, route):
    """(requests, round trips) of method and route between two scrapes."""
    h = {"method": method, "route": route}
    return (value(after, "db_round_trips_count", **h) - value(before, "db_round_trips_count", **h),
            value(after, "db_round_trips_sum", **h) - value(before, "db_round_trips_sum", **h))


def test_db_round_trips_per_route(server_factory, engine):
    """db_round_trips counts each request's exchanges with the database. On PostgreSQL a read
    route makes one round trip (the token's check rides in front of the read) and POST /quotes
    three (the read; the quote and the job's move; the queued email and notification with the
    COMMIT); on SQLite, where nothing crosses a network, every statement counts, and a token's
    check and GET /users/me's answer are kept until the accounts change or a second passes (read
    once just before the counting, so they are kept through it). A server of its own, whose
    background work (the provider's documents read) is done first: other tests' registrations
    and the documents' results would drop what it keeps."""
    api = Api(server_factory())
    user = customer(api)
    zip_code = user["body"]["zip"]
    pro = provider(api, zips=[zip_code])
    job = post_job(api, user)
    assert any(j["id"] == job["id"] for j in feed(api, pro["token"]))  # the feed's copy is current
    api.wait_queue_idle()
    kept_at = time.monotonic()
    assert api.get("/users/me", token=user["token"]).status_code == 200
    feed(api, pro["token"])
    before = scrape(api)
    for _ in range(2):
        assert api.get("/users/me", token=user["token"]).status_code == 200
        get_job(api, user["token"], job["id"])
        feed(api, pro["token"])
    quote(api, pro, job["id"])
    # a slow run (a loaded sanitizer pass) may outlive what SQLite keeps: each check and
    # /users/me's answer is then read once more
    lapsed = engine == "sqlite" and time.monotonic() - kept_at >= 0.9
    assert api.get("/health").status_code == 200
    after = scrape(api)
    assert after[1]["db_round_trips"] == "histogram"
    pg = engine == "postgres"

    def counted(route, requests, statements, rereads, method="GET"):
        got = trips(before, after, method, route)
        assert got[0] == requests and statements <= got[1] <= statements + (rereads if lapsed else 0), (route, got)

    counted("/users/me", 2, 2 if pg else 0, 2)  # SQLite: kept, no read
    counted("/jobs/:id", 2, 2, 1)
    counted("/jobs", 2, 2, 1)  # the versions; the pair's copy kept
    # SQLite: BEGIN, the read, the quote, the job, the email, the notification, COMMIT,
    # and the live-update outbox's rows (quote.created: the event and its 3 recipients;
    # job.updated: the event and 2 recipients, the matching providers found when it is read;
    # notification.created: the event and its recipient); on PostgreSQL those go with the COMMIT
    counted("/quotes", 1, 3 if pg else 16, 1, method="POST")
    assert trips(before, after, "GET", "/health") == (1, 0)
    # cumulative buckets, +Inf the count; on PostgreSQL every read within le="1"
    h = {"method": "GET", "route": "/users/me"}
    buckets = [value(after, "db_round_trips_bucket", le=le, **h) for le in TRIP_LES]
    assert buckets == sorted(buckets) and buckets[-1] == value(after, "db_round_trips_count", **h)
    moved = {le: value(after, "db_round_trips_bucket", le=le, **h) - value(before, "db_round_trips_bucket", le=le, **h)
             for le in TRIP_LES}
    assert (moved["0"] == (0 if pg else 2) and moved["1"] == 2 or lapsed) and moved["2"] == 2
    q = {"method": "POST", "route": "/quotes"}
    assert value(after, "db_round_trips_bucket", le="3", **q) - value(before, "db_round_trips_bucket", le="3", **q) \
        == (1 if pg else 0)
    health = {"method": "GET", "route": "/health"}
    assert value(after, "db_round_trips_bucket", le="0", **health) - \
        value(before, "db_round_trips_bucket", le="0", **health) == 1


def test_a_feed_reads_its_changed_pairs_in_one_more_round_trip(api, engine):
    """After a change to open jobs in two of the provider's pairs, the feed reads the versions,
    then both pairs again together: two round trips on PostgreSQL, however many pairs moved."""
    zips = [private_zip(), private_zip()]
    pro = provider(api, zips=zips)
    jobs = [post_job(api, customer(api, zip_code=z)) for z in zips]
    feed(api, pro["token"])
    for z in zips:  # each pair's version moves
        post_job(api, customer(api, zip_code=z))
    before = scrape(api)
    got = {j["id"] for j in feed(api, pro["token"])}
    after = scrape(api)
    assert {j["id"] for j in jobs} <= got and len(got) == 4
    # SQLite: the check, the versions, one statement per pair
    assert trips(before, after, "GET", "/jobs") == (1, 2 if engine == "postgres" else 4)


def test_round_trips_of_the_apps_everyday_routes(api, engine):
    """On PostgreSQL each of these reads makes one round trip (reads from several stores go
    together) and each write at most three (what needs no answer rides with the next statement
    or the COMMIT; an upload's token check runs before its file is stored). On SQLite every
    statement counts, so there the counts only have to move."""
    f = Flow(api).quoted()
    pro = f.pro
    steps = [
        ("GET", "/quotes/job/:jobId", 1, lambda: api.get(f"/quotes/job/{f.job_id}", token=f.user["token"])),
        ("GET", "/providers/me/insights", 1, lambda: api.get("/providers/me/insights", token=pro["token"])),
        ("GET", "/providers/:id/profile", 1, lambda: api.get(f"/providers/{pro['id']}/profile", token=f.user["token"])),
        ("POST", "/jobs/:id/messages", 3,
         lambda: api.post(f"/jobs/{f.job_id}/messages", token=pro["token"], json={"content": "Hello"})),
        ("GET", "/jobs/:id/messages", 1,
         lambda: api.get(f"/jobs/{f.job_id}/messages", token=f.user["token"], params={"providerId": pro["id"]})),
        ("POST", "/jobs", 3, lambda: api.post("/jobs", token=f.user["token"], json={
            "service": "lawncare", "description": "Mow it", "preferredAt": "2031-05-01T09:00:00.000Z"})),
        ("POST", "/jobs/:id/images", 3,
         lambda: api.post(f"/jobs/{f.job_id}/images", token=f.user["token"], files=image_files(1))),
        ("POST", "/providers/me/headshots", 3, lambda: api.post(
            "/providers/me/headshots", token=pro["token"], files={"headshot": ("h.png", png_bytes(3), "image/png")})),
        ("POST", "/auth/provider/register", 3, lambda: api.post("/auth/provider/register", json={
            "email": unique_email("trips"), "password": "password123", "name": "Pat", "serviceZips": ["10001", "10002"],
            "services": ["lawncare", "snowplowing"]})),
    ]
    for method, route, most, call in steps:
        before = scrape(api)
        r = call()
        assert r.status_code in (200, 201), (route, r.text)
        after = scrape(api)
        n, total = trips(before, after, method, route)
        assert n == 1 and total >= 1, (route, n, total)
        if engine == "postgres":
            assert total <= most, f"{method} {route}: {total:.0f} round trips, at most {most}"
    f.accepted()
    before = scrape(api)
    step(api, pro, f.job_id, "ON_THE_WAY")
    after = scrape(api)
    assert trips(before, after, "PATCH", "/jobs/:id/status")[1] <= (3 if engine == "postgres" else 99)
