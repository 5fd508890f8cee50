"""What the service keeps of its reads (docs/decisions.md, "SQLite: kept token checks and profiles"): on
SQLite, where every write passes through the one process, a customer's or provider's token that
passed its check, and GET /users/me's answer, are kept until a commit changes the accounts' rows
or the ended tokens, or for a second at most (a change made by another process, an operator's
sqlite3 shell, shows within it). Each test first reads enough to have them kept, then makes a
change that must show on the very next request. On PostgreSQL nothing is kept (other instances
write) and every answer is the same.
"""
import pytest

from conftest import unique_ip
from helpers import eventually
from staff_helpers import sql

ROLES = ["user", "provider"]


def me_path(role):
    return "/users/me" if role == "user" else "/providers/me"


def login(api, acct, role):
    path = "/auth/login" if role == "user" else "/auth/provider/login"
    r = api.post(path, json={"email": acct["email"], "password": acct["password"]}, ip=unique_ip())
    assert r.status_code == 200, r.text
    return r.json()


def account(api, role):
    return api.register_user() if role == "user" else api.register_provider()


def kept(api, token, role):
    """Reads as the token three times (the first keeps its check and its profile); the answer."""
    bodies = []
    for _ in range(3):
        r = api.get(me_path(role), token=token)
        assert r.status_code == 200, r.text
        bodies.append(r.json())
    assert bodies[0] == bodies[1] == bodies[2]
    return bodies[0]


def two_sessions_kept(api, role):
    """A new account with a second login, both tokens read until kept: (account, second login)."""
    a = account(api, role)
    second = login(api, a, role)
    kept(api, a["token"], role)
    kept(api, second["token"], role)
    return a, second


def refused(api, token, role):
    """The token is refused at once, on its profile and on another route."""
    for path in (me_path(role), me_path(role) + "/notifications"):
        r = api.get(path, token=token)
        assert r.status_code == 401, (path, r.text)
        assert r.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_a_profile_change_shows_on_the_next_read(api):
    u = api.register_user(name="Before")
    assert kept(api, u["token"], "user")["name"] == "Before"
    r = api.patch("/users/me", token=u["token"], json={"name": "After", "phone": "555-0100"})
    assert r.status_code == 200 and r.json()["name"] == "After", r.text
    for _ in range(2):
        body = api.get("/users/me", token=u["token"]).json()
        assert (body["name"], body["phone"]) == ("After", "555-0100")
    # another customer's kept profile is theirs, not this one's
    other = api.register_user(name="Other")
    assert kept(api, other["token"], "user")["name"] == "Other"
    assert api.get("/users/me", token=u["token"]).json()["name"] == "After"


@pytest.mark.parametrize("role", ROLES)
def test_logout_refuses_a_kept_token_at_once(api, role):
    a, second = two_sessions_kept(api, role)
    assert api.post("/auth/logout", token=a["token"]).status_code == 200
    refused(api, a["token"], role)
    kept(api, second["token"], role)  # another session's token stands


@pytest.mark.parametrize("role", ROLES)
def test_logout_all_refuses_every_kept_token_at_once(api, role):
    a, second = two_sessions_kept(api, role)
    assert api.post("/auth/logout-all", token=second["token"]).status_code == 200
    refused(api, a["token"], role)
    refused(api, second["token"], role)


@pytest.mark.parametrize("role", ROLES)
def test_a_password_change_refuses_kept_tokens_at_once(api, role):
    a = account(api, role)
    kept(api, a["token"], role)
    r = api.post("/auth/change-password", token=a["token"],
                 json={"currentPassword": a["password"], "newPassword": "another-pass-1"})
    assert r.status_code == 200, r.text
    refused(api, a["token"], role)
    kept(api, r.json()["token"], role)


@pytest.mark.parametrize("role", ROLES)
def test_deleting_the_account_refuses_its_kept_token_at_once(api, role):
    a = account(api, role)
    kept(api, a["token"], role)
    r = api.delete(me_path(role), token=a["token"], json={"password": a["password"]})
    assert r.status_code == 204, r.text
    refused(api, a["token"], role)


@pytest.mark.parametrize("role", ROLES)
def test_an_administrators_deletion_refuses_the_kept_token_at_once(api, admin_token, role):
    a = account(api, role)
    kept(api, a["token"], role)
    r = api.delete(f"/admin/accounts/{a['id']}", token=admin_token, params={"role": role})
    assert r.status_code in (200, 204), r.text
    refused(api, a["token"], role)


def test_a_refresh_tokens_reuse_refuses_the_sessions_kept_tokens_at_once(api):
    a = account(api, "user")
    s = login(api, a, "user")
    kept(api, s["token"], "user")
    r = api.post("/auth/refresh", json={"refreshToken": s["refreshToken"]})
    assert r.status_code == 200, r.text
    fresh = r.json()
    kept(api, fresh["token"], "user")
    assert api.post("/auth/refresh", json={"refreshToken": s["refreshToken"]}).status_code == 401  # reused
    refused(api, s["token"], "user")
    refused(api, fresh["token"], "user")
    kept(api, a["token"], "user")  # the registration's session is another one


def test_a_change_by_another_process_shows_within_a_second(api, server, pg_cluster):
    """An operator's write to the database outside the service (on SQLite, unseen by the process)
    shows once the kept answer lapses: a second at most."""
    u = api.register_user(name="Before")
    kept(api, u["token"], "user")
    sql(server, pg_cluster, f"UPDATE users SET name = 'Outside' WHERE id = '{u['id']}'")
    eventually(lambda: api.get("/users/me", token=u["token"]).json()["name"] == "Outside", timeout=5,
               what="the outside change")
    sql(server, pg_cluster, f"UPDATE users SET token_gen = token_gen + 1 WHERE id = '{u['id']}'")
    eventually(lambda: api.get("/users/me", token=u["token"]).status_code == 401, timeout=5,
               what="the token refused")
