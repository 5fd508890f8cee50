"""GODMODE administrators: login (24-hour token, 10 per 15 minutes per IP), the account list,
impersonation (2-hour token), account deletion with its cascade (rows, card holds, stored files,
tokens), data generation, in-app banners, POST /staff/impersonate-staff, and the whole area's
absence under APP_ENV=production.

Spec: marketplace-api.md 3 (Job status: the assigned provider deleted), 4 (Admin /admin, Staff
impersonate-staff), 5 (Administrator flow, token lifetimes), 8 (admin login limit); decisions.md 4
(GODMODE, generate bounds, banners in the database).
"""

import pytest
import requests

from conftest import ADMIN_EMAIL, ADMIN_ENV, ADMIN_PASSWORD, Api, unique_email, unique_ip
from flow_helpers import (
    ISO_RE, Flow, accept, customer, get_job, image_files, ok, post_job, private_zip, provider, quote,
)
from helpers import error_body, eventually, png_bytes
from staff_helpers import FORBIDDEN, UNAUTHORIZED, claims, count, forge, forged_claims, make_staff, sql

NOT_FOUND = error_body(404, "Not found")
ACCOUNT_NOT_FOUND = error_body(404, "Account not found")
ADMIN_ROUTES = [
    ("POST", "/admin/login", {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}),
    ("GET", "/admin/users", None),
    ("POST", "/admin/impersonate", {"targetId": "x", "targetRole": "user"}),
    ("DELETE", "/admin/accounts/cnotanidnotanidnotanid000?role=user", None),
    ("POST", "/admin/generate", {"customers": 1}),
    ("POST", "/admin/notify", {"userId": "x", "role": "user", "title": "t", "body": "b"}),
    ("POST", "/staff/impersonate-staff", {"staffId": "x"}),
    ("GET", "/admin/elevations", None),
    ("POST", "/admin/elevations/cnotanidnotanidnotanid000/approve", None),
    ("POST", "/admin/elevations/cnotanidnotanidnotanid000/deny", None),
]


def login(api, email=ADMIN_EMAIL, password=ADMIN_PASSWORD, ip=None):
    return api.post("/admin/login", json={"email": email, "password": password}, ip=ip or unique_ip())


# ---------------------------------------------------------------- login


def test_admin_login_returns_a_24_hour_admin_token(api):
    r = login(api, ADMIN_EMAIL.upper())
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"token", "admin"} and body["admin"]["email"] == ADMIN_EMAIL
    c = claims(body["token"])
    assert (c["id"], c["role"], c["exp"] - c["iat"]) == (body["admin"]["id"], "admin", 24 * 3600)
    assert "type" not in c
    assert api.get("/admin/users", token=body["token"]).status_code == 200


def test_admin_login_refuses_bad_credentials_alike(api):
    for email, password in ((ADMIN_EMAIL, "wrong-password"), (unique_email("ghost"), ADMIN_PASSWORD)):
        r = login(api, email, password)
        assert (r.status_code, r.json()) == (401, error_body(401, "Invalid credentials", "invalid_credentials"))
    r = api.post("/admin/login", json={"email": ADMIN_EMAIL}, ip=unique_ip())
    assert (r.status_code, r.json()) == (400, error_body(400, "password: is required"))


def test_admin_login_is_limited_to_10_per_15_minutes_per_ip(api):
    ip = unique_ip()
    answers = [login(api, password="wrong-password" if i % 2 else ADMIN_PASSWORD, ip=ip) for i in range(10)]
    assert [r.status_code for r in answers] == [200, 401] * 5
    r = login(api, ip=ip)
    assert (r.status_code, r.json()) == (429, error_body(429, "Too many requests"))
    assert 0 < int(r.headers["Retry-After"]) <= 15 * 60
    assert login(api).status_code == 200  # another address


def test_admin_token_expires_after_24_hours(server_factory):
    srv = server_factory(**ADMIN_ENV)
    api = Api(srv)
    token = login(api).json()["token"]
    api.advance_clock(24 * 3600 * 1000 - 5000)
    assert api.get("/admin/users", token=token).status_code == 200
    api.advance_clock(6000)
    assert (api.get("/admin/users", token=token).json()) == UNAUTHORIZED


@pytest.mark.parametrize("method, path, body", ADMIN_ROUTES[1:])
def test_admin_routes_refuse_everyone_else(api, server, method, path, body):
    assert api.request(method, path, json=body).status_code == 401
    cs = make_staff(api, "customer_support")
    for token in (api.register_user()["token"], api.register_provider()["token"], cs["token"]):
        r = api.request(method, path, json=body, token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN), token
    r = api.request(method, path, json=body, token=forge(server, forged_claims(role="admin")))
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)


# ---------------------------------------------------------------- users and impersonation


def test_admin_users_lists_customers_and_providers(api, admin_token):
    u, p = api.register_user(name="Listed User"), api.register_provider(name="Listed Pro")
    body = ok(api.get("/admin/users", token=admin_token))
    assert set(body) == {"users", "providers"}
    user = next(x for x in body["users"] if x["id"] == u["id"])
    assert user["email"] == u["email"] and user["name"] == "Listed User" and user["zip"] == "10001"
    assert set(user) == {"id", "email", "name", "address", "zip", "lat", "lng", "isPremium", "premiumSince",
                         "processorCustomerId", "createdAt"}
    assert user["processorCustomerId"] is None  # no card set up yet
    pro = next(x for x in body["providers"] if x["id"] == p["id"])
    assert pro["services"] == ["lawncare"] and pro["serviceZips"] == ["10001"]
    assert set(pro) == {"id", "email", "name", "phone", "companyName", "services", "serviceZips", "isPremium",
                        "createdAt"}
    assert "password" not in str(body)
    created = [x["createdAt"] for x in body["users"]]
    assert created == sorted(created, reverse=True)


def test_admin_users_tell_the_processor_customer(api, admin_token):
    """The specification's User has processorCustomerId: GET /admin/users omitted it."""
    u = customer(api, card="pm_card_visa")
    user = next(x for x in ok(api.get("/admin/users", token=admin_token))["users"] if x["id"] == u["id"])
    assert user["processorCustomerId"] and user["processorCustomerId"].startswith("cus_")


@pytest.mark.parametrize("role", ["user", "provider"])
def test_admin_impersonate_gives_a_2_hour_token(api, admin_token, role):
    acct = api.register_user(name="Imp User") if role == "user" else api.register_provider(name="Imp Pro")
    r = api.post("/admin/impersonate", token=admin_token, json={"targetId": acct["id"], "targetRole": role})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["identity"] == {"id": acct["id"], "email": acct["email"], "name": acct["body"]["name"], "role": role}
    c = claims(body["token"])
    assert (c["id"], c["role"], c["exp"] - c["iat"]) == (acct["id"], role, 2 * 3600)
    assert "elevationId" not in c and "type" not in c
    me = ok(api.get("/users/me" if role == "user" else "/providers/me", token=body["token"]))
    assert me["id"] == acct["id"]


def test_admin_impersonate_refusals(api, admin_token):
    u = api.register_user()
    r = api.post("/admin/impersonate", token=admin_token, json={"targetId": u["id"], "targetRole": "provider"})
    assert (r.status_code, r.json()) == (404, ACCOUNT_NOT_FOUND)
    for body, error in (({"targetRole": "user"}, "targetId: is required"),
                        ({"targetId": u["id"]}, "targetRole: is required"),
                        ({"targetId": u["id"], "targetRole": "admin"}, "targetRole: must be one of: user, provider")):
        r = api.post("/admin/impersonate", token=admin_token, json=body)
        assert (r.status_code, r.json()) == (400, error_body(400, error))


def test_impersonate_staff(api, admin_token):
    s = make_staff(api, "internal_audit", admin_token, name="Audrey")
    r = api.post("/staff/impersonate-staff", token=admin_token, json={"staffId": s["id"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["staff"] == {"id": s["id"], "name": "Audrey", "email": s["email"], "role": "internal_audit"}
    c = claims(body["token"])
    assert (c["id"], c["role"], c["type"], c["exp"] - c["iat"]) == (s["id"], "internal_audit", "staff", 12 * 3600)
    assert ok(api.get("/staff/me", token=body["token"]))["id"] == s["id"]
    r = api.post("/staff/impersonate-staff", token=admin_token, json={"staffId": "cnotanidnotanidnotanid000"})
    assert (r.status_code, r.json()) == (404, error_body(404, "Staff member not found"))
    r = api.post("/staff/impersonate-staff", token=admin_token, json={})
    assert (r.status_code, r.json()) == (400, error_body(400, "staffId: is required"))


# ---------------------------------------------------------------- deleting accounts


def served(url):
    return requests.get(url, timeout=30).status_code


def delete(api, token, acct_id, role):
    return api.delete(f"/admin/accounts/{acct_id}", token=token, params={"role": role})


def test_delete_account_validation_and_404(api, admin_token):
    u = api.register_user()
    r = api.delete(f"/admin/accounts/{u['id']}", token=admin_token)
    assert (r.status_code, r.json()) == (400, error_body(400, "role: is required"))
    r = delete(api, admin_token, u["id"], "admin")
    assert (r.status_code, r.json()) == (400, error_body(400, "role: must be one of: user, provider"))
    assert (delete(api, admin_token, u["id"], "provider").json()) == ACCOUNT_NOT_FOUND
    assert delete(api, admin_token, "cnotanidnotanidnotanid000", "user").status_code == 404
    assert api.get("/users/me", token=u["token"]).status_code == 200


def references(server, pg_cluster, acct_id):
    """How many rows of each table still name the account."""
    checks = {
        "users": f"SELECT COUNT(*) FROM users WHERE id = '{acct_id}'",
        "providers": f"SELECT COUNT(*) FROM providers WHERE id = '{acct_id}'",
        "jobs": f"SELECT COUNT(*) FROM jobs WHERE customer_id = '{acct_id}' OR provider_id = '{acct_id}'",
        "quotes": f"SELECT COUNT(*) FROM quotes WHERE provider_id = '{acct_id}'",
        "reviews": f"SELECT COUNT(*) FROM reviews WHERE customer_id = '{acct_id}' OR provider_id = '{acct_id}'",
        "messages": f"SELECT COUNT(*) FROM messages WHERE sender_id = '{acct_id}' OR provider_id = '{acct_id}'",
        "payments": f"SELECT COUNT(*) FROM payments WHERE user_id = '{acct_id}'",
        "notifications": f"SELECT COUNT(*) FROM notifications WHERE account_id = '{acct_id}'",
        "banners": f"SELECT COUNT(*) FROM banners WHERE account_id = '{acct_id}'",
        "addresses": f"SELECT COUNT(*) FROM user_addresses WHERE user_id = '{acct_id}'",
        "reports": f"SELECT COUNT(*) FROM job_reports WHERE customer_id = '{acct_id}'",
        "recurring": f"SELECT COUNT(*) FROM recurring_requests WHERE customer_id = '{acct_id}' "
                     f"OR provider_id = '{acct_id}'",
        "tickets": f"SELECT COUNT(*) FROM support_tickets WHERE account_id = '{acct_id}'",
        "favorites": f"SELECT COUNT(*) FROM favorites WHERE user_id = '{acct_id}' OR provider_id = '{acct_id}'",
        "pro_notes": f"SELECT COUNT(*) FROM pro_notes WHERE user_id = '{acct_id}' OR provider_id = '{acct_id}'",
        "seasonal_alerts": f"SELECT COUNT(*) FROM seasonal_alerts WHERE user_id = '{acct_id}'",
        "provider_zips": f"SELECT COUNT(*) FROM provider_zips WHERE provider_id = '{acct_id}'",
    }
    return {k: count(server, pg_cluster, q) for k, q in checks.items()}


def test_delete_customer_removes_everything_it_owns(api, server, pg_cluster, admin_token):
    f = Flow(api).completed()
    user, pro = f.user, f.pro
    ok(api.post("/reviews", token=user["token"], json={"jobId": f.job_id, "rating": 4}), 201)
    ok(api.post(f"/jobs/{f.job_id}/report", token=user["token"], json={"description": "Missed a spot"}), 201)
    ok(api.post(f"/jobs/{f.job_id}/messages", token=user["token"], json={"content": "Thanks!"}), 201)
    photo_msg = ok(api.post(f"/jobs/{f.job_id}/messages/photo", token=pro["token"],
                            files={"photo": ("p.png", png_bytes(31), "image/png")}), 201)
    open_job = post_job(api, user)
    images = ok(api.post(f"/jobs/{open_job['id']}/images", token=user["token"], files=image_files(1, seed=9)))["images"]
    addresses = ok(api.get("/users/me/addresses", token=user["token"]))
    addr = addresses[0] if addresses else ok(api.post("/users/me/addresses", token=user["token"],
                                                      json={"address": "1 Main", "zip": f.zip}), 201)[0]
    street = ok(api.post(f"/users/me/addresses/{addr['id']}/photos", token=user["token"],
                         files={"streetViewPhoto": ("s.png", png_bytes(32), "image/png")}))["streetViewPhoto"]
    ok(api.post("/users/me/support", token=user["token"],
                json={"subject": "Bye", "body": "Leaving", "category": "feedback"}))
    premium_with_a_favorite(api, user, pro)
    ok(api.post("/admin/notify", token=admin_token, json={"userId": user["id"], "role": "user", "title": "T",
                                                          "body": "B"}))
    photo_url = photo_msg["content"][len("[IMAGE]"):]
    urls = [photo_url, images[0], street] + get_job(api, pro["token"], f.job_id)["afterImages"]
    assert all(served(u) == 200 for u in urls)
    pro_notes_before = len(ok(api.get("/providers/me/notifications", token=pro["token"])))

    r = delete(api, admin_token, user["id"], "user")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert all(served(u) == 404 for u in urls), urls
    assert set(references(server, pg_cluster, user["id"]).values()) == {0}
    for table in ("quotes", "reviews", "messages", "payments", "job_reports", "recurring_requests"):
        assert count(server, pg_cluster, f"SELECT COUNT(*) FROM {table} WHERE job_id = '{f.job_id}'") == 0, table
    assert (api.get("/users/me", token=user["token"]).json()) == UNAUTHORIZED
    assert api.get(f"/jobs/{f.job_id}", token=pro["token"]).status_code == 404
    # the provider keeps its notifications about the job, without the link to it
    notes = ok(api.get("/providers/me/notifications", token=pro["token"]))
    assert len(notes) == pro_notes_before and all(n["jobId"] != f.job_id for n in notes)
    assert not any(u["id"] == user["id"] for u in ok(api.get("/admin/users", token=admin_token))["users"])
    assert delete(api, admin_token, user["id"], "user").status_code == 404


def premium_with_a_favorite(api, user, pro):
    """Makes user (with a saved card) premium, with pro as a favorite and a note about it."""
    ok(api.post("/payments/premium/subscribe", token=user["token"]))
    ok(api.post(f"/users/me/favorites/{pro['id']}", token=user["token"]))
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "Punctual"}))


def test_delete_provider_returns_its_jobs_to_pending(api, server, pg_cluster, admin_token):
    accepted = Flow(api).accepted()  # its card hold is voided
    user, pro = accepted.user, accepted.pro
    premium_with_a_favorite(api, user, pro)
    assert accepted.job["status"] == "ACCEPTED"
    done = post_job(api, user)
    accept(api, user, quote(api, pro, done["id"], 60)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS"):
        ok(api.patch(f"/jobs/{done['id']}/status", token=pro["token"], json={"status": status}))
    completed = ok(api.post(f"/jobs/{done['id']}/complete", token=pro["token"], files=image_files(1, seed=5)))
    ok(api.post("/reviews", token=user["token"], json={"jobId": done["id"], "rating": 2}), 201)
    quoted_only = post_job(api, user)
    quote(api, pro, quoted_only["id"], 70)
    ok(api.post(f"/jobs/{accepted.job_id}/messages", token=pro["token"], json={"content": "On my way soon"}), 201)
    logo = ok(api.post("/providers/me/logo", token=pro["token"],
                       files={"logo": ("l.png", png_bytes(41), "image/png")}))["logoUrl"]
    profile = ok(api.get("/providers/me", token=pro["token"]))
    urls = [logo, completed["afterImages"][0]] + profile["headshots"]
    assert all(served(u) == 200 for u in urls)
    hold = get_job(api, user["token"], accepted.job_id)["payment"]
    assert hold["status"] == "AUTHORIZED"

    r = delete(api, admin_token, pro["id"], "provider")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert all(served(u) == 404 for u in urls), urls
    assert set(references(server, pg_cluster, pro["id"]).values()) == {0}
    assert (api.get("/providers/me", token=pro["token"]).json()) == UNAUTHORIZED
    assert ok(api.get("/users/me/favorites", token=user["token"])) == []
    assert ok(api.get("/users/me/pro-notes", token=user["token"])) == {}
    for job_id in (accepted.job_id, done["id"], quoted_only["id"]):
        job = get_job(api, user["token"], job_id)
        assert (job["status"], job["providerId"], job["quotes"]) == ("PENDING", None, []), job_id
    # the payments moved to the jobs' history (issue 21): the paid one refunded, the hold voided
    job = get_job(api, user["token"], done["id"])
    assert job["afterImages"] == [] and job["payment"] is None
    assert get_job(api, user["token"], accepted.job_id)["payment"] is None

    def history(job_id):
        return sql(server, pg_cluster, f"SELECT status, refunded_cents, released_at FROM payments "
                                       f"WHERE job_id = '{job_id}' AND kind = 'job'")

    rows = eventually(lambda: history(done["id"]) + history(accepted.job_id), 20, "the paid job refunded, the hold voided",
                      until=lambda rows: [r[0] for r in rows] == ["REFUNDED", "CANCELED"])
    assert all(r[2] not in (None, "", "None") for r in rows)
    intent = sql(server, pg_cluster, f"SELECT data FROM processor_sim_objects WHERE id = "
                                     f"'{hold['processorPaymentIntentId']}'")
    assert '"status":"canceled"' in intent[0][0].replace(" ", "")
    # the job can be quoted, accepted and authorized afresh
    other = provider(api, [accepted.zip])
    q = quote(api, other, accepted.job_id, 95)
    accept(api, user, q["id"])
    assert get_job(api, user["token"], accepted.job_id)["payment"]["status"] == "AUTHORIZED"


# ---------------------------------------------------------------- generating data


@pytest.mark.parametrize("body, error", [
    ({"customers": -1}, "customers: must be between 0 and 1000"),
    ({"customers": 1001}, "customers: must be between 0 and 1000"),
    ({"customers": 1.5}, "customers: must be an integer"),
    ({"customers": "2"}, "customers: must be an integer"),
    ({"professionals": -1}, "professionals: must be between 0 and 1000"),
    ({"professionals": 1001}, "professionals: must be between 0 and 1000"),
    ({"requestsPerCustomer": -1}, "requestsPerCustomer: must be between 0 and 20"),
    ({"requestsPerCustomer": 21}, "requestsPerCustomer: must be between 0 and 20"),
    ({"customers": 5000, "professionals": -3}, "customers: must be between 0 and 1000"),
])
def test_generate_bounds(api, admin_token, body, error):
    r = api.post("/admin/generate", token=admin_token, json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))


def test_generate_makes_real_accounts_and_jobs(api, admin_token):
    r = api.post("/admin/generate", token=admin_token,
                 json={"customers": 2, "professionals": 2, "requestsPerCustomer": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["created"] == {"customers": 2, "professionals": 2, "jobs": 6}
    assert "password123" in body["note"]
    listed = ok(api.get("/admin/users", token=admin_token))
    customers = [u for u in listed["users"] if u["email"].startswith("gen-")][:2]
    pros = [p for p in listed["providers"] if p["email"].startswith("gen-")][:2]
    assert len(customers) == 2 and len(pros) == 2
    session = ok(api.post("/auth/login", json={"email": customers[0]["email"], "password": "password123"}))
    jobs = ok(api.get("/jobs", token=session["token"]))["jobs"]
    assert len(jobs) == 3 and {j["status"] for j in jobs} == {"PENDING"}
    assert all(j["zip"] == customers[0]["zip"] and j["lat"] is not None for j in jobs)
    pro_session = ok(api.post("/auth/provider/login", json={"email": pros[0]["email"], "password": "password123"}))
    assert ok(api.get("/providers/me", token=pro_session["token"]))["services"] == pros[0]["services"]


def test_generate_nothing_and_the_bounds_themselves(api, admin_token):
    assert ok(api.post("/admin/generate", token=admin_token, json={}))["created"] == \
        {"customers": 0, "professionals": 0, "jobs": 0}
    body = ok(api.post("/admin/generate", token=admin_token,
                       json={"customers": 1, "professionals": 0, "requestsPerCustomer": 20}))
    assert body["created"] == {"customers": 1, "professionals": 0, "jobs": 20}


# ---------------------------------------------------------------- banners


def test_notify_queues_a_banner_delivered_once(api, admin_token):
    for role in ("user", "provider"):
        acct = api.register_user() if role == "user" else api.register_provider()
        body = {"userId": acct["id"], "role": role, "title": "Storm", "body": "Plows out", "icon": "snow"}
        r = api.post("/admin/notify", token=admin_token, json=body)
        assert (r.status_code, r.json()) == (200, {"ok": True, "queued": {"userId": acct["id"], "role": role,
                                                                          "title": "Storm"}})
        poll = "/users/me/notification" if role == "user" else "/providers/me/notification"
        assert ok(api.get(poll, token=acct["token"])) == {"icon": "snow", "title": "Storm", "body": "Plows out"}
        assert ok(api.get(poll, token=acct["token"])) is None


@pytest.mark.parametrize("mutate, status, error", [
    (lambda b: b.pop("userId"), 400, "userId: is required"),
    (lambda b: b.pop("role"), 400, "role: is required"),
    (lambda b: b.update(role="staff"), 400, "role: must be one of: user, provider"),
    (lambda b: b.pop("title"), 400, "title: is required"),
    (lambda b: b.update(title="t" * 201), 400, "title: must be at most 200 characters"),
    (lambda b: b.update(body=""), 400, "body: must not be empty"),
    (lambda b: b.update(body="b" * 2001), 400, "body: must be at most 2000 characters"),
    (lambda b: b.update(icon="i" * 65), 400, "icon: must be at most 64 characters"),
    (lambda b: b.update(role="provider"), 404, "Account not found"),
    (lambda b: b.update(userId="cnotanidnotanidnotanid000"), 404, "Account not found"),
])
def test_notify_validates(api, admin_token, mutate, status, error):
    u = api.register_user()
    body = {"userId": u["id"], "role": "user", "title": "T", "body": "B"}
    mutate(body)
    r = api.post("/admin/notify", token=admin_token, json=body)
    assert (r.status_code, r.json()) == (status, error_body(status, error))
    assert ok(api.get("/users/me/notification", token=u["token"])) is None


# ---------------------------------------------------------------- production


@pytest.fixture(scope="module")
def production(make_server):
    return make_server(APP_ENV="production", JWT_SECRET="p" * 48, BCRYPT_COST="12", **ADMIN_ENV)


@pytest.mark.parametrize("method, path, body", ADMIN_ROUTES)
def test_godmode_is_absent_in_production(production, method, path, body):
    api = Api(production)
    for token in (None, forge(production, forged_claims(role="admin"))):
        r = api.request(method, path, json=body, token=token)
        assert (r.status_code, r.json()) == (404, NOT_FOUND), (path, token)


def test_staff_portal_stays_in_production(production):
    api = Api(production)
    r = api.post("/staff/login", json={"email": unique_email("s"), "password": "whatever-1"})
    assert (r.status_code, r.json()) == (401, error_body(401, "Invalid credentials", "invalid_credentials"))
    assert api.get("/staff/list").status_code == 401


def test_production_documents_only_what_it_serves(production, api):
    """The attack: production's /openapi.json and /docs listed GODMODE routes that answer 404 there."""
    doc = Api(production).get("/openapi.json").json()
    listed = [p for p in doc["paths"] if p.startswith("/admin") or p.startswith("/__test")]
    assert listed == [] and "/staff/impersonate-staff" not in doc["paths"]
    assert not any(op.get("x-dev-only") for item in doc["paths"].values() for op in item.values())
    assert {"AdminAccounts", "AdminSession", "Generated", "BannerQueued"}.isdisjoint(doc["components"]["schemas"])
    # the staff portal is served there, and documented
    assert "/staff/login" in doc["paths"] and "/staff/create" in doc["paths"]
    page = Api(production).get("/docs")
    assert page.status_code == 200 and 'spec-url="/openapi.json"' in page.text
    # outside production the same binary documents GODMODE
    dev = api.get("/openapi.json").json()
    assert "/admin/users" in dev["paths"] and "/staff/impersonate-staff" in dev["paths"]


def test_production_without_audit_key_warns(production):
    """Production derives the audit chain's key from JWT_SECRET when AUDIT_KEY is unset, and says
    that a key of its own, kept off the database host, is better (docs/operations.md)."""
    warned = production.wait_log(lambda x: "AUDIT_KEY is unset" in x.get("msg", ""))
    assert warned[0]["level"] == "warn" and "docs/operations.md" in warned[0]["msg"]
