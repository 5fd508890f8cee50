"""The customer's premium features: favorites, private provider notes, the spend summary, the
seasonal-alert switch, and the daily seasonal-alert task that reads the forecast (the fake
Open-Meteo of tests/api/fake_geo.py) and notifies opted-in premium customers.

Spec: marketplace-api.md sections 1 (premium unlocks favorites, spend summary, notes, seasonal
alerts), 2 (Favorite, ProNote), 3 (premium flags), 4 (Users), 5 (/users/me/* is user only),
7 (premium_required); the project's docs/decisions.md ("Customer premium").
"""

import pytest

from conftest import Api
from flow_helpers import (FORBIDDEN, UNAUTHORIZED, accept, customer, fresh_zip, ok, post_job, private_zip,
                          provider, quote, step)
from conftest import sign_webhook
from helpers import error_body, eventually, server_seconds
from test_notifications import FakePush

PREMIUM_REQUIRED = error_body(403, "This feature requires a premium subscription", "premium_required")
ALERTS_PREMIUM_REQUIRED = error_body(403, "Seasonal alerts require a premium subscription", "premium_required")
PROVIDER_NOT_FOUND = error_body(404, "Provider not found")
NO_PROVIDER = "cnosuchprovider0000000000"
DAY_MS = 24 * 3600 * 1000
FAVORITE_FIELDS = {"id", "name", "companyName", "logoUrl", "headshots", "services"}


def webhook(api, type_, obj):
    """A signed processor event at the service's clock (Stripe's scheme, decisions.md 5)."""
    import json
    import uuid
    now = server_seconds(api)
    raw = json.dumps({"id": f"evt_{uuid.uuid4().hex}", "object": "event", "type": type_, "data": {"object": obj}})
    r = api.post("/webhooks", data=raw, headers={"Content-Type": "application/json",
                                                 "Stripe-Signature": sign_webhook(raw, timestamp=now)})
    assert r.status_code == 200, r.text


def premium(api, zip_code=None, **over):
    """A customer with a saved card and an active premium subscription."""
    user = customer(api, zip_code, "pm_card_visa", **over)
    sub = ok(api.post("/payments/premium/subscribe", token=user["token"]))
    assert sub["isPremium"] is True
    user["subscription"] = sub["subscriptionId"]
    return user


def end_subscription(api, user):
    webhook(api, "customer.subscription.deleted",
            {"id": user["subscription"], "object": "subscription", "customer": "cus_any", "status": "canceled"})


def past_due(api, user):
    webhook(api, "customer.subscription.updated",
            {"id": user["subscription"], "object": "subscription", "customer": "cus_any", "status": "past_due"})


def premium_routes(pro_id):
    return [("GET", "/users/me/favorites", None), ("POST", f"/users/me/favorites/{pro_id}", None),
            ("PUT", f"/users/me/pro-notes/{pro_id}", {"note": "Punctual"}), ("GET", "/users/me/spend-summary", None)]


def free_routes(pro_id):
    return [("DELETE", f"/users/me/favorites/{pro_id}", None, {"favorited": False}),
            ("GET", "/users/me/pro-notes", None, {}),
            ("DELETE", f"/users/me/pro-notes/{pro_id}", None, {"ok": True}),
            ("PATCH", "/users/me/seasonal-alerts", {"enabled": False}, {"seasonalAlertsEnabled": False})]


# ================================================================ access and the premium gate

ALL_ROUTES = [("GET", "/users/me/favorites", None), ("POST", "/users/me/favorites/PRO", None),
              ("DELETE", "/users/me/favorites/PRO", None), ("GET", "/users/me/pro-notes", None),
              ("PUT", "/users/me/pro-notes/PRO", {"note": "x"}), ("DELETE", "/users/me/pro-notes/PRO", None),
              ("GET", "/users/me/spend-summary", None), ("PATCH", "/users/me/seasonal-alerts", {"enabled": False})]


@pytest.mark.parametrize("method,path,body", ALL_ROUTES)
def test_premium_routes_are_for_customers(api, method, path, body):
    pro = api.register_provider()
    path = path.replace("PRO", pro["id"])
    r = api.request(method, path, json=body)
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    r = api.request(method, path, json=body, token=pro["token"])
    assert r.status_code == 403 and r.json() == FORBIDDEN


def test_free_customer_is_refused_premium_features(api):
    pro = api.register_provider()
    user = customer(api)
    for method, path, body in premium_routes(pro["id"]):
        r = api.request(method, path, json=body, token=user["token"])
        assert r.status_code == 403 and r.json() == PREMIUM_REQUIRED, (method, path)
    r = api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": True})
    assert r.status_code == 403 and r.json() == ALERTS_PREMIUM_REQUIRED
    assert ok(api.get("/users/me", token=user["token"]))["seasonalAlertsEnabled"] is False
    # what stays open: removing, reading one's notes, switching alerts off
    for method, path, body, answer in free_routes(pro["id"]):
        assert ok(api.request(method, path, json=body, token=user["token"])) == answer, (method, path)
    # a card alone is not premium
    assert api.get("/users/me/favorites", token=customer(api, card="pm_card_visa")["token"]).status_code == 403


def test_premium_ends_with_the_subscription_and_survives_past_due(api):
    pro = api.register_provider()
    user = premium(api)
    ok(api.post(f"/users/me/favorites/{pro['id']}", token=user["token"]))
    past_due(api, user)
    assert ok(api.get("/payments/premium/status", token=user["token"]))["isPremium"] is False
    # a late payment keeps the features, as it keeps a second saved address
    assert [f["id"] for f in ok(api.get("/users/me/favorites", token=user["token"]))] == [pro["id"]]
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "Still here"}))
    ok(api.post("/users/me/addresses", token=user["token"], json={"address": "2 Side St", "zip": "10001"}), 201)
    ok(api.post("/users/me/addresses", token=user["token"], json={"address": "3 Side St", "zip": "10001"}), 201)
    end_subscription(api, user)
    for method, path, body in premium_routes(pro["id"]):
        r = api.request(method, path, json=body, token=user["token"])
        assert r.status_code == 403 and r.json() == PREMIUM_REQUIRED, (method, path)
    r = api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": True})
    assert r.status_code == 403 and r.json() == ALERTS_PREMIUM_REQUIRED
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "4 Side St", "zip": "10001"})
    assert r.status_code == 403 and r.json()["code"] == "premium_required"
    # notes are still the customer's to read and delete
    assert ok(api.get("/users/me/pro-notes", token=user["token"])) == {pro["id"]: "Still here"}
    assert ok(api.delete(f"/users/me/favorites/{pro['id']}", token=user["token"])) == {"favorited": False}


# ================================================================ favorites

def favorites(api, user):
    return ok(api.get("/users/me/favorites", token=user["token"]))


def test_favorites_add_list_remove(api):
    user = premium(api)
    assert favorites(api, user) == []
    plain = api.register_provider(name="Plain Pro", services=["handyman", "lawncare"])
    rich = provider(api, [private_zip()], ["snowplowing"], name="Rich Pro")  # with a headshot
    ok(api.patch("/providers/me", token=rich["token"], json={"companyName": "Rich & Co"}))
    assert ok(api.post(f"/users/me/favorites/{plain['id']}", token=user["token"])) == {"favorited": True}
    assert ok(api.post(f"/users/me/favorites/{rich['id']}", token=user["token"])) == {"favorited": True}
    # adding again changes nothing
    assert ok(api.post(f"/users/me/favorites/{plain['id']}", token=user["token"])) == {"favorited": True}
    got = favorites(api, user)
    assert all(set(f) == FAVORITE_FIELDS for f in got)
    assert [f["id"] for f in got] == [rich["id"], plain["id"]]  # most recently added first
    assert got[1] == {"id": plain["id"], "name": "Plain Pro", "companyName": None, "logoUrl": None, "headshots": [],
                      "services": ["handyman", "lawncare"]}
    assert got[0]["companyName"] == "Rich & Co" and got[0]["services"] == ["snowplowing"]
    assert len(got[0]["headshots"]) == 1 and "/files/" in got[0]["headshots"][0]
    # another customer's favorites are their own
    assert favorites(api, premium(api)) == []
    assert ok(api.delete(f"/users/me/favorites/{plain['id']}", token=user["token"])) == {"favorited": False}
    assert ok(api.delete(f"/users/me/favorites/{plain['id']}", token=user["token"])) == {"favorited": False}
    assert [f["id"] for f in favorites(api, user)] == [rich["id"]]


def test_favorite_of_an_unknown_provider_is_404(api):
    user = premium(api)
    r = api.post(f"/users/me/favorites/{NO_PROVIDER}", token=user["token"])
    assert r.status_code == 404 and r.json() == PROVIDER_NOT_FOUND
    # a customer's id is not a provider's
    r = api.post(f"/users/me/favorites/{user['id']}", token=user["token"])
    assert r.status_code == 404 and r.json() == PROVIDER_NOT_FOUND
    assert favorites(api, user) == []
    assert ok(api.delete(f"/users/me/favorites/{NO_PROVIDER}", token=user["token"])) == {"favorited": False}


def test_concurrent_favorite_adds_make_one_favorite(api, server):
    from flow_helpers import race
    user = premium(api)
    pro = api.register_provider()
    answers = race(server, [lambda c: c.post(f"/users/me/favorites/{pro['id']}", token=user["token"])] * 6)
    assert [r.status_code for r in answers] == [200] * 6
    assert [f["id"] for f in favorites(api, user)] == [pro["id"]]


# ================================================================ pro notes

def notes(api, user):
    return ok(api.get("/users/me/pro-notes", token=user["token"]))


def test_pro_notes_upsert_and_delete(api):
    user = premium(api)
    a, b = api.register_provider(), api.register_provider()
    assert notes(api, user) == {}
    assert ok(api.put(f"/users/me/pro-notes/{a['id']}", token=user["token"], json={"note": "On time"})) == {"ok": True}
    assert ok(api.put(f"/users/me/pro-notes/{b['id']}", token=user["token"], json={"note": "Ask for Sam"})) == {"ok": True}
    assert notes(api, user) == {a["id"]: "On time", b["id"]: "Ask for Sam"}
    ok(api.put(f"/users/me/pro-notes/{a['id']}", token=user["token"], json={"note": "Late twice \u2014 \u00e9t\u00e9"}))
    assert notes(api, user) == {a["id"]: "Late twice \u2014 \u00e9t\u00e9", b["id"]: "Ask for Sam"}
    # private to the customer
    assert notes(api, premium(api)) == {}
    assert ok(api.delete(f"/users/me/pro-notes/{a['id']}", token=user["token"])) == {"ok": True}
    assert ok(api.delete(f"/users/me/pro-notes/{a['id']}", token=user["token"])) == {"ok": True}
    assert notes(api, user) == {b["id"]: "Ask for Sam"}


@pytest.mark.parametrize("body,error", [
    ({}, "note: is required"),
    ({"note": None}, "note: is required"),
    ({"note": ""}, "note: must not be empty"),
    ({"note": "   "}, "note: must not be empty"),
    ({"note": 42}, "note: must be a string"),
    ({"note": ["a"]}, "note: must be a string"),
    ({"note": "x" * 1001}, "note: must be at most 1000 characters"),
    ({"note": "\u00e9" * 1001}, "note: must be at most 1000 characters"),
])
def test_pro_note_validation_changes_nothing(api, body, error):
    user = premium(api)
    pro = api.register_provider()
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "Original"}))
    r = api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json=body)
    assert r.status_code == 400 and r.json() == error_body(400, error)
    assert notes(api, user) == {pro["id"]: "Original"}


def test_pro_note_bounds_and_unknown_provider(api):
    user = premium(api)
    pro = api.register_provider()
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "\u00e9" * 1000}))
    ok(api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": "y"}))
    assert notes(api, user) == {pro["id"]: "y"}
    r = api.put(f"/users/me/pro-notes/{NO_PROVIDER}", token=user["token"], json={"note": "Who?"})
    assert r.status_code == 404 and r.json() == PROVIDER_NOT_FOUND
    assert notes(api, user) == {pro["id"]: "y"}


def test_validation_comes_before_the_premium_gate(api):
    user = customer(api)
    pro = api.register_provider()
    r = api.put(f"/users/me/pro-notes/{pro['id']}", token=user["token"], json={"note": ""})
    assert r.status_code == 400 and r.json() == error_body(400, "note: must not be empty")
    r = api.patch("/users/me/seasonal-alerts", token=user["token"], json={})
    assert r.status_code == 400 and r.json() == error_body(400, "enabled: is required")


# ================================================================ spend summary

def spend(api, user):
    return ok(api.get("/users/me/spend-summary", token=user["token"]))


def completed_job(api, user, pro, amount, service="lawncare"):
    job = post_job(api, user, service=service)
    accept(api, user, quote(api, pro, job["id"], amount)["id"])
    for s in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        job = step(api, pro, job["id"], s)
    return job


def test_spend_summary_of_a_new_premium_customer(api):
    assert spend(api, premium(api)) == {"ytdTotal": 0, "ytdJobs": 0, "byMonth": [], "byService": [],
                                        "topProvider": None}


def test_spend_summary_from_captured_payments_and_tips(api):
    zip_ = private_zip()
    user = premium(api, zip_)
    lawn = provider(api, [zip_], ["lawncare"], name="Lawn Larry")
    ok(api.patch("/providers/me", token=lawn["token"], json={"companyName": "Larry Lawns"}))
    snow = provider(api, [zip_], ["snowplowing", "lawncare"], name="Snow Sue")
    a = completed_job(api, user, lawn, 100)                      # 118 captured
    completed_job(api, user, snow, 50, "snowplowing")            # 59 captured
    completed_job(api, user, snow, 20.5)                         # 24.19 captured
    ok(api.post(f"/jobs/{a['id']}/tip", token=user["token"], json={"amount": 5}))  # 5 captured at once
    # authorized but not captured: not spent yet
    pending = post_job(api, user)
    accept(api, user, quote(api, lawn, pending["id"], 300)["id"])
    month = a["updatedAt"][:7]
    assert spend(api, user) == {
        "ytdTotal": 206.19, "ytdJobs": 3,
        "byMonth": [{"month": month, "total": 206.19, "jobs": 3}],
        "byService": [{"service": "lawncare", "total": 147.19, "jobs": 2},
                      {"service": "snowplowing", "total": 59, "jobs": 1}],
        "topProvider": {"id": lawn["id"], "name": "Lawn Larry", "companyName": "Larry Lawns"},
    }
    # another customer's spending is theirs
    assert spend(api, premium(api))["ytdTotal"] == 0


# ================================================================ seasonal-alert switch

@pytest.mark.parametrize("body,error", [
    ({}, "enabled: is required"),
    ({"enabled": None}, "enabled: is required"),
    ({"enabled": "true"}, "enabled: must be a boolean"),
    ({"enabled": 1}, "enabled: must be a boolean"),
])
def test_seasonal_alerts_validation(api, body, error):
    user = premium(api)
    r = api.patch("/users/me/seasonal-alerts", token=user["token"], json=body)
    assert r.status_code == 400 and r.json() == error_body(400, error)
    assert ok(api.get("/users/me", token=user["token"]))["seasonalAlertsEnabled"] is False


def test_seasonal_alerts_switch(api):
    user = premium(api)
    for enabled in (True, True, False, True):
        r = api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": enabled})
        assert ok(r) == {"seasonalAlertsEnabled": enabled}
        assert ok(api.get("/users/me", token=user["token"]))["seasonalAlertsEnabled"] is enabled
    # without premium it can still be switched off
    end_subscription(api, user)
    assert ok(api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": False})) == \
        {"seasonalAlertsEnabled": False}


# ================================================================ the daily seasonal-alert task

SNOW = (73, 28.0, 19.0)
WARM = (1, 64.0, 48.0)
COLD = (3, 41.0, 30.0)


@pytest.fixture
def alerts_env(server_factory, fake_geo):
    """A server of its own (the tests move its clock a day at a time), its pushes going to a
    fake Expo endpoint."""
    push = FakePush()
    srv = server_factory(WEATHER_URL=fake_geo.url, PUSH_URL=push.url)
    fake_geo.reset()
    api = Api(srv)
    api.wait_queue_idle()  # the start-up day's run is over before anyone opts in
    yield api, push
    fake_geo.reset()
    push.close()


def opted_in(api, zip_code, name="Opted In"):
    user = premium(api, zip_code, name=name)
    ok(api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": True}))
    return user


def forecasts_for(fake_geo, lat, lng):
    return len([c for c in fake_geo.calls("forecast") if c["query"]["latitude"] == [f"{lat:.4f}"]
                and c["query"]["longitude"] == [f"{lng:.4f}"]])


def titles(api, user):
    """The customer's notification titles, newest first (signing in again once the test clock
    has outlived the 7-day token)."""
    r = api.get("/users/me/notifications", token=user["token"])
    if r.status_code == 401:
        user["token"] = ok(api.post("/auth/login", json={"email": user["email"], "password": user["password"]}))["token"]
        r = api.get("/users/me/notifications", token=user["token"])
    return [n["title"] for n in ok(r)]


def wait_titles(api, user, count, timeout=20):
    return eventually(lambda: titles(api, user), timeout, f"{count} notification(s)", interval=0.1,
                      until=lambda got: len(got) >= count)


def next_day(api):
    """Moves the server's clock a day on, so the daily task's next slot comes due."""
    api.advance_clock(DAY_MS)


def test_snow_in_the_forecast_alerts_opted_in_premium_customers(alerts_env, fake_geo):
    api, push = alerts_env
    zip_, lat, lng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [COLD, COLD, SNOW] + [COLD] * 11)
    alerted = opted_in(api, zip_, "Snowy Sam")
    ok(api.post("/users/me/push-token", token=alerted["token"], json={"token": "ExponentPushToken[sam]"}))
    quiet = premium(api, zip_)                        # premium, alerts off
    lapsed = opted_in(api, zip_)                      # opted in, then the subscription ended
    end_subscription(api, lapsed)
    elsewhere = opted_in(api, fresh_zip()[0])         # no snow there (the fake's default forecast)
    next_day(api)
    assert wait_titles(api, alerted, 1) == ["Snow in the forecast"]
    (note,) = ok(api.get("/users/me/notifications", token=alerted["token"]))
    assert zip_ in note["body"] and "snowplowing" in note["body"] and note["jobId"] is None
    pushes = push.wait(1)
    assert pushes == [{"to": "ExponentPushToken[sam]", "title": "Snow in the forecast", "body": note["body"],
                       "data": {"jobId": None}}]
    api.wait_queue_idle()
    assert titles(api, quiet) == [] and titles(api, lapsed) == [] and titles(api, elsewhere) == []


def test_at_most_one_alert_per_service_per_seven_days(alerts_env, fake_geo):
    api, _ = alerts_env
    zip_, lat, lng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [SNOW] * 14)
    first = opted_in(api, zip_)
    next_day(api)
    assert wait_titles(api, first, 1) == ["Snow in the forecast"]
    # the next day: a newcomer is alerted, the first customer is not alerted again
    newcomer = opted_in(api, zip_)
    calls = forecasts_for(fake_geo, lat, lng)
    next_day(api)
    assert wait_titles(api, newcomer, 1) == ["Snow in the forecast"]
    api.wait_queue_idle()
    assert titles(api, first) == ["Snow in the forecast"]
    assert forecasts_for(fake_geo, lat, lng) == calls + 1  # one forecast per ZIP per day
    # five days later (six after the first alert): still nothing new
    api.advance_clock(5 * DAY_MS)
    eventually(lambda: forecasts_for(fake_geo, lat, lng), 20, "the next day's forecast", interval=0.1,
               until=lambda n: n >= calls + 2)
    api.wait_queue_idle()
    assert titles(api, first) == ["Snow in the forecast"] and titles(api, newcomer) == ["Snow in the forecast"]
    # a seventh day after the first alert: the first customer hears again, the newcomer (six days) not
    next_day(api)
    assert wait_titles(api, first, 2) == ["Snow in the forecast"] * 2
    api.wait_queue_idle()
    assert titles(api, newcomer) == ["Snow in the forecast"]


def test_lawn_season_start_alerts_once_a_year(alerts_env, fake_geo):
    api, _ = alerts_env
    zip_, lat, lng = fresh_zip()
    # two warm days are not a season; three in a row are
    fake_geo.set_forecast(lat, lng, [COLD, WARM, WARM, COLD, WARM, WARM, WARM] + [COLD] * 7)
    user = opted_in(api, zip_, "Green Gus")
    start = api.advance_clock(0)
    next_day(api)
    assert wait_titles(api, user, 1) == ["Lawn season is starting"]
    (note,) = ok(api.get("/users/me/notifications", token=user["token"]))
    assert "lawncare" in note["body"] and zip_ in note["body"]
    # eight days later the season has started already: no second alert within the year
    calls = forecasts_for(fake_geo, lat, lng)
    api.advance_clock(8 * DAY_MS)
    eventually(lambda: forecasts_for(fake_geo, lat, lng), 20, "the next forecast", interval=0.1,
               until=lambda n: n > calls)
    api.wait_queue_idle()
    if api.advance_clock(0)[:4] == start[:4]:
        assert titles(api, user) == ["Lawn season is starting"]


def test_snow_and_lawn_season_together_and_a_failed_forecast_is_retried(alerts_env, fake_geo):
    api, _ = alerts_env
    zip_, lat, lng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [WARM, WARM, WARM, SNOW] + [COLD] * 10)
    user = opted_in(api, zip_)
    fake_geo.fail_next("forecast", 1, 503)
    next_day(api)
    assert sorted(wait_titles(api, user, 2)) == ["Lawn season is starting", "Snow in the forecast"]
    api.wait_queue_idle()
    assert len(titles(api, user)) == 2


def test_two_instances_alert_each_customer_once(server_factory, fake_geo):
    fake_geo.reset()
    first = server_factory(WEATHER_URL=fake_geo.url)
    second = server_factory(WEATHER_URL=fake_geo.url, DATABASE_URL=first.env["DATABASE_URL"])
    a, b = Api(first), Api(second)
    zip_, lat, lng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [SNOW] * 14)
    a.wait_queue_idle()
    users = [opted_in(a, zip_) for _ in range(3)]
    calls = forecasts_for(fake_geo, lat, lng)
    a.advance_clock(DAY_MS)
    b.advance_clock(DAY_MS)
    for u in users:
        assert wait_titles(a, u, 1) == ["Snow in the forecast"]
    a.wait_queue_idle()  # the queue is the shared database's: both instances' work
    assert all(titles(a, u) == ["Snow in the forecast"] for u in users)
    assert forecasts_for(fake_geo, lat, lng) == calls + 1  # one unit for the ZIP, run by one instance
