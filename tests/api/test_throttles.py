"""Throttles that hold across addresses (issue 31, items 5 and 9; docs/decisions.md, "Rate limits"
and "Login throttle").

- Every password check (customer and provider login, staff and administrator login, the
  owner's change-password, change-email and account deletion) counts against the account from
  anywhere: 10 failures in 15 minutes hold a customer or provider account (429 with
  Retry-After to any attempt, the right password included) until the window passes; staff
  members and administrators are counted over an hour and 20 failures lock them until
  `marketplace staff unlock` or the hour passes.
- Attempts are counted before the password is hashed: a burst of parallel wrong passwords gets
  exactly 10 answers 401, the rest 429.
- Clients are counted by address, an IPv6 client by its /64.
- Per account: 10 setup-intents, 10 payment methods, 5 premium subscriptions and 10 payout
  onboarding links an hour; registrations: 20 an hour per client address.

The tests run on a server of their own (a hashing queue large enough for the burst, the test
clock moved freely) and reach it from distinct addresses: real loopback sources (127.0.0.x)
where the address is the socket's, X-Forwarded-For (the test servers trust one proxy)
elsewhere.
"""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import uuid

import pytest
import requests

from conftest import ADMIN_ENV, PG_ENV, Api, Server, admin_login, unique_email, unique_ip
from helpers import SANITIZER_MARKERS, error_body
from staff_helpers import make_staff
from test_system import db_rows

pytestmark = pytest.mark.pooler

TOO_MANY = {"error": "Too many requests", "code": "rate_limited"}  # every 429 (helpers.error_body)
INVALID = error_body(401, "Invalid credentials", "invalid_credentials")


@pytest.fixture(scope="module")
def srv(make_server):
    return make_server(BCRYPT_QUEUE="64", DB_POOL_SIZE="8", **ADMIN_ENV)


@pytest.fixture
def api(srv):
    return Api(srv)


def throttled(r, most):
    """Asserts a 429 with the standard body and a Retry-After of at most `most` seconds; the
    Retry-After."""
    assert (r.status_code, r.json()) == (429, TOO_MANY), r.text
    assert re.fullmatch(r"\d+", r.headers.get("Retry-After", "")), r.headers
    retry = int(r.headers["Retry-After"])
    assert 1 <= retry <= most, retry
    return retry


def login(api, acc, password=None, ip=None, path="/auth/login"):
    """A login of acc (its password unless another is given) from ip, or from an address of its own."""
    return api.post(path, json={"email": acc["email"], "password": password or acc["password"]},
                    ip=ip or unique_ip())


def staff_login(api, s, password=None, ip=None):
    return login(api, s, password, ip, "/staff/login")


def post_from(server, source, path, body):
    """POST path with a JSON body from the loopback address source (the socket's own address,
    no X-Forwarded-For): (status, parsed body, headers)."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30, source_address=(source, 0))
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null"), dict(r.getheaders())
    finally:
        c.close()


def cli(server, *args, stdin=None):
    """`marketplace ARGS` on the server's database, as an operator runs it beside the service."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DATA_DIR": server.data_dir, "BCRYPT_COST": "4",
           "DATABASE_URL": server.env["DATABASE_URL"], "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23",
           **PG_ENV}
    p = subprocess.run([server.binary, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)
    assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr[-5000:]
    return p


def audit_actions(server, action):
    return db_rows(server.env["DATABASE_URL"], server.data_dir,
                   f"SELECT actor_role, target_id, target_role FROM audit_log WHERE action = '{action}' ORDER BY seq")


# ---------------------------------------------------------------- the account, from anywhere

@pytest.mark.parametrize("kind", ["user", "provider"])
def test_ten_failures_from_ten_addresses_hold_the_account(api, srv, kind):
    """The attack: four addresses made 10 guesses each and a fifth logged in. Now the account
    counts every failure wherever it comes from (real loopback sources here)."""
    acc = api.register_user() if kind == "user" else api.register_provider()
    path = "/auth/login" if kind == "user" else "/auth/provider/login"
    octet = 2 + uuid.uuid4().int % 200  # loopback sources of this test: 127.<o>.0.1 .. 127.<o>.0.11
    for i in range(10):
        status, body, _ = post_from(srv, f"127.{octet}.0.{i + 1}", path, {"email": acc["email"], "password": f"guess-{i}"})
        assert (status, body) == (401, INVALID), (i, body)
    status, body, headers = post_from(srv, f"127.{octet}.0.11", path, {"email": acc["email"], "password": acc["password"]})
    assert (status, body) == (429, TOO_MANY) and 1 <= int(headers["Retry-After"]) <= 900, (status, body, headers)
    throttled(login(api, acc, path=path), 900)  # X-Forwarded-For: any other address
    # the other kind of account with the same email, and other accounts, go on
    other = api.register_provider(email=acc["email"]) if kind == "user" else api.register_user(email=acc["email"])
    other_path = "/auth/provider/login" if kind == "user" else "/auth/login"
    assert login(api, other, path=other_path).status_code == 200


def test_a_password_reset_lifts_the_accounts_hold(api, srv):
    """The mailbox's owner chose a new password: the guesses against the old one no longer
    hold the account (the owner need not wait out the window)."""
    acc = api.register_user()
    for i in range(10):
        assert login(api, acc, password=f"guess-{i}").status_code == 401
    throttled(login(api, acc), 900)
    assert api.post("/auth/forgot-password", json={"email": acc["email"], "role": "user"}, ip=unique_ip()).ok
    token = re.search(r"token=([0-9a-f]{64})", srv.wait_mail(acc["email"])[-1]["body"]).group(1)
    r = api.post("/auth/reset-password", json={"token": token, "newPassword": "chosen-after-reset"})
    assert r.status_code == 200, r.text
    assert login(api, acc, password="chosen-after-reset").status_code == 200


def test_every_password_check_counts_against_the_account(api):
    """Login, change-password, change-email and the owner's deletion share one count, and a
    held account refuses each of them, even with the right password."""
    u = api.register_user()
    tok = u["token"]
    wrong = [
        lambda ip: login(api, u, "wrong-password", ip),
        lambda ip: api.post("/auth/change-password", token=tok, ip=ip,
                            json={"currentPassword": "wrong-password", "newPassword": "brand-new-pass"}),
        lambda ip: api.post("/auth/change-email", token=tok, ip=ip,
                            json={"currentPassword": "wrong-password", "email": unique_email("new")}),
        lambda ip: api.delete("/users/me", token=tok, ip=ip, json={"password": "wrong-password"}),
    ]
    for i in range(10):
        r = wrong[i % 4](unique_ip())
        assert (r.status_code, r.json()) == (401, INVALID), (i, r.text)
    throttled(login(api, u), 900)
    throttled(api.post("/auth/change-password", token=tok, ip=unique_ip(),
                       json={"currentPassword": u["password"], "newPassword": "brand-new-pass"}), 900)
    throttled(api.post("/auth/change-email", token=tok, ip=unique_ip(),
                       json={"currentPassword": u["password"], "email": unique_email("new")}), 900)
    throttled(api.delete("/users/me", token=tok, ip=unique_ip(), json={"password": u["password"]}), 900)
    assert api.get("/users/me", token=tok).status_code == 200  # nothing changed


def test_a_providers_deletion_and_login_share_the_count(api):
    p = api.register_provider()
    for i in range(10):
        r = api.delete("/providers/me", token=p["token"], ip=unique_ip(), json={"password": "wrong-password"}) \
            if i % 2 else login(api, p, "wrong-password", path="/auth/provider/login")
        assert (r.status_code, r.json()) == (401, INVALID), (i, r.text)
    throttled(login(api, p, path="/auth/provider/login"), 900)
    throttled(api.delete("/providers/me", token=p["token"], ip=unique_ip(), json={"password": p["password"]}), 900)


def test_a_success_does_not_reset_the_accounts_count(api):
    """The owner's own login between guesses gives a guesser no fresh 10."""
    u = api.register_user()
    for _ in range(9):
        assert login(api, u, "wrong-password").status_code == 401
    assert login(api, u).status_code == 200
    assert login(api, u, "wrong-password").status_code == 401
    throttled(login(api, u), 900)


def test_parallel_wrong_passwords_are_counted_exactly(api, srv):
    """The attack: 13 guesses passed in a 10-guess window. Each attempt counts itself before
    the hashing, so of 24 at once exactly 10 are checked (401) and the rest refused (429)."""
    u = api.register_user()
    n = 24
    barrier = threading.Barrier(n)
    answers = [None] * n

    def guess(i):
        s = requests.Session()
        barrier.wait()
        r = s.post(srv.url + "/auth/login", json={"email": u["email"], "password": f"guess-{i}"},
                   headers={"X-Forwarded-For": unique_ip()}, timeout=30)
        answers[i] = (r.status_code, r.json())

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(a[0] for a in answers) == [401] * 10 + [429] * (n - 10), answers
    assert all(body == (INVALID if status == 401 else TOO_MANY) for status, body in answers), answers
    throttled(login(api, u), 900)


# ---------------------------------------------------------------- staff and administrators

def test_twenty_failures_lock_a_staff_member_until_unlocked(api, srv):
    admin = admin_login(api)
    s = make_staff(api, "customer_support", admin)
    for i in range(20):
        r = staff_login(api, s, f"guess-{i}")
        assert (r.status_code, r.json()) == (401, INVALID), (i, r.text)
    assert throttled(staff_login(api, s), 3600) > 15 * 60  # counted over the hour
    srv.wait_log(lambda line: line.get("msg") == "login throttle: account locked"
                 and line.get("account") == f"staff:{s['email']}" and line.get("level") == "warn")
    assert api.get("/staff/me", token=s["token"]).status_code == 200  # a lock ends no token

    p = cli(srv, "staff", "unlock", s["email"].upper())
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {s['email']} unlocked"), p.stderr
    assert staff_login(api, s).status_code == 200
    p = cli(srv, "staff", "unlock", "--email", s["email"])
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {s['email']} was not locked"), p.stderr
    assert ("operator-cli", s["id"], "staff") in audit_actions(srv, "staff.unlock")


def test_a_staff_members_success_clears_its_address_but_not_the_account(api):
    """From one address a staff member has 10 failures before that address is held (the
    account's 20 are counted from everywhere); a success there clears the address's count only."""
    s = make_staff(api, "professional_support", admin_login(api))
    ip = unique_ip()
    for i in range(9):
        assert staff_login(api, s, "wrong-password", ip).status_code == 401, i
    assert staff_login(api, s, ip=ip).status_code == 200
    for i in range(10):
        assert staff_login(api, s, "wrong-password", ip).status_code == 401, i
    throttled(staff_login(api, s, ip=ip), 900)  # the address: 10 since the success
    assert staff_login(api, s).status_code == 200  # the account: 19 of its 20
    assert staff_login(api, s, "wrong-password").status_code == 401
    assert throttled(staff_login(api, s), 3600) > 15 * 60  # the 20th: locked


def test_an_administrator_is_locked_and_unlocked_alike(api, srv):
    email, password = unique_email("root"), "admin-password-2"
    assert cli(srv, "admin", "create", "--email", email, stdin=password + "\n").returncode == 0
    for i in range(20):  # the route's own limit is 10 per address: every guess from another one
        r = api.post("/admin/login", json={"email": email, "password": f"guess-{i}"}, ip=unique_ip())
        assert (r.status_code, r.json()) == (401, INVALID), (i, r.text)
    r = api.post("/admin/login", json={"email": email, "password": password}, ip=unique_ip())
    assert throttled(r, 3600) > 15 * 60
    p = cli(srv, "staff", "unlock", "--email", email)
    assert (p.returncode, p.stdout.strip()) == (0, f"administrator {email} unlocked"), p.stderr
    assert api.post("/admin/login", json={"email": email, "password": password}, ip=unique_ip()).status_code == 200


@pytest.mark.parametrize("args, code, error", [
    ([], 2, "refused: email: is required"),
    (["not-an-email"], 2, "refused: email: must be a valid email"),
    (["--email", "nobody@example.com"], 1, "no staff member or administrator has the email nobody@example.com"),
])
def test_staff_unlock_refusals(srv, args, code, error):
    p = cli(srv, "staff", "unlock", *args)
    assert (p.returncode, p.stderr.strip().splitlines()[-1], p.stdout) == (code, error, "")


def test_the_windows_pass(api, srv):
    """A customer's hold ends 15 minutes after its first failure, a staff lock an hour after."""
    u = api.register_user()
    s = make_staff(api, "technical_support", admin_login(api))
    for i in range(20):
        if i < 10:
            assert login(api, u, "wrong-password").status_code == 401
        assert staff_login(api, s, "wrong-password").status_code == 401
    customer_wait = throttled(login(api, u), 900)
    staff_wait = throttled(staff_login(api, s), 3600)
    api.advance_clock(customer_wait * 1000 - 5000)
    throttled(login(api, u), 5)
    api.advance_clock(6000)
    assert login(api, u).status_code == 200
    throttled(staff_login(api, s), staff_wait)
    api.advance_clock((staff_wait - customer_wait) * 1000)
    assert staff_login(api, s).status_code == 200


# ---------------------------------------------------------------- IPv6: one client per /64

def test_ipv6_clients_are_counted_by_their_64(api):
    """Ten guesses at a staff member from ten addresses of one /64 are ten from one client:
    that client is held (the (account, client) count) while the account (10 of its 20) is not;
    registrations from one /64 share its 20 an hour."""
    s = make_staff(api, "internal_audit", admin_login(api))
    net, other = f"2001:db8:{uuid.uuid4().int % 0xffff:x}:1", f"2001:db8:{uuid.uuid4().int % 0xffff:x}:2"
    for i in range(10):
        assert staff_login(api, s, "wrong-password", f"{net}::{i + 1:x}").status_code == 401, i
    throttled(staff_login(api, s, ip=f"[{net}:ab:cd:ef:99]:443"), 900)  # another spelling, same /64
    assert staff_login(api, s, ip=f"{other}::1").status_code == 200
    for i in range(20):
        assert register(api, False, f"{net}:{i:x}::7").status_code == 201, i
    throttled(register(api, True, f"{net}::ffff"), 3600)  # customers and providers together
    assert register(api, True, f"{other}::ffff").status_code == 201


class V6Server(Server):
    @property
    def url(self):
        return f"http://[::1]:{self.port}"


def test_an_ipv6_socket_peer_is_counted_by_its_64(request, pg_cluster):
    """Without proxies the socket's own IPv6 address is the client: its counters are its /64."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    url = pg_cluster.new_database() if pg_cluster else None
    srv6 = V6Server(request.config.getoption("--binary"), url, {"BIND": "::1", "TRUST_PROXY": "0", "DB_POOL_SIZE": "4"})
    try:
        srv6.start()
        r = requests.post(srv6.url + "/auth/register", timeout=30, json={
            "email": unique_email(), "password": "password123", "name": "N", "address": "1 Main St", "zip": "10001"})
        assert r.status_code == 201, r.text
        keys = [k for (k,) in db_rows(srv6.env["DATABASE_URL"], srv6.data_dir, "SELECT key FROM rate_limits")]
        assert "register:::/64" in keys, keys
    finally:
        srv6.stop()
        report = srv6.sanitizer_report()
        srv6.cleanup()
    assert not report, report


# ---------------------------------------------------------------- where money and accounts are made

@pytest.mark.parametrize("method, path, body, most", [
    ("POST", "/payments/setup-intent", None, 10),
    ("POST", "/payments/payment-method", {"paymentMethodId": "pm_card_visa"}, 10),
    ("POST", "/payments/premium/subscribe", None, 5),
    ("POST", "/providers/me/payout-account", None, 10),
])
def test_processor_routes_are_limited_per_account(api, method, path, body, most):
    """Each of these calls the payment processor, whose own rate limit the platform shares."""
    make = api.register_provider if "providers" in path else api.register_user
    acc, other = make(), make()
    for a in (acc, other) if path.endswith("subscribe") else ():  # a card to subscribe with
        assert api.post("/payments/payment-method", token=a["token"], json={"paymentMethodId": "pm_card_visa"}).ok
    for i in range(most):
        r = api.request(method, path, token=acc["token"], json=body, ip=unique_ip())
        assert r.status_code != 429, (i, r.text)
    assert throttled(api.request(method, path, token=acc["token"], json=body, ip=unique_ip()), 3600) > 3500
    r = api.request(method, path, token=other["token"], json=body)  # per account, not per address
    assert r.status_code in (200, 201), r.text


CUSTOMER = {"password": "password123", "name": "N", "address": "1 Main St", "zip": "10001"}
PROVIDER = {"password": "password123", "name": "P", "serviceZips": ["10001"], "services": ["lawncare"]}


def register(api, provider, ip, **over):
    path, body = ("/auth/provider/register", PROVIDER) if provider else ("/auth/register", CUSTOMER)
    return api.post(path, ip=ip, json={"email": unique_email(), **body, **over})


def test_registrations_are_limited_per_address(api):
    """Customers and providers together, 20 an hour per client address; a refused body counts."""
    ip = unique_ip()
    for i in range(19):
        assert register(api, i % 2 == 1, ip).status_code == 201, i
    assert register(api, False, ip, zip="1").status_code == 400
    throttled(register(api, True, ip), 3600)
    throttled(register(api, False, ip), 3600)
    assert register(api, False, unique_ip()).status_code == 201


def test_the_document_lists_the_limits(api):
    doc = api.get("/openapi.json").json()
    for path, name, most, per in (("/payments/setup-intent", "setup-intent", 10, "account"),
                                  ("/payments/payment-method", "payment-method", 10, "account"),
                                  ("/payments/premium/subscribe", "premium-subscribe", 5, "account"),
                                  ("/providers/me/payout-account", "payout-account", 10, "account"),
                                  ("/auth/register", "register", 20, None),
                                  ("/auth/provider/register", "register", 20, None)):
        op = doc["paths"][path]["post"]
        assert "429" in op["responses"], path
        limit = op["x-rate-limit"]
        assert (limit["name"], limit["max"], limit["windowSeconds"], limit.get("per")) == (name, most, 3600, per), path
