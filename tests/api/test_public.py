"""The public routes: service coverage (/services/available, /services/check-zip) and the
waitlist (POST /waitlist: upsert, confirmation email, 5 per 15 minutes per IP, any origin)."""
import re

import pytest

from conftest import unique_email, unique_ip
from flow_helpers import private_zip
from helpers import error_body
from test_auth import assert_field_error


# ---------------------------------------------------------------- coverage

def test_services_available_lists_what_providers_offer_in_the_customers_zip(api):
    zip_ = private_zip()
    other = private_zip()
    u = api.register_user(zip=zip_)
    r = api.get("/services/available", token=u["token"])
    assert r.status_code == 200, r.text
    assert r.json() == {"services": [], "providerCount": 0, "zip": zip_}

    api.register_provider(serviceZips=[zip_, other], services=["home_cleaning", "lawncare"])
    api.register_provider(serviceZips=[zip_], services=["lawncare", "handyman"])
    api.register_provider(serviceZips=[other], services=["snowplowing"])  # elsewhere
    r = api.get("/services/available", token=u["token"])
    assert r.status_code == 200, r.text
    # each service once, in the specification's order
    assert r.json() == {"services": ["lawncare", "handyman", "home_cleaning"], "providerCount": 2, "zip": zip_}


@pytest.mark.parametrize("who", ["none", "provider"])
def test_services_available_is_for_customers(api, who):
    token = None if who == "none" else api.register_provider()["token"]
    r = api.get("/services/available", token=token)
    assert r.status_code == (401 if who == "none" else 403), r.text


def test_check_zip(api):
    zip_ = private_zip()
    r = api.get("/services/check-zip", params={"zip": zip_})
    assert r.status_code == 200, r.text
    assert r.json() == {"covered": False, "zip": zip_}
    api.register_provider(serviceZips=[zip_], services=["snowplowing"])
    assert api.get("/services/check-zip", params={"zip": zip_}).json() == {"covered": True, "zip": zip_}


@pytest.mark.parametrize("params", [{}, {"zip": ""}, {"zip": "1234"}, {"zip": "123456"}, {"zip": "12a45"},
                                    {"zip": "' OR 1=1 --"}])
def test_check_zip_needs_five_digits(api, params):
    assert_field_error(api.get("/services/check-zip", params=params), "zip")


# ---------------------------------------------------------------- waitlist

def waitlist_body(**over):
    body = {"name": "Dana", "email": unique_email("wait"), "zip": "10001", "role": "customer"}
    body.update(over)
    return body


def test_waitlist_signs_up_and_sends_a_confirmation(api, server):
    body = waitlist_body(name="Dana O'Brien; DROP TABLE waitlist_emails", zip="02139")
    r = api.post("/waitlist", json=body, ip=unique_ip())
    assert r.status_code == 200, r.text
    assert r.json() == {"ok": True}
    [mail] = server.wait_mail(body["email"])
    assert mail["subject"] == "You are on the waitlist"
    assert "Dana O'Brien; DROP TABLE waitlist_emails" in mail["body"] and "02139" in mail["body"]


def test_waitlist_twice_updates_the_entry(api, server):
    body = waitlist_body()
    assert api.post("/waitlist", json=body, ip=unique_ip()).status_code == 200
    again = dict(body, name="Dana Updated", zip="60601", role="provider", email=body["email"].upper())
    r = api.post("/waitlist", json=again, ip=unique_ip())
    assert r.status_code == 200, r.text
    assert r.json() == {"ok": True}
    mails = server.wait_mail(body["email"], count=2)  # the email is lowercased: one entry, two mails
    # two queue workers may write the two mails in either order
    assert sum("Dana Updated" in m["body"] and "60601" in m["body"] for m in mails) == 1


WAITLIST_BAD = [
    ("name", {"name": None}), ("name", {"name": ""}), ("name", {"name": "x" * 101}), ("name", {"name": 7}),
    ("email", {"email": None}), ("email", {"email": "not-an-email"}), ("email", {"email": ""}),
    ("zip", {"zip": None}), ("zip", {"zip": "1234"}), ("zip", {"zip": "abcde"}), ("zip", {"zip": 10001}),
    ("role", {"role": None}), ("role", {"role": "user"}), ("role", {"role": "admin"}), ("role", {"role": ""}),
]


@pytest.mark.parametrize("field,over", WAITLIST_BAD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(WAITLIST_BAD)])
def test_waitlist_rejects_bad_input(api, server, field, over):
    body = waitlist_body()
    body.update(over)
    body = {k: v for k, v in body.items() if v is not None}
    assert_field_error(api.post("/waitlist", json=body, ip=unique_ip()), field)
    if isinstance(body.get("email"), str) and body["email"]:
        api.wait_queue_idle()
        assert server.mails(body["email"].lower()) == []


def test_waitlist_name_of_100_characters_is_accepted(api):
    r = api.post("/waitlist", json=waitlist_body(name="x" * 100), ip=unique_ip())
    assert r.status_code == 200, r.text


def test_waitlist_is_limited_per_ip(api):
    ip = unique_ip()
    for i in range(5):
        r = api.post("/waitlist", json=waitlist_body(), ip=ip)
        assert r.status_code == 200, (i, r.text)
    r = api.post("/waitlist", json=waitlist_body(), ip=ip)
    assert r.status_code == 429
    assert r.json() == error_body(429, "Too many requests")
    assert re.fullmatch(r"\d+", r.headers.get("Retry-After", "")), r.headers
    assert 1 <= int(r.headers["Retry-After"]) <= 900
    assert api.post("/waitlist", json=waitlist_body(), ip=unique_ip()).status_code == 200


def test_waitlist_allows_any_origin_whatever_cors_origins_says(server_factory):
    from conftest import Api
    api = Api(server_factory(CORS_ORIGINS="https://app.example"))
    origin = "https://landing.example"
    r = api.post("/waitlist", json=waitlist_body(), ip=unique_ip(), headers={"Origin": origin})
    assert r.status_code == 200, r.text
    assert r.headers.get("Access-Control-Allow-Origin") == "*"
    pre = api.request("OPTIONS", "/waitlist", headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                       "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 204, pre.text
    assert pre.headers.get("Access-Control-Allow-Origin") == "*"
    # other routes keep to the configured list
    r = api.get("/services/check-zip", params={"zip": "10001"}, headers={"Origin": origin})
    assert r.status_code == 200
    assert r.headers.get("Access-Control-Allow-Origin") is None
