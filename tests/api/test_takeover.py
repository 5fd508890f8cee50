"""Issue 31's account takeovers that must not survive the owner's clean-up: a pending email
change ended by a password change, a reset and logout-all, the current mailbox told at once
with a link that cancels, the change made only by the confirmation page's POST; reset links
bound to the account's id; the limits on change-email's mail (5 an hour per account, 3 a day
per address) with no caller text in mail to an unconfirmed address; PENDING elevations that
lapse after 24 hours; a deleted account's token refused by the token check itself."""
import re

import pytest

from conftest import ADMIN_ENV, Api, unique_email, unique_ip
from flow_helpers import ok
from helpers import error_body
from staff_helpers import elevation_links, forge, forged_claims, link_get, make_staff, request_elevation, sql
from test_accounts import GONE, confirm_link, login

CANCEL_LINK_RE = re.compile(r"(http://localhost:\d+)(/auth/cancel-email-change\?token=([0-9a-f]{64}))")
RESET_RE = re.compile(r"token=([0-9a-f]{64})")
TOO_MANY = error_body(429, "Too many requests")


def masked(email):
    local, _, domain = email.partition("@")
    return f"{local[0]}***@{domain}"


def ask_change(api, account, email, password="password123"):
    return api.post("/auth/change-email", token=account["token"], json={"currentPassword": password, "email": email})


def owner_notice(server, account, new):
    """The mail to the account's current address about a change to new: its cancel path."""
    subject = f"An email change to {masked(new)} was requested"
    mails = [m for m in server.wait_mail(account["email"]) if m["subject"] == subject]
    assert mails, [m["subject"] for m in server.mails(account["email"])]
    body = mails[-1]["body"]
    assert f"An email change to {masked(new)} was requested" in body
    assert new not in body  # the attacker's address is not spelled out
    m = CANCEL_LINK_RE.search(body)
    assert m, body
    return m.group(2)


def forgot(api, email):
    assert api.post("/auth/forgot-password", json={"email": email, "role": "user"}, ip=unique_ip()).status_code == 200


def reset_token(server, email, count=1):
    return RESET_RE.search(server.wait_mail(email, count)[-1]["body"]).group(1)


def assert_gone(api, path):
    for method in ("GET", "POST"):
        r = api.request(method, path)
        assert r.status_code == 400, r.text
        assert r.headers["Content-Type"] == "text/html; charset=utf-8" and GONE in r.text


# ---------------------------------------------------------------- item 1: the takeover sequence

def change_password(api, server, owner):
    ok(api.post("/auth/change-password", token=owner["token"],
                json={"currentPassword": "password123", "newPassword": "owner-new-pass"}))


def reset_password(api, server, owner):
    forgot(api, owner["email"])
    token = reset_token(server, owner["email"], 2)  # the change's notice came first
    ok(api.post("/auth/reset-password", json={"token": token, "newPassword": "owner-new-pass"}))


def logout_all(api, server, owner):
    ok(api.post("/auth/logout-all", token=owner["token"]))


@pytest.mark.parametrize("clean_up", [change_password, reset_password, logout_all])
def test_the_owners_clean_up_ends_the_attackers_email_change(api, server, clean_up):
    """Someone who had the password asks for a change to an address of theirs; the owner's
    mailbox is told at once; the owner's clean-up ends the change, so the attacker's link
    answers the "no longer valid" page and the account keeps its address."""
    owner = api.register_user(name="Owner Person")
    attacker = unique_email("attacker")
    ok(ask_change(api, owner, attacker))
    owner_notice(server, owner, attacker)
    path = confirm_link(server, attacker)
    clean_up(api, server, owner)
    assert_gone(api, path)
    fresh = login(api, owner["email"], "password123" if clean_up is logout_all else "owner-new-pass")
    assert fresh.status_code == 200, fresh.text
    assert ok(api.get("/users/me", token=fresh.json()["token"]))["email"] == owner["email"]
    # nor can the attacker take the account through a reset at its address
    forgot(api, attacker)
    assert not [m for m in server.mails(attacker) if m["subject"] == "Reset your password"]


def test_the_cancel_link_ends_the_change(api, server):
    owner = api.register_provider()
    new = unique_email("cancelled")
    ok(ask_change(api, owner, new))
    path = confirm_link(server, new)
    cancel = owner_notice(server, owner, new)
    page = api.get(cancel)  # opening it changes nothing: the page's button cancels
    assert page.status_code == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<form method="post" action="cancel-email-change?token=' in page.text
    assert api.get(path).status_code == 200  # the change still stands
    done = api.post(cancel)
    assert done.status_code == 200, done.text
    assert "Email change cancelled" in done.text and masked(new) in done.text and new not in done.text
    assert_gone(api, path)
    again = api.post(cancel)
    assert again.status_code == 400 and GONE in again.text
    assert ok(api.get("/providers/me", token=owner["token"]))["email"] == owner["email"]


def test_a_new_request_ends_the_earlier_cancel_link(api, server):
    owner = api.register_user()
    first, second = unique_email("first"), unique_email("second")
    ok(ask_change(api, owner, first))
    cancel_first = owner_notice(server, owner, first)
    ok(ask_change(api, owner, second))
    assert api.post(cancel_first).status_code == 400
    path = confirm_link(server, second)
    assert api.post(path).status_code == 200  # the second change is untouched
    assert ok(api.get("/users/me", token=owner["token"]))["email"] == second


def test_cancel_link_bad_input(api):
    for method in ("GET", "POST"):
        r = api.request(method, "/auth/cancel-email-change")
        assert (r.status_code, r.json()) == (400, error_body(400, "token: is required")), r.text
    r = api.post("/auth/cancel-email-change?token=" + "0" * 64)
    assert r.status_code == 400 and GONE in r.text


def test_the_confirmation_link_changes_nothing_on_get(api, server):
    """A mail scanner opening the link (even several times) confirms nothing."""
    owner = api.register_user()
    new = unique_email("scanned")
    ok(ask_change(api, owner, new))
    path = confirm_link(server, new)
    for _ in range(3):
        assert api.get(path).status_code == 200
    assert login(api, new, "password123").status_code == 401
    assert ok(api.get("/users/me", token=owner["token"]))["email"] == owner["email"]


def test_a_reset_link_ends_when_the_account_leaves_its_address(api, server):
    """A link mailed to an address the account has left resets nobody, nor the account that
    registered the address since."""
    a = api.register_user()
    old = a["email"]
    forgot(api, old)
    token = reset_token(server, old)
    new = unique_email("moved")
    ok(ask_change(api, a, new))
    assert api.post(confirm_link(server, new)).status_code == 200
    b = api.register_user(email=old)
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "someone-chose"})
    assert (r.status_code, r.json()) == (400, error_body(400, "Invalid or expired reset token")), r.text
    assert login(api, new, "password123").status_code == 200
    assert login(api, old, b["password"]).status_code == 200


def test_a_reset_link_is_bound_to_the_account_not_its_address(api, server):
    """An account deleted after asking for a reset: the link does not reset the account that
    registered its address since."""
    a = api.register_user()
    forgot(api, a["email"])
    token = reset_token(server, a["email"])
    assert api.delete("/users/me", token=a["token"], json={"password": "password123"}).status_code == 204
    b = api.register_user(email=a["email"])
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "someone-chose"})
    assert (r.status_code, r.json()) == (400, error_body(400, "Invalid or expired reset token")), r.text
    assert login(api, b["email"], b["password"]).status_code == 200


# ---------------------------------------------------------------- item 4: no mail for strangers

def test_mail_to_the_new_address_carries_no_caller_text(api, server):
    name = "Click http://evil.example/login now to keep your account"
    owner = api.register_user(name=name[:100])
    new = unique_email("stranger")
    ok(ask_change(api, owner, new))
    mail = server.wait_mail(new)[-1]
    assert mail["subject"] == "Confirm your new email address"
    assert "evil" not in mail["raw"] and "Click" not in mail["raw"]
    assert mail["body"].startswith("Hello,\r\n") or mail["body"].startswith("Hello,\n"), mail["body"]


def test_change_email_is_limited_to_5_an_hour_per_account(server_factory):
    """On a server of its own: its clock moves an hour."""
    server = server_factory()
    api = Api(server)
    owner = api.register_user()
    for i in range(5):
        ok(ask_change(api, owner, unique_email(f"hour{i}")))
    target = unique_email("sixth")
    r = ask_change(api, owner, target)
    assert (r.status_code, r.json()) == (429, TOO_MANY), r.text
    assert 3500 <= int(r.headers["Retry-After"]) <= 3600
    assert server.mails(target) == []  # nothing sent, nothing changed
    told = server.wait_mail(owner["email"], 5)
    assert len([m for m in told if m["subject"].startswith("An email change")]) == 5
    api.advance_clock(3600 * 1000 + 1000)
    ok(ask_change(api, owner, target))


def test_change_email_is_limited_to_3_a_day_per_address(server_factory):
    server = server_factory()
    api = Api(server)
    target = unique_email("victim")
    for _ in range(3):
        ok(ask_change(api, api.register_user(), target))
    r = ask_change(api, api.register_provider(), target)
    assert (r.status_code, r.json()) == (429, TOO_MANY), r.text
    assert 86300 <= int(r.headers["Retry-After"]) <= 86400
    assert len(server.wait_mail(target, 3)) == 3
    ok(ask_change(api, api.register_user(), unique_email("other")))  # other addresses go on
    api.advance_clock(86400 * 1000 + 1000)
    ok(ask_change(api, api.register_user(), target))


def test_a_refused_password_does_not_count_toward_the_mail_limit(api, server):
    owner = api.register_user()
    for _ in range(3):
        r = ask_change(api, owner, unique_email("wrong"), password="not-the-password")
        assert r.status_code == 401
    for i in range(5):
        ok(ask_change(api, owner, unique_email(f"right{i}")))


# ---------------------------------------------------------------- item 7: elevations that lapse

def test_a_pending_elevation_lapses_after_24_hours(server_factory):
    """On a server of its own: its clock moves a day."""
    server = server_factory(**ADMIN_ENV)
    api = Api(server)
    cs = make_staff(api, "customer_support")
    u = api.register_user()
    e = request_elevation(api, cs, u["id"])
    approve, deny = elevation_links(server, e["id"])
    api.advance_clock(24 * 3600 * 1000 - 60 * 1000)
    fresh = api.post("/staff/login", json={"email": cs["email"], "password": cs["password"]}).json()["token"]
    assert next(x for x in ok(api.get("/staff/elevation", token=fresh)) if x["id"] == e["id"])["status"] == "PENDING"
    api.advance_clock(61 * 1000)
    got = next(x for x in ok(api.get("/staff/elevation", token=fresh)) if x["id"] == e["id"])
    assert got["status"] == "EXPIRED" and got["resolvedAt"], got
    for link in (approve, deny):
        page = link_get(api, link)
        assert page.status_code == 200 and GONE in page.text, page.text
    got = next(x for x in ok(api.get("/staff/elevation", token=fresh)) if x["id"] == e["id"])
    assert got["status"] == "EXPIRED"
    r = api.post("/staff/impersonate", token=fresh, json={"elevationId": e["id"]})
    assert r.status_code in (403, 409), r.text
    request_elevation(api, {"token": fresh}, u["id"])  # the member may ask again


# ---------------------------------------------------------------- item 10: deleted accounts

@pytest.mark.parametrize("role", ["user", "provider"])
def test_a_deleted_accounts_token_is_refused_by_the_token_check(api, server, pg_cluster, role):
    """A token signed for the account, of the generation its row has after the deletion, that
    no logout ended: the deletion alone refuses it."""
    a = api.register_user() if role == "user" else api.register_provider()
    me, table = ("/users/me", "users") if role == "user" else ("/providers/me", "providers")
    assert api.delete(me, token=a["token"], json={"password": "password123"}).status_code == 204
    [(gen,)] = sql(server, pg_cluster, f"SELECT token_gen FROM {table} WHERE id = '{a['id']}'")
    claims = forged_claims(id=a["id"], role=role)
    if int(gen):
        claims["gen"] = int(gen)
    r = api.get(me, token=forge(server, claims))
    assert (r.status_code, r.json()) == (401, error_body(401, "Unauthorized")), r.text
