"""Links that lead somewhere and emails as people expect them (issue 33, items 4 and 8).

- Each flow's link is an APP_URL path with its parameters: {APP_URL}/reset-password?token=,
  {APP_URL}/confirm-email?token=, {APP_URL}/payouts/onboarding/return and /refresh. Without
  APP_URL the server serves those pages itself under {PUBLIC_URL}/app, and a browser completes
  each flow there (headless Chromium: browser_driver.py).
- `redirectUrl` on forgot-password, change-email and the payout account: allowed when its origin
  is listed in APP_REDIRECT_URLS, or its scheme is a listed custom scheme; the link then starts
  with it. Anything else: 400 `redirectUrl: not an allowed address`, nothing sent or changed.
- Every email is multipart/alternative: the text part and an HTML part with the same links, the
  action a button whose link is also written out; rendered in Chromium without a request.
  (conftest.check_mail checks the parts and the links of every email any test reads.)
The project's docs/decisions.md, "Links"."""
import re

import os

import pytest

from browser_driver import Browser
from conftest import ADMIN_ENV, Api, admin_login, html_links, text_links, unique_email, unique_ip
from flow_helpers import accept, completed_flow, customer, ok, post_job, private_zip, provider, quote
from helpers import assert_error, eventually
from staff_helpers import make_staff, request_elevation, sql

pytestmark = pytest.mark.pooler

ALLOWED = " https://app.example.com , http://localhost:5173/,myapp://"
REFUSED = "redirectUrl: not an allowed address"
TOKEN = r"[0-9a-f]{64}"
NEW_PASSWORD = "a-new-password-1"


@pytest.fixture(scope="module")
def own(make_server):
    """A server without APP_URL (its own pages) that allows the app origins and scheme above."""
    return make_server(APP_URL=None, APP_REDIRECT_URLS=ALLOWED, **ADMIN_ENV)


@pytest.fixture(scope="module")
def own_api(own):
    return Api(own)


@pytest.fixture(scope="module")
def browser():
    """Chromium; the tests that use it are marked `once` (the pages are the same on every
    engine, and the other passes test their routes over HTTP)."""
    b = Browser().start()
    yield b
    b.stop()


def path_of(link):
    """The path and query of an absolute link (the test talks to 127.0.0.1)."""
    return "/" + link.split("://", 1)[1].split("/", 1)[1]


def base(server):
    """The server's PUBLIC_URL (its default: http://localhost:$PORT)."""
    return f"http://localhost:{server.port}"


def forgot(api, email, role="user", **extra):
    return api.post("/auth/forgot-password", json={"email": email, "role": role, **extra}, ip=unique_ip())


def change_email(api, acct, new, **extra):
    return api.post("/auth/change-email", token=acct["token"],
                    json={"currentPassword": acct["password"], "email": new, **extra})


def link_in(server, to, pattern, count=1):
    """The one link matching pattern (a regex) in mail number `count` to `to`."""
    mail = server.wait_mail(to, count)[count - 1]
    found = [m.group(0) for m in re.finditer(pattern, mail["body"])]
    assert len(found) == 1, (pattern, mail["body"])
    return found[0]


def onboarding_links(server, pg_cluster, account_id):
    """(return_url, refresh_url) of the simulated processor's latest account link of account_id."""
    import json
    rows = sql(server, pg_cluster, "SELECT data FROM processor_sim_objects WHERE kind = 'account_link' "
                                   "ORDER BY created_at DESC")
    for (data,) in rows:
        link = json.loads(data)
        if link["account"] == account_id:
            return link["return_url"], link["refresh_url"]
    raise AssertionError(f"no account link of {account_id}")


def payout_account_id(server, pg_cluster, provider_id):
    return sql(server, pg_cluster, f"SELECT processor_account_id FROM payout_accounts WHERE provider_id = "
                                   f"'{provider_id}'")[0][0]


# ================================================================ where links lead

def test_without_app_url_every_link_leads_to_the_servers_own_pages(own, own_api, pg_cluster):
    u = own_api.register_user()
    ok(forgot(own_api, u["email"]))
    link_in(own, u["email"], re.escape(base(own)) + r"/app/reset-password\?token=" + TOKEN + r"(?=\s)")
    new = unique_email("moved")
    ok(change_email(own_api, u, new))
    link_in(own, new, re.escape(base(own)) + r"/app/confirm-email\?token=" + TOKEN)
    # the cancel link to the current address is always the server's own page
    cancel = [m for m in own.wait_mail(u["email"], 2) if m["subject"].startswith("An email change")][0]
    assert re.search(re.escape(base(own)) + r"/auth/cancel-email-change\?token=" + TOKEN, cancel["body"])
    pro = own_api.register_provider()
    ok(own_api.post("/providers/me/payout-account", token=pro["token"]))
    assert onboarding_links(own, pg_cluster, payout_account_id(own, pg_cluster, pro["id"])) == (
        base(own) + "/app/payouts/onboarding/return", base(own) + "/app/payouts/onboarding/refresh")


def test_with_app_url_the_links_are_its_documented_paths(api, server, pg_cluster):
    """The shared server runs with APP_URL=http://app.test."""
    u = api.register_user()
    ok(forgot(api, u["email"]))
    link_in(server, u["email"], r"http://app\.test/reset-password\?token=" + TOKEN)
    new = unique_email("moved")
    ok(change_email(api, u, new))
    link_in(server, new, r"http://app\.test/confirm-email\?token=" + TOKEN)
    pro = api.register_provider()
    ok(api.post("/providers/me/payout-account", token=pro["token"], json={}))
    assert onboarding_links(server, pg_cluster, payout_account_id(server, pg_cluster, pro["id"])) == (
        "http://app.test/payouts/onboarding/return", "http://app.test/payouts/onboarding/refresh")


@pytest.mark.parametrize("redirect,expected", [
    ("https://app.example.com/auth/reset", "https://app.example.com/auth/reset?token={t}"),
    ("https://APP.example.com/r?from=mail#top", "https://APP.example.com/r?from=mail&token={t}#top"),
    ("http://localhost:5173/reset", "http://localhost:5173/reset?token={t}"),
    ("myapp://reset-password", "myapp://reset-password?token={t}"),
    ("MYAPP://reset", "MYAPP://reset?token={t}"),
])
def test_a_reset_link_leads_to_an_allowed_redirect_url(own, own_api, redirect, expected):
    u = own_api.register_user()
    ok(forgot(own_api, u["email"], redirectUrl=redirect))
    mail = own.wait_mail(u["email"])[0]
    [link] = text_links(mail["body"])
    token = re.search(r"token=(" + TOKEN + ")", link).group(1)
    assert link == expected.format(t=token) and link.startswith(redirect.split("#")[0])
    assert link in html_links(mail["html"])
    r = own_api.post("/auth/reset-password", json={"token": token, "newPassword": NEW_PASSWORD})
    assert r.status_code == 200 and r.json()["role"] == "user", r.text


def test_a_confirmation_link_leads_to_a_custom_scheme(own, own_api):
    u = own_api.register_user()
    new = unique_email("deep")
    ok(change_email(own_api, u, new, redirectUrl="myapp://account/confirm-email"))
    link = link_in(own, new, r"myapp://account/confirm-email\?token=" + TOKEN)
    # the app posts the token: the answer's status says how it went (200, 400 gone, 409 taken)
    r = own_api.post("/auth/confirm-email?token=" + link.rsplit("=", 1)[1])
    assert r.status_code == 200 and "Email address changed" in r.text
    assert ok(own_api.get("/users/me", token=u["token"]))["email"] == new


def test_an_onboarding_link_returns_to_an_allowed_redirect_url(own, own_api, pg_cluster):
    pro = own_api.register_provider()
    ok(own_api.post("/providers/me/payout-account", token=pro["token"],
                    json={"redirectUrl": "https://app.example.com/payouts"}))
    acct = payout_account_id(own, pg_cluster, pro["id"])
    assert onboarding_links(own, pg_cluster, acct) == (
        "https://app.example.com/payouts", "https://app.example.com/payouts?onboarding=refresh")
    ok(own_api.post("/providers/me/payout-account", token=pro["token"], json={"redirectUrl": "myapp://payouts"}))
    assert onboarding_links(own, pg_cluster, acct) == ("myapp://payouts", "myapp://payouts?onboarding=refresh")


BAD_REDIRECTS = [
    "https://evil.example/reset",
    "http://app.example.com/reset",             # another scheme
    "https://app.example.com:8443/reset",       # another port
    "https://app.example.com.evil.example/",    # another host
    "https://app.example.com@evil.example/",    # user information
    "https://evil.example/?https://app.example.com",
    "http://localhost:5174/",
    "otherapp://reset",
    "myapp:reset",                              # a custom scheme's address is myapp://...
    "javascript:alert(1)",
    "/reset-password",
    "app.example.com/reset",
    "https://app.example.com/a b",
    "https://app.example.com/\u00e9",
    "",
    "https://app.example.com/" + "x" * 2030,  # 2049 characters
    5,
    ["https://app.example.com"],
    {"url": "https://app.example.com"},
    True,
]


def test_a_refused_redirect_url_is_400_and_changes_and_sends_nothing(own, own_api, pg_cluster):
    u = own_api.register_user()
    pros = [own_api.register_provider() for _ in range(0, len(BAD_REDIRECTS), 9)]  # 10 an hour each
    new = unique_email("never")
    for i, bad in enumerate(BAD_REDIRECTS):
        assert_error(forgot(own_api, u["email"], redirectUrl=bad), 400, REFUSED)
        assert_error(forgot(own_api, unique_email("nobody"), redirectUrl=bad), 400, REFUSED)
        assert_error(change_email(own_api, u, new, redirectUrl=bad), 400, REFUSED)
        assert_error(own_api.post("/providers/me/payout-account", token=pros[i // 9]["token"],
                                  json={"redirectUrl": bad}), 400, REFUSED)
    # the allowed ones pass only the same check: a wrong password is still 401 after it
    r = change_email(own_api, {**u, "password": "wrong-password"}, new, redirectUrl="myapp://x")
    assert r.status_code == 401, r.text
    own_api.wait_queue_idle()
    assert own.mails(u["email"]) == [] and own.mails(new) == []
    [(resets,)] = sql(own, pg_cluster, f"SELECT count(*) FROM password_reset_tokens WHERE account_id = '{u['id']}'")
    assert int(resets) == 0
    assert ok(own_api.get("/users/me/export", token=u["token"]))["pendingEmailChange"] is None
    for pro in pros:
        assert ok(own_api.get("/providers/me/payout-account", token=pro["token"]))["status"] == "none"
    # and the change itself still works afterwards (the refusals counted against no limit)
    ok(change_email(own_api, u, new))


def test_without_app_redirect_urls_every_redirect_url_is_refused(api):
    u = api.register_user()
    for url in ("http://app.test/reset", "https://app.example.com/reset", "myapp://reset"):
        assert_error(forgot(api, u["email"], redirectUrl=url), 400, REFUSED)


@pytest.mark.parametrize("value", ["https://app.example.com/path", "*", "https://user@app.example.com", "myapp",
                                   "https://", "://x", "https://app.example.com?x=1"])
@pytest.mark.once
def test_a_bad_app_redirect_urls_entry_stops_the_start(server_factory, value):
    with pytest.raises(RuntimeError, match="APP_REDIRECT_URLS"):
        server_factory(APP_REDIRECT_URLS=f"https://ok.example.com,{value}")


# ================================================================ the server's own pages in a browser

@pytest.mark.once
def test_the_own_reset_page_completes_a_reset_in_a_browser(own, own_api, browser):
    u = own_api.register_user()
    ok(forgot(own_api, u["email"]))
    link = link_in(own, u["email"], re.escape(base(own)) + r"/app/reset-password\?token=" + TOKEN)
    page = browser.open(link)
    assert (page["status"], page["contentType"], page["title"]) == (200, "text/html; charset=utf-8",
                                                                     "Choose a new password")
    assert browser.axe() == []
    # the field says 8 at least (minlength, which a browser enforces); the server says so too
    r = own_api.post("/app/reset-password", data={"token": link.rsplit("=", 1)[1], "newPassword": "short"})
    assert r.status_code == 400 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "The new password must be at least 8 characters." in r.text and 'aria-invalid="true"' in r.text
    browser.fill("#newPassword", NEW_PASSWORD)
    page = browser.submit("button[type=submit]")
    assert (page["status"], page["title"]) == (200, "Your password was changed"), page["text"]
    assert page["url"] == base(own) + "/app/reset-password"  # the token went in the body, not the address
    assert all(url.startswith(base(own) + "/") for url in page["requests"]), page["requests"]
    assert browser.axe() == []
    r = own_api.post("/auth/login", json={"email": u["email"], "password": NEW_PASSWORD})
    assert r.status_code == 200, r.text
    again = browser.open(link)  # opened twice: a page that says the link is spent
    assert (again["status"], again["contentType"], again["title"]) == (400, "text/html; charset=utf-8",
                                                                       "This link is no longer valid")
    assert "used already, or it expired" in again["text"]


@pytest.mark.once
def test_the_own_confirmation_page_completes_an_email_change_in_a_browser(own, own_api, browser):
    u = own_api.register_user()
    new = unique_email("browser")
    ok(change_email(own_api, u, new))
    link = link_in(own, new, re.escape(base(own)) + r"/app/confirm-email\?token=" + TOKEN)
    page = browser.open(link)  # opening changes nothing (a mail scanner may open it)
    assert (page["status"], page["title"]) == (200, "Confirm your new email address") and new in page["text"]
    assert ok(own_api.get("/users/me", token=u["token"]))["email"] == u["email"]
    assert browser.axe() == []
    page = browser.submit("button[type=submit]")
    assert (page["status"], page["contentType"], page["title"]) == (200, "text/html; charset=utf-8",
                                                                    "Email address changed"), page["text"]
    assert ok(own_api.get("/users/me", token=u["token"]))["email"] == new
    for _ in range(2):  # opened again, never an error body: a page that says so
        again = browser.open(link)
        assert (again["status"], again["contentType"], again["title"]) == (400, "text/html; charset=utf-8",
                                                                           "This link is no longer valid")
        assert "if you confirmed it already, your account uses the new address" in again["text"]
        assert not again["text"].lstrip().startswith("{")
    again = own_api.post(path_of(link))  # the button of a page left open
    assert again.status_code == 400 and again.headers["Content-Type"] == "text/html; charset=utf-8"
    for cut in ("/app/confirm-email", "/app/confirm-email?token=", "/app/reset-password",
                "/app/reset-password?token=" + "t" * 513):
        page = browser.open(base(own) + cut)
        assert (page["status"], page["contentType"], page["title"]) == (400, "text/html; charset=utf-8",
                                                                        "This link is incomplete"), cut


def test_an_address_taken_before_the_button_is_pressed_shows_a_page(own, own_api):
    u = own_api.register_user()
    new = unique_email("taken")
    ok(change_email(own_api, u, new))
    link = link_in(own, new, re.escape(base(own)) + r"/app/confirm-email\?token=" + TOKEN)
    own_api.register_user(email=new)
    r = own_api.post(path_of(link))
    assert (r.status_code, r.headers["Content-Type"]) == (409, "text/html; charset=utf-8")
    assert "This address is taken" in r.text
    assert ok(own_api.get("/users/me", token=u["token"]))["email"] == u["email"]


@pytest.mark.once
def test_onboarding_returns_to_the_own_page_in_a_browser(own, own_api, browser):
    pro = own_api.register_provider()
    url = ok(own_api.post("/providers/me/payout-account", token=pro["token"]))["onboardingUrl"]
    page = browser.open(url)  # the simulated processor's page, whose link goes back to the app
    assert page["status"] == 200
    page = browser.submit("text=Back to the app")
    assert (page["status"], page["title"], page["url"]) == (
        200, "Payout setup finished", base(own) + "/app/payouts/onboarding/return")
    assert browser.axe() == []
    page = browser.open(base(own) + "/app/payouts/onboarding/refresh")
    assert (page["status"], page["title"]) == (200, "This setup link expired")
    assert browser.axe() == []
    assert ok(own_api.get("/providers/me/payout-account", token=pro["token"]))["status"] == "enabled"


def test_the_own_pages_are_served_beside_an_app_url(api, server):
    """APP_URL set: the links lead to the app, and the pages still answer (an app may send people
    there)."""
    u = api.register_user()
    ok(forgot(api, u["email"]))
    token = link_in(server, u["email"], r"http://app\.test/reset-password\?token=" + TOKEN).rsplit("=", 1)[1]
    page = api.get("/app/reset-password?token=" + token)
    assert page.status_code == 200 and f'name="token" value="{token}"' in page.text
    assert page.headers["Cache-Control"] == "no-store"
    done = api.post("/app/reset-password", data={"token": token, "newPassword": NEW_PASSWORD})
    assert done.status_code == 200 and "Your password was changed" in done.text
    login = ok(api.post("/auth/login", json={"email": u["email"], "password": NEW_PASSWORD}))
    u = {**u, "token": login["token"], "password": NEW_PASSWORD}  # the reset ended the account's tokens
    new = unique_email("shared")
    ok(change_email(api, u, new))
    token = link_in(server, new, r"http://app\.test/confirm-email\?token=" + TOKEN).rsplit("=", 1)[1]
    assert api.get("/app/confirm-email?token=" + token).status_code == 200
    assert api.post("/app/confirm-email?token=" + token).status_code == 200
    for path in ("/app/payouts/onboarding/return", "/app/payouts/onboarding/refresh"):
        assert api.get(path).status_code == 200


# ================================================================ emails: a text part and an HTML part

def every_kind_of_email(own, api):
    """Drives the flows that send each kind of email the account, marketplace and staff flows
    send, on the own server; returns the mails."""
    admin = admin_login(api)
    zip_code = private_zip()
    user, pro = customer(api, zip_code, "pm_card_visa"), provider(api, [zip_code])
    ok(forgot(api, user["email"]))
    ok(forgot(api, user["email"], redirectUrl="myapp://reset"))
    new = unique_email("every")
    ok(change_email(api, user, new))
    confirm = link_in(own, new, re.escape(base(own)) + r"/app/confirm-email\?token=" + TOKEN)
    assert api.post(path_of(confirm)).status_code == 200
    user = {**user, "email": new}
    r = api.post("/auth/change-password", token=user["token"],
                 json={"currentPassword": user["password"], "newPassword": NEW_PASSWORD})
    user["token"] = ok(r)["token"]
    job = post_job(api, user)
    q = quote(api, pro, job["id"])
    accept(api, user, q["id"])
    ok(api.post("/users/me/support", token=user["token"],
                json={"subject": "Card <trouble> & more", "body": "Ünïcode and a long line " + "x" * 1200,
                      "category": "technical"}))
    ok(api.post("/waitlist", json={"name": "Wendy Wait", "email": unique_email("wait"), "zip": "99501", "role": "customer"},
                ip=unique_ip()))
    staff = make_staff(api, "customer_support", admin)
    request_elevation(api, staff, user["id"])
    done = completed_flow(api)  # the payment's receipt
    ok(api.post(f"/jobs/{done.job_id}/tip", token=done.user["token"], json={"amount": 5}))  # the tip's
    ok(api.post(f"/jobs/{done.job_id}/report", token=done.user["token"], json={"description": "A missed corner"}),
       201)  # the staff's notice
    api.wait_queue_idle()
    return own.mails()


@pytest.mark.once
def test_every_email_has_a_text_and_an_html_part_with_the_same_links(own, own_api, browser):
    mails = every_kind_of_email(own, own_api)
    subjects = {m["subject"] for m in mails}
    for expected in ("Reset your password", "Confirm your new email address", "Your email address was changed",
                     "Your password was changed"):
        assert expected in subjects, subjects
    assert any(s.startswith("An email change to ") for s in subjects), subjects
    assert any(s.startswith("Elevation request: ") for s in subjects), subjects
    assert any("[Support: technical]" in s for s in subjects), subjects
    assert any(s.startswith("Your receipt: ") and s.endswith("(tip)") for s in subjects), subjects
    assert len(subjects) >= 13, subjects
    with_links = 0
    for mail in mails:
        # conftest.check_mail has checked the MIME structure and that both parts carry the same links
        for part in ("text/plain", "text/html"):
            assert f"Content-Type: {part}; charset=utf-8\r\n" in mail["raw"], mail["raw"][:3000]
        seen = browser.render(mail["html"])
        assert seen["requests"] == [] and seen["scripts"] == 0 and seen["images"] == 0, (mail["subject"], seen)
        assert seen["styleSheets"] == 0  # inline styles only
        links = text_links(mail["body"])
        buttons = [a for a in seen["links"] if a["button"]]
        written = {a["href"] for a in seen["links"] if not a["button"] and a["text"] == a["href"]}
        assert {a["href"] for a in seen["links"]} == links, mail["subject"]
        # each action is a visible, coloured button whose link is also written out
        assert {a["href"] for a in buttons} <= written, mail["subject"]
        for a in buttons:
            assert a["visible"] and a["text"] and a["background"] == "rgb(29, 78, 216)", (mail["subject"], a)
        with_links += bool(buttons)
        # the text is all there, in the HTML too
        first = mail["body"].strip().splitlines()[0].strip()
        assert first in seen["text"], (mail["subject"], first)
    assert with_links >= 5
    labels = {a["text"] for m in mails for a in browser.render(m["html"])["links"] if a["button"]}
    assert {"Reset your password", "Confirm your new email address", "Cancel the change", "Approve",
            "Deny"} <= labels, labels


def test_non_ascii_and_long_lines_are_quoted_printable(own, own_api):
    u = own_api.register_user(name="Zoë Ünal")
    ok(forgot(own_api, u["email"]))
    mail = own.wait_mail(u["email"])[0]
    assert "Hello Zoë Ünal," in mail["body"] and "Zoë Ünal" in mail["html"]
    assert "Content-Transfer-Encoding: quoted-printable" in mail["raw"]
    assert "Zoë" not in mail["raw"]  # the raw message is ASCII
    ascii_user = own_api.register_user(name="Plain Name")
    ok(forgot(own_api, ascii_user["email"]))
    plain = own.wait_mail(ascii_user["email"])[0]
    assert "Content-Transfer-Encoding: quoted-printable" not in plain["raw"]
    assert re.search(r"token=" + TOKEN, plain["raw"])  # a developer can read an ASCII mail as it is
