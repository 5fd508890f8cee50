"""Account management by the owner (issue 24, item 4): POST /auth/change-password,
/auth/change-email with its confirmation link (GET /auth/confirm-email), /auth/logout and
/auth/logout-all; DELETE /users/me and /providers/me (refused while a job runs, then personal
data erased while the ledger keeps its records under "Deleted account", and the email free to
register again); GET /users/me/export and /providers/me/export (every record, files as signed
links). The project's docs/decisions.md, "Account management"."""
import re

import pytest

from conftest import Api, unique_email, unique_ip
from flow_helpers import (ISO_RE, Flow, accept, customer, ok, post_job, private_zip, provider, quote, save_card,
                          step)
from helpers import eventually, png_bytes
from staff_helpers import forge, make_staff, sql
from test_auth import jwt_parts
from test_providers import assert_gone, fetch

pytestmark = pytest.mark.pooler

# the confirmation link leads to the app (APP_URL: http://app.test on the test servers), whose page
# posts the token to POST /auth/confirm-email (test_links.py follows the server's own pages)
CONFIRM_LINK_RE = re.compile(r"http://app\.test/confirm-email\?token=([0-9a-f]{64})")
DELETED = "Deleted account"
BUSY_ERROR = "The account has a job that is accepted, on the way or in progress: finish or cancel it first"
OWNER_ROUTES = [("POST", "/auth/change-password", {"currentPassword": "password123", "newPassword": "new-password-1"}),
                ("POST", "/auth/change-email", {"currentPassword": "password123", "email": "x@example.com"}),
                ("POST", "/auth/logout-all", None)]
GONE = "This link is no longer valid"


def me_status(api, account, role="user"):
    return api.get("/users/me" if role == "user" else "/providers/me", token=account["token"]).status_code


def login(api, email, password, role="user"):
    return api.post("/auth/login" if role == "user" else "/auth/provider/login",
                    json={"email": email, "password": password}, ip=unique_ip())


def register(api, role, **over):
    return api.register_user(**over) if role == "user" else api.register_provider(**over)


def second_token(api, account, role="user"):
    r = login(api, account["email"], account["password"], role)
    assert r.status_code == 200, r.text
    return r.json()["token"]


def error(r, status, message, code=None):
    assert r.status_code == status, r.text
    assert r.json()["error"] == message, r.text
    if code:
        assert r.json()["code"] == code, r.text


# ================================================================ tokens carry an id

def test_every_token_has_an_id_of_its_own(api):
    u = api.register_user()
    t2 = second_token(api, u)
    ids = {jwt_parts(t)[1]["jti"] for t in (u["token"], t2)}
    assert len(ids) == 2 and all(re.fullmatch(r"c[0-9a-z]{24}", i) for i in ids)


# ================================================================ POST /auth/logout

@pytest.mark.parametrize("role", ["user", "provider"])
def test_logout_ends_only_the_presented_token(api, role):
    a = register(api, role)
    other = second_token(api, a, role)
    r = api.post("/auth/logout", token=a["token"])
    assert r.status_code == 200 and r.json() == {"ok": True}, r.text
    assert me_status(api, a, role) == 401
    error(api.post("/auth/logout", token=a["token"]), 401, "Unauthorized")
    assert me_status(api, {"token": other}, role) == 200
    assert login(api, a["email"], a["password"], role).status_code == 200


def test_logout_ends_a_token_issued_before_tokens_had_an_id(api, server):
    u = api.register_user()
    claims = jwt_parts(u["token"])[1]
    legacy = forge(server, {"id": u["id"], "role": "user", "iat": claims["iat"], "exp": claims["exp"]})
    assert "jti" not in jwt_parts(legacy)[1]
    assert me_status(api, {"token": legacy}) == 200
    assert api.post("/auth/logout", token=legacy).status_code == 200
    assert me_status(api, {"token": legacy}) == 401
    assert me_status(api, u) == 200  # the account's other tokens live on


def test_ended_tokens_are_kept_only_until_they_would_have_expired(server_factory, pg_cluster):
    """On a server of its own (its clock moves a week): the record of an ended token, and an
    email change waiting for its link, are deleted by the hourly task once they expired."""
    srv = server_factory()
    api = Api(srv)
    u = api.register_user()
    jti = jwt_parts(u["token"])[1]["jti"]
    ok(api.post("/auth/change-email", token=u["token"], json={"currentPassword": "password123",
                                                              "email": unique_email("later")}))
    ok(api.post("/auth/logout", token=u["token"]))

    def ended():
        return [r[0] for r in sql(srv, pg_cluster, "SELECT token_id FROM ended_tokens")]

    def pending_changes():
        return int(sql(srv, pg_cluster, "SELECT COUNT(*) FROM email_changes")[0][0])

    def prunes():
        return int(sql(srv, pg_cluster, "SELECT COUNT(*) FROM job_queue WHERE kind = 'auth_prune' "
                                        "AND status = 'done'")[0][0])

    assert ended() == [jti] and pending_changes() == 1
    before = prunes()
    api.advance_clock(6 * 24 * 3600 * 1000)  # six days on: the token would still live
    eventually(prunes, 15, "the hourly pruning ran", until=lambda n: n > before)
    assert ended() == [jti] and pending_changes() == 0  # the link lapsed after 24 hours
    assert me_status(api, u) == 401
    api.advance_clock(24 * 3600 * 1000 + 3600 * 1000)  # past the token's 7 days
    eventually(ended, 15, "the ended token's record deleted", until=lambda rows: rows == [])


def test_logout_without_a_token_or_with_another_role(api, admin_token):
    error(api.post("/auth/logout"), 401, "Unauthorized")
    error(api.post("/auth/logout", token="not-a-token"), 401, "Unauthorized")
    staff = make_staff(api, "customer_support", admin_token)
    error(api.post("/auth/logout-all", token=staff["token"]), 403, "Forbidden")


def test_staff_and_administrator_tokens_log_out(api):
    """Every token can log out: POST /auth/logout answers a staff or administrator token as any
    other, and POST /staff/logout and /admin/logout (204) end the caller's token."""
    from conftest import admin_login
    for via in ("/auth/logout", "/staff/logout", "/admin/logout"):
        admin = admin_login(api)
        staff = make_staff(api, "customer_support", admin)
        assert ok(api.get("/staff/me", token=staff["token"]))["id"] == staff["id"]
        holder = admin if via == "/admin/logout" else staff["token"]
        r = api.post(via, token=holder)
        assert (r.status_code, r.json() if via == "/auth/logout" else r.text) == \
            ((200, {"ok": True}) if via == "/auth/logout" else (204, "")), r.text
        if via == "/admin/logout":
            error(api.get("/staff/list", token=admin), 401, "Unauthorized")
        else:
            error(api.get("/staff/me", token=staff["token"]), 401, "Unauthorized")
            assert ok(api.get("/staff/list", token=admin))  # another token of the house is untouched
    admin = admin_login(api)
    staff = make_staff(api, "customer_support", admin)
    error(api.post("/admin/logout", token=staff["token"]), 403, "Forbidden")
    error(api.post("/staff/logout", token=api.register_user()["token"]), 403, "Forbidden")


# ================================================================ POST /auth/logout-all

@pytest.mark.parametrize("role", ["user", "provider"])
def test_logout_all_ends_every_token_of_the_account(api, role):
    a, b = register(api, role), register(api, role)
    tokens = [a["token"], second_token(api, a, role), second_token(api, a, role)]
    assert api.post("/auth/logout-all", token=tokens[1]).json() == {"ok": True}
    for t in tokens:
        assert me_status(api, {"token": t}, role) == 401
    assert me_status(api, b, role) == 200  # another account is untouched
    fresh = second_token(api, a, role)  # a login afterwards, even within the same second, works
    assert me_status(api, {"token": fresh}, role) == 200


# ================================================================ POST /auth/change-password

@pytest.mark.parametrize("role", ["user", "provider"])
def test_change_password_answers_a_new_token_and_ends_the_others(api, server, role):
    a = register(api, role)
    other = second_token(api, a, role)
    r = api.post("/auth/change-password", token=a["token"],
                 json={"currentPassword": "password123", "newPassword": "brand-new-pass"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"token", "refreshToken"}  # a new session (issue 33)
    new = r.json()["token"]
    assert jwt_parts(new)[1]["role"] == role and jwt_parts(new)[1]["id"] == a["id"]
    assert me_status(api, {"token": new}, role) == 200
    assert me_status(api, a, role) == 401 and me_status(api, {"token": other}, role) == 401
    error(login(api, a["email"], "password123", role), 401, "Invalid credentials")
    assert login(api, a["email"], "brand-new-pass", role).status_code == 200
    mail = server.wait_mail(a["email"])[-1]
    assert mail["subject"] == "Your password was changed"
    assert "brand-new-pass" not in mail["raw"]


def test_change_password_with_the_wrong_current_password_is_401_and_changes_nothing(api):
    u = api.register_user()
    r = api.post("/auth/change-password", token=u["token"],
                 json={"currentPassword": "not-my-password", "newPassword": "brand-new-pass"})
    error(r, 401, "Invalid credentials")
    assert me_status(api, u) == 200  # a wrong password ends no token
    assert login(api, u["email"], "password123").status_code == 200


CHANGE_PASSWORD_BAD = [
    ({"newPassword": "brand-new-pass"}, "currentPassword: is required"),
    ({"currentPassword": "", "newPassword": "brand-new-pass"}, "currentPassword: must not be empty"),
    ({"currentPassword": 12345678, "newPassword": "brand-new-pass"}, "currentPassword: must be a string"),
    ({"currentPassword": "password123"}, "newPassword: is required"),
    ({"currentPassword": "password123", "newPassword": "short"}, "newPassword: must be at least 8 characters"),
    ({"currentPassword": "password123", "newPassword": "p" * 73}, "newPassword: must be at most 72 characters"),
    ({"currentPassword": "password123", "newPassword": "é" * 40}, "newPassword: must be at most 72 bytes"),
]


@pytest.mark.parametrize("body,message", CHANGE_PASSWORD_BAD, ids=[m for _, m in CHANGE_PASSWORD_BAD])
def test_change_password_bad_input_is_400(api, body, message):
    u = api.register_user()
    error(api.post("/auth/change-password", token=u["token"], json=body), 400, message)
    assert me_status(api, u) == 200


def test_change_password_goes_through_the_login_throttle(api):
    u = api.register_user()
    ip = unique_ip()
    for _ in range(10):
        r = api.post("/auth/change-password", token=u["token"], ip=ip,
                     json={"currentPassword": "guess-guess", "newPassword": "brand-new-pass"})
        assert r.status_code == 401, r.text
    r = api.post("/auth/change-password", token=u["token"], ip=ip,
                 json={"currentPassword": "password123", "newPassword": "brand-new-pass"})
    error(r, 429, "Too many requests")
    assert int(r.headers["Retry-After"]) > 0


def test_change_password_takes_no_idempotency_key(api):
    """A password route keeps nothing: the same key again runs again (and the old password no
    longer works), it is not replayed."""
    u = api.register_user()
    headers = {"Idempotency-Key": "change-once"}
    body = {"currentPassword": "password123", "newPassword": "brand-new-pass"}
    first = api.post("/auth/change-password", token=u["token"], json=body, headers=headers)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    again = api.post("/auth/change-password", token=first.json()["token"], json=body, headers=headers)
    error(again, 401, "Invalid credentials")
    assert "Idempotent-Replayed" not in again.headers


def test_an_impersonated_password_change_is_audited_without_the_passwords(api, server, admin_token):
    """Staff acting as the account (an impersonation token) leave an audit record of the call;
    the current and the new password are never in it."""
    from staff_helpers import impersonate
    agent, auditor = make_staff(api, "customer_support", admin_token), make_staff(api, "internal_audit", admin_token)
    u = api.register_user()
    elevation, token = impersonate(api, server, agent, u["id"])
    r = api.post("/auth/change-password", token=token,
                 json={"currentPassword": "secret-current-1", "newPassword": "secret-new-pass"})
    error(r, 401, "Invalid credentials")
    sessions = ok(api.get("/staff/audit/sessions", token=auditor["token"]))
    member = next(s for s in sessions if s["id"] == agent["id"])
    events = next(x for x in member["sessions"] if x["id"] == elevation["id"])["events"]
    assert [(e["path"], e["status"], e["body"]) for e in events] == [
        ("/auth/change-password", 401, {"currentPassword": "[REDACTED]", "newPassword": "[REDACTED]"})]
    assert "secret-" not in str(sessions)


def test_change_password_drops_pending_reset_links(api, server):
    u = api.register_user()
    assert api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=unique_ip()).ok
    link = server.wait_mail(u["email"])[-1]["body"]
    token = re.search(r"token=([0-9a-f]{64})", link).group(1)
    ok(api.post("/auth/change-password", token=u["token"],
                json={"currentPassword": "password123", "newPassword": "brand-new-pass"}))
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "attacker-pass"})
    error(r, 400, "Invalid or expired reset token")


# ================================================================ POST /auth/change-email

def confirm_link(server, to):
    mail = server.wait_mail(to)[-1]
    assert mail["subject"] == "Confirm your new email address"
    m = CONFIRM_LINK_RE.search(mail["body"])
    assert m, mail["body"]
    return "/auth/confirm-email?token=" + m.group(1)


@pytest.mark.parametrize("role", ["user", "provider"])
def test_change_email_through_its_link(api, server, role):
    a = register(api, role, name="Avery Change")
    new = unique_email("moved")
    r = api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": new.upper()})
    assert r.status_code == 200, r.text
    assert r.json() == {"message": f"A confirmation link was sent to {new}; the email changes when it is opened."}
    me = ok(api.get("/users/me" if role == "user" else "/providers/me", token=a["token"]))
    assert me["email"] == a["email"]  # nothing changes before the link is opened
    path = confirm_link(server, new)
    page = api.get(path)  # the link opens a page: opening it changes nothing (a mail scanner may)
    assert page.status_code == 200, page.text
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert new in page.text and '<form method="post" action="confirm-email?token=' in page.text
    assert ok(api.get("/users/me" if role == "user" else "/providers/me", token=a["token"]))["email"] == a["email"]
    page = api.post(path)  # the page's button
    assert page.status_code == 200, page.text
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert new in page.text and "Email address changed" in page.text
    me = ok(api.get("/users/me" if role == "user" else "/providers/me", token=a["token"]))
    assert me["email"] == new  # the tokens live on
    assert login(api, new, "password123", role).status_code == 200
    error(login(api, a["email"], "password123", role), 401, "Invalid credentials")
    # the current address was told of the request, then of the change (in either order of arrival)
    [notice] = [m for m in server.wait_mail(a["email"], 2) if m["subject"] == "Your email address was changed"]
    assert new in notice["body"]
    for method in ("GET", "POST"):  # once only
        gone = api.request(method, path)
        assert gone.status_code == 400 and GONE in gone.text
    assert register(api, role, email=a["email"])["id"] != a["id"]  # the old address is free again


def test_change_email_to_a_taken_address_is_409(api):
    a, b = api.register_user(), api.register_user()
    r = api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": b["email"]})
    error(r, 409, "Email already registered", "email_taken")
    r = api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": a["email"]})
    error(r, 409, "Email already registered", "email_taken")
    # a provider account of that address is another account
    pro = api.register_provider()
    r = api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": pro["email"]})
    assert r.status_code == 200, r.text


def test_an_address_taken_before_the_link_is_opened_is_409_and_changes_nothing(api, server):
    a = api.register_user()
    new = unique_email("race")
    ok(api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": new}))
    path = confirm_link(server, new)
    api.register_user(email=new)
    error(api.post(path), 409, "Email already registered", "email_taken")
    assert ok(api.get("/users/me", token=a["token"]))["email"] == a["email"]


def test_only_the_latest_email_change_holds_and_a_link_lapses_after_24_hours(server_factory):
    """On a server of its own: its clock moves a day."""
    server = server_factory()
    api = Api(server)
    a = api.register_user()
    first, second = unique_email("first"), unique_email("second")
    ok(api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": first}))
    ok(api.post("/auth/change-email", token=a["token"], json={"currentPassword": "password123", "email": second}))
    gone = api.post(confirm_link(server, first))
    assert gone.status_code == 400 and GONE in gone.text
    path = confirm_link(server, second)
    api.advance_clock(24 * 3600 * 1000 + 1000)
    gone = api.post(path)
    assert gone.status_code == 400 and GONE in gone.text
    assert login(api, a["email"], "password123").status_code == 200


def test_change_email_bad_input_and_wrong_password(api):
    u = api.register_user()
    for body, status, message in [
        ({"email": "x@example.com"}, 400, "currentPassword: is required"),
        ({"currentPassword": "password123"}, 400, "email: is required"),
        ({"currentPassword": "password123", "email": "not-an-email"}, 400, "email: must be a valid email"),
        ({"currentPassword": "password123", "email": "a@localhost"}, 400, "email: must be a valid email"),
        ({"currentPassword": "wrong-password", "email": "x@example.com"}, 401, "Invalid credentials"),
    ]:
        error(api.post("/auth/change-email", token=u["token"], json=body), status, message)


def test_confirm_email_link_bad_input(api):
    for method in ("GET", "POST"):
        error(api.request(method, "/auth/confirm-email"), 400, "token: is required")
        gone = api.request(method, "/auth/confirm-email?token=" + "0" * 64)
        assert gone.status_code == 400 and GONE in gone.text
        error(api.request(method, "/auth/confirm-email?token=" + "t" * 513), 400,
              "token: must be at most 512 characters")


@pytest.mark.parametrize("method,path,body", OWNER_ROUTES, ids=[p for _, p, _ in OWNER_ROUTES])
def test_owner_routes_refuse_other_roles_and_no_token(api, admin_token, method, path, body):
    error(api.request(method, path, json=body), 401, "Unauthorized")
    error(api.request(method, path, json=body, token=admin_token), 403, "Forbidden")
    staff = make_staff(api, "technical_support", admin_token)
    error(api.request(method, path, json=body, token=staff["token"]), 403, "Forbidden")


# ================================================================ DELETE /users/me, /providers/me

def delete_me(api, account, role="user", password="password123"):
    return api.delete("/users/me" if role == "user" else "/providers/me", token=account["token"],
                      json={"password": password})


@pytest.mark.parametrize("role", ["user", "provider"])
def test_delete_bad_input_wrong_password_and_other_roles(api, role, admin_token):
    a = register(api, role)
    path = "/users/me" if role == "user" else "/providers/me"
    error(api.delete(path, token=a["token"]), 400, "password: is required")
    error(api.delete(path, token=a["token"], json={"password": ""}), 400, "password: must not be empty")
    error(api.delete(path, token=a["token"], json={"password": 5}), 400, "password: must be a string")
    error(delete_me(api, a, role, "not-my-password"), 401, "Invalid credentials")
    error(api.delete(path, json={"password": "password123"}), 401, "Unauthorized")
    other = register(api, "provider" if role == "user" else "user")
    error(api.delete(path, token=other["token"], json={"password": "password123"}), 403, "Forbidden")
    error(api.delete(path, token=admin_token, json={"password": "password123"}), 403, "Forbidden")
    assert me_status(api, a, role) == 200


@pytest.mark.parametrize("status", ["ACCEPTED", "ON_THE_WAY", "IN_PROGRESS"])
def test_delete_is_refused_while_a_job_runs(api, status):
    f = Flow(api).moved_to(status)
    for account, role in ((f.user, "user"), (f.pro, "provider")):
        error(delete_me(api, account, role), 409, BUSY_ERROR, "account_busy")
        assert me_status(api, account, role) == 200
    assert ok(api.get(f"/jobs/{f.job_id}", token=f.user["token"]))["status"] == status


def test_a_customer_deletes_its_account_and_the_ledger_stays(api, server, admin_token):
    f = Flow(api, amount=120).completed()
    ok(api.post(f"/jobs/{f.job_id}/tip", token=f.user["token"], json={"amount": 10}))
    review = ok(api.post("/reviews", token=f.user["token"], json={"jobId": f.job_id, "rating": 5,
                                                                   "comment": "Great work"}), 201)
    photo = ok(api.post(f"/jobs/{f.job_id}/messages/photo", token=f.user["token"],
                        files={"photo": ("p.png", png_bytes(41), "image/png")}), 201)
    ok(api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"], json={"content": "Thanks again!"}), 201)
    ok(api.post("/users/me/push-token", token=f.user["token"], json={"token": "ExponentPushToken[del]"}))
    address = ok(api.post("/users/me/addresses", token=f.user["token"],
                          json={"label": "Home", "address": "9 Gone St", "zip": f.zip}), 201)[0]
    with_photo = ok(api.post(f"/users/me/addresses/{address['id']}/photos", token=f.user["token"],
                             files={"streetViewPhoto": ("s.png", png_bytes(42), "image/png")}))
    street = with_photo["streetViewPhoto"]
    assert fetch(street).status_code == 200
    # an open job with another provider's quote: cancelled by the deletion
    other = provider(api, [f.zip])
    open_job = post_job(api, f.user)
    other_quote = quote(api, other, open_job["id"], 90)
    insights_before = ok(api.get("/providers/me/insights", token=f.pro["token"]))

    r = delete_me(api, f.user)
    assert r.status_code == 204 and r.content == b"", r.text
    assert me_status(api, f.user) == 401
    error(login(api, f.user["email"], "password123"), 401, "Invalid credentials")
    assert_gone(street)
    assert fetch(photo["content"][len("[IMAGE]"):]).status_code == 404

    # the provider's side: the completed job, its review and income stay, under "Deleted account"
    job = ok(api.get(f"/jobs/{f.job_id}", token=f.pro["token"]))
    assert job["status"] == "COMPLETED" and job["customer"]["name"] == DELETED
    assert job["address"] == "" and job["lat"] is None and job["beforeImages"] == [] and job["afterImages"] == []
    assert job["payment"]["status"] == "PAID" and job["tipAmount"] == 10
    messages = ok(api.get(f"/jobs/{f.job_id}/messages", token=f.pro["token"]))["messages"]
    assert [(m["senderName"], m["content"]) for m in messages if m["senderRole"] == "user"] == \
        [(DELETED, "[Photo removed]"), (DELETED, "Thanks again!")]
    insights = ok(api.get("/providers/me/insights", token=f.pro["token"]))
    assert insights["incomeByService"] == insights_before["incomeByService"]
    assert insights["totalReviews"] == 1 and insights["averageRating"] == 5
    assert [(x["id"], x["customerName"]) for x in insights["recentReviews"]] == [(review["id"], DELETED)]
    # the open job was cancelled: the other provider's quote on it can no longer be accepted
    mine = ok(api.get("/providers/me/quotes", token=other["token"]))
    assert [(q["id"], q["status"], q["jobStatus"]) for q in mine] == [(other_quote["id"], "PENDING", "CANCELLED")]

    # staff look-ups: the record, its jobs and payments, nothing personal
    agent = make_staff(api, "customer_support", admin_token)
    detail = ok(api.get(f"/staff/customers/{f.user['id']}", token=agent["token"]))
    user = detail["user"]
    assert user["name"] == DELETED and user["email"] == f"deleted-{f.user['id']}@deleted"
    assert user["address"] == "" and user["zip"] == "" and user["isPremium"] is False
    assert {j["id"]: j["status"] for j in detail["jobs"]} == {f.job_id: "COMPLETED", open_job["id"]: "CANCELLED"}
    paid = {p["kind"]: p["status"] for p in detail["payments"]}
    assert paid == {"job": "PAID", "tip": "PAID"}
    assert [j["review"]["id"] for j in detail["jobs"] if j["id"] == f.job_id] == [review["id"]]
    found = ok(api.get("/staff/customers", token=agent["token"], params={"q": f.user["email"]}))
    assert found == []  # the email is no longer held

    # the address registers again, as a new account
    again = api.register_user(email=f.user["email"])
    assert again["id"] != f.user["id"]
    assert ok(api.get("/jobs", token=again["token"]))["jobs"] == []


def test_a_premium_customer_deleting_ends_premium(api, admin_token):
    user = customer(api, private_zip(), "pm_card_visa")
    ok(api.post("/payments/premium/subscribe", token=user["token"]))
    pro = provider(api, verified=False)
    ok(api.post(f"/users/me/favorites/{pro['id']}", token=user["token"]))
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "Kind"}))
    assert delete_me(api, user).status_code == 204
    agent = make_staff(api, "customer_support", admin_token)
    detail = ok(api.get(f"/staff/customers/{user['id']}", token=agent["token"]))["user"]
    assert detail["isPremium"] is False and detail["premiumSince"] is None
    assert detail["processorSubscriptionId"] is None
    assert detail["processorCustomerId"]  # the processor customer stays, for the ledger's refunds


def test_a_provider_deletes_its_account_and_the_ledger_stays(api, admin_token):
    f = Flow(api, amount=150).completed()
    ok(api.post("/reviews", token=f.user["token"], json={"jobId": f.job_id, "rating": 4}), 201)
    ok(api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "Glad to help"}), 201)
    logo = ok(api.post("/providers/me/logo", token=f.pro["token"],
                       files={"logo": ("l.png", png_bytes(51), "image/png")}))["logoUrl"]
    me = ok(api.get("/providers/me", token=f.pro["token"]))
    files = [logo, me["idDocFront"], me["idDocBack"], *me["headshots"]]
    assert all(fetch(u).status_code == 200 for u in files)
    # an open job it alone quoted goes back to PENDING without its quote
    open_job = post_job(api, f.user)
    quote(api, f.pro, open_job["id"], 70)
    fan = customer(api, f.zip, "pm_card_visa")
    ok(api.post("/payments/premium/subscribe", token=fan["token"]))
    ok(api.post(f"/users/me/favorites/{f.pro['id']}", token=fan["token"]))

    assert delete_me(api, f.pro, "provider").status_code == 204
    assert me_status(api, f.pro, "provider") == 401
    error(login(api, f.pro["email"], "password123", "provider"), 401, "Invalid credentials")
    for u in files:
        assert_gone(u)
    reopened = ok(api.get(f"/jobs/{open_job['id']}", token=f.user["token"]))
    assert reopened["status"] == "PENDING" and reopened["quotes"] == []
    assert ok(api.get("/users/me/favorites", token=fan["token"])) == []
    error(api.get(f"/providers/{f.pro['id']}/profile", token=f.user["token"]), 404, "Provider not found")

    # the customer's completed job keeps its provider, its payment and its review
    job = ok(api.get(f"/jobs/{f.job_id}", token=f.user["token"]))
    assert job["providerId"] == f.pro["id"] and job["provider"]["name"] == DELETED
    assert job["payment"]["status"] == "PAID" and [q["status"] for q in job["quotes"]] == ["ACCEPTED"]
    messages = ok(api.get(f"/jobs/{f.job_id}/messages", token=f.user["token"]))["messages"]
    assert [m["senderName"] for m in messages if m["senderRole"] == "provider"] == [DELETED]
    # staff: the ledger of the deleted provider still adds up
    agent = make_staff(api, "professional_support", admin_token)
    detail = ok(api.get(f"/staff/providers/{f.pro['id']}", token=agent["token"]))
    assert detail["provider"]["name"] == DELETED and detail["provider"]["phone"] is None
    assert detail["provider"]["headshots"] == [] and detail["provider"]["idDocFront"] is None
    assert [j["id"] for j in detail["jobs"]] == [f.job_id]
    assert sum(m["paidOut"] + m["inHold"] for m in detail["ledger"]) == 150  # captured; transferred when due
    assert api.register_provider(email=f.pro["email"])["id"] != f.pro["id"]


def test_deleting_an_account_erases_its_live_events(api, server, pg_cluster):
    """The outbox of live updates keeps 24 hours of events: every event addressed to an erased
    account goes with it, for every recipient (they carry its data: its jobs, whose feed events
    name it too, its messages, payments, notifications), and its tickets; the other party keeps
    the events that are its own only."""
    f = Flow(api, amount=80).completed()
    ok(api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"], json={"content": "Thanks, Casey here"}), 201)
    ok(api.post("/events/ticket", token=f.user["token"]))
    me, pro = f"user:{f.user['id']}", f"provider:{f.pro['id']}"

    def recipients(who):
        return {r[0] for r in sql(server, pg_cluster, f"SELECT event_id FROM event_recipients WHERE recipient = '{who}'")}

    mine, theirs = recipients(me), recipients(pro)
    matched = {r[0] for r in sql(server, pg_cluster, "SELECT id FROM events WHERE match_service IS NOT NULL")}
    assert mine & theirs and mine & matched and theirs - mine  # the thread's message to both; the job's feed
    assert delete_me(api, f.user).status_code == 204
    assert recipients(me) == set() and recipients(pro) >= theirs - mine
    ids = ", ".join(str(i) for i in mine)
    assert sql(server, pg_cluster, f"SELECT id FROM events WHERE id IN ({ids})") == []
    assert sql(server, pg_cluster, f"SELECT event_id FROM event_recipients WHERE event_id IN ({ids})") == []
    assert sql(server, pg_cluster, f"SELECT id FROM events WHERE data LIKE '%{f.user['id']}%'") == []
    assert sql(server, pg_cluster, f"SELECT ticket_hash FROM event_tickets WHERE account_id = '{f.user['id']}'") == []


def test_a_deleted_account_is_gone_for_administrators_and_staff_requests(api, admin_token):
    u = api.register_user()
    assert delete_me(api, u).status_code == 204
    error(api.post("/admin/impersonate", token=admin_token, json={"targetId": u["id"], "targetRole": "user"}),
          404, "Account not found")
    error(api.post("/auth/logout-all", token=u["token"]), 401, "Unauthorized")
    # the erased email is none any account can take (so nobody can block an erasure with it)
    body = {"email": f"deleted-{u['id']}@deleted", "password": "password123", "name": "X", "address": "1 St",
            "zip": "10001"}
    error(api.post("/auth/register", json=body), 400, "email: must be a valid email")


def test_delete_takes_no_idempotency_key_and_runs_once(api):
    u = api.register_user()
    r = api.delete("/users/me", token=u["token"], json={"password": "password123"}, headers={"Idempotency-Key": "k1"})
    assert r.status_code == 204
    r = api.delete("/users/me", token=u["token"], json={"password": "password123"}, headers={"Idempotency-Key": "k1"})
    error(r, 401, "Unauthorized")


# ================================================================ GET /users/me/export, /providers/me/export

def test_a_customer_export_holds_every_record(api, server):
    f = Flow(api, amount=80).completed()
    u = f.user
    ok(api.patch("/users/me", token=u["token"], json={"phone": "555-0101"}))
    ok(api.post(f"/jobs/{f.job_id}/tip", token=u["token"], json={"amount": 5}))
    review = ok(api.post("/reviews", token=u["token"], json={"jobId": f.job_id, "rating": 4, "comment": "Good"}), 201)
    report = ok(api.post(f"/jobs/{f.job_id}/report", token=u["token"], json={"description": "A missed corner"}), 201)
    ok(api.post(f"/jobs/{f.job_id}/recurring", token=u["token"],
                json={"dayOfWeek": 2, "timeSlot": "morning", "endDate": "2031-12-31T00:00:00.000Z"}))
    sent = ok(api.post(f"/jobs/{f.job_id}/messages", token=u["token"], json={"content": "See you"}), 201)
    answer = ok(api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "Sure"}), 201)
    ok(api.post("/users/me/push-token", token=u["token"], json={"token": "ExponentPushToken[export]"}))
    ok(api.post("/payments/premium/subscribe", token=u["token"]))
    address = ok(api.post("/users/me/addresses", token=u["token"],
                          json={"label": "Cabin", "address": "3 Lake Rd", "zip": f.zip}), 201)[-1]
    ok(api.post(f"/users/me/addresses/{address['id']}/photos", token=u["token"],
                files={"serviceAreaPhotos": ("a.png", png_bytes(61), "image/png")}))
    ok(api.post(f"/users/me/favorites/{f.pro['id']}", token=u["token"]))
    ok(api.put(f"/users/me/pro-notes/{f.pro['id']}", token=u["token"], json={"note": "Always on time"}))
    ok(api.post("/users/me/support", token=u["token"],
                json={"subject": "Export test", "body": "Hello", "category": "feedback"}))
    images = ok(api.post(f"/jobs/{f.job_id}/images", token=u["token"],
                         files=[("images", ("j.png", png_bytes(62), "image/png"))]))["images"]
    new_email = unique_email("pending")
    ok(api.post("/auth/change-email", token=u["token"], json={"currentPassword": "password123", "email": new_email}))
    stranger = Flow(api)  # another customer's records never show

    r = api.get("/users/me/export", token=u["token"])
    assert r.status_code == 200, r.text
    x = r.json()
    assert ISO_RE.match(x["exportedAt"])
    assert x["account"]["id"] == u["id"] and x["account"]["email"] == u["email"] and x["account"]["phone"] == "555-0101"
    assert x["billing"]["processorCustomerId"] and x["billing"]["processorSubscriptionId"]
    assert x["devicePushToken"] == "ExponentPushToken[export]"
    assert [a["id"] for a in x["addresses"]] == [address["id"]]
    photos = [p for a in x["addresses"] for p in a["serviceAreaPhotos"]]
    assert len(photos) == 1 and fetch(photos[0]).status_code == 200
    assert [j["id"] for j in x["jobs"]] == [f.job_id]
    job = x["jobs"][0]
    assert job["images"] and all(fetch(i).status_code == 200 for i in job["images"] + job["afterImages"])
    assert len(images) == 1
    assert [q["id"] for q in x["quotes"]] == [f.quote["id"]]
    assert sorted(p["kind"] for p in x["payments"]) == ["job", "tip"]
    assert all(p["status"] == "PAID" and p["jobId"] == f.job_id for p in x["payments"])
    assert [v["id"] for v in x["reviews"]] == [review["id"]]
    assert [v["id"] for v in x["reports"]] == [report["id"]]
    assert [(v["jobId"], v["providerId"], v["dayOfWeek"], v["timeSlot"]) for v in x["recurringRequests"]] == \
        [(f.job_id, f.pro["id"], 2, "morning")]
    assert [(m["id"], m["jobId"], m["providerId"]) for m in x["messages"]] == \
        [(sent["id"], f.job_id, f.pro["id"]), (answer["id"], f.job_id, f.pro["id"])]
    assert [v["providerId"] for v in x["favorites"]] == [f.pro["id"]]
    assert [(v["providerId"], v["note"]) for v in x["proNotes"]] == [(f.pro["id"], "Always on time")]
    assert len(x["notifications"]) >= 3 and all(ISO_RE.match(n["createdAt"]) for n in x["notifications"])
    assert [(t["subject"], t["status"]) for t in x["supportTickets"]] == [("Export test", "OPEN")]
    assert x["seasonalAlerts"] == []
    assert x["pendingEmailChange"]["email"] == new_email
    text = r.text
    assert stranger.user["id"] not in text and stranger.job_id not in text
    assert "password" not in text.lower() and "$2" not in text  # no hash, no secret


def test_a_provider_export_holds_every_record(api):
    f = Flow(api, amount=95).completed()
    review = ok(api.post("/reviews", token=f.user["token"], json={"jobId": f.job_id, "rating": 5}), 201)
    message = ok(api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "Done!"}), 201)
    other_job = post_job(api, f.user)
    other_quote = quote(api, f.pro, other_job["id"], 60)
    ok(api.post("/providers/me/support", token=f.pro["token"],
                json={"subject": "Payout question", "body": "When?", "category": "technical"}))

    x = ok(api.get("/providers/me/export", token=f.pro["token"]))
    assert x["account"]["id"] == f.pro["id"] and x["account"]["email"] == f.pro["email"]
    documents = [x["account"]["idDocFront"], x["account"]["idDocBack"], *x["account"]["headshots"]]
    assert len(documents) == 3 and all(fetch(u).status_code == 200 for u in documents)
    assert x["devicePushToken"] is None
    assert [j["id"] for j in x["jobs"]] == [f.job_id]
    assert [(q["id"], q["status"]) for q in x["quotes"]] == [(f.quote["id"], "ACCEPTED"), (other_quote["id"], "PENDING")]
    assert [v["id"] for v in x["reviews"]] == [review["id"]]
    assert [m["id"] for m in x["messages"]] == [message["id"]]
    assert any(n["jobId"] == f.job_id for n in x["notifications"])
    assert [t["subject"] for t in x["supportTickets"]] == ["Payout question"]
    assert x["recurringRequests"] == [] and x["pendingEmailChange"] is None


def test_export_refuses_other_roles_and_no_token(api):
    u, p = api.register_user(), api.register_provider()
    error(api.get("/users/me/export"), 401, "Unauthorized")
    error(api.get("/users/me/export", token=p["token"]), 403, "Forbidden")
    error(api.get("/providers/me/export", token=u["token"]), 403, "Forbidden")
    empty = ok(api.get("/providers/me/export", token=p["token"]))
    assert empty["jobs"] == [] and empty["quotes"] == [] and empty["messages"] == []
    assert ok(api.get("/users/me/export", token=u["token"]))["addresses"] == []
