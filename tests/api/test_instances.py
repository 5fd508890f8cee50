"""Two instances on one PostgreSQL database (issue 14, item 6), as behind a load balancer:
the same DATABASE_URL and JWT_SECRET, each its own DATA_DIR. Migrations started by both at the
same moment apply once; each background job (emails, pushes, recognition) runs exactly once
between them; rate limits count across both; a banner queued through one is delivered once,
through the other. See docs/operations.md."""
import collections
import json
import threading

import pytest
import requests

from conftest import ADMIN_ENV, Api, Server, _fail_on, _stop_all, admin_login, unique_email, unique_ip
from fake_s3 import FakeS3
from helpers import eventually
from flow_helpers import accept, customer, feed, get_job, ok, post_job, private_zip, provider, quote
from test_outages import SlowPush
from test_system import db_rows

pytestmark = pytest.mark.pooler

SECRET = "two-instances-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def push():
    fake = SlowPush([])
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def s3():
    fake = FakeS3("AKIDINSTANCES", "instances-secret", "us-east-1", "shared").start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def pair(request, engine, pg_cluster, push, s3):
    """Two servers started at the same moment on one fresh PostgreSQL database, with shared
    object storage (an upload through one is recognised by whichever takes the work)."""
    if engine != "postgres":
        pytest.skip("PostgreSQL only: instances share a database server")
    url = pg_cluster.new_database()
    env = {"JWT_SECRET": SECRET, "PUSH_URL": push.url, "DB_POOL_SIZE": "4", "QUEUE_WORKERS": "2",
           "S3_ENDPOINT": s3.url, "S3_BUCKET": "shared", "S3_REGION": "us-east-1", "S3_ACCESS_KEY_ID": "AKIDINSTANCES",
           "S3_SECRET_ACCESS_KEY": "instances-secret", **ADMIN_ENV}
    servers = [Server(request.config.getoption("--binary"), url, env) for _ in range(2)]
    errors = []

    def start(srv):
        try:
            srv.start()
        except Exception as e:  # reported below, with the log
            errors.append(e)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    yield servers
    _fail_on(_stop_all(servers))
    assert not errors, errors


def jobs_run(servers):
    """{job id: [(instance, attempt, outcome)]} from both logs' finished-job lines."""
    runs = collections.defaultdict(list)
    for i, srv in enumerate(servers):
        for line in srv.log_lines():
            if line.get("msg", "").startswith("background job") and "jobId" in line:
                runs[line["jobId"]].append((i, line["attempt"], line["outcome"]))
    return runs


def wait_idle(servers, kinds, timeout=30):
    url = servers[0].env["DATABASE_URL"]
    in_list = ", ".join(f"'{k}'" for k in kinds)
    eventually(lambda: db_rows(url, servers[0].data_dir,
                               f"SELECT id, status FROM job_queue WHERE kind IN ({in_list}) AND status <> 'done'"),
               timeout, "the work finished", interval=0.2, until=lambda left: left == [])


def test_migrations_started_at_once_apply_once(pair):
    url = pair[0].env["DATABASE_URL"]
    versions = db_rows(url, pair[0].data_dir, "SELECT version FROM schema_migrations ORDER BY version")
    applied = [line["msg"] for srv in pair for line in srv.log_lines() if line.get("msg", "").startswith("applied migration")]
    assert len(applied) == len(versions) == len(set(applied)), (applied, versions)
    for srv in pair:
        assert requests.get(srv.url + "/ready", timeout=10).json() == {"status": "ready"}


def test_each_background_job_runs_exactly_once(pair, push):
    a, b = (Api(s) for s in pair)
    # emails: password resets asked through either instance
    users = [a.register_user() for _ in range(6)]
    for i, u in enumerate(users):
        api = (a, b)[i % 2]
        r = api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=unique_ip())
        assert r.status_code == 200
    # pushes: an ASAP job notifies every matching provider; recognition: licences uploaded through both
    z = private_zip()
    pros = [provider((a, b)[i % 2], [z]) for i in range(4)]
    for i, pro in enumerate(pros):
        ok((a, b)[i % 2].post("/providers/me/push-token", token=pro["token"],
                              json={"token": f"ExponentPushToken[two{i}]"}))
    post_job(b, customer(a, z), isAsap=True)
    wait_idle(pair, ["email", "push", "licence_check"])

    url = pair[0].env["DATABASE_URL"]
    rows = db_rows(url, pair[0].data_dir,
                   "SELECT id, kind, attempts FROM job_queue WHERE kind IN ('email', 'push', 'licence_check')")
    kinds = collections.Counter(kind for _, kind, _ in rows)
    assert kinds["email"] >= 6 and kinds["push"] == 4 and kinds["licence_check"] == 4, kinds
    assert all(attempts == "1" for _, _, attempts in rows), [r for r in rows if r[2] != "1"]
    # info lines reach the logs within 100 ms of the event
    runs = eventually(lambda: jobs_run(pair), 5, "a log line for every finished job",
                      until=lambda runs: all(runs[job_id] for job_id, _, _ in rows))
    for job_id, kind, _ in rows:
        assert [(attempt, outcome) for _, attempt, outcome in runs[job_id]] == [(1, "done")], (kind, runs[job_id])
    # both instances did some of the work
    assert {inst for job_id, _, _ in rows for inst, _, _ in runs[job_id]} == {0, 1}
    # what reached the outside world: each email once (in one of the two outboxes), each push once
    mails = [m["headers"]["message-id"] for srv in pair for m in srv.mails()]
    assert len(mails) == len(set(mails)) == kinds["email"]
    for u in users:
        assert sum(len(srv.mails(u["email"])) for srv in pair) == 1
    tos = [to for to, _ in push.requests if to.startswith("ExponentPushToken[two")]
    assert sorted(tos) == sorted(f"ExponentPushToken[two{i}]" for i in range(4))


def test_rate_limits_count_across_instances(pair):
    ip = unique_ip()
    codes = []
    for i in range(7):
        r = requests.post(pair[i % 2].url + "/auth/forgot-password", headers={"X-Forwarded-For": ip},
                          json={"email": unique_email("rl"), "role": "user"}, timeout=10)
        codes.append(r.status_code)
    assert codes == [200] * 5 + [429, 429], codes


def test_a_banner_queued_through_one_is_delivered_once_through_the_other(pair):
    a, b = (Api(s) for s in pair)
    user = a.register_user()
    r = a.post("/admin/notify", token=admin_login(b),
               json={"userId": user["id"], "role": "user", "title": "Both", "body": "one of us"})
    assert r.status_code == 200, r.text
    got = b.get("/users/me/notification", token=user["token"])
    assert got.json() == {"icon": None, "title": "Both", "body": "one of us"}
    assert a.get("/users/me/notification", token=user["token"]).json() is None
    assert b.get("/users/me/notification", token=user["token"]).json() is None


def test_a_token_from_one_instance_works_on_the_other(pair):
    a, b = (Api(s) for s in pair)
    user = a.register_user()
    assert b.get("/users/me", token=user["token"]).json()["email"] == user["email"]


def test_the_feed_shows_at_once_what_the_other_instance_changed(pair):
    """Each instance keeps the feed's open jobs per (service, ZIP) in memory, checked against a
    version every change to an open job moves in its own transaction (PostgreSQL): a job posted,
    quoted, edited in the database by hand or taken off the market through one instance shows in
    the other's very next feed."""
    a, b = (Api(s) for s in pair)
    z = private_zip()
    pro, rival = provider(a, [z]), provider(b, [z])
    cust = customer(b, z)
    assert feed(a, pro["token"]) == []  # the empty part, now held by instance a
    job = post_job(b, cust)
    (seen,) = feed(a, pro["token"])
    assert seen["id"] == job["id"] and seen["status"] == "PENDING" and seen["quoted"] is False
    quote(b, rival, job["id"])
    (seen,) = feed(a, pro["token"])
    assert seen["status"] == "QUOTED" and seen["quoted"] is False
    mine = quote(b, pro, job["id"], amount=90)
    (seen,) = feed(a, pro["token"])
    assert seen["quoted"] is True
    # an operator's UPDATE outside the service moves the version too
    url = pair[0].env["DATABASE_URL"]
    db_rows(url, pair[0].data_dir, f"UPDATE jobs SET description = 'Edited by hand' WHERE id = '{job['id']}'")
    (seen,) = feed(a, pro["token"])
    assert seen["description"] == "Edited by hand"
    detail = get_job(a, pro["token"], job["id"])
    assert {k: detail[k] for k in seen if k != "quoted"} == {k: v for k, v in seen.items() if k != "quoted"}
    accept(b, cust, mine["id"])
    assert feed(a, pro["token"]) == []
    assert feed(b, rival["token"]) == []
