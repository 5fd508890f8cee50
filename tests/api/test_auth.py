"""POST /auth/* (register, login, provider variants, forgot and reset password) and the bearer
token check, as seen through GET /users/me.

Tests that move the service clock run on a dedicated `server_factory()` server: the clock of
the shared session server only moves forward and every test shares it.
"""
import base64
import hashlib
import hmac
import json
import os
import re
import threading
import time
import uuid

import pytest
import requests

from conftest import Api, unique_email, unique_ip
from helpers import bcrypt_runs, error_body, png_bytes

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
RESET_LINK_RE = re.compile(r"http://app\.test/reset-password\?token=([0-9a-f]+)")
SEVEN_DAYS_S = 7 * 24 * 3600
INVALID_CREDENTIALS = error_body(401, "Invalid credentials", "invalid_credentials")
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")


# ---------------------------------------------------------------- helpers

def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jwt_parts(token):
    head, payload, sig = token.split(".")
    return json.loads(b64url_decode(head)), json.loads(b64url_decode(payload)), sig


def secret_of(server):
    with open(os.path.join(server.data_dir, "jwt_secret"), "rb") as f:
        return f.read()


def sign(secret, header, payload, alg="HS256"):
    """A JWT over the given header and payload, signed with HMAC-SHA{256,384,512}."""
    signing_input = b64url(json.dumps(header, separators=(",", ":"))) + "." + \
        b64url(json.dumps(payload, separators=(",", ":")))
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    sig = hmac.new(secret, signing_input.encode(), digest).digest()
    return signing_input + "." + b64url(sig)


def user_body(**over):
    body = {"email": unique_email("user"), "password": "password123", "name": "Test User",
            "address": "1 Main St", "zip": "10001"}
    body.update(over)
    return body


def provider_body(**over):
    body = {"email": unique_email("pro"), "password": "password123", "name": "Test Pro",
            "serviceZips": ["10001"], "services": ["lawncare"]}
    body.update(over)
    return body


def drop(body, key):
    body = dict(body)
    body.pop(key)
    return body


def assert_field_error(r, field):
    assert r.status_code == 400, r.text
    body = r.json()
    assert re.match(rf"^{re.escape(field)}(\[\d+\])?: \S", body["error"]), body
    assert body == error_body(400, body["error"]), body  # validation_failed, with the field it names


def bad_input_cases(cases):
    """Parametrizes a test by the (field, mutate) pairs of cases, each named <field>-<index>."""
    return pytest.mark.parametrize("field,mutate", cases, ids=[f"{f}-{i}" for i, (f, _) in enumerate(cases)])


def assert_refused_creating_nothing(api, path, good, bad, field):
    """POST path with bad is a field error on field, and creates nothing: good, its email still free, registers."""
    assert_field_error(api.post(path, json=bad), field)
    r = api.post(path, json=good)
    assert r.status_code == 201, r.text


def reset_token_from(mail):
    tokens = RESET_LINK_RE.findall(mail["body"])
    assert len(tokens) == 1, mail["body"]
    assert re.fullmatch(r"[0-9a-f]{64}", tokens[0]), tokens[0]
    return tokens[0]


def request_reset(api, email, role="user", count=1):
    """POST /auth/forgot-password from a fresh address; returns the raw token of mail `count`."""
    r = api.post("/auth/forgot-password", json={"email": email, "role": role}, ip=unique_ip())
    assert r.status_code == 200, r.text
    mails = api.server.wait_mail(email.strip().lower(), count=count)
    return reset_token_from(mails[count - 1])


def no_mail_for(server, to):
    """True when no mail to `to` exists once the background queue is idle (a mail queued by
    the request would have been sent by then)."""
    Api(server).wait_queue_idle()
    return not server.mails(to)


def login(api, email, password, provider=False):
    path = "/auth/provider/login" if provider else "/auth/login"
    return api.post(path, json={"email": email, "password": password})


# ---------------------------------------------------------------- register: success

def assert_registered(r, role, body, name):
    """r is 201 {token, refreshToken, <role>: {id, email, name}} for body, the token HS256 for that account and role, 7 days long."""
    assert r.status_code == 201, r.text
    data = r.json()
    assert set(data) == {"token", "refreshToken", role}
    assert re.fullmatch(r"[0-9a-f]{64}", data["refreshToken"]), data["refreshToken"]
    account = data[role]
    assert set(account) == {"id", "email", "name"}
    assert ID_RE.match(account["id"]), account["id"]
    assert (account["email"], account["name"]) == (body["email"], name)
    header, payload, sig = jwt_parts(data["token"])
    assert header["alg"] == "HS256"
    assert (payload["id"], payload["role"]) == (account["id"], role)
    assert isinstance(payload["iat"], int) and isinstance(payload["exp"], int)
    assert payload["exp"] - payload["iat"] == SEVEN_DAYS_S
    assert sig
    return data


def test_register_returns_201_token_and_user(api, server):
    body = user_body()
    data = assert_registered(api.post("/auth/register", json=body), "user", body, "Test User")
    me = api.get("/users/me", token=data["token"])
    assert me.status_code == 200, me.text
    assert me.json()["id"] == data["user"]["id"]


def test_provider_register_returns_201_token_and_provider(api):
    body = provider_body()
    assert_registered(api.post("/auth/provider/register", json=body), "provider", body, "Test Pro")


def test_ids_are_distinct(api):
    ids = {api.register_user()["id"] for _ in range(5)} | {api.register_provider()["id"] for _ in range(5)}
    assert len(ids) == 10
    assert all(ID_RE.match(i) for i in ids)


def test_email_is_lowercased_and_trimmed(api):
    local = "Mixed.Case-" + uuid.uuid4().hex[:10]
    raw = f"  {local}@Example.COM \t"
    expect = f"{local.lower()}@example.com"
    r = api.post("/auth/register", json=user_body(email=raw))
    assert r.status_code == 201, r.text
    assert r.json()["user"]["email"] == expect
    me = api.get("/users/me", token=r.json()["token"]).json()
    assert me["email"] == expect
    # logins accept any case and surrounding space
    for variant in (expect, expect.upper(), f" {local}@EXAMPLE.com "):
        lr = login(api, variant, "password123")
        assert lr.status_code == 200, (variant, lr.text)
        assert lr.json()["user"] == {"id": me["id"], "email": expect, "name": "Test User"}


def test_provider_email_is_lowercased_and_trimmed(api):
    local = "Pro.Case-" + uuid.uuid4().hex[:10]
    expect = f"{local.lower()}@example.com"
    r = api.post("/auth/provider/register", json=provider_body(email=f" {local}@EXAMPLE.com "))
    assert r.status_code == 201, r.text
    assert r.json()["provider"]["email"] == expect
    lr = login(api, expect.upper(), "password123", provider=True)
    assert lr.status_code == 200, lr.text
    assert lr.json()["provider"]["email"] == expect


# ---------------------------------------------------------------- register: validation

LONG = "x" * 300

REGISTER_BAD = [
    ("email", lambda b: drop(b, "email")),
    ("email", lambda b: {**b, "email": None}),
    ("email", lambda b: {**b, "email": 42}),
    ("email", lambda b: {**b, "email": ""}),
    ("email", lambda b: {**b, "email": "no-at-sign.example.com"}),
    ("email", lambda b: {**b, "email": "user@example"}),
    ("email", lambda b: {**b, "email": "us er@example.com"}),
    ("email", lambda b: {**b, "email": "a@b@example.com"}),
    ("email", lambda b: {**b, "email": "@example.com"}),
    ("password", lambda b: drop(b, "password")),
    ("password", lambda b: {**b, "password": 12345678}),
    ("password", lambda b: {**b, "password": ""}),
    ("password", lambda b: {**b, "password": "a" * 7}),
    ("password", lambda b: {**b, "password": "a" * 73}),
    ("name", lambda b: drop(b, "name")),
    ("name", lambda b: {**b, "name": 5}),
    ("name", lambda b: {**b, "name": ""}),
    ("name", lambda b: {**b, "name": "   "}),
    ("name", lambda b: {**b, "name": "n" * 101}),
    ("name", lambda b: {**b, "name": "\u00e9" * 101}),
    ("address", lambda b: drop(b, "address")),
    ("address", lambda b: {**b, "address": ["1 Main St"]}),
    ("address", lambda b: {**b, "address": ""}),
    ("address", lambda b: {**b, "address": "a" * 301}),
    ("zip", lambda b: drop(b, "zip")),
    ("zip", lambda b: {**b, "zip": "1234"}),
    ("zip", lambda b: {**b, "zip": "123456"}),
    ("zip", lambda b: {**b, "zip": "12a45"}),
    ("zip", lambda b: {**b, "zip": 12345}),
    ("zip", lambda b: {**b, "zip": ""}),
]


@bad_input_cases(REGISTER_BAD)
def test_register_rejects_bad_input(api, field, mutate):
    good = user_body()
    assert_refused_creating_nothing(api, "/auth/register", good, mutate(good), field)


def test_register_nul_in_name_is_a_field_error(api):
    r = api.post("/auth/register", json=user_body(name="a\u0000b"))
    assert_field_error(r, "name")


def test_register_reports_first_failing_field_in_spec_order(api):
    r = api.post("/auth/register", json={"email": "bad", "password": "short", "zip": "1"})
    assert r.status_code == 400
    assert r.json() == error_body(400, r.json()["error"])
    assert r.json()["error"].startswith("email: ")
    r = api.post("/auth/register", json={"email": unique_email(), "password": "short", "zip": "1"})
    assert r.json()["error"].startswith("password: ")


def test_register_malformed_and_empty_bodies(api):
    r = api.post("/auth/register", data="{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json() == error_body(400, "body: malformed JSON")
    r = api.post("/auth/register")  # a missing body counts as {}
    assert_field_error(r, "email")
    r = api.post("/auth/register", json=[user_body()])
    assert r.json() == error_body(400, "body: must be a JSON object")


REGISTER_OK = [
    ("name-100", {"name": "n" * 100}),
    ("name-100-multibyte", {"name": "\u00e9" * 100}),
    ("name-1", {"name": "N"}),
    ("password-8", {"password": "p" * 8}),
    ("password-72", {"password": "p" * 72}),
    ("address-300", {"address": "a" * 300}),
    ("zip-leading-zero", {"zip": "01234"}),
    ("email-plus-subdomain", {"email": f"first.last+tag-{uuid.uuid4().hex[:8]}@mail.example.co.uk"}),
    ("unknown-field-ignored", {"isPremium": True, "role": "admin"}),
]


def named_cases(argname, cases):
    """Parametrizes argname by the values of cases [(name, value)], each test id the case's name."""
    return pytest.mark.parametrize(argname, [v for _, v in cases], ids=[n for n, _ in cases])


def registered_and_logged_in(api, body, provider=False):
    """Registers body (201, named as body says) and logs in with its email and password; returns the registration."""
    path, role = ("/auth/provider/register", "provider") if provider else ("/auth/register", "user")
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    assert r.json()[role]["name"] == body["name"]
    lr = login(api, body["email"], body["password"], provider=provider)
    assert lr.status_code == 200, lr.text
    return r.json()


@named_cases("over", REGISTER_OK)
def test_register_accepts_boundary_values(api, over):
    body = user_body(**over)
    me = api.get("/users/me", token=registered_and_logged_in(api, body)["token"]).json()
    assert me["name"] == body["name"]
    assert me["address"] == body["address"]
    assert me["zip"] == body["zip"]
    if "isPremium" in over:
        assert me.get("isPremium", False) is False  # unknown/unsettable fields are ignored


def test_password_over_72_bytes_is_refused_everywhere(api):
    """bcrypt reads 72 bytes: 40 two-byte characters fit the character bound but not bcrypt."""
    long_pw = "\u00e9" * 40  # 40 characters, 80 bytes
    for path, body in (("/auth/register", user_body(password=long_pw)),
                       ("/auth/provider/register", provider_body(password=long_pw))):
        r = api.post(path, json=body)
        assert (r.status_code, r.json()) == (400, error_body(400, "password: must be at most 72 bytes")), path
        assert login(api, body["email"], long_pw).status_code == 401  # nothing was created
    u = api.register_user()
    token = request_reset(api, u["email"])
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": long_pw})
    assert (r.status_code, r.json()) == (400, error_body(400, "newPassword: must be at most 72 bytes"))
    assert login(api, u["email"], u["password"]).status_code == 200
    # 36 two-byte characters are exactly 72 bytes: accepted, and every byte counts
    pw = "\u00e9" * 35 + "a" + "b"
    assert len(pw.encode()) == 72
    v = api.register_user(password=pw)
    assert login(api, v["email"], pw).status_code == 200
    assert login(api, v["email"], pw[:-1] + "c").status_code == 401


def test_password_of_72_characters_must_match_exactly(api):
    pw = "p" * 71 + "q"
    u = api.register_user(password=pw)
    assert login(api, u["email"], pw).status_code == 200
    # bcrypt would ignore anything past byte 72; a password differing in byte 72 must fail
    assert login(api, u["email"], "p" * 72).status_code == 401


PROVIDER_BAD = [
    ("email", lambda b: drop(b, "email")),
    ("email", lambda b: {**b, "email": "no-at.example.com"}),
    ("email", lambda b: {**b, "email": "pro@localhost"}),
    ("email", lambda b: {**b, "email": "p ro@example.com"}),
    ("email", lambda b: {**b, "email": "a@@example.com"}),
    ("password", lambda b: drop(b, "password")),
    ("password", lambda b: {**b, "password": "a" * 7}),
    ("password", lambda b: {**b, "password": "a" * 73}),
    ("password", lambda b: {**b, "password": True}),
    ("name", lambda b: drop(b, "name")),
    ("name", lambda b: {**b, "name": ""}),
    ("name", lambda b: {**b, "name": "n" * 101}),
    ("phone", lambda b: {**b, "phone": "1" * 21}),
    ("phone", lambda b: {**b, "phone": 5551234}),
    ("serviceZips", lambda b: drop(b, "serviceZips")),
    ("serviceZips", lambda b: {**b, "serviceZips": []}),
    ("serviceZips", lambda b: {**b, "serviceZips": ["10001", "1234"]}),
    ("serviceZips", lambda b: {**b, "serviceZips": ["abcde"]}),
    ("serviceZips", lambda b: {**b, "serviceZips": "123456"}),
    ("serviceZips", lambda b: {**b, "serviceZips": 10001}),
    ("serviceZips", lambda b: {**b, "serviceZips": [10001]}),
    ("services", lambda b: drop(b, "services")),
    ("services", lambda b: {**b, "services": []}),
    ("services", lambda b: {**b, "services": ["gardening"]}),
    ("services", lambda b: {**b, "services": ["lawncare", "plumbing"]}),
    ("services", lambda b: {**b, "services": "gardening"}),
    ("services", lambda b: {**b, "services": "LAWNCARE"}),
    ("services", lambda b: {**b, "services": [None]}),
]


@bad_input_cases(PROVIDER_BAD)
def test_provider_register_rejects_bad_input(api, field, mutate):
    good = provider_body()
    assert_refused_creating_nothing(api, "/auth/provider/register", good, mutate(good), field)


def test_provider_item_error_names_the_index(api):
    r = api.post("/auth/provider/register", json=provider_body(serviceZips=["10001", "1234"]))
    assert r.status_code == 400
    assert r.json()["error"].startswith("serviceZips[1]: ")
    assert r.json() == error_body(400, r.json()["error"]) and r.json()["field"] == "serviceZips[1]"


PROVIDER_OK = [
    ("single-zip-string", {"serviceZips": "10001"}),
    ("single-service-string", {"services": "snowplowing"}),
    ("both-single", {"serviceZips": "02134", "services": "handyman"}),
    ("all-services", {"services": ["lawncare", "snowplowing", "handyman", "home_cleaning"]}),
    ("many-zips", {"serviceZips": ["10001", "10002", "10003", "90210"]}),
    ("phone-20", {"phone": "+1 (555) 123-4567 x1"}),
    ("phone-absent", {}),
    ("name-100", {"name": "n" * 100}),
    ("password-8", {"password": "p" * 8}),
    ("password-72", {"password": "p" * 72}),
]


@named_cases("over", PROVIDER_OK)
def test_provider_register_accepts(api, over):
    registered_and_logged_in(api, provider_body(**over), provider=True)


# ---------------------------------------------------------------- duplicates and races

def test_register_same_email_twice_is_409(api):
    u = api.register_user()
    for email in (u["email"], u["email"].upper(), "  " + u["email"].replace("user", "USER") + " "):
        r = api.post("/auth/register", json=user_body(email=email, password="different-pw"))
        assert r.status_code == 409, (email, r.text)
        assert r.json() == error_body(409, "Email already registered", "email_taken")
    # the original password is untouched
    assert login(api, u["email"], "password123").status_code == 200
    assert login(api, u["email"], "different-pw").status_code == 401


def test_provider_register_same_email_twice_is_409(api):
    p = api.register_provider()
    r = api.post("/auth/provider/register", json=provider_body(email=p["email"].upper()))
    assert r.status_code == 409, r.text
    assert r.json() == error_body(409, "Email already registered", "email_taken")


def test_same_email_may_be_user_and_provider(api):
    email = unique_email("both")
    u = api.post("/auth/register", json=user_body(email=email, password="user-password"))
    p = api.post("/auth/provider/register", json=provider_body(email=email, password="provider-password"))
    assert u.status_code == 201, u.text
    assert p.status_code == 201, p.text
    assert u.json()["user"]["id"] != p.json()["provider"]["id"]
    assert login(api, email, "user-password").json()["user"]["id"] == u.json()["user"]["id"]
    assert login(api, email, "provider-password", provider=True).json()["provider"]["id"] == \
        p.json()["provider"]["id"]
    # each account keeps its own password
    assert login(api, email, "provider-password").status_code == 401
    assert login(api, email, "user-password", provider=True).status_code == 401


def _race(url, path, bodies):
    barrier = threading.Barrier(len(bodies))
    results = [None] * len(bodies)

    def run(i):
        barrier.wait()
        try:
            results[i] = requests.post(url + path, json=bodies[i], headers={"X-Forwarded-For": unique_ip()},
                                       timeout=30)
        except requests.RequestException as e:  # pragma: no cover - reported below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("kind", ["user", "provider"])
def test_concurrent_registrations_of_one_email(api, kind):
    path = "/auth/register" if kind == "user" else "/auth/provider/register"
    make = user_body if kind == "user" else provider_body
    key = "user" if kind == "user" else "provider"
    for _ in range(5):
        email = unique_email("race")
        bodies = [make(email=email, password="first-password"), make(email=email, password="second-password")]
        results = _race(api.url, path, bodies)
        codes = sorted(r.status_code for r in results)
        assert codes == [201, 409], [(r.status_code, r.text) for r in results]
        winner = next(i for i, r in enumerate(results) if r.status_code == 201)
        loser = 1 - winner
        assert results[loser].json() == error_body(409, "Email already registered", "email_taken")
        # exactly one account exists, with the winner's password
        lr = login(api, email, bodies[winner]["password"], provider=kind == "provider")
        assert lr.status_code == 200, lr.text
        assert lr.json()[key]["id"] == results[winner].json()[key]["id"]
        assert login(api, email, bodies[loser]["password"], provider=kind == "provider").status_code == 401


# ---------------------------------------------------------------- login

def test_login_returns_200_token_and_user(api):
    u = api.register_user(name="Login Person")
    r = login(api, u["email"], u["password"])
    assert r.status_code == 200, r.text
    data = r.json()
    assert set(data) == {"token", "refreshToken", "user"}
    assert data["user"] == {"id": u["id"], "email": u["email"], "name": "Login Person"}
    header, payload, _ = jwt_parts(data["token"])
    assert header["alg"] == "HS256"
    assert payload["id"] == u["id"] and payload["role"] == "user"
    assert payload["exp"] - payload["iat"] == SEVEN_DAYS_S
    assert api.get("/users/me", token=data["token"]).status_code == 200


def test_provider_login_returns_200_token_and_provider(api):
    p = api.register_provider(name="Pro Login")
    r = login(api, p["email"], p["password"], provider=True)
    assert r.status_code == 200, r.text
    data = r.json()
    assert set(data) == {"token", "refreshToken", "provider"}
    assert data["provider"] == {"id": p["id"], "email": p["email"], "name": "Pro Login"}
    _, payload, _ = jwt_parts(data["token"])
    assert payload["id"] == p["id"] and payload["role"] == "provider"
    assert payload["exp"] - payload["iat"] == SEVEN_DAYS_S


@pytest.mark.parametrize("provider", [False, True], ids=["user", "provider"])
def test_login_unknown_email_and_wrong_password_look_the_same(api, provider):
    acc = api.register_provider() if provider else api.register_user()
    wrong = login(api, acc["email"], "wrong-password", provider)
    unknown = login(api, unique_email("nobody"), "password123", provider)
    assert wrong.status_code == 401 and unknown.status_code == 401
    assert wrong.json() == INVALID_CREDENTIALS
    assert unknown.json() == INVALID_CREDENTIALS
    assert wrong.text == unknown.text


def test_credentials_do_not_cross_roles(api):
    u = api.register_user()
    p = api.register_provider()
    r = login(api, u["email"], u["password"], provider=True)
    assert r.status_code == 401 and r.json() == INVALID_CREDENTIALS
    r = login(api, p["email"], p["password"], provider=False)
    assert r.status_code == 401 and r.json() == INVALID_CREDENTIALS


LOGIN_BAD = [
    ("email", {"password": "password123"}),
    ("email", {"email": "", "password": "password123"}),
    ("email", {"email": "not-an-email", "password": "password123"}),
    ("email", {"email": 7, "password": "password123"}),
    ("password", {"email": "someone@example.com"}),
    ("password", {"email": "someone@example.com", "password": ""}),
    ("password", {"email": "someone@example.com", "password": 12345678}),
]


@pytest.mark.parametrize("path", ["/auth/login", "/auth/provider/login"])
@pytest.mark.parametrize("field,body", LOGIN_BAD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(LOGIN_BAD)])
def test_login_rejects_bad_input(api, path, field, body):
    assert_field_error(api.post(path, json=body), field)


@pytest.mark.parametrize("path", ["/auth/login", "/auth/provider/login"])
def test_login_of_an_unknown_email_costs_one_bcrypt_check_like_a_wrong_password(api, path):
    """An unknown email must not answer faster than a wrong password (that would reveal which
    emails have accounts): each costs exactly one bcrypt check at the configured cost, the
    unknown one against a dummy hash. Counted, not timed, so a loaded machine cannot make it
    pass or fail."""
    account = api.register_provider() if "provider" in path else api.register_user()
    for email, password in ((unique_email("ghost"), "password123"), (account["email"], "wrong-password")):
        before = bcrypt_runs(api)
        r = api.post(path, json={"email": email, "password": password}, ip=unique_ip())
        assert r.status_code == 401 and r.json() == INVALID_CREDENTIALS
        assert bcrypt_runs(api) - before == 1, email
    before = bcrypt_runs(api)
    assert api.post(path, json={"email": account["email"], "password": account["password"]},
                    ip=unique_ip()).status_code == 200
    assert bcrypt_runs(api) - before == 1


# ---------------------------------------------------------------- login throttle
# docs/decisions.md: 10 failures per account (from anywhere), per (account, client address)
# and 50 per client address in 15-minute windows from the first failure; then 429 with
# Retry-After, even with the right password. test_throttles.py has the account's count across
# addresses, parallel attempts, staff locks and IPv6.

TOO_MANY = error_body(429, "Too many requests")


def _login_from(api, ip, email, password, provider):
    path = "/auth/provider/login" if provider else "/auth/login"
    return api.post(path, json={"email": email, "password": password}, ip=ip)


def _assert_throttled(r):
    assert (r.status_code, r.json()) == (429, TOO_MANY), r.text
    retry = r.headers.get("Retry-After", "")
    assert re.fullmatch(r"\d+", retry) and 1 <= int(retry) <= 900, retry


@pytest.mark.parametrize("provider", [False, True], ids=["user", "provider"])
def test_login_failures_per_account_and_address_are_throttled(api, provider):
    acc = api.register_provider() if provider else api.register_user()
    other = api.register_provider() if provider else api.register_user()
    ip = unique_ip()
    for i in range(10):
        r = _login_from(api, ip, acc["email"], f"wrong-{i}", provider)
        assert (r.status_code, r.json()) == (401, INVALID_CREDENTIALS), (i, r.text)
    _assert_throttled(_login_from(api, ip, acc["email"], acc["password"], provider))  # no password check
    _assert_throttled(_login_from(api, ip, acc["email"].upper(), "wrong", provider))  # the same account
    # the account is held from every address; another account from this one goes on
    _assert_throttled(_login_from(api, unique_ip(), acc["email"], acc["password"], provider))
    assert _login_from(api, ip, other["email"], other["password"], provider).status_code == 200
    # the other kind of account with the same email is another account
    assert _login_from(api, ip, acc["email"], acc["password"], not provider).status_code == 401


def test_a_successful_login_keeps_the_accounts_failures(api):
    u = api.register_user()
    ip = unique_ip()
    for i in range(9):
        assert _login_from(api, ip, u["email"], "wrong", False).status_code == 401, i
    assert _login_from(api, ip, u["email"], u["password"], False).status_code == 200
    assert _login_from(api, ip, u["email"], "wrong", False).status_code == 401
    _assert_throttled(_login_from(api, ip, u["email"], u["password"], False))


def test_login_failures_per_address_are_throttled(api):
    """Guessing across many accounts (unknown ones count too) from one address."""
    u = api.register_user()
    ip = unique_ip()
    for i in range(50):
        r = _login_from(api, ip, unique_email("guess"), "password123", i % 2 == 1)
        assert r.status_code == 401, (i, r.text)
    _assert_throttled(_login_from(api, ip, u["email"], u["password"], False))
    _assert_throttled(_login_from(api, ip, unique_email("guess"), "password123", True))
    assert _login_from(api, unique_ip(), u["email"], u["password"], False).status_code == 200


def test_login_throttle_window_ends_after_15_minutes(server_factory):
    api = Api(server_factory())
    u = api.register_user()
    ip = unique_ip()
    for _ in range(10):
        assert _login_from(api, ip, u["email"], "wrong", False).status_code == 401
    r = _login_from(api, ip, u["email"], u["password"], False)
    _assert_throttled(r)
    api.advance_clock(int(r.headers["Retry-After"]) * 1000 - 5000)
    _assert_throttled(_login_from(api, ip, u["email"], u["password"], False))
    api.advance_clock(6000)
    assert _login_from(api, ip, u["email"], u["password"], False).status_code == 200


# ---------------------------------------------------------------- tokens

@pytest.fixture
def signed(server, api):
    """(user, secret, iat) where iat is the server's own clock reading (from a fresh token)."""
    u = api.register_user()
    _, payload, _ = jwt_parts(u["token"])
    return u, secret_of(server), payload["iat"]


def test_missing_or_malformed_authorization_is_401(api):
    assert api.get("/users/me").status_code == 401
    assert api.get("/users/me").json() == UNAUTHORIZED
    for value in ("Bearer", "Bearer ", "Bearer garbage", "Bearer a.b.c", "Bearer ...",
                  "Token abc", "Basic dXNlcjpwYXNz"):
        r = api.get("/users/me", headers={"Authorization": value})
        assert r.status_code == 401, value
        assert r.json() == UNAUTHORIZED


def test_token_without_bearer_scheme_is_401(api):
    u = api.register_user()
    r = api.get("/users/me", headers={"Authorization": u["token"]})
    assert r.status_code == 401 and r.json() == UNAUTHORIZED


def test_handmade_hs256_token_is_accepted(api, signed):
    u, secret, iat = signed
    token = sign(secret, {"alg": "HS256", "typ": "JWT"},
                 {"id": u["id"], "role": "user", "iat": iat, "exp": iat + 3600})
    r = api.get("/users/me", token=token)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == u["id"]


def test_tampered_payload_is_401(api, signed):
    u, secret, iat = signed
    other = api.register_user()
    head, payload, sig = u["token"].split(".")
    claims = json.loads(b64url_decode(payload))
    for change in ({"role": "provider"}, {"role": "admin"}, {"id": other["id"]},
                   {"exp": claims["exp"] + 3600}):
        forged = head + "." + b64url(json.dumps({**claims, **change}, separators=(",", ":"))) + "." + sig
        r = api.get("/users/me", token=forged)
        assert r.status_code == 401, change
        assert r.json() == UNAUTHORIZED
    # a flipped signature character
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    r = api.get("/users/me", token=f"{head}.{payload}.{flipped}")
    assert r.status_code == 401
    # a token signed with another secret
    r = api.get("/users/me", token=sign(b"x" * 64, {"alg": "HS256", "typ": "JWT"}, claims))
    assert r.status_code == 401


def test_alg_none_is_401(api, signed):
    u, _, iat = signed
    claims = {"id": u["id"], "role": "user", "iat": iat, "exp": iat + 3600}
    for alg in ("none", "None", "NONE"):
        token = b64url(json.dumps({"alg": alg, "typ": "JWT"})) + "." + b64url(json.dumps(claims)) + "."
        r = api.get("/users/me", token=token)
        assert r.status_code == 401, alg
        assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("alg", ["HS384", "HS512"])
def test_other_hmac_algorithms_are_401(api, signed, alg):
    u, secret, iat = signed
    token = sign(secret, {"alg": alg, "typ": "JWT"}, {"id": u["id"], "role": "user", "iat": iat, "exp": iat + 3600},
                 alg=alg)
    r = api.get("/users/me", token=token)
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED


def test_header_claiming_hs256_over_other_signature_is_401(api, signed):
    u, secret, iat = signed
    claims = {"id": u["id"], "role": "user", "iat": iat, "exp": iat + 3600}
    good = sign(secret, {"alg": "HS256", "typ": "JWT"}, claims)
    hs512 = sign(secret, {"alg": "HS256", "typ": "JWT"}, claims, alg="HS512")
    assert good != hs512
    assert api.get("/users/me", token=good).status_code == 200
    assert api.get("/users/me", token=hs512).status_code == 401


def test_expired_or_claimless_tokens_are_401(api, signed):
    u, secret, iat = signed
    hdr = {"alg": "HS256", "typ": "JWT"}
    cases = {
        "expired": {"id": u["id"], "role": "user", "iat": iat - 7200, "exp": iat - 10},
        "no-exp": {"id": u["id"], "role": "user", "iat": iat},
        "no-id": {"role": "user", "iat": iat, "exp": iat + 3600},
        "no-role": {"id": u["id"], "iat": iat, "exp": iat + 3600},
        "empty-id": {"id": "", "role": "user", "iat": iat, "exp": iat + 3600},
    }
    for name, claims in cases.items():
        r = api.get("/users/me", token=sign(secret, hdr, claims))
        assert r.status_code == 401, name
        assert r.json() == UNAUTHORIZED


def test_unknown_role_claim_is_403(api, signed):
    u, secret, iat = signed
    token = sign(secret, {"alg": "HS256", "typ": "JWT"}, {"id": u["id"], "role": "superuser", "iat": iat,
                                                          "exp": iat + 3600})
    r = api.get("/users/me", token=token)
    assert r.status_code == 403
    assert r.json() == FORBIDDEN


def test_provider_token_on_user_routes_is_403(api):
    p = api.register_provider()
    r = api.get("/users/me", token=p["token"])
    assert r.status_code == 403 and r.json() == FORBIDDEN
    r = api.patch("/users/me", token=p["token"], json={"lat": 1})
    assert r.status_code == 403 and r.json() == FORBIDDEN


def test_token_expires_after_seven_days_on_service_clock(server_factory):
    srv = server_factory()
    api = Api(srv)
    u = api.register_user()
    p = api.register_provider()
    assert api.get("/users/me", token=u["token"]).status_code == 200
    api.advance_clock(SEVEN_DAYS_S * 1000 - 5000)
    assert api.get("/users/me", token=u["token"]).status_code == 200
    api.advance_clock(6000)  # now 7 days + 1 s after issue
    r = api.get("/users/me", token=u["token"])
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED
    # the provider token has expired too: a 401 (not the 403 of a valid provider token)
    assert api.get("/users/me", token=p["token"]).status_code == 401
    # a fresh login works again and issues a token from the moved clock
    lr = login(api, u["email"], u["password"])
    assert lr.status_code == 200
    assert api.get("/users/me", token=lr.json()["token"]).status_code == 200


# ---------------------------------------------------------------- stored verbatim

TRICKY = [
    "Robert'); DROP TABLE users;--",
    "O'Brien \"The Hammer\" `tick`",
    "back\\slash \\\\ and \\n literal",
    "%_ LIKE wildcards %% _",
    "Zo\u00eb \u00c5ngstr\u00f6m \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "emoji \U0001F600\U0001F3E0\U0001F9F9 \u2603",
    "$1 $2 ? :name",
    "<script>alert(1)</script>",
]


@pytest.mark.parametrize("text", TRICKY, ids=[f"t{i}" for i in range(len(TRICKY))])
def test_special_characters_are_stored_verbatim(api, text):
    u = api.register_user(name=text, address=text + " / 1 Main St")
    me = api.get("/users/me", token=u["token"])
    assert me.status_code == 200
    assert me.json()["name"] == text
    assert me.json()["address"] == text + " / 1 Main St"
    lr = login(api, u["email"], u["password"])
    assert lr.status_code == 200
    assert lr.json()["user"]["name"] == text
    p = api.register_provider(name=text)
    assert login(api, p["email"], p["password"], provider=True).json()["provider"]["name"] == text


def test_sql_in_email_and_password_is_harmless(api):
    pw = "' OR '1'='1' --"
    u = api.register_user(password=pw)
    assert login(api, u["email"], pw).status_code == 200
    r = login(api, u["email"], "' OR '1'='1")
    assert r.status_code == 401
    r = api.post("/auth/login", json={"email": "x'@example.com", "password": pw})
    assert r.status_code == 401 and r.json() == INVALID_CREDENTIALS


# ---------------------------------------------------------------- forgot-password

def test_forgot_password_same_answer_and_mail_only_for_existing(api, server):
    u = api.register_user(name="Forgetful")
    ghost = unique_email("ghost")
    r_ghost = api.post("/auth/forgot-password", json={"email": ghost, "role": "user"}, ip=unique_ip())
    r_real = api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=unique_ip())
    assert r_ghost.status_code == 200 and r_real.status_code == 200
    assert list(r_real.json()) == ["message"]
    assert isinstance(r_real.json()["message"], str) and r_real.json()["message"]
    assert r_real.json() == r_ghost.json()

    mails = server.wait_mail(u["email"])
    assert len(mails) == 1
    mail = mails[0]
    assert mail["subject"]
    token = reset_token_from(mail)
    assert "Forgetful" in mail["body"]
    assert token not in json.dumps(r_real.json())
    assert no_mail_for(server, ghost)


def test_forgot_password_finds_account_whatever_the_case(api, server):
    u = api.register_user()
    r = api.post("/auth/forgot-password", json={"email": "  " + u["email"].upper(), "role": "user"},
                 ip=unique_ip())
    assert r.status_code == 200
    server.wait_mail(u["email"])


def test_forgot_password_role_selects_the_account(api, server):
    p = api.register_provider()
    # a provider-only email asked for as a customer: nothing to send
    r = api.post("/auth/forgot-password", json={"email": p["email"], "role": "user"}, ip=unique_ip())
    assert r.status_code == 200
    assert no_mail_for(server, p["email"])
    token = request_reset(api, p["email"], role="provider")
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "new-provider-pw"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"message", "role"}
    assert r.json()["role"] == "provider"
    assert login(api, p["email"], "new-provider-pw", provider=True).status_code == 200
    assert login(api, p["email"], p["password"], provider=True).status_code == 401


FORGOT_BAD = [
    ("email", {"role": "user"}),
    ("email", {"email": "", "role": "user"}),
    ("email", {"email": "nope", "role": "user"}),
    ("email", {"email": "a@b", "role": "user"}),
    ("email", {"email": 1, "role": "user"}),
    ("role", {"email": "someone@example.com"}),
    ("role", {"email": "someone@example.com", "role": "admin"}),
    ("role", {"email": "someone@example.com", "role": "customer"}),
    ("role", {"email": "someone@example.com", "role": "USER"}),
    ("role", {"email": "someone@example.com", "role": ["user"]}),
]


@pytest.mark.parametrize("field,body", FORGOT_BAD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(FORGOT_BAD)])
def test_forgot_password_rejects_bad_input(api, field, body):
    assert_field_error(api.post("/auth/forgot-password", json=body, ip=unique_ip()), field)


def test_forgot_password_is_limited_per_ip(api):
    ip = unique_ip()
    for i in range(5):
        r = api.post("/auth/forgot-password", json={"email": unique_email("rl"), "role": "user"}, ip=ip)
        assert r.status_code == 200, (i, r.text)
    r = api.post("/auth/forgot-password", json={"email": unique_email("rl"), "role": "user"}, ip=ip)
    assert r.status_code == 429
    assert r.json() == error_body(429, "Too many requests")
    retry = r.headers.get("Retry-After")
    assert retry is not None and re.fullmatch(r"\d+", retry), retry
    assert 1 <= int(retry) <= 900
    # still limited, and other addresses are not affected
    assert api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"},
                    ip=ip).status_code == 429
    assert api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"},
                    ip=unique_ip()).status_code == 200


def test_forgot_password_limit_does_not_send_mail(api, server):
    ip = unique_ip()
    for _ in range(5):
        api.post("/auth/forgot-password", json={"email": unique_email("rl"), "role": "user"}, ip=ip)
    u = api.register_user()
    r = api.post("/auth/forgot-password", json={"email": u["email"], "role": "user"}, ip=ip)
    assert r.status_code == 429
    assert no_mail_for(server, u["email"])


def test_forgot_password_limit_window_reopens_after_15_minutes(server_factory):
    srv = server_factory()
    api = Api(srv)
    ip = unique_ip()
    for _ in range(5):
        assert api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"},
                        ip=ip).status_code == 200
    r = api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"}, ip=ip)
    assert r.status_code == 429
    assert 1 <= int(r.headers["Retry-After"]) <= 900
    api.advance_clock(14 * 60 * 1000)
    r = api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"}, ip=ip)
    assert r.status_code == 429
    assert 1 <= int(r.headers["Retry-After"]) <= 61
    api.advance_clock(60 * 1000 + 1000)
    for i in range(5):
        r = api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"}, ip=ip)
        assert r.status_code == 200, (i, r.text)
    assert api.post("/auth/forgot-password", json={"email": unique_email(), "role": "user"},
                    ip=ip).status_code == 429


# ---------------------------------------------------------------- reset-password

def test_reset_password_flow(api):
    u = api.register_user()
    token = request_reset(api, u["email"])
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "brand-new-pw"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"message", "role"}
    assert isinstance(r.json()["message"], str) and r.json()["message"]
    assert r.json()["role"] == "user"
    old = login(api, u["email"], u["password"])
    assert old.status_code == 401 and old.json() == INVALID_CREDENTIALS
    new = login(api, u["email"], "brand-new-pw")
    assert new.status_code == 200
    assert new.json()["user"]["id"] == u["id"]
    # single use
    again = api.post("/auth/reset-password", json={"token": token, "newPassword": "another-pw-1"})
    assert again.json() == error_body(400, "Invalid or expired reset token")
    assert login(api, u["email"], "brand-new-pw").status_code == 200
    assert login(api, u["email"], "another-pw-1").status_code == 401


@pytest.mark.parametrize("provider", [False, True])
def test_a_password_reset_ends_every_earlier_token(api, provider):
    """The attack: a reset left every token issued before it valid for 7 days. A token issued
    after it, even within the same second, works."""
    acc = api.register_provider() if provider else api.register_user()
    me, role = ("/providers/me", "provider") if provider else ("/users/me", "user")
    earlier = [acc["token"], login(api, acc["email"], acc["password"], provider=provider).json()["token"]]
    assert all(api.get(me, token=t).status_code == 200 for t in earlier)
    token = request_reset(api, acc["email"], role=role)
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": "brand-new-pw"}).status_code == 200
    fresh = login(api, acc["email"], "brand-new-pw", provider=provider)
    assert fresh.status_code == 200
    for t in earlier:
        r = api.get(me, token=t)
        assert (r.status_code, r.json()) == (401, error_body(401, "Unauthorized"))
    assert jwt_parts(fresh.json()["token"])[1]["gen"] == 1
    r = api.get(me, token=fresh.json()["token"])
    assert r.status_code == 200 and r.json()["id"] == acc["id"]
    # and a second reset ends that one too
    token = request_reset(api, acc["email"], role=role, count=2)
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": "newer-pw-123"}).status_code == 200
    assert api.get(me, token=fresh.json()["token"]).status_code == 401


def test_an_ended_token_writes_nothing(api):
    """On PostgreSQL the token's check rides in front of the request's first statement: a token
    ended by a reset is refused, and what its request would have written (the Idempotency-Key's
    claim, the job) never runs; the same key then serves the account's next token."""
    u = api.register_user()
    token = request_reset(api, u["email"])
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": "brand-new-pw"}).status_code == 200
    key = f"k-{uuid.uuid4().hex}"
    body = {"service": "lawncare", "description": "Mow it", "preferredAt": "2031-05-01T09:00:00.000Z"}
    r = api.post("/jobs", token=u["token"], json=body, headers={"Idempotency-Key": key})
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    r = api.patch("/users/me", token=u["token"], json={"name": "Changed"})
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    fresh = login(api, u["email"], "brand-new-pw").json()["token"]
    assert api.get("/jobs", token=fresh).json()["jobs"] == []
    assert api.get("/users/me", token=fresh).json()["name"] == "Test User"
    r = api.post("/jobs", token=fresh, json=body, headers={"Idempotency-Key": key})
    assert r.status_code == 201 and "Idempotent-Replayed" not in r.headers


def test_an_ended_token_acts_nowhere_else_either(api, server):
    """The check also rides on routes that act beyond the database (the slow lane, uploads):
    whatever would act first for an ended token runs the check before it, so no password is
    hashed or changed and no photo is stored."""
    u = api.register_user()
    body = {"service": "lawncare", "description": "Mow it", "preferredAt": "2031-05-01T09:00:00.000Z"}
    job = api.post("/jobs", token=u["token"], json=body).json()
    token = request_reset(api, u["email"])
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": "brand-new-pw"}).status_code == 200
    r = api.post("/auth/change-password", token=u["token"],
                 json={"currentPassword": "brand-new-pw", "newPassword": "another-pw-1"})
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    uploads = os.path.join(server.data_dir, "uploads")
    before = sorted(os.listdir(uploads)) if os.path.isdir(uploads) else []
    r = api.post(f"/jobs/{job['id']}/images", token=u["token"],
                 files={"images": ("a.png", png_bytes(5), "image/png")})
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    assert (sorted(os.listdir(uploads)) if os.path.isdir(uploads) else []) == before
    assert login(api, u["email"], "another-pw-1").status_code == 401
    fresh = login(api, u["email"], "brand-new-pw").json()["token"]
    assert api.get(f"/jobs/{job['id']}", token=fresh).json()["images"] == []


def test_reset_of_user_leaves_provider_with_same_email_alone(api):
    email = unique_email("both")
    api.register_user(email=email, password="user-pw-123")
    api.register_provider(email=email, password="pro-pw-1234")
    token = request_reset(api, email, role="user")
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "user-pw-new"})
    assert r.status_code == 200 and r.json()["role"] == "user"
    assert login(api, email, "user-pw-new").status_code == 200
    assert login(api, email, "pro-pw-1234", provider=True).status_code == 200
    assert login(api, email, "user-pw-new", provider=True).status_code == 401


def test_reset_unknown_token_is_400(api):
    for token in (os.urandom(32).hex(), "x", "' OR 1=1 --"):
        r = api.post("/auth/reset-password", json={"token": token, "newPassword": "whatever-123"})
        assert r.json() == error_body(400, "Invalid or expired reset token"), token


def test_reset_token_is_not_its_hash(api):
    """Only the hash is stored; presenting the SHA-256 of the token must not work."""
    u = api.register_user()
    token = request_reset(api, u["email"])
    hashed = hashlib.sha256(token.encode()).hexdigest()
    assert api.post("/auth/reset-password", json={"token": hashed, "newPassword": "newpass-123"}).status_code == 400
    assert api.post("/auth/reset-password", json={"token": token.upper(),
                                                  "newPassword": "newpass-123"}).status_code == 400
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": "newpass-123"}).status_code == 200


def test_second_forgot_password_replaces_first_token(api):
    u = api.register_user()
    first = request_reset(api, u["email"], count=1)
    second = request_reset(api, u["email"], count=2)
    assert first != second
    r = api.post("/auth/reset-password", json={"token": first, "newPassword": "first-new-pw"})
    assert r.status_code == 400
    r = api.post("/auth/reset-password", json={"token": second, "newPassword": "second-new-pw"})
    assert r.status_code == 200, r.text
    assert login(api, u["email"], "second-new-pw").status_code == 200
    assert login(api, u["email"], "first-new-pw").status_code == 401


RESET_BAD = [
    ("token", {"newPassword": "good-password"}),
    ("token", {"token": "", "newPassword": "good-password"}),
    ("token", {"token": 123, "newPassword": "good-password"}),
    ("newPassword", {"newPassword": None}),
    ("newPassword", {}),
    ("newPassword", {"newPassword": ""}),
    ("newPassword", {"newPassword": "a" * 7}),
    ("newPassword", {"newPassword": "a" * 73}),
    ("newPassword", {"newPassword": 12345678}),
]


@pytest.mark.parametrize("field,body", RESET_BAD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(RESET_BAD)])
def test_reset_rejects_bad_input_and_keeps_token(api, field, body):
    u = api.register_user()
    token = request_reset(api, u["email"])
    sent = dict(body)
    if field == "newPassword":
        sent["token"] = token
    assert_field_error(api.post("/auth/reset-password", json=sent), field)
    # bad input changed nothing: the old password works and the token is still live
    assert login(api, u["email"], u["password"]).status_code == 200
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "p" * 8})
    assert r.status_code == 200, r.text
    assert login(api, u["email"], "p" * 8).status_code == 200


def test_reset_accepts_72_character_password(api):
    u = api.register_user()
    token = request_reset(api, u["email"])
    pw = "z" * 72
    assert api.post("/auth/reset-password", json={"token": token, "newPassword": pw}).status_code == 200
    assert login(api, u["email"], pw).status_code == 200


def test_reset_token_expires_after_one_hour(server_factory):
    srv = server_factory()
    api = Api(srv)
    a, b = api.register_user(), api.register_user()
    token_a = request_reset(api, a["email"])
    token_b = request_reset(api, b["email"])
    api.advance_clock(59 * 60 * 1000)
    r = api.post("/auth/reset-password", json={"token": token_a, "newPassword": "in-time-pw"})
    assert r.status_code == 200, r.text
    api.advance_clock(60 * 1000 + 1000)  # now 1 h + 1 s after issue
    r = api.post("/auth/reset-password", json={"token": token_b, "newPassword": "too-late-pw"})
    assert r.json() == error_body(400, "Invalid or expired reset token")
    assert login(api, b["email"], b["password"]).status_code == 200
    assert login(api, b["email"], "too-late-pw").status_code == 401
    # a new request issues a fresh, working token
    token_b2 = request_reset(api, b["email"], count=2)
    assert api.post("/auth/reset-password", json={"token": token_b2,
                                                  "newPassword": "fresh-pw-1"}).status_code == 200


def test_concurrent_use_of_one_reset_token(api):
    u = api.register_user()
    token = request_reset(api, u["email"])
    bodies = [{"token": token, "newPassword": f"racer-pw-{i}"} for i in range(4)]
    results = _race(api.url, "/auth/reset-password", bodies)
    codes = [r.status_code for r in results]
    assert sorted(codes) == [200, 400, 400, 400], [(r.status_code, r.text) for r in results]
    winner = codes.index(200)
    assert login(api, u["email"], f"racer-pw-{winner}").status_code == 200


# ---------------------------------------------------------------- hashing saturation
# The hashing lane and the slow lane are the HTTP core's, whatever the engine: SQLite only.

@pytest.mark.engine_independent
def test_saturated_hashing_answers_503_and_health_stays_up(server_factory):
    srv = server_factory(BCRYPT_COST="12", BCRYPT_THREADS="1", BCRYPT_QUEUE="0")
    api = Api(srv)
    u = api.register_user()

    n = 8
    barrier = threading.Barrier(n + 1)
    results = [None] * n
    health = []

    def do_login(i):
        barrier.wait()
        results[i] = requests.post(srv.url + "/auth/login", json={"email": u["email"], "password": u["password"]},
                                   timeout=60)

    threads = [threading.Thread(target=do_login, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    while any(t.is_alive() for t in threads):
        t0 = time.perf_counter()
        r = requests.get(srv.url + "/health", timeout=5)
        health.append((r.status_code, time.perf_counter() - t0))
        time.sleep(0.02)
    for t in threads:
        t.join(60)

    codes = [r.status_code for r in results]
    assert 200 in codes, codes
    assert 503 in codes, codes
    assert set(codes) <= {200, 503}, codes
    for r in results:
        if r.status_code == 503:
            assert r.json() == error_body(503, "Server busy")
            assert re.fullmatch(r"\d+", r.headers.get("Retry-After", "")), r.headers
            assert int(r.headers["Retry-After"]) >= 1
        else:
            assert r.json()["user"]["id"] == u["id"]
    assert health, "GET /health was not sampled while logins ran"
    assert all(code == 200 for code, _ in health), health
    assert max(dt for _, dt in health) < 1.0, health


@pytest.mark.engine_independent
def test_refused_logins_are_held_without_a_worker(server_factory):
    # Two slow-lane workers, one of them busy with a login hashing at cost 14 (about a second):
    # the refused logins' 503s are each held 200 ms, but by the server's timer, not by the one
    # free worker, so eight of them all come back after about 200 ms instead of one by one.
    srv = server_factory(BCRYPT_COST="14", BCRYPT_THREADS="1", BCRYPT_QUEUE="0", HTTP_SLOW_WORKERS="2")
    api = Api(srv)
    api.timeout = 180
    u = api.register_user()
    body = {"email": u["email"], "password": u["password"]}
    first = []
    hashing = threading.Thread(target=lambda: first.append(requests.post(srv.url + "/auth/login", json=body, timeout=180)))
    hashing.start()
    Api(srv).wait_load(lambda load: load["hashingPoolFull"], "the first login hashing")

    n = 8
    barrier = threading.Barrier(n)
    results = [None] * n

    def refused(i):
        barrier.wait()
        t0 = time.perf_counter()
        r = requests.post(srv.url + "/auth/login", json=body, timeout=30)
        results[i] = (r, time.perf_counter() - t0)

    threads = [threading.Thread(target=refused, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    hashing.join(180)
    assert first and first[0].status_code == 200, first
    for r, elapsed in results:
        assert r.status_code == 503, (r.status_code, r.text)
        assert r.headers["Retry-After"] == "1"
        assert r.json() == error_body(503, "Server busy")
        assert 0.15 <= elapsed < 0.8, [round(e, 3) for _, e in results]
