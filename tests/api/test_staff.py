"""Staff portal: staff accounts and login, the staff guard, customer and provider look-ups (with
the provider's ledger), the elevation flow (request, emailed approve/deny links, impersonation,
deactivation, the 15-minute window) and the audit trail (redaction, sessions, the hash chain
checked by `marketplace audit verify`).

Spec: marketplace-api.md 2 (Staff, ElevationRequest, AuditEvent), 3 (Elevation status), 4 (Staff
/staff), 5 (Staff authentication, Elevation flow), 7; decisions.md 3, 4 (signed single-use
approval links, redaction). Staff members are created through POST /staff/create with the
administrator's token. Tests that move the clock or tamper with the database run on servers of
their own.
"""
import datetime
import sqlite3
import subprocess

import pytest

from conftest import ADMIN_ENV, Api, admin_login, unique_email, unique_ip
from helpers import bcrypt_runs, error_body
from flow_helpers import ISO_RE, JOB_FIELDS, Flow, accept, customer, image_files, ok, post_job, quote, race, step
from staff_helpers import (
    AUDIT_COLUMNS, ELEVATION_FIELDS, FORBIDDEN, STAFF_FIELDS, STAFF_ROLES, UNAUTHORIZED, approved_elevation,
    audit_rows, audit_verify, checkpoints, claims, count, database_before, derived_audit_key, elevation_links, forge,
    forged_claims, impersonate, keyed_hash, link_get, make_staff, plain_hash, request_elevation, rewrite_chain, sql,
    sql_at,
)

MINUTE_MS = 60 * 1000
INVALID_CREDENTIALS = error_body(401, "Invalid credentials", "invalid_credentials")


@pytest.fixture
def staff_of(api, admin_token):
    """staff_of(role) -> a new staff member of that role."""
    return lambda role, **kw: make_staff(api, role, admin_token, **kw)


@pytest.fixture(scope="module")
def own_server(make_server):
    """A server whose clock the tests of this file may move."""
    return make_server(**ADMIN_ENV)


# ---------------------------------------------------------------- staff accounts


def test_create_staff_answers_201_without_password(api, admin_token):
    email = unique_email("new-staff")
    r = api.post("/staff/create", token=admin_token,
                 json={"name": "Nora Agent", "email": email.upper(), "password": "password123",
                       "role": "customer_support"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == STAFF_FIELDS
    assert body["name"] == "Nora Agent" and body["email"] == email and body["role"] == "customer_support"
    assert ISO_RE.match(body["createdAt"])
    assert "password" not in r.text and "$2" not in r.text


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b.pop("name"), "name: is required"),
    (lambda b: b.update(name=""), "name: must not be empty"),
    (lambda b: b.update(name="n" * 101), "name: must be at most 100 characters"),
    (lambda b: b.pop("email"), "email: is required"),
    (lambda b: b.update(email="not-an-email"), "email: must be a valid email"),
    (lambda b: b.pop("password"), "password: is required"),
    (lambda b: b.update(password="short77"), "password: must be at least 8 characters"),
    (lambda b: b.update(password="p" * 73), "password: must be at most 72 characters"),
    (lambda b: b.pop("role"), "role: is required"),
    (lambda b: b.update(role="admin"),
     "role: must be one of: customer_support, professional_support, technical_support, internal_audit"),
])
def test_create_staff_validates_each_field(api, admin_token, mutate, error):
    body = {"name": "X", "email": unique_email("bad"), "password": "password123", "role": "internal_audit"}
    mutate(body)
    r = api.post("/staff/create", token=admin_token, json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))


def test_create_staff_reports_fields_in_spec_order(api, admin_token):
    r = api.post("/staff/create", token=admin_token, json={"role": "nope", "password": "x"})
    assert (r.status_code, r.json()) == (400, error_body(400, "name: is required"))
    r = api.post("/staff/create", token=admin_token, json={"name": "A", "role": "nope", "password": "x"})
    assert r.json() == error_body(400, "email: is required")


def test_create_staff_bounds_are_accepted(api, admin_token):
    r = api.post("/staff/create", token=admin_token,
                 json={"name": "n" * 100, "email": unique_email("b"), "password": "p" * 72, "role": "internal_audit"})
    assert r.status_code == 201, r.text


def test_create_staff_email_taken_is_409(api, admin_token, staff_of):
    s = staff_of("technical_support")
    r = api.post("/staff/create", token=admin_token,
                 json={"name": "Twin", "email": s["email"].upper(), "password": "password123",
                       "role": "internal_audit"})
    assert (r.status_code, r.json()) == (409, error_body(409, "Email already registered", "email_taken"))


def test_list_staff_newest_first_without_secrets(api, admin_token, staff_of):
    a, b = staff_of("internal_audit"), staff_of("technical_support")
    r = api.get("/staff/list", token=admin_token)
    assert r.status_code == 200
    listed = r.json()
    assert all(set(s) == STAFF_FIELDS for s in listed)
    ids = [s["id"] for s in listed]
    assert ids.index(b["id"]) < ids.index(a["id"])
    assert "password" not in r.text and "$2" not in r.text


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/staff/list", None),
    ("POST", "/staff/create", {"name": "X", "email": "x@example.com", "password": "password123",
                               "role": "internal_audit"}),
])
def test_staff_management_is_for_administrators(api, staff_of, method, path, body):
    r = api.request(method, path, json=body)
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    for token in [api.register_user()["token"], api.register_provider()["token"]] + \
            [staff_of(role)["token"] for role in STAFF_ROLES]:
        r = api.request(method, path, json=body, token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN), token


# ---------------------------------------------------------------- login and the staff guard


def test_staff_login_returns_a_12_hour_staff_token(api, staff_of):
    s = staff_of("professional_support", name="Pat Pro")
    r = api.post("/staff/login", json={"email": s["email"].upper(), "password": s["password"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["staff"] == {"id": s["id"], "name": "Pat Pro", "email": s["email"], "role": "professional_support"}
    c = claims(body["token"])
    assert c["id"] == s["id"] and c["role"] == "professional_support" and c["type"] == "staff"
    assert c["exp"] - c["iat"] == 12 * 3600
    assert "elevationId" not in c


def test_staff_login_refuses_unknown_email_and_wrong_password_alike(api, staff_of):
    s = staff_of("internal_audit")
    wrong = api.post("/staff/login", json={"email": s["email"], "password": "not-the-password"})
    unknown = api.post("/staff/login", json={"email": unique_email("ghost"), "password": s["password"]})
    assert (wrong.status_code, wrong.json()) == (401, INVALID_CREDENTIALS)
    assert (unknown.status_code, unknown.json()) == (401, INVALID_CREDENTIALS)
    # a customer's credentials are not a staff member's
    u = api.register_user()
    r = api.post("/staff/login", json={"email": u["email"], "password": u["password"]})
    assert (r.status_code, r.json()) == (401, INVALID_CREDENTIALS)


def test_staff_login_is_throttled_per_account_and_address(api, staff_of):
    s = staff_of("technical_support")
    ip, other_ip = unique_ip(), unique_ip()
    for _ in range(10):
        r = api.post("/staff/login", json={"email": s["email"], "password": "wrong-password"}, ip=ip)
        assert (r.status_code, r.json()) == (401, INVALID_CREDENTIALS)
    r = api.post("/staff/login", json={"email": s["email"], "password": s["password"]}, ip=ip)
    assert (r.status_code, r.json()) == (429, error_body(429, "Too many requests"))
    assert 0 < int(r.headers["Retry-After"]) <= 15 * 60
    # another address, and another account from the same address, are not held back
    assert api.post("/staff/login", json={"email": s["email"], "password": s["password"]}, ip=other_ip).status_code == 200
    other = staff_of("technical_support")
    assert api.post("/staff/login", json={"email": other["email"], "password": other["password"]},
                    ip=ip).status_code == 200


def test_staff_login_of_an_unknown_email_costs_one_bcrypt_check_like_a_wrong_password(api, admin_token):
    """An unknown email must not answer faster than a wrong password (that would reveal which
    emails are staff): each costs exactly one bcrypt check at the configured cost, the unknown
    one against a dummy hash, as test_auth.py's customer and provider logins. Counted, not timed:
    timed, it failed on a CI run whose four API passes kept two cores busy through all six of
    its rounds."""
    s, ip = make_staff(api, "internal_audit", admin_token), unique_ip()
    for email, password in ((unique_email("ghost"), "password123"), (s["email"], "wrong-password")):
        before = bcrypt_runs(api)
        r = api.post("/staff/login", json={"email": email, "password": password}, ip=ip)
        assert (r.status_code, r.json()) == (401, INVALID_CREDENTIALS)
        assert bcrypt_runs(api) - before == 1, email
    before = bcrypt_runs(api)
    assert api.post("/staff/login", json={"email": s["email"], "password": s["password"]}, ip=ip).status_code == 200
    assert bcrypt_runs(api) - before == 1


@pytest.mark.parametrize("body, error", [
    ({"password": "x"}, "email: is required"),
    ({"email": "nope", "password": "x"}, "email: must be a valid email"),
    ({"email": "a@example.com"}, "password: is required"),
    ({"email": "a@example.com", "password": ""}, "password: must not be empty"),
])
def test_staff_login_validates(api, body, error):
    r = api.post("/staff/login", json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))


@pytest.mark.parametrize("role", STAFF_ROLES)
def test_staff_me_for_every_role(api, staff_of, role):
    s = staff_of(role)
    r = api.get("/staff/me", token=s["token"])
    assert r.status_code == 200
    assert r.json() == {k: s[k] for k in STAFF_FIELDS}


def test_staff_routes_refuse_non_staff_tokens(api, admin_token):
    assert api.get("/staff/me").status_code == 401
    for token in (api.register_user()["token"], api.register_provider()["token"], admin_token):
        for path in ("/staff/me", "/staff/elevation", "/staff/customers", "/staff/providers", "/staff/tickets",
                     "/staff/audit/sessions"):
            r = api.get(path, token=token)
            assert (r.status_code, r.json()) == (403, FORBIDDEN), path


def test_staff_token_on_customer_and_provider_routes_is_403(api, staff_of):
    s = staff_of("customer_support")
    for path in ("/users/me", "/providers/me", "/jobs", "/payments/method"):
        r = api.get(path, token=s["token"])
        assert (r.status_code, r.json()) == (403, FORBIDDEN), path


def test_forged_staff_tokens_are_refused(api, server, staff_of):
    s = staff_of("customer_support")
    cases = [
        (forged_claims(role="customer_support", type="staff"), 401),  # no such staff member
        (forged_claims(id=s["id"], role="internal_audit", type="staff"), 401),  # not the member's role
        (forged_claims(id=s["id"], role="admin", type="staff"), 403),  # not a staff role at all
    ]
    for payload, status in cases:
        r = api.get("/staff/me", token=forge(server, payload))
        assert r.status_code == status, payload
    # the genuine token works, and the same claims signed again work too
    assert api.get("/staff/me", token=s["token"]).status_code == 200
    assert api.get("/staff/me", token=forge(server, claims(s["token"]))).status_code == 200
    # a forged administrator without an administrator row
    r = api.get("/staff/list", token=forge(server, forged_claims(role="admin")))
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)


def test_staff_token_expires_after_12_hours(own_server):
    api = Api(own_server)
    s = make_staff(api, "technical_support")
    api.advance_clock(12 * 3600 * 1000 - 5000)
    assert api.get("/staff/me", token=s["token"]).status_code == 200
    api.advance_clock(6000)
    r = api.get("/staff/me", token=s["token"])
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)


ANY_STAFF = set(STAFF_ROLES)
SUPPORT_AGENTS = {"customer_support", "professional_support"}
ROLE_MATRIX = [  # every staff, admin and support route, who may call it, and what they get here
    ("GET", "/staff/me", None, ANY_STAFF, 200),
    ("GET", "/staff/customers", None, {"customer_support"}, 200),
    ("GET", "/staff/customers/cnotanidnotanidnotanid000", None, {"customer_support"}, 404),
    ("GET", "/staff/providers", None, {"professional_support"}, 200),
    ("GET", "/staff/providers/cnotanidnotanidnotanid000", None, {"professional_support"}, 404),
    ("POST", "/staff/elevation", {"targetId": "cnotanidnotanidnotanid000", "targetRole": "user", "reason": "r"},
     SUPPORT_AGENTS, 404),
    ("GET", "/staff/elevation", None, ANY_STAFF, 200),
    ("POST", "/staff/impersonate", {"elevationId": "cnotanidnotanidnotanid000"}, SUPPORT_AGENTS, 404),
    ("PATCH", "/staff/elevation/cnotanidnotanidnotanid000/deactivate", None, ANY_STAFF, 404),
    ("GET", "/staff/tickets", None, {"technical_support"}, 200),
    ("PATCH", "/staff/tickets/cnotanidnotanidnotanid000", {}, {"technical_support"}, 404),
    ("GET", "/staff/audit/sessions", None, {"internal_audit"}, 200),
    ("GET", "/staff/list", None, {"admin"}, 200),
    ("POST", "/staff/create", {}, {"admin"}, 400),
    ("POST", "/staff/impersonate-staff", {"staffId": "cnotanidnotanidnotanid000"}, {"admin"}, 404),
    ("GET", "/admin/users", None, {"admin"}, 200),
    ("POST", "/admin/impersonate", {}, {"admin"}, 400),
    ("DELETE", "/admin/accounts/cnotanidnotanidnotanid000?role=user", None, {"admin"}, 404),
    ("POST", "/admin/generate", {"customers": -1}, {"admin"}, 400),
    ("POST", "/admin/notify", {}, {"admin"}, 400),
    ("POST", "/users/me/support", {}, {"user"}, 400),
    ("POST", "/providers/me/support", {}, {"provider"}, 400),
]


def test_role_matrix(api, server, admin_token):
    """Each route refuses every other role (403), no token and a forged staff token (401), and
    lets its own roles through to its checks: the status each row names (a list, a validation
    400 or the 404 of an id that does not exist)."""
    tokens = {role: make_staff(api, role, admin_token)["token"] for role in STAFF_ROLES}
    tokens.update(admin=admin_token, user=api.register_user()["token"], provider=api.register_provider()["token"])
    forged = forge(server, forged_claims(role="customer_support", type="staff"))
    for method, path, body, allowed, status in ROLE_MATRIX:
        assert (api.request(method, path, json=body).json()) == UNAUTHORIZED, path
        r = api.request(method, path, json=body, token=forged)
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED), path
        for role, token in tokens.items():
            r = api.request(method, path, json=body, token=token)
            if role in allowed:
                assert r.status_code == status, (path, role, r.status_code, r.text)
            else:
                assert (r.status_code, r.json()) == (403, FORBIDDEN), (path, role)


def test_expired_tokens_are_refused_everywhere(own_server):
    api = Api(own_server)
    admin = admin_login(api)
    tokens = {role: make_staff(api, role, admin)["token"] for role in STAFF_ROLES}
    tokens.update(admin=admin, user=api.register_user()["token"], provider=api.register_provider()["token"])
    api.advance_clock(7 * 24 * 3600 * 1000 + 1000)  # past the longest of them (7 days)
    for method, path, body, allowed, _ in ROLE_MATRIX:
        for role in allowed:
            r = api.request(method, path, json=body, token=tokens[role])
            assert (r.status_code, r.json()) == (401, UNAUTHORIZED), (path, role)


# ---------------------------------------------------------------- customer and provider look-ups

CUSTOMER_ROW = {"id", "name", "email", "address", "zip", "createdAt", "processorCustomerId"}
PROVIDER_ROW = {"id", "name", "email", "companyName", "services", "serviceZips", "isPremium", "premiumSince",
                "premiumBilledMonth", "createdAt"}


def search(api, token, path, q):
    r = api.get(path, token=token, params={"q": q})
    assert r.status_code == 200, r.text
    return r.json()


def test_customer_search_fields_and_substring(api, staff_of):
    cs = staff_of("customer_support")
    tag = unique_email("x")[2:10]
    u = api.register_user(name=f"Quinn {tag} Harper")
    found = search(api, cs["token"], "/staff/customers", tag.upper())
    assert [c["id"] for c in found] == [u["id"]]
    assert set(found[0]) == CUSTOMER_ROW
    assert found[0]["email"] == u["email"] and found[0]["processorCustomerId"] is None
    # by email, case-insensitively
    assert [c["id"] for c in search(api, cs["token"], "/staff/customers", u["email"].upper())] == [u["id"]]


def test_search_matches_metacharacters_literally(api, staff_of):
    cs = staff_of("customer_support")
    tag = unique_email("m")[2:10]
    names = {
        "pct": f"{tag} 100% Lawn",
        "plain": f"{tag} 1000 Lawn",
        "under": f"{tag} a_b",
        "nounder": f"{tag} axb",
        "slash": f"{tag} back\\slash",
        "quote": f"{tag} O'Brien",
        "dquote": f'{tag} say "hi"',
    }
    ids = {k: api.register_user(name=v)["id"] for k, v in names.items()}

    def hits(q):
        return {c["id"] for c in search(api, cs["token"], "/staff/customers", q)}

    assert hits(f"{tag} 100%") == {ids["pct"]}
    assert hits(f"{tag} a_b") == {ids["under"]}
    assert hits("_b") >= {ids["under"]} and ids["nounder"] not in hits(f"{tag} a_")
    assert hits(f"{tag} back\\slash") == {ids["slash"]}
    assert hits(f"{tag} O'Brien") == {ids["quote"]}
    assert hits(f'{tag} say "hi"') == {ids["dquote"]}
    assert hits("%") >= {ids["pct"]} and ids["plain"] not in hits("%")
    # SQL in the search text is text
    assert hits(f"{tag}' OR '1'='1") == set()
    assert hits("'; DROP TABLE users; --") == set()
    assert api.get("/users/me", token=api.register_user()["token"]).status_code == 200


def test_search_is_capped_at_100_newest_first(api, admin_token, staff_of):
    cs = staff_of("customer_support")
    r = api.post("/admin/generate", token=admin_token, json={"customers": 101})
    assert r.status_code == 200, r.text
    found = search(api, cs["token"], "/staff/customers", "generated customer")
    assert len(found) == 100
    created = [c["createdAt"] for c in found]
    assert created == sorted(created, reverse=True)


def test_search_bounds(api, staff_of):
    cs = staff_of("customer_support")
    assert api.get("/staff/customers", token=cs["token"], params={"q": "q" * 100}).status_code == 200
    r = api.get("/staff/customers", token=cs["token"], params={"q": "q" * 101})
    assert (r.status_code, r.json()) == (400, error_body(400, "q: must be at most 100 characters"))
    assert api.get("/staff/customers", token=cs["token"]).status_code == 200


def test_provider_search_matches_company_name(api, staff_of):
    ps = staff_of("professional_support")
    tag = unique_email("c")[2:10]
    pro = api.register_provider(name="Plain Name")
    ok(api.patch("/providers/me", token=pro["token"], json={"companyName": f"Green {tag} Lawns LLC"}))
    found = search(api, ps["token"], "/staff/providers", f"{tag} LAWNS")
    assert [p["id"] for p in found] == [pro["id"]]
    assert set(found[0]) == PROVIDER_ROW
    assert found[0]["services"] == ["lawncare"] and found[0]["serviceZips"] == ["10001"]
    assert found[0]["companyName"] == f"Green {tag} Lawns LLC" and found[0]["isPremium"] is False
    assert [p["id"] for p in search(api, ps["token"], "/staff/providers", pro["email"])] == [pro["id"]]


@pytest.mark.parametrize("path, allowed", [
    ("/staff/customers", "customer_support"),
    ("/staff/customers/cnotanidnotanidnotanid000", "customer_support"),
    ("/staff/providers", "professional_support"),
    ("/staff/providers/cnotanidnotanidnotanid000", "professional_support"),
    ("/staff/audit/sessions", "internal_audit"),
])
def test_look_ups_admit_only_their_staff_role(api, staff_of, path, allowed):
    for role in STAFF_ROLES:
        r = api.get(path, token=staff_of(role)["token"])
        if role == allowed:  # a list answers 200, an unknown account 404
            assert r.status_code == (404 if path.endswith("cnotanidnotanidnotanid000") else 200), r.text
        else:
            assert (r.status_code, r.json()) == (403, FORBIDDEN), role
    assert api.get(path).status_code == 401


def test_unknown_customer_and_provider_are_404(api, staff_of):
    cs, ps = staff_of("customer_support"), staff_of("professional_support")
    r = api.get("/staff/customers/cnotanidnotanidnotanid000", token=cs["token"])
    assert (r.status_code, r.json()) == (404, error_body(404, "Customer not found"))
    # a provider's id is not a customer's
    pro = api.register_provider()
    assert api.get(f"/staff/customers/{pro['id']}", token=cs["token"]).status_code == 404
    r = api.get("/staff/providers/cnotanidnotanidnotanid000", token=ps["token"])
    assert (r.status_code, r.json()) == (404, error_body(404, "Provider not found"))


def test_customer_detail_has_jobs_quotes_review_payments_elevations(api, server, staff_of):
    cs = staff_of("customer_support")
    f = Flow(api).completed()
    ok(api.post("/reviews", token=f.user["token"], json={"jobId": f.job_id, "rating": 5, "comment": "Great"}), 201)
    open_job = post_job(api, f.user)
    e = request_elevation(api, cs, f.user["id"])
    r = api.get(f"/staff/customers/{f.user['id']}", token=cs["token"])
    assert r.status_code == 200, r.text
    d = r.json()
    assert set(d) == {"user", "jobs", "payments", "elevations"}
    assert d["user"]["id"] == f.user["id"] and d["user"]["email"] == f.user["email"]
    assert d["user"]["processorCustomerId"].startswith("cus_")
    assert "password" not in r.text and "passwordHash" not in d["user"]
    assert [j["id"] for j in d["jobs"]] == [open_job["id"], f.job_id]
    done = d["jobs"][1]
    assert JOB_FIELDS <= set(done) and done["status"] == "COMPLETED"
    assert [q["id"] for q in done["quotes"]] == [f.quote["id"]]
    assert done["review"]["rating"] == 5 and done["review"]["comment"] == "Great"
    assert done["payment"]["status"] == "PAID" and d["jobs"][0]["payment"] is None
    assert d["jobs"][0]["quotes"] == [] and d["jobs"][0]["review"] is None
    assert [(p["jobId"], p["kind"], p["status"], p["amount"]) for p in d["payments"]] == \
        [(f.job_id, "job", "PAID", 118.0)]
    assert [x["id"] for x in d["elevations"]] == [e["id"]]
    assert set(d["elevations"][0]) == ELEVATION_FIELDS


def test_provider_detail_ledger(api, server, pg_cluster, staff_of):
    """The ledger's figures are sums of recorded movements (issue 22): the completed job and its
    tip were captured and are transfers not paid yet (inHold: the report window runs, and the
    provider has no payout account); the accepted job's authorization and the completed job
    whose capture is not done are pendingCapture. test_payouts.py follows them to paidOut."""
    ps = staff_of("professional_support")
    paid = Flow(api, amount=100).completed()
    user, pro = paid.user, paid.pro
    ok(api.post(f"/jobs/{paid.job_id}/tip", token=user["token"], json={"amount": 5}))
    held = post_job(api, user)  # accepted only: its authorization is a hold
    accept(api, user, quote(api, pro, held["id"], 80)["id"])
    waiting = post_job(api, user)  # completed, its capture not done yet (so no transfer either)
    accept(api, user, quote(api, pro, waiting["id"], 50)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, pro, waiting["id"], status)
    sql(server, pg_cluster, f"UPDATE payments SET status = 'AUTHORIZED' WHERE job_id = '{waiting['id']}'")
    sql(server, pg_cluster, f"DELETE FROM payout_transfers WHERE job_id = '{waiting['id']}'")
    r = api.get(f"/staff/providers/{pro['id']}", token=ps["token"])
    assert r.status_code == 200, r.text
    d = r.json()
    assert set(d) == {"provider", "jobs", "ledger", "anticipatedJobs", "anticipatedTotal", "balance", "elevations"}
    assert d["balance"] == 0
    assert d["provider"]["id"] == pro["id"] and d["provider"]["isPremium"] is False
    by_id = {j["id"]: j for j in d["jobs"]}
    assert set(by_id) == {paid.job_id, held["id"], waiting["id"]}
    assert by_id[paid.job_id]["payment"]["status"] == "PAID"
    assert by_id[held["id"]]["payment"]["status"] == "AUTHORIZED"
    assert [q["amount"] for q in by_id[held["id"]]["quotes"]] == [80.0]
    assert by_id[paid.job_id]["review"] is None
    assert len(d["ledger"]) == 1  # everything happened this month
    month = d["ledger"][0]
    assert month == {"month": paid.job["updatedAt"][:7], "jobs": 3, "paidOut": 0, "inHold": 105.0,
                     "pendingCapture": 130.0, "grossEarnings": 235.0, "premiumFeeDeducted": 0, "netEarnings": 235.0,
                     "netted": 0}
    assert (d["anticipatedJobs"], d["anticipatedTotal"]) == (1, 80.0)
    # Preferred Pro since now: the 39 fee comes off this month
    now_ms = int(datetime.datetime.fromisoformat(api.advance_clock(0).replace("Z", "+00:00")).timestamp() * 1000)
    sql(server, pg_cluster, f"UPDATE providers SET is_premium = 1, premium_since = {now_ms} WHERE id = '{pro['id']}'")
    month = ok(api.get(f"/staff/providers/{pro['id']}", token=ps["token"]))["ledger"][0]
    assert (month["premiumFeeDeducted"], month["netEarnings"]) == (39.0, 196.0)


def test_new_provider_has_an_empty_ledger(api, staff_of):
    ps = staff_of("professional_support")
    pro = api.register_provider()
    d = ok(api.get(f"/staff/providers/{pro['id']}", token=ps["token"]))
    assert (d["jobs"], d["ledger"], d["anticipatedJobs"], d["anticipatedTotal"], d["elevations"]) == \
        ([], [], 0, 0, [])


# ---------------------------------------------------------------- elevation requests


def test_elevation_request_is_pending_and_emails_signed_links(api, server, staff_of):
    cs = staff_of("customer_support", name="Carla Support")
    u = api.register_user(name="Ursula Target")
    r = api.post("/staff/elevation", token=cs["token"],
                 json={"targetId": u["id"], "targetRole": "user", "reason": "Card trouble"})
    assert r.status_code == 201, r.text
    e = r.json()
    assert set(e) == ELEVATION_FIELDS
    assert (e["staffId"], e["targetId"], e["targetRole"], e["reason"], e["status"]) == \
        (cs["id"], u["id"], "user", "Card trouble", "PENDING")
    assert e["staff"] == {"id": cs["id"], "name": "Carla Support", "email": cs["email"], "role": "customer_support"}
    assert e["activatedAt"] is None and e["expiresAt"] is None and ISO_RE.match(e["createdAt"])
    approve, deny = elevation_links(server, e["id"])
    mail = [m for m in server.mails("admin@localhost") if e["id"] in m["body"]][0]
    assert "Carla Support" in mail["body"] and "Ursula Target" in mail["body"] and "Card trouble" in mail["body"]
    assert approve.split("?token=")[1] != deny.split("?token=")[1]


def test_the_eleventh_elevation_request_in_an_hour_is_429(api, server, staff_of):
    """The attack: every request emails the administrator, and none was limited."""
    cs, other = staff_of("customer_support"), staff_of("customer_support")
    targets = [api.register_user()["id"] for _ in range(11)]
    made = [request_elevation(api, cs, t) for t in targets[:10]]
    r = api.post("/staff/elevation", token=cs["token"], json={"targetId": targets[10], "targetRole": "user",
                                                               "reason": "one more"})
    assert (r.status_code, r.json()) == (429, error_body(429, "Too many requests"))
    assert 3500 < int(r.headers["Retry-After"]) <= 3600
    assert len(ok(api.get("/staff/elevation", token=cs["token"]))) == 10
    for e in made:
        elevation_links(server, e["id"])  # each of the ten emailed its links
    request_elevation(api, other, targets[10])  # per staff member


def test_professional_support_may_request_a_provider(api, staff_of):
    ps = staff_of("professional_support")
    pro = api.register_provider()
    assert request_elevation(api, ps, pro["id"], "provider")["targetRole"] == "provider"


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b.pop("targetId"), "targetId: is required"),
    (lambda b: b.update(targetId=""), "targetId: must not be empty"),
    (lambda b: b.pop("targetRole"), "targetRole: is required"),
    (lambda b: b.update(targetRole="admin"), "targetRole: must be one of: user, provider"),
    (lambda b: b.pop("reason"), "reason: is required"),
    (lambda b: b.update(reason="   "), "reason: must not be empty"),
    (lambda b: b.update(reason="r" * 1001), "reason: must be at most 1000 characters"),
])
def test_elevation_request_validates(api, staff_of, mutate, error):
    cs = staff_of("customer_support")
    body = {"targetId": api.register_user()["id"], "targetRole": "user", "reason": "Help"}
    mutate(body)
    r = api.post("/staff/elevation", token=cs["token"], json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))
    assert ok(api.get("/staff/elevation", token=cs["token"])) == []


def test_elevation_request_for_a_missing_account_is_404(api, staff_of):
    cs = staff_of("customer_support")
    u = api.register_user()
    for target, role in (("cnotanidnotanidnotanid000", "user"), (u["id"], "provider")):
        r = api.post("/staff/elevation", token=cs["token"], json={"targetId": target, "targetRole": role,
                                                                   "reason": "Help"})
        assert (r.status_code, r.json()) == (404, error_body(404, "Account not found"))


def test_elevation_request_roles(api, admin_token, staff_of):
    u = api.register_user()
    body = {"targetId": u["id"], "targetRole": "user", "reason": "Help"}
    assert api.post("/staff/elevation", json=body).status_code == 401
    for token in [staff_of("technical_support")["token"], staff_of("internal_audit")["token"], admin_token,
                  u["token"], api.register_provider()["token"]]:
        r = api.post("/staff/elevation", token=token, json=body)
        assert (r.status_code, r.json()) == (403, FORBIDDEN)


def test_second_open_elevation_for_the_same_target_is_409(api, server, staff_of):
    cs, other = staff_of("customer_support"), staff_of("customer_support")
    u = api.register_user()
    conflict = error_body(409, "An elevation request for this account is already pending, approved or active")
    e = request_elevation(api, cs, u["id"])
    for status in ("PENDING", "APPROVED", "ACTIVE"):
        assert ok(api.get("/staff/elevation", token=cs["token"]))[0]["status"] == status
        r = api.post("/staff/elevation", token=cs["token"], json={"targetId": u["id"], "targetRole": "user",
                                                                   "reason": "Again"})
        assert (r.status_code, r.json()) == (409, conflict)
        if status == "PENDING":
            assert link_get(api, elevation_links(server, e["id"])[0]).status_code == 200
        elif status == "APPROVED":
            ok(api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]}))
    # another staff member may ask for the same account
    request_elevation(api, other, u["id"])
    # once the first is deactivated, its owner may ask again
    ok(api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"]))
    request_elevation(api, cs, u["id"])


def test_concurrent_elevation_requests_make_one(api, server, staff_of):
    cs = staff_of("customer_support")
    u = api.register_user()
    body = {"targetId": u["id"], "targetRole": "user", "reason": "Race"}
    answers = race(server, [lambda c: c.post("/staff/elevation", token=cs["token"], json=body)] * 8)
    assert sorted(r.status_code for r in answers) == [201] + [409] * 7
    assert [e["status"] for e in ok(api.get("/staff/elevation", token=cs["token"]))] == ["PENDING"]


def test_own_elevations_newest_first(api, staff_of):
    cs, other = staff_of("customer_support"), staff_of("customer_support")
    first = request_elevation(api, cs, api.register_user()["id"])
    second = request_elevation(api, cs, api.register_user()["id"])
    request_elevation(api, other, api.register_user()["id"])
    assert [e["id"] for e in ok(api.get("/staff/elevation", token=cs["token"]))] == [second["id"], first["id"]]
    assert ok(api.get("/staff/elevation", token=staff_of("internal_audit")["token"])) == []


# ---------------------------------------------------------------- the administrator's links


def test_approve_link_shows_an_escaped_page_and_works_once(api, server, staff_of):
    cs = staff_of("customer_support", name="Eve <b>Agent</b>")
    u = api.register_user(name="Tom & \"Jerry\"")
    e = request_elevation(api, cs, u["id"], reason="<script>alert('x')</script> needs help")
    approve, deny = elevation_links(server, e["id"])
    r = link_get(api, approve)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    page = r.text
    assert "<script>" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; needs help" in page
    assert "Eve &lt;b&gt;Agent&lt;/b&gt;" in page and "Tom &amp; &quot;Jerry&quot;" in page
    assert "APPROVED" in page
    again = link_get(api, approve)
    assert again.status_code == 200 and again.headers["Content-Type"].startswith("text/plain")
    assert "already resolved" in again.text and "APPROVED" in again.text
    assert ok(api.get("/staff/elevation", token=cs["token"]))[0]["status"] == "APPROVED"
    # the deny link ends an approved elevation (issue 20): it is never started
    late_deny = link_get(api, deny)
    assert late_deny.status_code == 200 and late_deny.headers["Content-Type"].startswith("text/html")
    assert "Elevation ended" in late_deny.text and "DEACTIVATED" in late_deny.text
    got = ok(api.get("/staff/elevation", token=cs["token"]))[0]
    assert got["status"] == "DEACTIVATED" and ISO_RE.match(got["deactivatedAt"]) and got["activatedAt"] is None
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Elevation request is not approved"))
    for link in (approve, deny):
        r = link_get(api, link)
        assert r.headers["Content-Type"].startswith("text/plain") and "already resolved: it is DEACTIVATED" in r.text


def test_deny_link_rejects(api, server, staff_of):
    cs = staff_of("customer_support")
    e = request_elevation(api, cs, api.register_user()["id"])
    _, deny = elevation_links(server, e["id"])
    r = link_get(api, deny)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html") and "REJECTED" in r.text
    got = ok(api.get("/staff/elevation", token=cs["token"]))[0]
    assert got["status"] == "REJECTED" and ISO_RE.match(got["resolvedAt"])
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Elevation request is not approved"))


def test_links_need_their_own_valid_token(api, server, staff_of):
    cs = staff_of("customer_support")
    e = request_elevation(api, cs, api.register_user()["id"])
    other = request_elevation(api, cs, api.register_user()["id"])
    approve, deny = elevation_links(server, e["id"])
    other_approve, _ = elevation_links(server, other["id"])
    base = approve.split("?")[0]
    bad = [
        base,  # no token
        base + "?token=",
        base + "?token=" + "0" * 64,  # forged
        base + "?token=" + deny.split("?token=")[1],  # the deny link's token
        base + "?token=" + other_approve.split("?token=")[1],  # another request's token
        base + "?token=" + approve.split("?token=")[1][:-1] + ("1" if approve.endswith("0") else "0"),
    ]
    for url in bad:
        r = link_get(api, url)
        assert (r.status_code, r.json()) == (403, error_body(403, "Invalid or missing link token")), url
    assert ok(api.get("/staff/elevation", token=cs["token"]))[1]["status"] == "PENDING"
    # an unknown request is 404 whatever the token
    r = link_get(api, server.url + "/staff/elevation/cnotanidnotanidnotanid000/approve?token=" + "0" * 64)
    assert (r.status_code, r.json()) == (404, error_body(404, "Elevation request not found"))
    r = link_get(api, server.url + "/staff/elevation/cnotanidnotanidnotanid000/deny")
    assert r.status_code == 404


def test_concurrent_link_uses_resolve_once(api, server, staff_of):
    cs = staff_of("customer_support")
    e = request_elevation(api, cs, api.register_user()["id"])
    approve, deny = elevation_links(server, e["id"])
    answers = race(server, [lambda c: link_get(c, approve), lambda c: link_get(c, deny)] * 3)
    pages = [r for r in answers if r.headers["Content-Type"].startswith("text/html")]
    resolved = [r for r in pages if "Elevation approved" in r.text or "Elevation denied" in r.text]
    ended = [r for r in pages if "Elevation ended" in r.text]  # a deny link after the approval won
    assert len(resolved) == 1 and len(ended) <= 1 and len(pages) == len(resolved) + len(ended)
    assert not ended or "Elevation approved" in resolved[0].text
    assert all(r.status_code == 200 for r in answers)


# ---------------------------------------------------------------- impersonation


def test_impersonation_token_and_identity(api, server, staff_of):
    cs = staff_of("customer_support")
    u = api.register_user(name="Ida Customer")
    e = approved_elevation(api, server, cs, u["id"])
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["identity"] == {"id": u["id"], "name": "Ida Customer", "email": u["email"], "role": "user"}
    c = claims(body["token"])
    assert (c["id"], c["role"], c["elevationId"]) == (u["id"], "user", e["id"])
    assert c["exp"] - c["iat"] == 15 * 60 and "type" not in c
    me = ok(api.get("/users/me", token=body["token"]))
    assert me["id"] == u["id"]
    got = ok(api.get("/staff/elevation", token=cs["token"]))[0]
    assert got["status"] == "ACTIVE" and ISO_RE.match(got["activatedAt"]) and ISO_RE.match(got["expiresAt"])
    # ACTIVE is not APPROVED: a second token is refused
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Elevation request is not approved"))


def test_impersonating_a_provider(api, server, staff_of):
    ps = staff_of("professional_support")
    pro = api.register_provider()
    _, token = impersonate(api, server, ps, pro["id"], "provider")
    assert ok(api.get("/providers/me", token=token))["id"] == pro["id"]
    assert api.get("/users/me", token=token).status_code == 403


def test_impersonate_refusals(api, server, staff_of):
    cs, other = staff_of("customer_support"), staff_of("customer_support")
    e = request_elevation(api, cs, api.register_user()["id"])
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Elevation request is not approved"))
    link_get(api, elevation_links(server, e["id"])[0])
    r = api.post("/staff/impersonate", token=other["token"], json={"elevationId": e["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Not your elevation request"))
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": "cnotanidnotanidnotanid000"})
    assert (r.status_code, r.json()) == (404, error_body(404, "Elevation request not found"))
    r = api.post("/staff/impersonate", token=cs["token"], json={})
    assert (r.status_code, r.json()) == (400, error_body(400, "elevationId: is required"))
    for token in (staff_of("technical_support")["token"], staff_of("internal_audit")["token"],
                  api.register_user()["token"]):
        assert api.post("/staff/impersonate", token=token, json={"elevationId": e["id"]}).status_code == 403
    assert api.post("/staff/impersonate", json={"elevationId": e["id"]}).status_code == 401
    # still APPROVED after all that, and its owner can start it
    ok(api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]}))


def test_impersonation_never_grants_staff_or_admin_rights(api, server, admin_token, staff_of):
    cs = staff_of("customer_support")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    for method, path in (("GET", "/staff/me"), ("GET", "/staff/elevation"), ("GET", "/staff/customers"),
                         ("GET", "/staff/list"), ("GET", "/admin/users")):
        r = api.request(method, path, token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN), path
    # the elevation claimed by a token with another role or subject is refused outright
    for over in ({"role": "admin"}, {"role": "customer_support", "type": "staff"}, {"id": cs["id"]},
                 {"role": "provider"}):
        payload = {**claims(token), **over}
        for path in ("/users/me", "/admin/users", "/staff/me"):
            r = api.get(path, token=forge(server, payload))
            assert (r.status_code, r.json()) == (401, UNAUTHORIZED), (over, path)


def test_deactivation_ends_the_token(api, server, staff_of):
    cs, other = staff_of("customer_support"), staff_of("customer_support")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    assert api.get("/users/me", token=token).status_code == 200
    r = api.patch(f"/staff/elevation/{e['id']}/deactivate", token=other["token"])
    assert (r.status_code, r.json()) == (403, error_body(403, "Not your elevation request"))
    assert api.get("/users/me", token=token).status_code == 200
    r = api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"])
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["status"] == "DEACTIVATED" and ISO_RE.match(d["deactivatedAt"]) and set(d) == ELEVATION_FIELDS
    r = api.get("/users/me", token=token)
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    # idempotent
    assert ok(api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"]))["status"] == "DEACTIVATED"
    r = api.patch("/staff/elevation/cnotanidnotanidnotanid000/deactivate", token=cs["token"])
    assert (r.status_code, r.json()) == (404, error_body(404, "Elevation request not found"))
    assert api.patch(f"/staff/elevation/{e['id']}/deactivate").status_code == 401
    assert api.patch(f"/staff/elevation/{e['id']}/deactivate", token=u["token"]).status_code == 403


def test_the_deny_link_ends_an_active_elevation(api, server, pg_cluster, staff_of):
    """The attack: nobody but its owner could end an elevation; the administrator's deny link on an
    ACTIVE request answered "already resolved"."""
    cs = staff_of("customer_support")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    assert api.get("/users/me", token=token).status_code == 200
    _, deny = elevation_links(server, e["id"])
    r = link_get(api, deny)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "<h1>Elevation ended</h1>" in r.text and "<strong>DEACTIVATED</strong>" in r.text
    assert "no longer works" in r.text
    r = api.get("/users/me", token=token)
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    got = ok(api.get("/staff/elevation", token=cs["token"]))[0]
    assert got["status"] == "DEACTIVATED" and ISO_RE.match(got["deactivatedAt"]) and got["activatedAt"]
    rows = sql(server, pg_cluster, "SELECT action, actor_role FROM audit_log WHERE kind = 'action' AND "
                                   f"target_id = '{e['id']}' ORDER BY seq")
    assert [tuple(x) for x in rows] == [("elevation.approve", "approval-link"), ("elevation.end", "approval-link")]
    again = link_get(api, deny)
    assert again.headers["Content-Type"].startswith("text/plain") and "it is DEACTIVATED" in again.text


def test_an_approval_lapses_after_an_hour(own_server):
    """The attack: an approval never lapsed (approved, then used 20 days later)."""
    api = Api(own_server)
    cs = make_staff(api, "customer_support", admin_login(api))
    u1, u2 = api.register_user(), api.register_user()
    e1 = approved_elevation(api, own_server, cs, u1["id"])
    e2 = approved_elevation(api, own_server, cs, u2["id"])
    api.advance_clock(60 * MINUTE_MS - 2000)
    token = ok(api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e1["id"]}))["token"]
    api.advance_clock(3000)
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e2["id"]})
    assert (r.status_code, r.json()) == (403, error_body(403, "Elevation request is not approved"))
    mine = {x["id"]: x for x in ok(api.get("/staff/elevation", token=cs["token"]))}
    lapsed = mine[e2["id"]]
    assert lapsed["status"] == "DEACTIVATED" and lapsed["activatedAt"] is None
    resolved = datetime.datetime.fromisoformat(lapsed["resolvedAt"].replace("Z", "+00:00"))
    assert lapsed["deactivatedAt"] == (resolved + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert mine[e1["id"]]["status"] == "ACTIVE"  # started in time: its own 15 minutes run
    assert api.get("/users/me", token=token).status_code == 200
    request_elevation(api, cs, u2["id"])  # the lapsed approval no longer blocks a new request


def test_pending_request_can_be_withdrawn_but_not_a_rejected_one(api, server, staff_of):
    cs = staff_of("customer_support")
    e = request_elevation(api, cs, api.register_user()["id"])
    assert ok(api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"]))["status"] == "DEACTIVATED"
    assert "already resolved" in link_get(api, elevation_links(server, e["id"])[0]).text
    rejected = request_elevation(api, cs, api.register_user()["id"])
    link_get(api, elevation_links(server, rejected["id"])[1])
    r = api.patch(f"/staff/elevation/{rejected['id']}/deactivate", token=cs["token"])
    assert (r.status_code, r.json()) == (409, error_body(409, "Elevation request was rejected", "invalid_state"))


def test_elevation_lapses_after_15_minutes(own_server):
    api = Api(own_server)
    admin = admin_login(api)
    cs = make_staff(api, "customer_support", admin)
    u = api.register_user()
    e, token = impersonate(api, own_server, cs, u["id"])
    api.advance_clock(15 * MINUTE_MS - 2000)
    assert api.get("/users/me", token=token).status_code == 200
    api.advance_clock(3000)
    r = api.get("/users/me", token=token)
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    # deactivated on the next read, stamped with the moment it lapsed
    d = ok(api.get(f"/staff/customers/{u['id']}", token=cs["token"]))["elevations"][0]
    assert d["status"] == "DEACTIVATED" and d["deactivatedAt"] == d["expiresAt"]
    assert ok(api.get("/staff/elevation", token=cs["token"]))[0]["status"] == "DEACTIVATED"
    # and the agent may ask again
    request_elevation(api, cs, u["id"])


def test_token_of_a_lapsed_elevation_stays_refused_when_the_clock_passes_its_exp(own_server):
    api = Api(own_server)
    cs = make_staff(api, "customer_support", admin_login(api))
    u = api.register_user()
    e, token = impersonate(api, own_server, cs, u["id"])
    api.advance_clock(16 * MINUTE_MS)
    assert api.get("/users/me", token=token).status_code == 401
    r = api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]})
    assert r.status_code == 403


# ---------------------------------------------------------------- the audit trail


def sessions(api, auditor):
    r = api.get("/staff/audit/sessions", token=auditor["token"])
    assert r.status_code == 200, r.text
    return r.json()


def events_of(api, auditor, staff_id, elevation_id):
    member = next(s for s in sessions(api, auditor) if s["id"] == staff_id)
    session = next(x for x in member["sessions"] if x["id"] == elevation_id)
    return session["events"]


def test_impersonated_requests_are_recorded_with_credentials_redacted(api, server, staff_of):
    cs, auditor = staff_of("customer_support"), staff_of("internal_audit")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    ok(api.get("/users/me", token=token))
    r = api.post("/payments/payment-method", token=token, json={"paymentMethodId": "pm_card_visa"})
    assert r.status_code == 200, r.text
    nested = {"service": "lawncare", "preferredAt": "2031-05-01T09:00:00.000Z",
              "details": {"gate": {"password": "1234", "Token": "abc", "notes": ["keep", {"newPassword": "x"}]}}}
    job = ok(api.post("/jobs", token=token, json=nested), 201)
    api.get("/staff/me", token=token)  # refused by the role check: recorded too
    api.post("/jobs", token=token, json={"service": "nope"})  # refused by validation: recorded too
    events = events_of(api, auditor, cs["id"], e["id"])
    assert [(ev["method"], ev["path"], ev["status"]) for ev in events] == [
        ("GET", "/users/me", 200),
        ("POST", "/payments/payment-method", 200),
        ("POST", "/jobs", 201),
        ("GET", "/staff/me", 403),
        ("POST", "/jobs", 400),
    ]
    assert all(set(ev) == {"id", "seq", "elevationId", "method", "path", "body", "status", "createdAt",
                           "completedAt"} for ev in events)
    assert events[0]["body"] is None
    assert events[1]["body"] == {"paymentMethodId": "[REDACTED]"}
    assert events[2]["body"]["details"] == {"gate": {"password": "[REDACTED]", "Token": "[REDACTED]",
                                                     "notes": ["keep", {"newPassword": "[REDACTED]"}]}}
    assert events[2]["body"]["service"] == "lawncare"
    assert events[4]["body"] == {"service": "nope"}
    assert "pm_card_visa" not in str(events) and "1234" not in str(events)
    # recorded before the handler ran: the record is no later than the job it created
    assert events[2]["createdAt"] <= job["createdAt"] <= events[2]["completedAt"]


def test_calls_to_open_routes_with_an_impersonation_token_are_recorded(api, server, staff_of):
    """The attack: a call to an open route made with an impersonation token (POST /auth/login,
    say) was not audited, though the audit step records every call made with it."""
    cs, auditor = staff_of("customer_support"), staff_of("internal_audit")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    login = api.post("/auth/login", token=token, json={"email": u["email"], "password": u["password"]})
    assert login.status_code == 200
    assert ok(api.get("/health", token=token)) == {"status": "ok"}  # answered on the event thread otherwise
    assert api.get("/services/check-zip", token=token, params={"zip": "10001"}).status_code == 200
    bad = api.post("/auth/login", token=token, json={"email": "not-an-email", "password": "x"})
    assert bad.status_code == 400
    # a path no route has is a call made with the token too
    lost = api.post("/no/such/route", token=token, json={"password": "hunter2"})
    assert (lost.status_code, lost.json()) == (404, error_body(404, "Not found"))
    events = events_of(api, auditor, cs["id"], e["id"])
    assert [(ev["method"], ev["path"], ev["status"]) for ev in events] == [
        ("POST", "/auth/login", 200), ("GET", "/health", 200), ("GET", "/services/check-zip", 200),
        ("POST", "/auth/login", 400), ("POST", "/no/such/route", 404)]
    assert events[4]["body"] == {"password": "[REDACTED]"}
    assert events[0]["body"] == {"email": u["email"], "password": "[REDACTED]"}
    assert u["password"] not in str(events)
    # once the elevation is over its token is no token at all on an open route: answered, not recorded
    ok(api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"]))
    assert ok(api.get("/health", token=token)) == {"status": "ok"}
    assert api.post("/auth/login", token=token, json={"email": u["email"], "password": u["password"]}).status_code == 200
    assert api.get("/no/such/route", token=token).status_code == 404
    assert len(events_of(api, auditor, cs["id"], e["id"])) == 5


def test_multipart_bodies_record_names_only(api, server, staff_of):
    cs, auditor = staff_of("customer_support"), staff_of("internal_audit")
    u = customer(api)
    job = post_job(api, u)
    e, token = impersonate(api, server, cs, u["id"])
    files = image_files(2) + [("caption", (None, "secret caption"))]
    r = api.post(f"/jobs/{job['id']}/images", token=token, files=files)
    assert r.status_code == 200, r.text
    ev = events_of(api, auditor, cs["id"], e["id"])[0]
    assert ev["path"] == f"/jobs/{job['id']}/images" and ev["status"] == 200
    assert ev["body"] == {"fields": ["caption"], "files": [{"field": "images", "filename": "photo0.png"},
                                                          {"field": "images", "filename": "photo1.png"}]}
    assert "secret caption" not in str(ev)


def test_staff_actions_are_in_the_chain(server, pg_cluster, api, admin_token, staff_of):
    cs = staff_of("customer_support")
    u = api.register_user()
    e, _ = impersonate(api, server, cs, u["id"])
    ok(api.patch(f"/staff/elevation/{e['id']}/deactivate", token=cs["token"]))
    rows = sql(server, pg_cluster, "SELECT action, actor_id FROM audit_log WHERE kind = 'action' AND "
                                   f"(target_id = '{u['id']}' OR target_id = '{e['id']}' OR target_id = '{cs['id']}') "
                                   "ORDER BY seq")
    assert [(action, actor or None) for action, actor in rows] == [
        ("staff.create", claims(admin_token)["id"]),
        ("elevation.request", cs["id"]),
        ("elevation.approve", None),
        ("elevation.impersonate", cs["id"]),
        ("elevation.deactivate", cs["id"]),
    ]


def test_sessions_shape_and_access(api, server, staff_of):
    cs, auditor = staff_of("customer_support"), staff_of("internal_audit")
    u = api.register_user()
    e, token = impersonate(api, server, cs, u["id"])
    ok(api.get("/users/me", token=token))
    listed = sessions(api, auditor)
    member = next(s for s in listed if s["id"] == cs["id"])
    assert set(member) == STAFF_FIELDS | {"sessions"}
    assert [x["id"] for x in member["sessions"]] == [e["id"]]
    assert set(member["sessions"][0]) == ELEVATION_FIELDS | {"events"}
    assert next(s for s in listed if s["id"] == auditor["id"])["sessions"] == []


def test_concurrent_impersonated_requests_keep_one_chain(server_factory):
    srv = server_factory(**ADMIN_ENV)
    api = Api(srv)
    cs = make_staff(api, "customer_support")
    u = api.register_user()
    _, token = impersonate(api, srv, cs, u["id"])
    answers = race(srv, [lambda c: c.get("/users/me", token=token)] * 12)
    assert all(r.status_code == 200 for r in answers)
    code, out = audit_verify(srv)
    assert code == 0, out
    assert "audit chain intact" in out


def _alter_body(srv, pg, total):
    return "UPDATE audit_log SET body = '{\"reason\":\"nothing to see\"}' WHERE seq = 3", 3


def _alter_status(srv, pg, total):
    seq = count(srv, pg, "SELECT seq FROM audit_log WHERE kind = 'outcome' AND status = 403")
    return f"UPDATE audit_log SET status = 200 WHERE seq = {seq}", seq


def _delete_middle(srv, pg, total):
    return "DELETE FROM audit_log WHERE seq = 4", 5


def _append_forged(srv, pg, total):
    return ("INSERT INTO audit_log (seq, id, kind, created_at, prev_hash, hash) SELECT seq + 1, "
            "'cforgedforgedforgedforged1', 'action', 0, hash, hash FROM audit_tip", total + 1)


def _append_well_forged(srv, pg, total):
    """A record appended with a correct hash, the chain's key included: only the tip tells it apart."""
    prev = sql(srv, pg, f"SELECT hash FROM audit_log WHERE seq = {total}")[0][0]
    row = dict.fromkeys(AUDIT_COLUMNS)
    row.update(seq=total + 1, id="cforgedforgedforgedforged2", kind="action", created_at=5, prev_hash=prev)
    h = keyed_hash(derived_audit_key(srv), row)
    return ("INSERT INTO audit_log (seq, id, kind, created_at, prev_hash, hash) VALUES "
            f"({total + 1}, 'cforgedforgedforgedforged2', 'action', 5, '{prev}', '{h}')", total + 1)


def _delete_last(srv, pg, total):
    return f"DELETE FROM audit_log WHERE seq = {total}", total


@pytest.mark.parametrize("tamper", [_alter_body, _alter_status, _delete_middle, _append_forged, _append_well_forged,
                                    _delete_last])
def test_audit_verify_names_the_first_broken_record(server_factory, pg_cluster, tamper):
    srv, api, _, _, token = chain_server(server_factory)
    code, out = audit_verify(srv)
    total = count(srv, pg_cluster, "SELECT COUNT(*) FROM audit_log")
    assert code == 0 and f"intact: {total} records" in out, out
    statement, broken_at = tamper(srv, pg_cluster, total)
    sql(srv, pg_cluster, statement)
    code, out = audit_verify(srv)
    assert code == 1, out
    assert f"audit chain broken at record {broken_at}" in out, out
    if tamper is _append_well_forged:  # its hash is right: only the tip gives it away
        assert "the chain's tip names record" in out, out
    # the service goes on appending after the tampered records; a forged record that took the
    # next position makes appends fail, and an impersonated request is then refused, not unrecorded
    r = api.get("/users/me", token=token)
    if tamper in (_append_forged, _append_well_forged):
        assert (r.status_code, r.json()) == (503, error_body(503, "Audit trail unavailable"))
    else:
        assert r.status_code == 200


# ---------------------------------------------------------------- a chain that holds (issue 20, item 2)

AUDIT_KEY = "an audit key of thirty-two bytes or more, kept elsewhere"


def chain_server(server_factory, **env):
    """A server with a few audit records (an impersonated GET and a refused one, the actions
    around them): (server, api, staff member, elevation, impersonation token)."""
    srv = server_factory(**ADMIN_ENV, **env)
    api = Api(srv)
    cs = make_staff(api, "customer_support")
    u = api.register_user()
    e, token = impersonate(api, srv, cs, u["id"])
    ok(api.get("/users/me", token=token))
    assert api.get("/staff/me", token=token).status_code == 403
    return srv, api, cs, e, token


def insert_outside(srv, pg, seq, elevation_id):
    """Writes a record at seq (0, NULL) past the database's rule, as someone who can write the
    database can: the check dropped on PostgreSQL, ignored on SQLite."""
    values = (f"({seq}, 'cforgedforgedforgedforged0', 'request', '{elevation_id}', 'GET', '/users/me', 1, "
              f"'{'0' * 64}', '{'0' * 64}')")
    insert = ("INSERT INTO audit_log (seq, id, kind, elevation_id, method, path, created_at, prev_hash, hash) "
              f"VALUES {values}")
    url = srv.env["DATABASE_URL"]
    if url.startswith("sqlite:"):
        con = sqlite3.connect(url[len("sqlite:"):])
        with pytest.raises(sqlite3.IntegrityError):
            con.execute(insert)
        con.execute("PRAGMA ignore_check_constraints = ON")
        con.execute(insert)
        con.commit()
        con.close()
    else:
        with pytest.raises(subprocess.CalledProcessError):
            sql(srv, pg, insert)
        sql(srv, pg, "ALTER TABLE audit_log DROP CONSTRAINT audit_log_seq_positive")
        sql(srv, pg, insert)


def test_a_record_outside_the_chain_breaks_it(server_factory, pg_cluster):
    """The attack: a row with seq 0 was never read by `audit verify` (it paged seq > 0), yet the
    audit sessions showed it as a session's first event."""
    srv, api, cs, e, _ = chain_server(server_factory)
    auditor = make_staff(api, "internal_audit")
    before = events_of(api, auditor, cs["id"], e["id"])
    insert_outside(srv, pg_cluster, 0, e["id"])
    code, out = audit_verify(srv)
    assert code == 1, out
    assert "audit chain broken at record 0 (cforgedforgedforgedforged0): its seq is outside the chain's positions" in out
    assert events_of(api, auditor, cs["id"], e["id"]) == before  # never shown as an event


def test_migration_sets_aside_records_outside_the_chain(server_factory, pg_cluster, tmp_path):
    url = database_before(pg_cluster, str(tmp_path), 13)
    forged = ("INSERT INTO audit_log (seq, id, kind, created_at, prev_hash, hash) VALUES "
              f"(0, 'cforgedforgedforgedforged0', 'action', 1, '{'0' * 64}', '{'0' * 64}')")
    sql_at(url, pg_cluster, forged)
    if url.startswith("sqlite:"):  # SQLite's old primary key also let seq be NULL
        sql_at(url, pg_cluster, forged.replace("(0, 'cforgedforgedforgedforged0'", "(NULL, 'cforgedforgedforgedforged1'"))
    srv = server_factory(DATABASE_URL=url, **ADMIN_ENV)
    assert count(srv, pg_cluster, "SELECT COUNT(*) FROM audit_log") == 0
    assert {r["id"] for r in audit_rows(srv, pg_cluster, "audit_log_set_aside")} >= {"cforgedforgedforgedforged0"}
    code, out = audit_verify(srv)
    assert code == 1 and "migration 0014 set it aside" in out, out


def test_records_are_keyed_with_audit_key(server_factory, pg_cluster):
    srv, *_ = chain_server(server_factory, AUDIT_KEY=AUDIT_KEY)
    rows = audit_rows(srv, pg_cluster)
    assert rows and all(r["hash"] == keyed_hash(AUDIT_KEY.encode(), r) for r in rows)
    assert all(r["hash"] != plain_hash(r) for r in rows)
    code, out = audit_verify(srv)
    assert code == 0 and f"audit chain intact: {len(rows)} records" in out, out
    # verified under another key, the first record is already altered
    code, out = audit_verify(srv, AUDIT_KEY=AUDIT_KEY + "!")
    assert code == 1 and "audit chain broken at record 1" in out, out


def test_without_audit_key_the_key_is_derived_from_jwt_secret(server_factory, pg_cluster):
    srv, *_ = chain_server(server_factory)
    key = derived_audit_key(srv)
    assert all(r["hash"] == keyed_hash(key, r) for r in audit_rows(srv, pg_cluster))


def test_a_short_audit_key_is_refused(server_factory):
    with pytest.raises(RuntimeError, match="AUDIT_KEY must be at least 32 bytes"):
        server_factory(AUDIT_KEY="x" * 31)


def test_a_record_rewritten_without_the_key_breaks_the_chain(server_factory, pg_cluster):
    srv, *_ = chain_server(server_factory)
    rows = audit_rows(srv, pg_cluster)
    rows[2]["body"] = '{"reason":"nothing to see"}'
    rewrite_chain(srv, pg_cluster, rows, plain_hash, start=3)
    code, out = audit_verify(srv)
    assert code == 1, out
    assert (f"audit chain broken at record 3 ({rows[2]['id']}): its hash is a plain SHA-256 though the chain is keyed "
            "from an earlier record on") in out, out


def test_a_chain_written_before_the_key_still_verifies(server_factory, pg_cluster, tmp_path):
    """Records hashed with plain SHA-256 (before migration 0014) verify; the first keyed record
    marks the switch, and every later record must be keyed."""
    url = database_before(pg_cluster, str(tmp_path), 13)
    old = []
    prev = "0" * 64
    for seq in (1, 2):
        row = dict.fromkeys(AUDIT_COLUMNS)
        row.update(seq=seq, id=f"coldoldoldoldoldoldoldol{seq}", kind="action", actor_role="operator-cli",
                   action="staff.create", body='{"name":"Old"}', created_at=1700000000000 + seq, prev_hash=prev)
        row["hash"] = prev = plain_hash(row)
        old.append(row)
    statements = [f"INSERT INTO audit_log (seq, id, kind, actor_role, action, body, created_at, prev_hash, hash) VALUES "
                  f"({r['seq']}, '{r['id']}', 'action', 'operator-cli', 'staff.create', '{r['body']}', "
                  f"{r['created_at']}, '{r['prev_hash']}', '{r['hash']}')" for r in old]
    statements.append(f"UPDATE audit_tip SET seq = 2, hash = '{prev}' WHERE id = 1")
    for statement in statements:
        sql_at(url, pg_cluster, statement)
    srv = server_factory(DATABASE_URL=url, **ADMIN_ENV)
    make_staff(Api(srv), "technical_support")  # a keyed record follows the old ones
    code, out = audit_verify(srv)
    assert code == 0, out
    assert "records before 3 were hashed before the chain was keyed" in out, out
    # migration 0023 recorded that the keyed chain starts after the old records (issue 31): the
    # whole chain rewritten the old way, which needs no key, is refused from there on, even
    # without the checkpoint the server wrote at its start (which no longer matches either)
    assert count(srv, pg_cluster, "SELECT keyed_from FROM audit_tip") == 3
    rows = audit_rows(srv, pg_cluster)
    rows[0]["body"] = '{"name":"Someone Else"}'
    rewrite_chain(srv, pg_cluster, rows, plain_hash)
    code, out = audit_verify(srv)
    assert code == 1 and "audit chain broken at record 2: checkpoint 2:" in out, out
    code, out = audit_verify(srv, AUDIT_CHECKPOINT_FILE=srv.dir + "/none")
    assert code == 1, out
    assert (f"audit chain broken at record 3 ({rows[2]['id']}): its hash is a plain SHA-256 though the chain is keyed "
            "from record 3 on (migration 0023; rewritten without the key)") in out, out


# ---------------------------------------------------------------- checkpoints kept outside the database


def stopped_with_checkpoint(server_factory, pg_cluster):
    """A chain server stopped (SIGTERM): (server, its records, the checkpoint it wrote)."""
    srv, *_ = chain_server(server_factory)
    rows = audit_rows(srv, pg_cluster)
    assert srv.stop() == 0
    line = checkpoints(srv)[-1]
    assert line.split(" ")[0] == f"{rows[-1]['seq']}:{rows[-1]['hash']}"
    logged = [x for x in srv.log_lines() if x.get("msg") == "audit checkpoint"]
    assert (logged[-1]["seq"], logged[-1]["hash"]) == (rows[-1]["seq"], rows[-1]["hash"])
    return srv, rows, line.split(" ")[0]


def test_a_tail_cut_off_with_its_tip_moved_back_fails_the_checkpoint(server_factory, pg_cluster):
    """The attack: deleting the last records and moving audit_tip back passed verify."""
    srv, rows, cp = stopped_with_checkpoint(server_factory, pg_cluster)
    code, out = audit_verify(srv)
    assert code == 0 and "checkpoints: 1 held" in out, out
    keep = rows[-3]
    sql(srv, pg_cluster, f"DELETE FROM audit_log WHERE seq > {keep['seq']}")
    sql(srv, pg_cluster, f"UPDATE audit_tip SET seq = {keep['seq']}, hash = '{keep['hash']}' WHERE id = 1")
    code, out = audit_verify(srv)
    assert code == 1, out
    assert (f"checkpoint {cp} ({srv.data_dir}/audit-checkpoints line 1) no longer matches: the chain ends at record "
            f"{keep['seq']}") in out, out


def test_a_chain_recomputed_with_plain_sha256_fails_the_checkpoint(server_factory, pg_cluster):
    """The attack: an edited record, then every record after it and the tip recomputed, and (issue
    31) the recorded start of the keyed chain moved past them, without which record 1 is refused."""
    srv, rows, cp = stopped_with_checkpoint(server_factory, pg_cluster)
    rows[0]["body"] = '{"name":"Someone Else"}'
    rewrite_chain(srv, pg_cluster, rows, plain_hash)  # from the first record: nothing keyed is left
    code, out = audit_verify(srv)
    assert code == 1 and f"audit chain broken at record 1 ({rows[0]['id']}): its hash is a plain SHA-256" in out, out
    sql(srv, pg_cluster, f"UPDATE audit_tip SET keyed_from = {rows[-1]['seq'] + 1} WHERE id = 1")
    code, out = audit_verify(srv)
    assert code == 1, out
    assert f"checkpoint {cp} ({srv.data_dir}/audit-checkpoints line 1) no longer matches: the record's hash is now" \
        in out, out
    # without the checkpoint the rewrite looks like a chain written before the key: the database
    # alone cannot tell, which is why production requires the checkpoint file (test_audit.py)
    code, out = audit_verify(srv, AUDIT_CHECKPOINT_FILE=srv.dir + "/none")
    assert code == 0, out


def test_expect_checks_a_checkpoint_given_on_the_command_line(server_factory, pg_cluster):
    srv, *_ = chain_server(server_factory)
    rows = audit_rows(srv, pg_cluster)
    mid, last = rows[1], rows[-1]
    code, out = audit_verify(srv, "--expect", f"{mid['seq']}:{mid['hash']}", "--expect", f"{last['seq']}:{last['hash']}")
    assert code == 0 and "checkpoints: 2 held" in out, out
    wrong = f"{mid['seq']}:{'f' * 64}"
    code, out = audit_verify(srv, "--expect", wrong)
    assert code == 1 and f"checkpoint {wrong} (--expect) no longer matches: the record's hash is now {mid['hash']}" \
        in out, out
    beyond = f"{last['seq'] + 5}:{last['hash']}"
    code, out = audit_verify(srv, "--expect", beyond)
    assert code == 1 and f"checkpoint {beyond} (--expect) no longer matches: the chain ends at record {last['seq']}" \
        in out, out
    for bad in ("12", f"x:{'a' * 64}", f"3:{'a' * 63}", f"3:{'A' * 64}", f"3:{'a' * 64} trailing"):
        code, out = audit_verify(srv, "--expect", bad)
        assert code == 2 and "--expect takes SEQ:HASH" in out, (bad, out)
    code, out = audit_verify(srv, "--expect")
    assert code == 2 and "unknown command" in out, out


def test_a_malformed_checkpoint_file_is_reported(server_factory, pg_cluster):
    srv, *_ = chain_server(server_factory)
    with open(srv.data_dir + "/audit-checkpoints", "w", encoding="utf-8") as f:
        f.write("# kept by the operator\n\n1:" + "0" * 64 + " note\nnot a checkpoint\n")
    code, out = audit_verify(srv)
    assert code == 2 and f"{srv.data_dir}/audit-checkpoints line 4 is not a checkpoint (SEQ:HASH)" in out, out


def test_checkpoints_every_60_seconds_when_the_tip_moved(server_factory, pg_cluster, tmp_path):
    path = str(tmp_path / "checkpoints")
    srv, api, cs, e, token = chain_server(server_factory, AUDIT_CHECKPOINT_FILE=path)

    def written():
        with open(path, encoding="utf-8") as f:
            return [line.split(" ")[0] for line in f]

    def logged(tip):
        return srv.wait_log(lambda x: x.get("msg") == "audit checkpoint" and x["seq"] == tip["seq"])[-1]

    api.advance_clock(MINUTE_MS)
    first = audit_rows(srv, pg_cluster)[-1]
    assert (logged(first)["hash"], logged(first)["file"]) == (first["hash"], path)
    assert written() == [f"{first['seq']}:{first['hash']}"]
    # a minute without a record, then one (two records): one more checkpoint, none for the quiet time
    api.advance_clock(MINUTE_MS)
    ok(api.get("/users/me", token=token))
    api.advance_clock(MINUTE_MS)
    second = audit_rows(srv, pg_cluster)[-1]
    assert second["seq"] == first["seq"] + 2 and logged(second)["hash"] == second["hash"]
    assert written() == [f"{first['seq']}:{first['hash']}", f"{second['seq']}:{second['hash']}"]
    code, out = audit_verify(srv)
    assert code == 0 and "checkpoints: 2 held" in out, out
