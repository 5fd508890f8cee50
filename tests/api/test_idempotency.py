"""Idempotency keys (docs/decisions.md, HTTP): Stripe's semantics on every POST and PATCH route,
JSON bodies and uploads (issue 24: an upload's fingerprint holds its text fields and each
file's SHA-256). The first request with a key runs and its answer is kept for 24 hours per
(account or client address, key); a repeat gets the same answer with `Idempotent-Replayed:
true` and changes nothing; another request under the key is 422, a repeat while the first runs
409; 400 and 5xx answers are not kept. The processor's charges are counted at a fake Stripe."""
import hashlib
import json
import threading
import uuid

import pytest

from conftest import ADMIN_EMAIL, ADMIN_ENV, ADMIN_PASSWORD, Api, admin_login, unique_email, unique_ip
from fake_stripe import FakeStripe
from helpers import error_body, eventually, png_bytes
from flow_helpers import Flow, customer, get_job, image_files, ok, post_job, race
from staff_helpers import approved_elevation, count, database_before, make_staff, sql, sql_at

pytestmark = pytest.mark.pooler

REUSED = error_body(422, "Idempotency-Key reused with a different request", "idempotency_key_reused")
IN_PROGRESS = error_body(409, "A request with this Idempotency-Key is in progress", "idempotency_key_in_use")
BAD_KEY = error_body(400, "Idempotency-Key: must be 1 to 255 printable ASCII characters")
JOB = {"service": "lawncare", "description": "Mow the front lawn", "preferredAt": "2031-05-01T09:00:00.000Z"}


def key():
    return f"key-{uuid.uuid4()}"


def post(api, path, token, k, **kw):
    return api.post(path, token=token, headers={"Idempotency-Key": k}, **kw)


def jobs_of(api, user):
    return ok(api.get("/jobs", token=user["token"]))["jobs"]


def assert_same_answer(first, again):
    assert again.status_code == first.status_code
    assert again.json() == first.json()
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"


# ================================================================ the shared server

def test_post_job_twice_with_one_key_makes_one_job(api):
    user = customer(api)
    k = key()
    first = post(api, "/jobs", user["token"], k, json=JOB)
    assert first.status_code == 201, first.text
    again = post(api, "/jobs", user["token"], k, json=JOB)
    assert_same_answer(first, again)
    # the same object serialised differently is the same request
    reordered = post(api, "/jobs", user["token"], k, data='{ "preferredAt": "2031-05-01T09:00:00.000Z", '
                     '"description": "Mow the front lawn",\n "service": "lawncare" }')
    assert_same_answer(first, reordered)
    assert [j["id"] for j in jobs_of(api, user)] == [first.json()["id"]]
    # without a key every request runs
    ok(api.post("/jobs", token=user["token"], json=JOB), 201)
    assert len(jobs_of(api, user)) == 2


def test_key_reused_with_another_body_path_or_method_is_422(api):
    user = customer(api)
    k = key()
    first = post(api, "/jobs", user["token"], k, json=JOB)
    assert first.status_code == 201
    other_body = post(api, "/jobs", user["token"], k, json={**JOB, "description": "Rake leaves"})
    assert (other_body.status_code, other_body.json()) == (422, REUSED)
    job_id = first.json()["id"]
    other_path = post(api, f"/jobs/{job_id}/cancel", user["token"], k)
    assert (other_path.status_code, other_path.json()) == (422, REUSED)
    other_method = api.patch("/users/me", token=user["token"], headers={"Idempotency-Key": k}, json={"lat": 1})
    assert (other_method.status_code, other_method.json()) == (422, REUSED)
    assert [j["id"] for j in jobs_of(api, user)] == [job_id]
    assert get_job(api, user["token"], job_id)["status"] == "PENDING"  # the cancel never ran
    assert ok(api.get("/users/me", token=user["token"]))["lat"] is None


def test_keys_are_per_account(api):
    a, b = customer(api), customer(api)
    k = key()
    ra = post(api, "/jobs", a["token"], k, json=JOB)
    rb = post(api, "/jobs", b["token"], k, json=JOB)
    assert ra.status_code == rb.status_code == 201
    assert "Idempotent-Replayed" not in rb.headers
    assert ra.json()["id"] != rb.json()["id"]
    assert len(jobs_of(api, a)) == len(jobs_of(api, b)) == 1


def test_open_routes_key_on_the_client_address(api, server):
    k = key()
    body = {"name": "Wait Lister", "email": f"wl-{uuid.uuid4().hex[:10]}@example.com", "zip": "10001",
            "role": "customer"}
    ip1, ip2 = unique_ip(), unique_ip()
    first = api.post("/waitlist", json=body, ip=ip1, headers={"Idempotency-Key": k})
    assert first.status_code == 200, first.text
    again = api.post("/waitlist", json=body, ip=ip1, headers={"Idempotency-Key": k})
    assert_same_answer(first, again)
    elsewhere = api.post("/waitlist", json=body, ip=ip2, headers={"Idempotency-Key": k})
    assert elsewhere.status_code == 200 and "Idempotent-Replayed" not in elsewhere.headers
    api.wait_queue_idle()
    assert len(server.mails(body["email"])) == 2  # the replay sent nothing


@pytest.mark.parametrize("bad", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_malformed_keys_are_400_and_change_nothing(api, bad):
    user = customer(api)
    raw = bad.encode("utf-8")  # sent as bytes: requests would refuse some of them as str
    r = api.post("/jobs", token=user["token"], headers={"Idempotency-Key": raw}, json=JOB)
    assert (r.status_code, r.json()) == (400, BAD_KEY)
    assert jobs_of(api, user) == []


def test_longest_and_odd_printable_keys_are_accepted(api):
    user = customer(api)
    for k in ("k" * 255, "a b ~!@#$%^&*()[]{}<>?/\\|'\";:=+", "1"):
        first = post(api, "/jobs", user["token"], k, json=JOB)
        assert first.status_code == 201, (k, first.text)
        assert_same_answer(first, post(api, "/jobs", user["token"], k, json=JOB))
    assert len(jobs_of(api, user)) == 3


def test_validation_failures_are_not_kept_so_a_corrected_retry_runs(api):
    user = customer(api)
    k = key()
    bad = post(api, "/jobs", user["token"], k, json={**JOB, "service": "gardening"})
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("service: must be one of")
    assert bad.json() == error_body(400, bad.json()["error"])
    fixed = post(api, "/jobs", user["token"], k, json=JOB)
    assert fixed.status_code == 201 and "Idempotent-Replayed" not in fixed.headers
    assert len(jobs_of(api, user)) == 1


def test_other_client_errors_are_kept(api):
    """A 4xx other than 400 is the route's answer to that request, kept like a success."""
    user = customer(api)
    k = key()
    missing = post(api, "/quotes/cmissingquote0000000000000/accept", user["token"], k)
    assert missing.status_code == 404
    assert_same_answer(missing, post(api, "/quotes/cmissingquote0000000000000/accept", user["token"], k))


def test_routes_without_keys_ignore_the_header(api):
    user = customer(api)
    k = key()
    for _ in range(2):
        r = api.get("/users/me", token=user["token"], headers={"Idempotency-Key": k})
        assert r.status_code == 200 and "Idempotent-Replayed" not in r.headers


# ================================================================ uploads (issue 24, item 6)

def photo(seed):
    return {"photo": ("p.png", png_bytes(seed), "image/png")}


def thread_of(api, token, job_id):
    return ok(api.get(f"/jobs/{job_id}/messages", token=token))["messages"]


def test_an_upload_replayed_with_its_key_runs_once(api):
    f = Flow(api).accepted()
    k = key()
    first = post(api, f"/jobs/{f.job_id}/messages/photo", f.user["token"], k, files=photo(50))
    assert first.status_code == 201, first.text
    again = post(api, f"/jobs/{f.job_id}/messages/photo", f.user["token"], k, files=photo(50))
    assert_same_answer(first, again)
    assert [m["id"] for m in thread_of(api, f.user["token"], f.job_id)] == [first.json()["id"]]
    # a file of other bytes, or another text field, under the key is another request
    for files, data in ((photo(51), None), (photo(50), {"providerId": f.pro["id"]})):
        r = post(api, f"/jobs/{f.job_id}/messages/photo", f.user["token"], k, files=files, data=data)
        assert (r.status_code, r.json()) == (422, REUSED)
    # without a key, or with a new one, the same photo is sent again
    assert api.post(f"/jobs/{f.job_id}/messages/photo", token=f.user["token"], files=photo(50)).status_code == 201
    assert post(api, f"/jobs/{f.job_id}/messages/photo", f.user["token"], key(), files=photo(50)).status_code == 201
    assert len(thread_of(api, f.user["token"], f.job_id)) == 3


def test_every_upload_route_takes_the_key(api):
    user = customer(api)
    job = post_job(api, user)
    k = key()
    for _ in range(2):
        r = post(api, f"/jobs/{job['id']}/images", user["token"], k, files=image_files(2))
        assert r.status_code == 200, r.text
    assert r.headers["Idempotent-Replayed"] == "true"
    assert len(get_job(api, user["token"], job["id"])["images"]) == 2
    # the order of the files is part of the request
    r = post(api, f"/jobs/{job['id']}/images", user["token"], k, files=list(reversed(image_files(2))))
    assert (r.status_code, r.json()) == (422, REUSED)
    # a refused upload is not kept: the corrected one runs under the same key
    k = key()
    r = post(api, f"/jobs/{job['id']}/images", user["token"], k, files=image_files(0))
    assert r.status_code == 400 and "Idempotent-Replayed" not in r.headers
    r = post(api, f"/jobs/{job['id']}/images", user["token"], k, files=image_files(1, seed=3))
    assert r.status_code == 200 and "Idempotent-Replayed" not in r.headers
    assert len(get_job(api, user["token"], job["id"])["images"]) == 3
    doc = api.get("/openapi.json").json()
    for path in ("/jobs/{id}/images", "/jobs/{id}/messages/photo", "/providers/me/logo",
                 "/users/me/addresses/{id}/photos"):
        op = doc["paths"][path]["post"]
        assert {"$ref": "#/components/parameters/IdempotencyKey"} in op["parameters"], path
        assert {"409", "422"} <= set(op["responses"]), path


def test_auth_comes_before_the_key(api):
    r = api.post("/jobs", headers={"Idempotency-Key": key()}, json=JOB)
    assert (r.status_code, r.json()) == (401, error_body(401, "Unauthorized"))


def test_concurrent_duplicates_run_once(server, api):
    user = customer(api)
    k = key()
    answers = race(server, [lambda c: post(c, "/jobs", user["token"], k, json=JOB) for _ in range(8)])
    ran = [r for r in answers if r.status_code == 201 and "Idempotent-Replayed" not in r.headers]
    assert len(ran) == 1, [(r.status_code, r.text) for r in answers]
    for r in answers:
        if r is ran[0]:
            continue
        if r.status_code == 409:
            assert r.json() == IN_PROGRESS
        else:
            assert_same_answer(ran[0], r)
    assert [j["id"] for j in jobs_of(api, user)] == [ran[0].json()["id"]]


# ================================================================ money, at a fake Stripe

@pytest.fixture(scope="module")
def fake_stripe():
    fake = FakeStripe(api_key="sk_test_fake").start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def sapi(make_server, fake_stripe):
    return Api(make_server(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake_stripe.url))


def intents_of(fake, user):
    cus = fake.objects("customer", email=user["email"])
    assert len(cus) == 1
    return fake.objects("payment_intent", customer=cus[0]["id"])


def test_accept_and_tip_twice_with_one_key_charge_once(sapi, fake_stripe):
    flow = Flow(sapi).quoted()
    k = key()
    first = post(sapi, f"/quotes/{flow.quote['id']}/accept", flow.user["token"], k)
    assert first.status_code == 200, first.text
    assert_same_answer(first, post(sapi, f"/quotes/{flow.quote['id']}/accept", flow.user["token"], k))
    assert len(intents_of(fake_stripe, flow.user)) == 1  # one authorization
    job = get_job(sapi, flow.user["token"], flow.job_id)
    assert job["status"] == "ACCEPTED" and job["payment"]["status"] == "AUTHORIZED"

    flow.job = first.json()["job"]
    flow.completed()
    k = key()
    tip = post(sapi, f"/jobs/{flow.job_id}/tip", flow.user["token"], k, json={"amount": 5})
    assert tip.status_code == 200, tip.text
    assert_same_answer(tip, post(sapi, f"/jobs/{flow.job_id}/tip", flow.user["token"], k, json={"amount": 5}))
    assert len(intents_of(fake_stripe, flow.user)) == 2  # the authorization and one tip
    assert get_job(sapi, flow.user["token"], flow.job_id)["tipAmount"] == 5
    # a tip without the key is a second request: refused as the route refuses a second tip
    assert sapi.post(f"/jobs/{flow.job_id}/tip", token=flow.user["token"], json={"amount": 5}).status_code == 409
    assert len(intents_of(fake_stripe, flow.user)) == 2


def test_concurrent_tips_with_one_key_charge_once(sapi, fake_stripe):
    """Six tips under one key, released together while the processor holds tip charges: the one
    that claimed the key runs and is held there until the other five have answered, so each of
    them arrived while it ran and must answer 409 in progress (an answer that could be either
    409 or a replay is two cases: the replay is forced by the repeat sent once the tip finished).
    One charge."""
    flow = Flow(sapi).completed()
    k = key()

    def tip(c):
        return post(c, f"/jobs/{flow.job_id}/tip", flow.user["token"], k, json={"amount": 3})

    release = fake_stripe.hold("POST", "/v1/payment_intents")
    barrier, answers = threading.Barrier(6), []

    def send():
        c = Api(sapi.server)
        barrier.wait()
        answers.append(tip(c))

    threads = [threading.Thread(target=send) for _ in range(6)]
    try:
        for t in threads:
            t.start()
        eventually(lambda: list(answers), 30, "the five repeats answered", until=lambda got: len(got) == 5)
        assert [(r.status_code, r.json(), r.headers.get("Retry-After")) for r in answers] == [(409, IN_PROGRESS, "1")] * 5
    finally:
        release.set()
        fake_stripe.delay("POST", "/v1/payment_intents", 0)
        for t in threads:
            t.join(30)
    ran = answers[5]
    assert ran.status_code == 200 and "Idempotent-Replayed" not in ran.headers, ran.text
    assert_same_answer(ran, tip(sapi))
    assert len(intents_of(fake_stripe, flow.user)) == 2


# ================================================================ a private server: clock and restart

def test_keys_survive_a_restart_and_expire_after_24_hours(server_factory):
    api = Api(server_factory())
    user = customer(api)
    k = key()
    first = post(api, "/jobs", user["token"], k, json=JOB)
    assert first.status_code == 201
    api.server.restart()
    assert_same_answer(first, post(api, "/jobs", user["token"], k, json=JOB))
    api.advance_clock(24 * 3600 * 1000 - 60 * 1000)  # a minute before expiry: still kept
    assert_same_answer(first, post(api, "/jobs", user["token"], k, json=JOB))
    assert len(jobs_of(api, user)) == 1
    api.advance_clock(61 * 1000)  # 24 hours after the first request: the key is free again
    again = post(api, "/jobs", user["token"], k, json=JOB)
    assert again.status_code == 201 and "Idempotent-Replayed" not in again.headers
    assert again.json()["id"] != first.json()["id"]
    assert len(jobs_of(api, user)) == 2
    # and is kept anew
    assert_same_answer(again, post(api, "/jobs", user["token"], k, json=JOB))
    # after expiry another body under the key runs too
    api.advance_clock(24 * 3600 * 1000)
    other = post(api, "/jobs", user["token"], k, json={**JOB, "description": "Another"})
    assert other.status_code == 201 and "Idempotent-Replayed" not in other.headers



def test_browsers_may_send_the_key_and_read_the_replay_mark(api):
    r = api.request("OPTIONS", "/jobs", headers={"Origin": "https://app.example.com",
                                                 "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204
    assert "idempotency-key" in [h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")]
    user = customer(api)
    r = api.post("/jobs", token=user["token"], json=JOB, headers={"Origin": "https://app.example.com"})
    assert "Idempotent-Replayed" in [h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")]


# ================================================================ credentials are never kept (issue 20)

def credential_requests(api, server):
    """(path, token, body) of every route that takes a password or issues a token, each valid
    enough to run its handler."""
    admin = admin_login(api)
    user = api.register_user()
    pro = api.register_provider()
    cs = make_staff(api, "customer_support", admin)
    elevation = approved_elevation(api, server, cs, user["id"])
    return [
        ("/auth/register", None, {"email": unique_email(), "password": "password123", "name": "N", "address": "1 St",
                                  "zip": "10001"}),
        ("/auth/login", None, {"email": user["email"], "password": user["password"]}),
        ("/auth/provider/register", None, {"email": unique_email("pro"), "password": "password123", "name": "P",
                                           "serviceZips": "10001", "services": "lawncare"}),
        ("/auth/provider/login", None, {"email": pro["email"], "password": pro["password"]}),
        ("/auth/forgot-password", None, {"email": user["email"], "role": "user"}),
        ("/auth/reset-password", None, {"token": "0" * 64, "newPassword": "password456"}),
        ("/staff/login", None, {"email": cs["email"], "password": cs["password"]}),
        ("/staff/create", admin, {"name": "S", "email": unique_email("st"), "password": "password123",
                                  "role": "technical_support"}),
        ("/staff/impersonate", cs["token"], {"elevationId": elevation["id"]}),
        ("/staff/impersonate-staff", admin, {"staffId": cs["id"]}),
        ("/admin/login", None, {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}),
        ("/admin/impersonate", admin, {"targetId": user["id"], "targetRole": "user"}),
    ]


def test_a_login_key_is_no_oracle_and_keeps_no_token(api, server, pg_cluster):
    """The attack: a key reused with wrong passwords answered 422 without meeting the throttle,
    and the right password then got the victim's token replayed from the table."""
    user = api.register_user()
    k, ip = key(), unique_ip()
    wrong = api.post("/auth/login", json={"email": user["email"], "password": "wrong-password"}, ip=ip,
                     headers={"Idempotency-Key": k})
    assert (wrong.status_code, wrong.json()) == (401, error_body(401, "Invalid credentials", "invalid_credentials"))
    right = api.post("/auth/login", json={"email": user["email"], "password": user["password"]}, ip=ip,
                     headers={"Idempotency-Key": k})
    assert right.status_code == 200, right.text
    assert "Idempotent-Replayed" not in right.headers and right.json()["user"]["id"] == user["id"]
    assert count(server, pg_cluster, f"SELECT COUNT(*) FROM idempotency_keys WHERE key = '{k}'") == 0


def test_credential_routes_run_every_time_and_store_nothing(api, server, pg_cluster):
    # the second request runs too: a registration then finds its email taken, an elevation started
    first = {"/auth/register": 201, "/auth/provider/register": 201, "/staff/create": 201, "/auth/reset-password": 400}
    second = {**first, "/auth/register": 409, "/auth/provider/register": 409, "/staff/create": 409,
              "/staff/impersonate": 403}
    for path, token, body in credential_requests(api, server):
        k, ip = key(), unique_ip()
        answers = [api.post(path, token=token, json=body, ip=ip, headers={"Idempotency-Key": k}) for _ in range(2)]
        assert all("Idempotent-Replayed" not in r.headers for r in answers), path
        assert [r.status_code for r in answers] == [first.get(path, 200), second.get(path, 200)], (path, answers[1].text)
        assert count(server, pg_cluster, f"SELECT COUNT(*) FROM idempotency_keys WHERE key = '{k}'") == 0, path


def test_the_document_offers_no_key_on_credential_routes(api):
    doc = api.get("/openapi.json").json()
    key_param = {"$ref": "#/components/parameters/IdempotencyKey"}
    for path in ("/auth/register", "/auth/login", "/auth/provider/register", "/auth/provider/login",
                 "/auth/forgot-password", "/auth/reset-password", "/staff/login", "/staff/create",
                 "/staff/impersonate", "/staff/impersonate-staff", "/admin/login", "/admin/impersonate"):
        op = doc["paths"][path]["post"]
        assert key_param not in op.get("parameters", []), path
        assert "Idempotent-Replayed" not in op["responses"][next(c for c in op["responses"] if c[0] == "2")].get(
            "headers", {}), path
        assert "422" not in op["responses"], path
    assert key_param in doc["paths"]["/jobs"]["post"]["parameters"]
    assert key_param in doc["paths"]["/waitlist"]["post"]["parameters"]


def canonical(method, path, body):
    return f"{method}\n{path}\n{json.dumps(body, sort_keys=True, separators=(',', ':'))}"


def test_fingerprints_are_keyed_never_a_bare_hash(api, server, pg_cluster):
    user = customer(api)
    k = key()
    ok(post(api, "/jobs", user["token"], k, json=JOB), 201)
    (stored,), = sql(server, pg_cluster, f"SELECT request_hash FROM idempotency_keys WHERE key = '{k}'")
    bare = hashlib.sha256(canonical("POST", "/jobs", JOB).encode()).hexdigest()
    assert stored.startswith("hmac:") and len(stored) == 5 + 64 and bare not in stored


def test_a_row_kept_before_the_change_still_replays(api, server, pg_cluster):
    """Rows written before migration 0014 hold a bare SHA-256; they are compared as such until
    they expire, so a retry across the upgrade is still answered from its key."""
    user = customer(api)
    k, path = key(), "/quotes/cmissingquote0000000000000/accept"
    bare = hashlib.sha256(canonical("POST", path, {}).encode()).hexdigest()
    sql(server, pg_cluster, "INSERT INTO idempotency_keys (scope, key, request_hash, status, response, locked_until, "
                            f"created_at, expires_at) VALUES ('user:{user['id']}', '{k}', '{bare}', 404, "
                            "'{\"error\":\"Quote not found\"}', 0, 0, 9999999999999)")
    r = post(api, path, user["token"], k)
    assert (r.status_code, r.json(), r.headers.get("Idempotent-Replayed")) == (404, error_body(404, "Quote not found"),
                                                                               "true")
    other = post(api, path.replace("0000/", "0001/"), user["token"], k)
    assert (other.status_code, other.json()) == (422, REUSED)


def test_the_migration_deletes_kept_credential_answers(server_factory, pg_cluster, tmp_path):
    url = database_before(pg_cluster, str(tmp_path), 13)
    srv_rows = [("ip:10.0.0.1", "login"), ("admin:cadmin", "impersonate"), ("customer_support:cstaff", "elevate"),
                ("user:cuser", "job"), ("provider:cpro", "quote")]
    for scope, k in srv_rows:
        stmt = ("INSERT INTO idempotency_keys (scope, key, request_hash, status, response, locked_until, created_at, "
                f"expires_at) VALUES ('{scope}', '{k}', '{'0' * 64}', 200, '{{\"token\":\"t\"}}', 0, 0, 9999999999999)")
        sql_at(url, pg_cluster, stmt)
    srv = server_factory(DATABASE_URL=url, **ADMIN_ENV)
    left = sorted(r[0] for r in sql(srv, pg_cluster, "SELECT scope FROM idempotency_keys"))
    assert left == ["provider:cpro", "user:cuser"]
