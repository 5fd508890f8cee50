"""The provider's business tools: assigned jobs and schedule, weekly availability, Preferred Pro,
insights, premium insights and smart bundles (GET and accept).

Spec: marketplace-api.md sections 2 (Provider), 3 (Premium flags), 4 (Providers, the Bundle
shape), 5 (/providers/me/* is provider only), 7 (premium_required, already_member,
verification_required), 8 (bundle amounts 25-500, at most 3 bundles); the project's
docs/decisions.md ("Provider tools"), which gives the formula of every figure checked here.

Figures that depend on the market rate (premium insights, bundle prices) are checked on
servers of their own, where the test controls every accepted quote.
"""
import datetime
import math
import statistics

import pytest

from conftest import Api
from helpers import error_body, eventually
from flow_helpers import (FORBIDDEN, ID_RE, ISO_RE, JOB_FIELDS, UNAUTHORIZED, accept, customer, fresh_zip, ok,
                          post_job, private_zip, provider, quote, race, step, submit_quote, zip_centroid)
from test_providers import certificate_lines, insurance_check, server_today, text_pdf

PREMIUM_REQUIRED_CODE = "premium_required"
DEFAULT_WEEK = {d: {"start": "08:00", "end": "17:00", "on": d not in ("sat", "sun")}
                for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
ALL_DAY = {d: {"start": "00:00", "end": "23:59", "on": True} for d in DEFAULT_WEEK}
DAYS = list(DEFAULT_WEEK)
SCHEDULE_FIELDS = {"id", "service", "address", "zip", "status", "customerName", "scheduledAt", "amount"}


def fee(amount):
    """The platform fee in dollars: 18%, rounded to the cent (as the service rounds cents)."""
    cents = round(amount * 100)
    return (cents * 18 + 50) // 100 / 100


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def server_now(api):
    return datetime.datetime.fromisoformat(api.advance_clock(0).replace("Z", "+00:00"))


def ms_between(a, b):
    parse = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return round((parse(b) - parse(a)).total_seconds() * 1000)


def complete(api, pro, job_id):
    """ON_THE_WAY, IN_PROGRESS, COMPLETED by PATCH; the completed job."""
    for s in ("ON_THE_WAY", "IN_PROGRESS"):
        step(api, pro, job_id, s)
    return step(api, pro, job_id, "COMPLETED")


def won_job(api, pro, zip_code, amount, service="lawncare", card="pm_card_visa", preferred=None, user=None,
            **quote_over):
    """A job of a new customer in zip_code that pro quoted and the customer accepted; returns
    (user, job as accepted, quote)."""
    user = user or customer(api, zip_code, card)
    body = {"service": service}
    if preferred:
        body["preferredAt"] = preferred
    job = post_job(api, user, **body)
    q = quote(api, pro, job["id"], amount, **quote_over)
    return user, accept(api, user, q["id"])["job"], q


def tools_routes():
    return [
        ("GET", "/providers/me/jobs", None), ("GET", "/providers/me/schedule", None),
        ("GET", "/providers/me/availability", None), ("PUT", "/providers/me/availability", {"availability": ALL_DAY}),
        ("GET", "/providers/me/insights", None), ("GET", "/providers/me/premium-insights", None),
        ("POST", "/providers/me/preferred-pro/apply", None), ("GET", "/providers/me/smart-bundles", None),
        ("POST", "/providers/me/smart-bundles/accept", {"jobs": [{"jobId": "cnosuchjob000000000000000", "amount": 50}]}),
    ]


# ================================================================ access

@pytest.mark.parametrize("method,path,body", tools_routes())
def test_tools_need_a_provider_token(api, method, path, body):
    r = api.request(method, path, json=body)
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    r = api.request(method, path, json=body, token="garbage.token.here")
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    user = api.register_user()
    r = api.request(method, path, json=body, token=user["token"])
    assert r.status_code == 403 and r.json() == FORBIDDEN


# ================================================================ assigned jobs and schedule

def test_new_provider_has_no_jobs_and_an_empty_schedule(api):
    pro = provider(api)
    assert ok(api.get("/providers/me/jobs", token=pro["token"])) == []
    assert ok(api.get("/providers/me/schedule", token=pro["token"])) == []


def test_assigned_jobs_are_every_won_job_by_preferred_at(api):
    zip_ = private_zip()
    pro = provider(api, [zip_])
    rival = provider(api, [zip_])
    _, late, _ = won_job(api, pro, zip_, 80, preferred="2031-06-03T10:00:00.000Z")
    _, early, _ = won_job(api, pro, zip_, 70, preferred="2031-06-01T10:00:00.000Z")
    u, done, _ = won_job(api, pro, zip_, 60, preferred="2031-06-02T10:00:00.000Z")
    complete(api, pro, done["id"])
    asap_user = customer(api, zip_)
    asap = post_job(api, asap_user, isAsap=True, preferredAt=None)
    accept(api, asap_user, quote(api, pro, asap["id"], 90)["id"])
    # neither a job it only quoted nor a job another provider won
    quote(api, pro, post_job(api, customer(api, zip_))["id"], 50)
    won_job(api, rival, zip_, 55, preferred="2031-06-01T11:00:00.000Z")
    jobs = ok(api.get("/providers/me/jobs", token=pro["token"]))
    assert [j["id"] for j in jobs] == [asap["id"], early["id"], done["id"], late["id"]]
    assert all(set(j) == JOB_FIELDS for j in jobs)
    assert [j["status"] for j in jobs] == ["ACCEPTED", "ACCEPTED", "COMPLETED", "ACCEPTED"]
    assert all(j["providerId"] == pro["id"] for j in jobs)


def test_schedule_lists_running_jobs_with_the_accepted_quote(api):
    zip_ = private_zip()
    pro = provider(api, [zip_])
    u1, a, _ = won_job(api, pro, zip_, 120.5, preferred="2031-07-02T09:00:00.000Z",
                       scheduledAt="2031-07-01T15:30:00.000Z", user=customer(api, zip_, name="Ann Smith"))
    u2, b, _ = won_job(api, pro, zip_, 80, preferred="2031-07-03T09:00:00.000Z",
                       user=customer(api, zip_, name="Bob Jones"))
    _, c, _ = won_job(api, pro, zip_, 40, preferred="2031-07-04T09:00:00.000Z")
    step(api, pro, b["id"], "ON_THE_WAY")
    step(api, pro, c["id"], "ON_THE_WAY")
    step(api, pro, c["id"], "IN_PROGRESS")
    _, d, _ = won_job(api, pro, zip_, 30, preferred="2031-07-05T09:00:00.000Z")
    complete(api, pro, d["id"])  # done: off the schedule
    quote(api, pro, post_job(api, customer(api, zip_))["id"], 50)  # only quoted: not scheduled
    schedule = ok(api.get("/providers/me/schedule", token=pro["token"]))
    assert all(set(s) == SCHEDULE_FIELDS for s in schedule)
    assert schedule[0] == {"id": a["id"], "service": "lawncare", "address": "1 Main St", "zip": zip_,
                           "status": "ACCEPTED", "customerName": "Ann Smith",
                           "scheduledAt": "2031-07-01T15:30:00.000Z", "amount": 120.5}
    # without a scheduledAt on the quote, the job's preferredAt
    assert schedule[1] == {"id": b["id"], "service": "lawncare", "address": "1 Main St", "zip": zip_,
                           "status": "ON_THE_WAY", "customerName": "Bob Jones",
                           "scheduledAt": "2031-07-03T09:00:00.000Z", "amount": 80}
    assert [s["id"] for s in schedule] == [a["id"], b["id"], c["id"]]
    assert schedule[2]["status"] == "IN_PROGRESS" and schedule[2]["amount"] == 40


# ================================================================ availability

def put_availability(api, pro, body):
    return api.put("/providers/me/availability", token=pro["token"], json=body)


def test_availability_defaults_to_weekdays_eight_to_five(api):
    pro = provider(api, verified=False)
    assert ok(api.get("/providers/me/availability", token=pro["token"])) == DEFAULT_WEEK
    assert ok(api.get("/providers/me", token=pro["token"]))["availability"] == DEFAULT_WEEK


def test_availability_put_replaces_the_week(api):
    pro = provider(api, verified=False)
    week = {d: {"start": f"{7 + i:02d}:15", "end": f"{12 + i:02d}:45", "on": i % 2 == 0} for i, d in enumerate(DAYS)}
    assert ok(put_availability(api, pro, {"availability": week})) == week
    assert ok(api.get("/providers/me/availability", token=pro["token"])) == week
    assert ok(api.get("/providers/me", token=pro["token"]))["availability"] == week
    # a second PUT replaces the whole week: days left out are off
    only = {"sat": {"start": "09:00", "end": "13:00", "on": True}}
    expected = {d: {"start": "08:00", "end": "17:00", "on": False} for d in DAYS}
    expected["sat"] = only["sat"]
    assert ok(put_availability(api, pro, {"availability": only})) == expected
    assert ok(api.get("/providers/me/availability", token=pro["token"])) == expected


def test_availability_put_changes_nothing_else(api):
    pro = provider(api, verified=False)
    before = ok(api.get("/providers/me", token=pro["token"]))
    body = {"availability": ALL_DAY, "isPremium": True, "premiumSince": "2020-01-01T00:00:00.000Z", "name": "Hacker",
            "availability2": {"mon": {}}}
    ok(put_availability(api, pro, body))
    after = ok(api.get("/providers/me", token=pro["token"]))
    assert after["availability"] == ALL_DAY
    assert {k: v for k, v in after.items() if k != "availability"} == \
        {k: v for k, v in before.items() if k != "availability"}
    # unknown day names are ignored
    assert ok(put_availability(api, pro, {"availability": {"holiday": {"on": True}}})) == \
        {d: {"start": "08:00", "end": "17:00", "on": False} for d in DAYS}


HHMM = "must be a time HH:MM (00:00 to 23:59)"


@pytest.mark.parametrize("body,error", [
    ({}, "availability: is required"),
    ({"availability": None}, "availability: is required"),
    ({"availability": []}, "availability: must be an object"),
    ({"availability": "mon-fri"}, "availability: must be an object"),
    ({"availability": 5}, "availability: must be an object"),
    ({"availability": True}, "availability: must be an object"),
    ({"availability": {"mon": "09:00-17:00"}}, "availability.mon: must be an object"),
    ({"availability": {"tue": []}}, "availability.tue: must be an object"),
    ({"availability": {"mon": {"end": "17:00", "on": True}}}, "availability.mon.start: is required"),
    ({"availability": {"mon": {"start": "08:00", "on": True}}}, "availability.mon.end: is required"),
    ({"availability": {"mon": {"start": "08:00", "end": "17:00"}}}, "availability.mon.on: is required"),
    ({"availability": {"wed": {"start": "8:00", "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"wed": {"start": "24:00", "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"wed": {"start": "08:60", "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"wed": {"start": "ab:cd", "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"wed": {"start": "08:00:00", "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"wed": {"start": 800, "end": "17:00", "on": True}}}, f"availability.wed.start: {HHMM}"),
    ({"availability": {"thu": {"start": "08:00", "end": "5pm", "on": True}}}, f"availability.thu.end: {HHMM}"),
    ({"availability": {"fri": {"start": "08:00", "end": "17:00", "on": "yes"}}}, "availability.fri.on: must be a boolean"),
    ({"availability": {"sun": {"start": "08:00", "end": "17:00", "on": 1}}}, "availability.sun.on: must be a boolean"),
    ({"availability": {"sat": {"start": "17:00", "end": "08:00", "on": True}}}, "availability.sat: end must be after start"),
    ({"availability": {"sat": {"start": "09:00", "end": "09:00", "on": True}}}, "availability.sat: end must be after start"),
    # the first failure in day order (mon before sun) is the one reported
    ({"availability": {"sun": {"start": "x"}, "mon": {"start": "y"}}}, f"availability.mon.start: {HHMM}"),
])
def test_availability_validation(api, body, error):
    pro = provider(api, verified=False)
    ok(put_availability(api, pro, {"availability": ALL_DAY}))
    r = put_availability(api, pro, body)
    assert r.status_code == 400 and r.json() == error_body(400, error)
    assert ok(api.get("/providers/me/availability", token=pro["token"])) == ALL_DAY


def test_availability_bounds_and_off_days(api):
    pro = provider(api, verified=False)
    week = {"mon": {"start": "00:00", "end": "23:59", "on": True},
            "tue": {"start": "17:00", "end": "08:00", "on": False}}  # an off day's hours are kept as given
    expected = {d: {"start": "08:00", "end": "17:00", "on": False} for d in DAYS}
    expected.update(week)
    assert ok(put_availability(api, pro, {"availability": week})) == expected


def test_availability_malformed_json(api):
    pro = provider(api, verified=False)
    r = api.put("/providers/me/availability", token=pro["token"], data="{not json",
                headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json() == error_body(400, "body: malformed JSON")


# ================================================================ Preferred Pro

ALREADY = error_body(409, "You are already a Preferred Pro member", "already_member")


def test_preferred_pro_apply(api):
    pro = provider(api, verified=False)
    before = ok(api.get("/providers/me", token=pro["token"]))
    assert before["isPremium"] is False and before["premiumSince"] is None and before["preferredProAppliedAt"] is None
    now = server_now(api)
    # dates and flags in the body are ignored: the server's clock decides
    r = api.post("/providers/me/preferred-pro/apply", token=pro["token"],
                 json={"premiumSince": "2001-01-01T00:00:00.000Z", "preferredProAppliedAt": "2001-01-01T00:00:00.000Z",
                       "isPremium": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True and isinstance(body["message"], str) and body["message"]
    after = ok(api.get("/providers/me", token=pro["token"]))
    assert after["isPremium"] is True
    assert ISO_RE.match(after["premiumSince"]) and after["premiumSince"] == after["preferredProAppliedAt"]
    since = datetime.datetime.fromisoformat(after["premiumSince"].replace("Z", "+00:00"))
    assert abs((since - now).total_seconds()) < 30
    r = api.post("/providers/me/preferred-pro/apply", token=pro["token"])
    assert r.status_code == 409 and r.json() == ALREADY
    assert ok(api.get("/providers/me", token=pro["token"]))["premiumSince"] == after["premiumSince"]


def test_preferred_pro_concurrent_applications_one_wins(api, server):
    pro = provider(api, verified=False)
    answers = race(server, [lambda c: c.post("/providers/me/preferred-pro/apply", token=pro["token"])] * 8)
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [409] * 7
    assert all(r.json() == ALREADY for r in answers if r.status_code == 409)


# ================================================================ insights

EMPTY_INSIGHTS = {
    "averageRating": None, "totalReviews": 0, "avgTurnaroundMs": None, "incomeByService": {}, "topZip": None,
    "annualIncomeByService": {},
    "membershipFee": {"owed": False, "amount": 0, "reason": "Not a Preferred Pro member", "balance": 0},
    "pendingIncome": {"scheduled": 0, "scheduledByService": {}, "awaitingTransfer": 0, "awaitingByService": {}},
    "recentReviews": [],
}


def insights(api, pro):
    return ok(api.get("/providers/me/insights", token=pro["token"]))


def test_insights_of_a_new_provider(api):
    assert insights(api, provider(api, verified=False)) == EMPTY_INSIGHTS


def test_insights_after_real_jobs(api):
    z1, z2 = private_zip(), private_zip()
    pro = provider(api, [z1, z2], ["lawncare", "snowplowing"])
    # A: lawncare in z1, 100, completed and paid, tipped 5, reviewed 5
    ua, a, _ = won_job(api, pro, z1, 100, user=customer(api, z1, "pm_card_visa", name="Ann Reviewer"))
    a_done = complete(api, pro, a["id"])
    ok(api.post(f"/jobs/{a['id']}/tip", token=ua["token"], json={"amount": 5}))
    review_a = ok(api.post("/reviews", token=ua["token"], json={"jobId": a["id"], "rating": 5, "comment": "Great"}), 201)
    # B: snowplowing in z2, 80.25, completed and paid, reviewed 3 without a comment
    ub, b, _ = won_job(api, pro, z2, 80.25, "snowplowing", user=customer(api, z2, "pm_card_visa", name="Bo Critic"))
    b_done = complete(api, pro, b["id"])
    review_b = ok(api.post("/reviews", token=ub["token"], json={"jobId": b["id"], "rating": 3}), 201)
    # C and D: accepted and on the way (scheduled)
    won_job(api, pro, z1, 60)
    _, d, _ = won_job(api, pro, z2, 40, "snowplowing")
    step(api, pro, d["id"], "ON_THE_WAY")
    # E: completed without a card: the authorization failed, nothing to capture, no income
    _, e, _ = won_job(api, pro, z1, 50, card=None)
    e_done = complete(api, pro, e["id"])
    # F: only quoted, G: cancelled before acceptance (neither counts)
    quote(api, pro, post_job(api, customer(api, z1))["id"], 999)
    ug = customer(api, z1)
    g = post_job(api, ug)
    quote(api, pro, g["id"], 888)
    ok(api.post(f"/jobs/{g['id']}/cancel", token=ug["token"]))

    got = insights(api, pro)
    turnarounds = [ms_between(j["updatedAt"], done["updatedAt"]) for j, done in ((a, a_done), (b, b_done), (e, e_done))]
    year = a_done["updatedAt"][:4]
    assert got["averageRating"] == 4.0 and got["totalReviews"] == 2
    assert got["avgTurnaroundMs"] == round(sum(turnarounds) / 3)
    assert got["incomeByService"] == {"lawncare": 105, "snowplowing": 80.25}
    assert got["topZip"] == {"zip": z1, "total": 105}
    assert got["annualIncomeByService"] == {year: {"lawncare": 105, "snowplowing": 80.25}}
    assert got["membershipFee"] == EMPTY_INSIGHTS["membershipFee"]
    # A (100 and the tip) and B were captured: transfers not paid yet (the report window runs)
    assert got["pendingIncome"] == {"scheduled": 100, "scheduledByService": {"lawncare": 60, "snowplowing": 40},
                                    "awaitingTransfer": 185.25,
                                    "awaitingByService": {"lawncare": 105, "snowplowing": 80.25}}
    # (POST /reviews answers a createdAt read a moment after the stored one: compared to 50 ms)
    assert [abs(ms_between(r["createdAt"], mine["createdAt"])) < 50
            for r, mine in zip(got["recentReviews"], (review_b, review_a))] == [True, True]
    assert [{k: v for k, v in r.items() if k != "createdAt"} for r in got["recentReviews"]] == [
        {"id": review_b["id"], "jobId": b["id"], "rating": 3, "comment": None, "customerName": "Bo Critic",
         "service": "snowplowing"},
        {"id": review_a["id"], "jobId": a["id"], "rating": 5, "comment": "Great", "customerName": "Ann Reviewer",
         "service": "lawncare"},
    ]

    # Preferred Pro: this month's fee is owed
    ok(api.post("/providers/me/preferred-pro/apply", token=pro["token"]))
    fee_now = insights(api, pro)["membershipFee"]
    assert fee_now == {"owed": True, "amount": 39, "month": server_now(api).strftime("%Y-%m"),
                       "reason": "Preferred Pro membership fee for this month", "cancelAtMonthEnd": False,
                       "balance": 0}


def test_insights_awaiting_transfer_once_the_capture_goes_through(server_factory):
    """Against the fake Stripe: a completed job whose capture the processor refuses stays
    AUTHORIZED (its capture queued): no money moved, so it is neither income nor awaiting
    transfer. Once captured it is both: a transfer to the provider, not paid yet."""
    from fake_stripe import FakeStripe
    fake = FakeStripe(api_key="sk_test_fake", prices={"price_premium": 999}).start()
    try:
        api = Api(server_factory(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake.url,
                                 STRIPE_PREMIUM_PRICE_ID="price_premium"))
        zip_ = private_zip()
        pro = provider(api, [zip_])
        user, job, _ = won_job(api, pro, zip_, 70)
        intent = ok(api.get(f"/jobs/{job['id']}", token=user["token"]))["payment"]["processorPaymentIntentId"]
        fake.fail_next("POST", f"/v1/payment_intents/{intent}/capture", count=1000, status=500)
        complete(api, pro, job["id"])
        assert ok(api.get(f"/jobs/{job['id']}", token=user["token"]))["payment"]["status"] == "AUTHORIZED"
        got = insights(api, pro)
        assert got["pendingIncome"] == {"scheduled": 0, "scheduledByService": {}, "awaitingTransfer": 0,
                                        "awaitingByService": {}}
        assert got["incomeByService"] == {} and got["topZip"] is None
        fake.reset_controls()
        api.advance_clock(5 * 60 * 1000)  # the capture's next retry comes due (its backoff is seconds yet)
        got = eventually(lambda: insights(api, pro), 30, "the capture settled", interval=0.2,
                         until=lambda got: got["incomeByService"] == {"lawncare": 70})
        assert got["pendingIncome"] == {"scheduled": 0, "scheduledByService": {}, "awaitingTransfer": 70,
                                        "awaitingByService": {"lawncare": 70}}
    finally:
        fake.stop()


def test_insights_keep_the_last_five_reviews_newest_first(api):
    zip_ = private_zip()
    pro = provider(api, [zip_])
    ids = []
    for rating in (1, 2, 3, 4, 5, 4):
        u, job, _ = won_job(api, pro, zip_, 20)
        complete(api, pro, job["id"])
        ids.append(ok(api.post("/reviews", token=u["token"], json={"jobId": job["id"], "rating": rating}), 201)["id"])
    got = insights(api, pro)
    assert got["totalReviews"] == 6 and got["averageRating"] == round(19 / 6, 2)
    assert [r["id"] for r in got["recentReviews"]] == ids[::-1][:5]


def test_premium_insights_need_preferred_pro(api):
    pro = provider(api, verified=False)
    r = api.get("/providers/me/premium-insights", token=pro["token"])
    assert r.status_code == 403 and r.json()["code"] == PREMIUM_REQUIRED_CODE and r.json()["error"]
    ok(api.post("/providers/me/preferred-pro/apply", token=pro["token"]))
    body = ok(api.get("/providers/me/premium-insights", token=pro["token"]))
    assert set(body) == {"currentZips", "zipExpansion", "pricingTrends", "lostBids", "insuranceOpportunity",
                         "serviceExpansion"}
    assert body["currentZips"] == pro["body"]["serviceZips"]
    assert body["lostBids"] == [] and body["zipExpansion"] == []
    assert body["insuranceOpportunity"] == {"totalCompleted": 0, "wonByInsured": 0, "pct": 0,
                                            "providerHasInsurance": False}
    trend = body["pricingTrends"]["lawncare"]
    assert {k: v for k, v in trend.items() if k not in ("marketAvg", "trend")} == \
        {"myAvg": None, "winRate": 0, "totalBids": 0, "wonBids": 0}
    assert len(trend["trend"]) == 6 and all(t["bids"] == 0 and t["myAvg"] is None for t in trend["trend"])
    assert sorted(s["service"] for s in body["serviceExpansion"]) == ["handyman", "home_cleaning", "snowplowing"]
    assert all(set(s) == {"service", "openJobs", "estimatedMonthlyIncome"} for s in body["serviceExpansion"])


def nearest_zips(zip_code, count):
    """The count ZIPs of the table nearest to zip_code's centroid (itself excluded), nearest first."""
    from flow_helpers import _ZIPS
    lat, lng = zip_centroid(zip_code)
    rad = math.pi / 180

    def miles(z):
        dlat, dlng = (z[1] - lat) * rad, (z[2] - lng) * rad
        a = math.sin(dlat / 2) ** 2 + math.cos(lat * rad) * math.cos(z[1] * rad) * math.sin(dlng / 2) ** 2
        return 2 * 3958.8 * math.asin(min(1.0, math.sqrt(a)))

    near = sorted((miles(z), z[0]) for z in _ZIPS if z[0] != zip_code)
    return [z for d, z in near[:count] if d <= 25]


def test_premium_insights_figures(server_factory):
    """A server of its own: the market rate is every accepted quote of a service."""
    api = Api(server_factory())
    home = None
    while not home:  # a ZIP with at least two neighbours within 25 miles
        home = fresh_zip()[0]
        near = nearest_zips(home, 2)
        home = home if len(near) == 2 else None
    n1, n2 = near
    pro = provider(api, [home], ["lawncare"])
    rival = provider(api, [home, n1, n2], ["lawncare", "handyman"])
    accepted = {"lawncare": [], "handyman": []}
    # the market: lawncare quotes won by the rival
    for amount in (100, 120, 200):
        won_job(api, rival, n2, amount)
        accepted["lawncare"].append(amount)
    _, hj, _ = won_job(api, rival, n2, 80, "handyman")
    accepted["handyman"].append(80)
    # the provider's bids in its own ZIP: one lost to a cheaper rival, one won, one open
    lost_user = customer(api, home, "pm_card_visa")
    lost_job = post_job(api, lost_user)
    quote(api, pro, lost_job["id"], 90)
    winning = accept(api, lost_user, quote(api, rival, lost_job["id"], 70)["id"])
    accepted["lawncare"].append(70)
    _, mine, _ = won_job(api, pro, home, 110)
    accepted["lawncare"].append(110)
    quote(api, pro, post_job(api, customer(api, home))["id"], 101)
    # completed jobs in the provider's ZIP and service: one by the provider, one by an insured rival
    complete(api, pro, mine["id"])
    complete(api, rival, winning["job"]["id"])
    expiry = server_today(api) + datetime.timedelta(days=200)
    assert insurance_check(api, rival["token"], text_pdf(certificate_lines(expiry)), "cert.pdf",
                           "application/pdf")["insCheckStatus"] == "active"
    # open jobs: two lawncare and one handyman in n1, one lawncare in n2, two handyman at home
    for zip_code, service in ((n1, "lawncare"), (n1, "lawncare"), (n1, "handyman"), (n2, "lawncare"),
                              (home, "handyman"), (home, "handyman")):
        post_job(api, customer(api, zip_code), service=service)
    ok(api.post("/providers/me/preferred-pro/apply", token=pro["token"]))
    body = ok(api.get("/providers/me/premium-insights", token=pro["token"]))

    lawn_rate = round(statistics.median(accepted["lawncare"]) / 5) * 5
    handy_rate = round(statistics.median(accepted["handyman"]) / 5) * 5
    assert body["currentZips"] == [home]
    assert body["zipExpansion"] == [
        {"zip": n1, "openJobs": 2, "projectedMonthlyIncome": 2 * lawn_rate, "topService": "lawncare",
         "serviceBreakdown": {"lawncare": 2}},
        {"zip": n2, "openJobs": 1, "projectedMonthlyIncome": lawn_rate, "topService": "lawncare",
         "serviceBreakdown": {"lawncare": 1}},
    ]
    lawn = body["pricingTrends"]["lawncare"]
    assert set(body["pricingTrends"]) == {"lawncare"}
    assert lawn["myAvg"] == round((90 + 110 + 101) / 3, 2)
    assert lawn["marketAvg"] == round(statistics.mean(accepted["lawncare"]), 2)
    assert lawn["winRate"] == 0.33 and lawn["totalBids"] == 3 and lawn["wonBids"] == 1
    month = server_now(api).strftime("%Y-%m")
    assert lawn["trend"][-1] == {"month": month, "myAvg": round((90 + 110 + 101) / 3, 2), "bids": 3}
    assert [t["bids"] for t in lawn["trend"][:-1]] == [0] * 5
    assert body["lostBids"] == [{"service": "lawncare", "myAmount": 90, "winningAmount": 70, "delta": 20,
                                 "date": winning["job"]["updatedAt"]}]
    assert body["insuranceOpportunity"] == {"totalCompleted": 2, "wonByInsured": 1, "pct": 50,
                                            "providerHasInsurance": False}
    assert body["serviceExpansion"] == [
        {"service": "handyman", "openJobs": 2, "estimatedMonthlyIncome": 2 * handy_rate},
        {"service": "snowplowing", "openJobs": 0, "estimatedMonthlyIncome": 0},
        {"service": "home_cleaning", "openJobs": 0, "estimatedMonthlyIncome": 0},
    ]
    assert hj["status"] == "ACCEPTED"


# ================================================================ smart bundles: accept

def accept_bundle(api, pro, jobs):
    return api.post("/providers/me/smart-bundles/accept", token=pro["token"], json={"jobs": jobs})


def own_quotes(api, user, job_id, pro):
    return [q for q in ok(api.get(f"/quotes/job/{job_id}", token=user["token"])) if q["providerId"] == pro["id"]]


@pytest.mark.parametrize("body,error", [
    ({}, "jobs: is required"),
    ({"jobs": None}, "jobs: is required"),
    ({"jobs": {"jobId": "x", "amount": 50}}, "jobs: must be an array"),
    ({"jobs": "c123"}, "jobs: must be an array"),
    ({"jobs": []}, "jobs: must contain at least 1 item"),
    ({"jobs": ["cjob"]}, "jobs[0]: must be an object"),
    ({"jobs": [{"jobId": "J", "amount": 50}, 7]}, "jobs[1]: must be an object"),
    ({"jobs": [{"amount": 50}]}, "jobs[0].jobId: is required"),
    ({"jobs": [{"jobId": 12, "amount": 50}]}, "jobs[0].jobId: must be a string"),
    ({"jobs": [{"jobId": "", "amount": 50}]}, "jobs[0].jobId: must not be empty"),
    ({"jobs": [{"jobId": "J", "amount": 50}, {"jobId": "J"}]}, "jobs[1].amount: is required"),
    ({"jobs": [{"jobId": "J", "amount": "50"}]}, "jobs[0].amount: must be a number"),
    ({"jobs": [{"jobId": "J", "amount": None}]}, "jobs[0].amount: is required"),
    ({"jobs": [{"jobId": "J", "amount": 50}] * 51}, "jobs: must contain at most 50 items"),
])
def test_bundle_accept_validation_changes_nothing(api, body, error):
    zip_ = private_zip()
    pro = provider(api, [zip_])
    user = customer(api, zip_)
    job = post_job(api, user)
    body = {"jobs": [dict(j, jobId=job["id"]) if isinstance(j, dict) and j.get("jobId") == "J" else j
                     for j in body["jobs"]]} if isinstance(body.get("jobs"), list) else body
    r = api.post("/providers/me/smart-bundles/accept", token=pro["token"], json=body)
    assert r.status_code == 400 and r.json() == error_body(400, error)
    assert own_quotes(api, user, job["id"], pro) == []


def test_bundle_accept_needs_verification(api):
    zip_ = private_zip()
    pro = provider(api, [zip_], verified=False)
    user = customer(api, zip_)
    job = post_job(api, user)
    r = accept_bundle(api, pro, [{"jobId": job["id"], "amount": 50}])
    assert r.status_code == 400 and r.json()["code"] == "verification_required"
    assert own_quotes(api, user, job["id"], pro) == []


def test_bundle_accept_quotes_each_job_as_post_quotes_would(api, server):
    zip_ = private_zip()
    pro = provider(api, [zip_], ["lawncare", "handyman"])
    ok(api.patch("/providers/me", token=pro["token"], json={"companyName": "Bundle Co"}))
    users = [customer(api, zip_) for _ in range(3)]
    jobs = [post_job(api, u) for u in users]
    quoted_user = customer(api, zip_)
    already = post_job(api, quoted_user)
    quote(api, pro, already["id"], 60)
    cancelled_user = customer(api, zip_)
    cancelled = post_job(api, cancelled_user)
    ok(api.post(f"/jobs/{cancelled['id']}/cancel", token=cancelled_user["token"]))
    elsewhere = post_job(api, customer(api, private_zip()))  # not in the provider's ZIPs
    body = [{"jobId": jobs[0]["id"], "amount": 10}, {"jobId": jobs[1]["id"], "amount": 1000},
            {"jobId": jobs[2]["id"], "amount": 123.45}, {"jobId": already["id"], "amount": 70},
            {"jobId": cancelled["id"], "amount": 70}, {"jobId": "cnosuchjob000000000000000", "amount": 70},
            {"jobId": elsewhere["id"], "amount": 70}, {"jobId": jobs[0]["id"], "amount": 99}]
    r = accept_bundle(api, pro, body)
    assert r.status_code == 200 and r.json() == {"accepted": 3, "skipped": 5}
    for user, job, amount in zip(users, jobs, (25, 500, 123.45)):
        (q,) = own_quotes(api, user, job["id"], pro)
        assert q["amount"] == amount and q["platformFee"] == fee(amount)
        assert q["totalAmount"] == round(amount + fee(amount), 2) and q["status"] == "PENDING"
        assert ok(api.get(f"/jobs/{job['id']}", token=user["token"]))["status"] == "QUOTED"
        mail = server.wait_mail(user["email"])[0]
        assert mail["subject"] == "You received a quote" and "Bundle Co" in mail["body"]
        notes = ok(api.get("/users/me/notifications", token=user["token"]))
        assert [n["title"] for n in notes] == ["New quote"] and notes[0]["jobId"] == job["id"]
    assert [q["amount"] for q in own_quotes(api, quoted_user, already["id"], pro)] == [60]
    assert own_quotes(api, cancelled_user, cancelled["id"], pro) == []


def test_bundle_accept_concurrent_requests_make_one_quote_per_job(api, server):
    zip_ = private_zip()
    pro = provider(api, [zip_])
    users = [customer(api, zip_) for _ in range(5)]
    jobs = [post_job(api, u) for u in users]
    body = [{"jobId": j["id"], "amount": 80} for j in jobs]
    answers = race(server, [lambda c: c.post("/providers/me/smart-bundles/accept", token=pro["token"],
                                             json={"jobs": body})] * 4)
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    assert sum(r.json()["accepted"] for r in answers) == 5
    assert sum(r.json()["skipped"] for r in answers) == 15
    for user, job in zip(users, jobs):
        assert len(own_quotes(api, user, job["id"], pro)) == 1


# ================================================================ smart bundles: GET

@pytest.fixture(scope="module")
def bundle_server(make_server):
    """A server of its own: bundle prices come from the market rate, which the tests set here."""
    return make_server()


@pytest.fixture(scope="module")
def bapi(bundle_server):
    api = Api(bundle_server)
    # the market: lawncare 137 -> rate 135; handyman 800 -> rate 800, above the bundle range
    seller = provider(api, [private_zip()], ["lawncare", "handyman"])
    for amount, service in ((137, "lawncare"), (800, "handyman")):
        won_job(api, seller, seller["body"]["serviceZips"][0], amount, service)
    return api


def bundles(api, pro):
    return ok(api.get("/providers/me/smart-bundles", token=pro["token"]))


def at_day(now, days, hour, minute=0):
    d = (now + datetime.timedelta(days=days)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return iso(d)


def located_job(api, user, lat, lng, when, service="lawncare"):
    """A job at the customer's profile address with the customer's coordinates set to (lat, lng)."""
    ok(api.patch("/users/me", token=user["token"], json={"lat": lat, "lng": lng}))
    return post_job(api, user, service=service, preferredAt=when)


def road(lat1, lng1, lat2, lng2):
    rad = math.pi / 180
    dlat, dlng = (lat2 - lat1) * rad, (lng2 - lng1) * rad
    a = math.sin(dlat / 2) ** 2 + math.cos(lat1 * rad) * math.cos(lat2 * rad) * math.sin(dlng / 2) ** 2
    miles = 2 * 3958.8 * math.asin(min(1.0, math.sqrt(a))) * 1.3
    return miles, max(1, math.ceil(miles / 35 * 60))


def test_bundles_of_a_provider_without_jobs(api):
    assert bundles(api, provider(api)) == []


def test_bundles_group_by_day_route_and_rank(bapi):
    api = bapi
    home, blat, blng = fresh_zip()
    off_table = private_zip()
    pro = provider(api, [home, off_table], ["lawncare", "handyman"])
    ok(put_availability(api, pro, {"availability": ALL_DAY}))
    now = server_now(api)
    near_user, far_user = customer(api, home, name="Near Nell"), customer(api, home, name="Far Fred")
    blind = customer(api, off_table, name="No Coords")
    d1 = 1
    # day 1, posted out of route order: far (0.30 deg north), near (0.05), mid (0.15), one without coordinates
    far = located_job(api, far_user, blat + 0.30, blng, at_day(now, d1, 9))
    nocoord = post_job(api, blind, preferredAt=at_day(now, d1, 10))
    near = located_job(api, near_user, blat + 0.05, blng, at_day(now, d1, 11))
    mid = located_job(api, near_user, blat + 0.15, blng, at_day(now, d1, 12), service="handyman")
    # day 2: one job; day 3: two; day 4: three (the day-2 bundle ranks fourth and is left out)
    located_job(api, near_user, blat + 0.01, blng, at_day(now, 2, 9))
    day3 = [located_job(api, near_user, blat + 0.02 * k, blng, at_day(now, 3, 9 + k)) for k in (1, 2)]
    day4 = [located_job(api, near_user, blat + 0.02 * k, blng, at_day(now, 4, 9 + k)) for k in (1, 2, 3)]
    got = bundles(api, pro)
    assert got == bundles(api, pro)  # deterministic
    assert [b["date"] for b in got] == [at_day(now, d, 0)[:10] for d in (1, 4, 3)]
    first = got[0]
    assert set(first) >= {"id", "date", "jobCount", "items", "projectedEarnings", "avgDailyEarnings",
                          "boostDollars", "boostPct"}
    assert first["jobCount"] == 4 and len(first["items"]) == 4
    assert [i["job"]["id"] for i in first["items"]] == [near["id"], mid["id"], far["id"], nocoord["id"]]
    assert [i["routeOrder"] for i in first["items"]] == [1, 2, 3, 4]
    # prices: the market rate clamped to 25-500; earnings after the 18% platform fee
    assert [i["estimatedPrice"] for i in first["items"]] == [135, 500, 135, 135]
    assert [i["estimatedEarnings"] for i in first["items"]] == [round(p - fee(p), 2) for p in (135, 500, 135, 135)]
    assert first["projectedEarnings"] == round(3 * (135 - fee(135)) + 500 - fee(500), 2)
    assert first["avgDailyEarnings"] == 0 and first["boostDollars"] == first["projectedEarnings"]
    assert first["boostPct"] == 0
    # distances: from the base (the first service ZIP's centroid), then from stop to stop
    points = [(blat, blng), (blat + 0.05, blng), (blat + 0.15, blng), (blat + 0.30, blng)]
    for k, item in enumerate(first["items"][:3]):
        miles, minutes = road(*points[k], *points[k + 1])
        assert item["distanceMi"] == round(miles, 1) and item["driveMinutes"] == minutes
    assert first["items"][3]["distanceMi"] is None and first["items"][3]["driveMinutes"] is None
    job = first["items"][0]["job"]
    assert job == {"id": near["id"], "service": "lawncare", "address": "1 Main St", "zip": home,
                   "preferredAt": at_day(now, d1, 11), "lat": pytest.approx(blat + 0.05), "lng": pytest.approx(blng),
                   "customer": {"id": near_user["id"], "name": "Near Nell"}}
    assert first["items"][3]["job"]["lat"] is None and first["items"][3]["job"]["customer"]["name"] == "No Coords"
    assert [b["jobCount"] for b in got] == [4, 3, 2]
    assert [i["job"]["id"] for i in got[2]["items"]] == [j["id"] for j in day3]
    assert len({b["id"] for b in got}) == 3 and all(b["id"].startswith("b") and len(b["id"]) == 25 for b in got)


def test_bundles_leave_out_what_does_not_fit(bapi):
    api = bapi
    home, lat, lng = fresh_zip()
    pro = provider(api, [home], ["lawncare", "snowplowing"])
    now = server_now(api)
    # weekdays 08:00-17:00 (the default); find the next two weekdays at least a day ahead
    days = [d for d in range(1, 7) if (now + datetime.timedelta(days=d)).weekday() < 5][:2]
    weekend = [d for d in range(1, 7) if (now + datetime.timedelta(days=d)).weekday() >= 5][0]
    d, e = days
    # a scheduled job at d 12:00: candidates within two hours of it clash
    won_job(api, pro, home, 100, "snowplowing", preferred=at_day(now, d, 12))  # (keeps lawncare's market)
    u = customer(api, home)
    fits = [post_job(api, u, preferredAt=at_day(now, d, 14)), post_job(api, u, preferredAt=at_day(now, d, 8)),
            post_job(api, u, preferredAt=at_day(now, e, 16, 59))]
    post_job(api, u, preferredAt=at_day(now, d, 13))            # clashes (1 hour after)
    post_job(api, u, preferredAt=at_day(now, d, 10, 30))        # clashes (1.5 hours before)
    post_job(api, u, preferredAt=at_day(now, e, 17))            # at the end of the day: outside
    post_job(api, u, preferredAt=at_day(now, e, 7, 59))         # before the start
    post_job(api, u, preferredAt=at_day(now, weekend, 12))      # a day off
    post_job(api, u, preferredAt=at_day(now, 8, 12))            # beyond 7 days
    post_job(api, u, preferredAt=iso(now - datetime.timedelta(hours=1)))  # in the past
    post_job(api, u, service="handyman", preferredAt=at_day(now, d, 15))  # not its service
    post_job(api, u, isAsap=True, preferredAt=None)             # no date to plan
    quoted = post_job(api, u, preferredAt=at_day(now, d, 16))   # already quoted
    quote(api, pro, quoted["id"], 50)
    taken_user = customer(api, home)
    taken = post_job(api, taken_user, service="snowplowing", preferredAt=at_day(now, d, 15))  # another's now
    rival = provider(api, [home], ["snowplowing"])
    accept(api, taken_user, quote(api, rival, taken["id"], 50)["id"])
    got = bundles(api, pro)
    ids = sorted(i["job"]["id"] for b in got for i in b["items"])
    assert ids == sorted(j["id"] for j in fits)
    # a day of two jobs ranks above a day of one
    assert [b["jobCount"] for b in got] == [2, 1]


def test_bundles_compare_with_the_providers_average_day(bapi):
    api = bapi
    home, lat, lng = fresh_zip()
    pro = provider(api, [home], ["lawncare", "snowplowing"])
    ok(put_availability(api, pro, {"availability": ALL_DAY}))
    # history: two snowplowing jobs (lawncare's market stays) completed today, one day worked
    for amount in (100, 50):
        _, job, _ = won_job(api, pro, home, amount, "snowplowing")
        complete(api, pro, job["id"])
    avg = round(100 - fee(100) + 50 - fee(50), 2)
    now = server_now(api)
    u = customer(api, home)
    post_job(api, u, preferredAt=at_day(now, 2, 10))
    (b,) = bundles(api, pro)
    projected = round(135 - fee(135), 2)
    assert b["projectedEarnings"] == projected and b["avgDailyEarnings"] == avg
    assert b["boostDollars"] == round(projected - avg, 2)
    assert b["boostPct"] == round((projected - avg) / avg * 100)
