"""Sessions that last (issue 33, item 3), on both engines: every customer and provider login,
registration and password change opens a session whose refresh token POST /auth/refresh
exchanges for a new token and a new refresh token (rotation: 30 days from each exchange, 90 days
at most from the login); a refresh token presented a second time ends its whole session and every
access token of it (reuse detection); logout, logout-all, a password change and a reset end
sessions; staff and administrator logins have none.

The lifetimes are checked on a server of this module's own (`clock`), whose service clock the
tests move by weeks (POST /__test/clock), so the shared server's clock stays where it is.
"""
import hashlib
import re

import pytest

from conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Api, unique_ip
from helpers import assert_error
from staff_helpers import make_staff, sql

DAY_MS = 24 * 3600 * 1000
HEX64 = re.compile(r"^[0-9a-f]{64}$")
REFUSED = "Invalid or expired refresh token"


@pytest.fixture(scope="module")
def clock(make_server):
    """A server of its own whose clock the tests move by weeks."""
    return Api(make_server(DB_POOL_SIZE="4"))


def refresh(api, refresh_token):
    return api.post("/auth/refresh", json={"refreshToken": refresh_token})


def rotated(api, refresh_token):
    r = refresh(api, refresh_token)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"token", "refreshToken"} and HEX64.match(body["refreshToken"]), body
    return body


def refused(api, refresh_token):
    assert_error(refresh(api, refresh_token), 401, REFUSED, "invalid_token")


def me(api, token, role="user"):
    return api.get("/users/me" if role == "user" else "/providers/me", token=token).status_code


def session(api, role="user"):
    """A new account of role, logged in: {token, refreshToken, email, password, id}."""
    acct = api.register_user() if role == "user" else api.register_provider()
    path = "/auth/login" if role == "user" else "/auth/provider/login"
    r = api.post(path, json={"email": acct["email"], "password": acct["password"]}, ip=unique_ip())
    assert r.status_code == 200, r.text
    body = r.json()
    assert HEX64.match(body["refreshToken"]) and body["token"] != acct["token"]
    return {**acct, "token": body["token"], "refreshToken": body["refreshToken"]}


# ---------------------------------------------------------------- what opens a session


@pytest.mark.parametrize("role", ["user", "provider"])
def test_registration_and_login_carry_a_refresh_token(api, role):
    path = "/auth/register" if role == "user" else "/auth/provider/register"
    body = {"email": f"refresh-{role}-{unique_ip().replace('.', '-')}@example.com", "password": "password123",
            "name": "Refresh Person"}
    body.update({"address": "1 Main St", "zip": "10001"} if role == "user"
                else {"serviceZips": ["10001"], "services": ["lawncare"]})
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    registered = r.json()
    assert set(registered) == {"token", "refreshToken", role} and HEX64.match(registered["refreshToken"])
    s = session(api, role)
    assert s["refreshToken"] != registered["refreshToken"]
    # each one works, and is the caller's own
    for token in (registered["refreshToken"], s["refreshToken"]):
        got = rotated(api, token)
        assert me(api, got["token"], role) == 200


def test_staff_and_administrator_logins_have_no_session(api):
    staff = make_staff(api, "customer_support")
    r = api.post("/staff/login", json={"email": staff["email"], "password": staff["password"]})
    assert r.status_code == 200 and "refreshToken" not in r.json(), r.text
    r = api.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}, ip=unique_ip())
    assert r.status_code == 200 and "refreshToken" not in r.json(), r.text


def test_only_hashes_of_refresh_tokens_are_stored(api, server, pg_cluster):
    s = session(api)
    rows = sql(server, pg_cluster, "SELECT token_hash FROM refresh_tokens")
    hashes = {row[0] for row in rows}
    assert hashlib.sha256(s["refreshToken"].encode()).hexdigest() in hashes
    assert s["refreshToken"] not in hashes


# ---------------------------------------------------------------- rotation and reuse


@pytest.mark.parametrize("role", ["user", "provider"])
def test_rotation_answers_a_new_pair_of_the_same_account(api, role):
    s = session(api, role)
    first = rotated(api, s["refreshToken"])
    assert first["refreshToken"] != s["refreshToken"] and first["token"] != s["token"]
    assert me(api, first["token"], role) == 200
    second = rotated(api, first["refreshToken"])
    assert me(api, second["token"], role) == 200
    assert me(api, s["token"], role) == 200  # earlier access tokens live out their 7 days


def test_a_used_refresh_token_ends_its_session_and_every_token_of_it(api):
    s = session(api)
    other = session(api)  # another account's session is not touched
    again = api.post("/auth/login", json={"email": s["email"], "password": s["password"]}, ip=unique_ip()).json()
    first = rotated(api, s["refreshToken"])
    second = rotated(api, first["refreshToken"])
    # the first refresh token again: reuse
    refused(api, s["refreshToken"])
    # the session ended: its newest refresh token and every access token issued in it
    refused(api, second["refreshToken"])
    for token in (s["token"], first["token"], second["token"]):
        assert me(api, token) == 401
    # the account's other session (another login) and other accounts go on
    assert me(api, again["token"]) == 200
    assert me(api, rotated(api, again["refreshToken"])["token"]) == 200
    assert me(api, rotated(api, other["refreshToken"])["token"]) == 200


def test_reuse_after_the_newest_token_was_used_ends_it_too(api):
    s = session(api)
    first = rotated(api, s["refreshToken"])
    refused(api, s["refreshToken"])
    refused(api, first["refreshToken"])  # the session ended with the reuse
    assert me(api, first["token"]) == 401


def test_the_stream_of_an_ended_session_is_refused(api):
    s = session(api)
    first = rotated(api, s["refreshToken"])
    r = api.post("/events/ticket", token=first["token"])
    assert r.status_code == 200, r.text
    refused(api, s["refreshToken"])  # reuse ends the session
    assert api.post("/events/ticket", token=first["token"]).status_code == 401


# ---------------------------------------------------------------- lifetimes


def test_a_refresh_token_lives_30_days_from_its_issue(clock):
    s = session(clock)
    later = session(clock)
    clock.advance_clock(29 * DAY_MS)
    got = rotated(clock, s["refreshToken"])  # day 29: valid, and the next one lives 30 days from now
    assert me(clock, got["token"]) == 200
    clock.advance_clock(29 * DAY_MS)  # day 58
    got = rotated(clock, got["refreshToken"])
    clock.advance_clock(30 * DAY_MS + 1000)  # 30 days and a second after its issue
    refused(clock, got["refreshToken"])
    # an expired token unused is no reuse and ends nothing; the other login's token expired too
    refused(clock, later["refreshToken"])


def test_no_session_lasts_beyond_90_days_from_its_login(clock):
    s = session(clock)
    token = s["refreshToken"]
    for _ in range(3):  # days 29, 58, 87
        clock.advance_clock(29 * DAY_MS)
        token = rotated(clock, token)["refreshToken"]
    clock.advance_clock(2 * DAY_MS)  # day 89: still within the cap
    token = rotated(clock, token)["refreshToken"]
    clock.advance_clock(DAY_MS + 1000)  # day 90 and a second: the cap, though the token is a day old
    refused(clock, token)
    # a new login opens a new session
    fresh = clock.post("/auth/login", json={"email": s["email"], "password": s["password"]}, ip=unique_ip()).json()
    assert me(clock, rotated(clock, fresh["refreshToken"])["token"]) == 200


def test_the_access_token_of_a_refresh_lives_7_days(clock):
    s = session(clock)
    clock.advance_clock(6 * DAY_MS)
    got = rotated(clock, s["refreshToken"])
    clock.advance_clock(2 * DAY_MS)  # the login's token is 8 days old, the refreshed one 2
    assert me(clock, s["token"]) == 401
    assert me(clock, got["token"]) == 200
    clock.advance_clock(5 * DAY_MS + 1000)
    assert me(clock, got["token"]) == 401
    assert me(clock, rotated(clock, got["refreshToken"])["token"]) == 200


# ---------------------------------------------------------------- what ends sessions


@pytest.mark.parametrize("role", ["user", "provider"])
def test_logout_ends_the_session(api, role):
    s = session(api, role)
    first = rotated(api, s["refreshToken"])
    r = api.post("/auth/logout", token=first["token"])
    assert (r.status_code, r.json()) == (200, {"ok": True})
    refused(api, first["refreshToken"])
    assert me(api, s["token"], role) == 401  # the login's own token, of the same session


def test_logout_with_a_token_of_another_session_leaves_this_one(api):
    s = session(api)
    other = api.post("/auth/login", json={"email": s["email"], "password": s["password"]}, ip=unique_ip()).json()
    assert api.post("/auth/logout", token=other["token"]).status_code == 200
    refused(api, other["refreshToken"])
    assert me(api, rotated(api, s["refreshToken"])["token"]) == 200


@pytest.mark.parametrize("role", ["user", "provider"])
def test_logout_all_ends_every_session(api, role):
    s = session(api, role)
    path = "/auth/login" if role == "user" else "/auth/provider/login"
    other = api.post(path, json={"email": s["email"], "password": s["password"]}, ip=unique_ip()).json()
    assert api.post("/auth/logout-all", token=s["token"]).status_code == 200
    refused(api, s["refreshToken"])
    refused(api, other["refreshToken"])


def test_a_password_change_ends_every_session_and_opens_one(api):
    s = session(api)
    other = api.post("/auth/login", json={"email": s["email"], "password": s["password"]}, ip=unique_ip()).json()
    r = api.post("/auth/change-password", token=s["token"],
                 json={"currentPassword": s["password"], "newPassword": "another-pass-1"})
    assert r.status_code == 200, r.text
    changed = r.json()
    assert set(changed) == {"token", "refreshToken"} and HEX64.match(changed["refreshToken"])
    refused(api, s["refreshToken"])
    refused(api, other["refreshToken"])
    got = rotated(api, changed["refreshToken"])
    assert me(api, got["token"]) == 200


def test_a_password_reset_ends_every_session(api, server):
    s = session(api)
    r = api.post("/auth/forgot-password", json={"email": s["email"], "role": "user"}, ip=unique_ip())
    assert r.status_code == 200
    mail = server.wait_mail(s["email"])[0]
    token = re.search(r"reset-password\?token=([0-9a-f]{64})", mail["body"]).group(1)
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "reset-pass-123"})
    assert r.status_code == 200, r.text
    refused(api, s["refreshToken"])


def test_a_deleted_account_has_no_session(api):
    s = session(api)
    r = api.delete("/users/me", token=s["token"], json={"password": s["password"]})
    assert r.status_code == 204, r.text
    refused(api, s["refreshToken"])


# ---------------------------------------------------------------- bad input


def test_bad_refresh_requests(api):
    s = session(api)
    for body, message in [({}, "refreshToken: is required"), ({"refreshToken": None}, "refreshToken: is required"),
                          ({"refreshToken": ""}, "refreshToken: must not be empty"),
                          ({"refreshToken": 12}, "refreshToken: must be a string"),
                          ({"refreshToken": ["a"]}, "refreshToken: must be a string"),
                          ({"refreshToken": "a" * 513}, "refreshToken: must be at most 512 characters")]:
        assert_error(api.post("/auth/refresh", json=body), 400, message, field="refreshToken")
    r = api.post("/auth/refresh", data="{", headers={"Content-Type": "application/json"})
    assert_error(r, 400, "body: malformed JSON")
    for unknown in ("0" * 64, s["token"], s["refreshToken"][:-1], s["refreshToken"].upper()):
        refused(api, unknown)
    # an access token is no refresh token, and a bearer token does not stand for one
    assert_error(api.post("/auth/refresh", token=s["token"], json={}), 400, "refreshToken: is required",
                 field="refreshToken")
    # none of it changed anything: the session's token works once
    assert me(api, rotated(api, s["refreshToken"])["token"]) == 200
