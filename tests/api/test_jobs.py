"""Jobs: posting (POST /jobs), the customer list and the provider feed (GET /jobs), the detail
view (GET /jobs/:id), the customer's photos, the provider's lifecycle (PATCH status, start,
complete), cancellation, tips, reviews, dispute reports and recurring requests, and the whole
marketplace flow once end to end.

Spec: marketplace-api.md sections 1, 2 (Job, JobReport, Review), 3 (Job status), 4 (Jobs,
Reviews), 5 (access matrix), 7 (errors), 8 (limits); decisions.md section 4 (job JSON, GET
/jobs semantics, the one-step status order, payment object and statuses, tip without a card
400, tip/recurring/review on a job not COMPLETED 409) and section 5 (the simulated processor).

Every test makes its own accounts in a ZIP of its own (flow_helpers.private_zip; fresh_zip where
the job's coordinates matter), so whole-feed assertions see only that test's jobs. The 48-hour
cancellation lock and the 72-hour report window move the clock, so they run on a dedicated
server.
"""
import datetime

import pytest
import requests

from conftest import Api
from helpers import assert_error, error_body, eventually
from test_system import db_rows
from flow_helpers import (
    FILE_URL_RE, FORBIDDEN, ID_RE, ISO_RE, JOB_FIELDS, JOB_NOT_FOUND, PAYMENT_FIELDS, QUOTE_FIELDS, SERVICES_MSG,
    UNAUTHORIZED, accept, completed_flow, customer, drive_minutes, feed, Flow, fresh_zip, get_job, image_files, ok,
    post_job, private_zip, provider, quote, race, set_status, step, verify,
)

HOUR_MS = 3600 * 1000
CANCEL_CONFLICT = error_body(409, "An accepted job can be cancelled only after 48 hours", "WITHIN_CANCELLATION_WINDOW")
NOT_CANCELLABLE = error_body(400, "Only a PENDING, QUOTED or ACCEPTED job can be cancelled", "invalid_state")
NOT_COMPLETED = error_body(409, "The job is not completed", "invalid_state")
NOT_YOUR_JOB = error_body(403, "Not your job")
NO_PHOTOS = error_body(400, "No photos uploaded: send 1 to 10 images", "validation_failed", field="images")
STEP_STATUS_MSG = "status: must be one of: ON_THE_WAY, IN_PROGRESS, COMPLETED"


def bad_request(r, message, code=None, field=None):
    assert_error(r, 400, message, code, field)


def conflict(r, body):
    assert r.status_code == 409, f"{r.status_code} {r.text}"
    assert r.json() == body


def parse_iso(text):
    assert ISO_RE.match(text), text
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def assert_served(url, data):
    assert FILE_URL_RE.match(url), url
    r = requests.get(url, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "image/png"
    assert r.content == data


# ================================================================ POST /jobs

def test_post_job_returns_the_whole_job(api):
    zip_code, lat, lng = fresh_zip()
    u = customer(api, zip_code, address="42 Oak Avenue, Apt 3")
    body = {"service": "handyman", "description": "Fix the fence gate", "preferredAt": "2031-05-01T11:30:00+02:00",
            "details": {"rooms": 3, "pets": ["dog"], "note": "side door"}, "isAsap": False}
    r = api.post("/jobs", token=u["token"], json=body)
    assert r.status_code == 201, r.text
    job = r.json()
    assert set(job) == JOB_FIELDS, set(job) ^ JOB_FIELDS
    assert ID_RE.match(job["id"])
    assert job["customerId"] == u["id"]
    assert job["providerId"] is None
    assert job["service"] == "handyman"
    assert job["description"] == "Fix the fence gate"
    assert job["preferredAt"] == "2031-05-01T09:30:00.000Z"
    assert job["isAsap"] is False
    assert job["details"] == {"rooms": 3, "pets": ["dog"], "note": "side door"}
    assert job["address"] == "42 Oak Avenue, Apt 3"  # copied from the profile
    assert job["zip"] == zip_code
    assert job["lat"] == pytest.approx(lat, abs=1e-4) and job["lng"] == pytest.approx(lng, abs=1e-4)
    assert job["status"] == "PENDING"
    assert job["images"] == [] and job["beforeImages"] == [] and job["afterImages"] == []
    assert job["tipAmount"] is None and job["etaMinutes"] is None
    assert parse_iso(job["createdAt"]) == parse_iso(job["updatedAt"])
    # the same job is what the owner reads back
    detail = get_job(api, u["token"], job["id"])
    assert {k: detail[k] for k in JOB_FIELDS} == job


def test_job_coordinates_come_from_the_zip_centroid(api):
    u = customer(api, "10001")
    job = post_job(api, u)
    assert job["zip"] == "10001"
    assert job["lat"] == pytest.approx(40.75, abs=0.01)
    assert job["lng"] == pytest.approx(-73.997, abs=0.01)


def test_job_coordinates_are_the_customers_own_when_set(api):
    u = customer(api, "10001")
    r = api.patch("/users/me", token=u["token"], json={"lat": 41.25, "lng": -72.5})
    assert r.status_code == 200, r.text
    job = post_job(api, u)
    assert job["zip"] == "10001"
    assert job["lat"] == pytest.approx(41.25) and job["lng"] == pytest.approx(-72.5)


def test_job_in_an_unknown_zip_has_no_coordinates(api):
    zip_code = private_zip()  # not in the embedded table
    u = customer(api, zip_code)
    job = post_job(api, u)
    assert job["zip"] == zip_code
    assert job["lat"] is None and job["lng"] is None


def test_asap_job_needs_no_preferred_time(api):
    u = customer(api)
    r = api.post("/jobs", token=u["token"], json={"service": "snowplowing", "isAsap": True})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["isAsap"] is True and job["preferredAt"] is None
    assert job["description"] is None and job["details"] is None
    assert job["status"] == "PENDING"


def test_preferred_at_of_the_epoch_is_kept(api):
    u = customer(api)
    job = post_job(api, u, preferredAt="1970-01-01T00:00:00Z")
    assert job["isAsap"] is False
    assert job["preferredAt"] == "1970-01-01T00:00:00.000Z"


def test_preferred_at_is_normalised_to_utc_milliseconds(api):
    u = customer(api)
    for given, stored in (("2031-05-01T09:00:00.123456Z", "2031-05-01T09:00:00.123Z"),
                          ("2031-05-01 09:00", "2031-05-01T09:00:00.000Z"),
                          ("2031-05-01", "2031-05-01T00:00:00.000Z"),
                          ("2031-05-01T00:30:00-0130", "2031-05-01T02:00:00.000Z"),
                          ("1970-01-01T00:00:00.001Z", "1970-01-01T00:00:00.001Z")):
        assert post_job(api, u, preferredAt=given)["preferredAt"] == stored, given


def test_description_of_2000_characters_is_accepted(api):
    u = customer(api)
    job = post_job(api, u, description="é" * 2000, details={})
    assert job["description"] == "é" * 2000
    assert job["details"] == {}


@pytest.mark.parametrize("body, message", [
    ({}, "service: is required"),
    ({"service": "plumbing", "isAsap": True}, f"service: {SERVICES_MSG}"),
    ({"service": "Lawncare", "isAsap": True}, f"service: {SERVICES_MSG}"),
    ({"service": "lawncare", "isAsap": True, "description": "x" * 2001},
     "description: must be at most 2000 characters"),
    ({"service": "lawncare", "isAsap": True, "description": 12}, "description: must be a string"),
    ({"service": "lawncare", "preferredAt": "next tuesday"}, "preferredAt: must be a valid ISO 8601 date-time"),
    ({"service": "lawncare", "preferredAt": "2031-02-30T10:00:00Z"},
     "preferredAt: must be a valid ISO 8601 date-time"),
    ({"service": "lawncare", "preferredAt": 1893456000000}, "preferredAt: must be a valid ISO 8601 date-time"),
    ({"service": "lawncare", "isAsap": True, "details": "big yard"}, "details: must be an object"),
    ({"service": "lawncare", "isAsap": True, "details": [1, 2]}, "details: must be an object"),
    ({"service": "lawncare", "preferredAt": "2031-01-01T10:00:00Z", "isAsap": "yes"}, "isAsap: must be a boolean"),
    ({"service": "lawncare", "preferredAt": "2031-01-01T10:00:00Z", "isAsap": 1}, "isAsap: must be a boolean"),
    # only a true isAsap waives preferredAt, which comes first in the order
    ({"service": "lawncare", "isAsap": "yes"}, "preferredAt: is required unless isAsap is true"),
    ({"service": "lawncare"}, "preferredAt: is required unless isAsap is true"),
    ({"service": "lawncare", "isAsap": False}, "preferredAt: is required unless isAsap is true"),
    ({"service": "lawncare", "isAsap": True, "addressId": 7}, "addressId: must be a string"),
    # fields are checked in the specification's order: preferredAt comes before details
    ({"service": "lawncare", "details": [1]}, "preferredAt: is required unless isAsap is true"),
    ({"service": "lawncare", "addressId": 5}, "preferredAt: is required unless isAsap is true"),
])
def test_post_job_validation(api, body, message):
    u = customer(api)
    bad_request(api.post("/jobs", token=u["token"], json=body), message)
    assert feed(api, u["token"]) == []


def test_post_job_malformed_json(api):
    u = customer(api)
    r = api.post("/jobs", token=u["token"], data="{not json", headers={"Content-Type": "application/json"})
    bad_request(r, "body: malformed JSON")


def test_post_job_with_an_unknown_address_is_404(api):
    u = customer(api)
    r = api.post("/jobs", token=u["token"], json={"service": "lawncare", "isAsap": True, "addressId": "cnosuchaddress0000000000"})
    assert r.status_code == 404, r.text
    assert r.json() == error_body(404, "Address not found")
    assert feed(api, u["token"]) == []


def test_post_job_needs_a_customer(api):
    pro = provider(api, verified=False)
    body = {"service": "lawncare", "isAsap": True}
    r = api.post("/jobs", token=pro["token"], json=body)
    assert r.status_code == 403 and r.json() == FORBIDDEN
    r = api.post("/jobs", json=body)
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    r = api.post("/jobs", json=body, token="not-a-token")
    assert r.status_code == 401 and r.json() == UNAUTHORIZED


# ================================================================ GET /jobs

def test_customer_lists_own_jobs_newest_first(api):
    zip_code = private_zip()
    u = customer(api, zip_code)
    other = customer(api, zip_code)
    ids = []
    for i in range(3):
        ids.append(post_job(api, u, description=f"job {i}")["id"])
        post_job(api, other)
        api.advance_clock(10)
    jobs = feed(api, u["token"])
    assert [j["id"] for j in jobs] == ids[::-1]
    for j in jobs:
        assert set(j) == JOB_FIELDS
        assert j["customerId"] == u["id"]
    assert feed(api, customer(api, zip_code)["token"]) == []


def test_jobs_posted_back_to_back_are_listed_newest_first(server_factory):
    """Jobs that share a millisecond are listed newest first too: the server's clock is frozen, so
    all of them share their createdAt, and a service that breaks such ties at random cannot pass
    by luck."""
    api = Api(server_factory())
    u = customer(api)
    api.freeze_clock()
    posted = [post_job(api, u, description=f"j{i:02d}") for i in range(60)]
    assert len({j["createdAt"] for j in posted}) == 1
    assert [j["description"] for j in feed(api, u["token"])] == [f"j{i:02d}" for i in range(60)][::-1]


def test_provider_feed_matches_services_and_zips_asap_first(api):
    zip_code = private_zip()
    other_zip = private_zip()
    u = customer(api, zip_code)
    far = customer(api, other_zip)
    pro = provider(api, [zip_code], ["lawncare", "handyman"])
    late = post_job(api, u, service="lawncare", preferredAt="2031-06-03T09:00:00Z")["id"]
    early = post_job(api, u, service="handyman", preferredAt="2031-06-01T09:00:00Z")["id"]
    asap1 = post_job(api, u, service="lawncare", isAsap=True, preferredAt=None)["id"]
    api.advance_clock(10)
    asap2 = post_job(api, u, service="handyman", isAsap=True, preferredAt="2031-07-01T09:00:00Z")["id"]
    middle = post_job(api, u, service="lawncare", preferredAt="2031-06-02T09:00:00Z")["id"]
    snow = post_job(api, u, service="snowplowing")["id"]          # service not offered
    elsewhere = post_job(api, far, service="lawncare")["id"]      # ZIP not served
    jobs = feed(api, pro["token"])
    ids = [j["id"] for j in jobs]
    assert ids == [asap1, asap2, early, middle, late], ids  # ASAP by posting time, then preferredAt
    assert snow not in ids and elsewhere not in ids
    for j in jobs:
        assert set(j) == JOB_FIELDS | {"quoted"}
        assert j["quoted"] is False
    # quoting flips `quoted` for this provider only
    quote(api, pro, middle, 80)
    other = provider(api, [zip_code], ["lawncare"])
    assert {j["id"]: j["quoted"] for j in feed(api, pro["token"])}[middle] is True
    theirs = feed(api, other["token"])
    assert [j["id"] for j in theirs] == [asap1, middle, late]
    assert all(j["quoted"] is False for j in theirs)
    # a snowplowing provider of the ZIP sees only the snowplowing job
    plow = provider(api, [zip_code], ["snowplowing"], verified=False)
    assert [j["id"] for j in feed(api, plow["token"])] == [snow]
    # a provider serving both ZIPs sees the jobs of both
    both = provider(api, [other_zip, zip_code], ["lawncare"], verified=False)
    assert [j["id"] for j in feed(api, both["token"])] == [asap1, elsewhere, middle, late]  # elsewhere: 2031-05-01


def test_asap_jobs_come_first_even_before_very_old_dates(api):
    zip_code = private_zip()
    u = customer(api, zip_code)
    pro = provider(api, [zip_code], verified=False)
    asap = post_job(api, u, isAsap=True, preferredAt=None)["id"]
    old = post_job(api, u, preferredAt="1969-07-20T20:17:00Z")["id"]
    assert [j["id"] for j in feed(api, pro["token"])] == [asap, old]


def test_accepted_and_cancelled_jobs_leave_the_feed(api):
    zip_code = private_zip()
    u = customer(api, zip_code, "pm_card_visa")
    pro = provider(api, [zip_code])
    watcher = provider(api, [zip_code], verified=False)
    accepted = post_job(api, u)["id"]
    cancelled = post_job(api, u)["id"]
    still_open = post_job(api, u)["id"]
    q = quote(api, pro, accepted)
    quote(api, pro, still_open)
    assert {j["id"] for j in feed(api, watcher["token"])} == {accepted, cancelled, still_open}
    accept(api, u, q["id"])
    ok(api.post(f"/jobs/{cancelled}/cancel", token=u["token"]))
    for p in (pro, watcher):
        assert [j["id"] for j in feed(api, p["token"])] == [still_open]
    # the customer still lists all three
    assert {j["id"]: j["status"] for j in feed(api, u["token"])} == {
        accepted: "ACCEPTED", cancelled: "CANCELLED", still_open: "QUOTED"}


def test_list_jobs_needs_a_token(api):
    r = api.get("/jobs")
    assert r.status_code == 401 and r.json() == UNAUTHORIZED


# ================================================================ the stored Job JSON (migration 0012)
# Each job's JSON is written when the job changes and copied into every answer; these tests
# check that every view shows a change at once and that all views agree.

def without_signatures(job):
    """The Job JSON with each photo URL cut at its query (the expiry moves with the clock)."""
    out = dict(job)
    for k in ("images", "beforeImages", "afterImages"):
        out[k] = [u.split("?")[0] for u in job[k]]
    return out


def views_of(api, user, pros, jid):
    """The job as its customer's list, GET /jobs/:id and each provider's feed show it (None
    where it is not in a feed), without the members each view adds."""
    listed = {j["id"]: j for j in feed(api, user["token"])}[jid]
    detail = get_job(api, user["token"], jid)
    views = [listed, {k: v for k, v in detail.items() if k in JOB_FIELDS}]
    for p in pros:
        mine = {j["id"]: j for j in feed(api, p["token"])}.get(jid)
        views.append(mine and {k: v for k, v in mine.items() if k != "quoted"})
    return [v and without_signatures(v) for v in views]


def test_every_view_shows_a_change_at_once(api):
    zip_code = private_zip()
    u = customer(api, zip_code, "pm_card_visa")
    a, b = provider(api, [zip_code]), provider(api, [zip_code])
    job = post_job(api, u, details={"area": 0.30000000000000004, "gate": "code 12\n\u00e9"})
    jid = job["id"]
    assert job["details"] == {"area": 0.3, "gate": "code 12\n\u00e9"}  # 15 significant digits, as before
    first = views_of(api, u, [a, b], jid)
    assert all(v == without_signatures(job) for v in first), first

    api.advance_clock(2)
    quote(api, a, jid, 90)
    quoted = views_of(api, u, [a, b], jid)
    assert all(v["status"] == "QUOTED" and v["updatedAt"] > job["updatedAt"] for v in quoted), quoted
    assert all(v == quoted[0] for v in quoted)
    assert {j["id"]: j["quoted"] for j in feed(api, a["token"])}[jid] is True
    assert {j["id"]: j["quoted"] for j in feed(api, b["token"])}[jid] is False

    api.advance_clock(2)
    ok(api.post(f"/jobs/{jid}/images", token=u["token"], files=image_files(1, seed=31)))
    photo = views_of(api, u, [a, b], jid)
    assert all(len(v["images"]) == 1 and v["updatedAt"] > quoted[0]["updatedAt"] for v in photo), photo
    assert all(v == photo[0] for v in photo)
    for j in feed(api, b["token"]):
        if j["id"] == jid:
            assert_served(j["images"][0], image_files(1, seed=31)[0][1][1])

    ok(api.post(f"/jobs/{jid}/cancel", token=u["token"]))
    gone = views_of(api, u, [a, b], jid)
    assert gone[0]["status"] == gone[1]["status"] == "CANCELLED" and gone[2:] == [None, None]


def stored_json(server, jid):
    from test_system import db_rows
    return db_rows(server.env["DATABASE_URL"], server.data_dir,
                   f"SELECT json_head IS NULL, json_tail IS NULL FROM jobs WHERE id = '{jid}'")[0]


def test_a_change_made_outside_the_jobs_domain_shows_at_once_and_is_repaired(api, server):
    """A writer that changes a job without rewriting its JSON (an operator's UPDATE, a seeder's
    INSERT) is still shown exactly: the row is rendered until the repair writes the JSON back."""
    from test_system import db_rows
    zip_code = private_zip()
    u = customer(api, zip_code)
    pro = provider(api, [zip_code], verified=False)
    jid = post_job(api, u)["id"]
    assert stored_json(server, jid) in [("0", "0"), ("f", "f")]  # written with the job
    db_rows(server.env["DATABASE_URL"], server.data_dir,
            f"UPDATE jobs SET description = 'Changed by hand', tip_cents = 250, updated_at = updated_at + 1 "
            f"WHERE id = '{jid}'")
    assert stored_json(server, jid) in [("1", "1"), ("t", "t")]  # the trigger dropped the stale JSON
    views = views_of(api, u, [pro], jid)
    assert all(v["description"] == "Changed by hand" and v["tipAmount"] == 2.5 for v in views), views
    assert all(v == views[0] for v in views)
    eventually(lambda: stored_json(server, jid), 15, "the stored JSON repaired",
               until=lambda stored: stored in [("0", "0"), ("f", "f")])
    assert views_of(api, u, [pro], jid) == views
    # a quote on a job changed behind its JSON's back (the quote's transaction re-reads it)
    quoter = provider(api, [zip_code])
    db_rows(server.env["DATABASE_URL"], server.data_dir,
            f"UPDATE jobs SET description = 'Changed again' WHERE id = '{jid}'")
    quote(api, quoter, jid, 70)
    views = views_of(api, u, [pro, quoter], jid)
    assert all(v["description"] == "Changed again" and v["status"] == "QUOTED" for v in views), views
    assert all(v == views[0] for v in views)
    # a row inserted straight into the table, as bench/seed_jobs.py does
    other = post_job(api, u)
    db_rows(server.env["DATABASE_URL"], server.data_dir,
            "INSERT INTO jobs (id, customer_id, service, description, preferred_at, is_asap, feed_at, address, zip, "
            "status, created_at, updated_at, seq) SELECT 'cseeded' || substr(id, 8), customer_id, service, 'Seeded', "
            f"preferred_at, is_asap, feed_at, address, zip, status, created_at, updated_at, seq + 1 FROM jobs "
            f"WHERE id = '{other['id']}'")
    seeded = "cseeded" + other["id"][7:]
    got = {j["id"]: j for j in feed(api, pro["token"])}[seeded]
    assert got["description"] == "Seeded" and got["lat"] is None and got["quoted"] is False
    assert get_job(api, u["token"], seeded)["description"] == "Seeded"


# ================================================================ GET /jobs/:id

def test_job_detail_visibility_and_nested_objects(api):
    zip_code = private_zip()
    other_zip = private_zip()
    u = customer(api, zip_code, "pm_card_visa", name="Casey Customer")
    stranger = customer(api, zip_code)
    a = provider(api, [zip_code], phone="555-0100", name="Alex Pro")
    ok(api.patch("/providers/me", token=a["token"], json={"companyName": "Alex Lawns LLC"}))
    b = provider(api, [zip_code])
    wrong_service = provider(api, [zip_code], ["snowplowing"], verified=False)
    wrong_zip = provider(api, [other_zip], verified=False)
    job = post_job(api, u)
    jid = job["id"]

    owner_view = get_job(api, u["token"], jid)
    assert set(owner_view) == JOB_FIELDS | {"customer", "provider", "quotes", "payment"}
    assert owner_view["customer"] == {"id": u["id"], "name": "Casey Customer"}
    assert owner_view["provider"] is None
    assert owner_view["quotes"] == [] and owner_view["payment"] is None

    matching_view = get_job(api, b["token"], jid)
    assert set(matching_view) == JOB_FIELDS | {"customer", "provider", "quotes"}  # no payment
    assert matching_view["customer"] == {"id": u["id"], "name": "Casey Customer"}

    for token in (wrong_service["token"], wrong_zip["token"], stranger["token"]):
        r = api.get(f"/jobs/{jid}", token=token)
        assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    r = api.get("/jobs/cnosuchjob000000000000000", token=u["token"])
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    assert api.get(f"/jobs/{jid}").status_code == 401

    qa = quote(api, a, jid, 100, note="A's quote")
    qb = quote(api, b, jid, 120)
    owner_view = get_job(api, u["token"], jid)
    assert owner_view["status"] == "QUOTED"
    assert [q["id"] for q in owner_view["quotes"]] == [qa["id"], qb["id"]]
    assert all(set(q) == QUOTE_FIELDS for q in owner_view["quotes"])
    assert [q["id"] for q in get_job(api, a["token"], jid)["quotes"]] == [qa["id"]]
    assert [q["id"] for q in get_job(api, b["token"], jid)["quotes"]] == [qb["id"]]

    accept(api, u, qa["id"])
    owner_view = get_job(api, u["token"], jid)
    assert owner_view["provider"] == {"id": a["id"], "name": "Alex Pro", "companyName": "Alex Lawns LLC",
                                      "phone": "555-0100"}
    payment = owner_view["payment"]
    assert set(payment) == PAYMENT_FIELDS
    assert payment["status"] == "AUTHORIZED" and payment["amount"] == 118.0
    assert ID_RE.match(payment["id"]) and payment["processorPaymentIntentId"]
    assigned_view = get_job(api, a["token"], jid)
    assert assigned_view["payment"] == payment
    assert assigned_view["provider"]["id"] == a["id"]
    assert [(q["id"], q["status"]) for q in assigned_view["quotes"]] == [(qa["id"], "ACCEPTED")]
    # the losing provider no longer sees the job
    r = api.get(f"/jobs/{jid}", token=b["token"])
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND


# ================================================================ POST /jobs/:id/images

def test_customer_adds_photos_to_a_job(api):
    u = customer(api)
    jid = post_job(api, u)["id"]
    files = image_files(2, seed=11)
    r = api.post(f"/jobs/{jid}/images", token=u["token"], files=files)
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["images"] and len(body["images"]) == 2
    for url, (_, (_, data, _)) in zip(body["images"], files):
        assert_served(url, data)
    more = image_files(3, seed=12)
    r = api.post(f"/jobs/{jid}/images", token=u["token"], files=more)
    assert r.status_code == 200, r.text
    assert len(r.json()["images"]) == 3  # the answer lists the photos of this request
    job = get_job(api, u["token"], jid)
    assert len(job["images"]) == 5  # appended, not replaced
    for url, (_, (_, data, _)) in zip(job["images"], files + more):
        assert_served(url, data)


def test_concurrent_photo_uploads_keep_every_photo(api, server):
    u = customer(api)
    for round_ in range(100):
        jid = post_job(api, u)["id"]
        results = race(server, [lambda c, i=i: c.post(f"/jobs/{jid}/images", token=u["token"],
                                                      files=image_files(1, seed=round_ * 10 + i))
                                for i in range(5)])
        assert [r.status_code for r in results] == [200] * 5
        sent = sorted(r.json()["images"][0].split("?")[0] for r in results)
        kept = sorted(url.split("?")[0] for url in get_job(api, u["token"], jid)["images"])
        assert kept == sent, f"round {round_}: {len(kept)} of 5 photos kept"


def test_job_photos_limits_and_access(api):
    u = customer(api)
    jid = post_job(api, u)["id"]
    bad_request(api.post(f"/jobs/{jid}/images", token=u["token"], files=image_files(6)), "images: at most 5 files")
    bad_request(api.post(f"/jobs/{jid}/images", token=u["token"], files=image_files(0)), "No files uploaded", "validation_failed",
                "images")
    r = api.post(f"/jobs/{jid}/images", token=u["token"], files={"images": ("a.png", b"plain text, not a picture", "image/png")})
    bad_request(r, "images: must be a PNG, JPEG or WebP image")
    r = api.post(f"/jobs/{jid}/images", token=customer(api)["token"], files=image_files(1))
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    r = api.post(f"/jobs/{jid}/images", token=provider(api, verified=False)["token"], files=image_files(1))
    assert r.status_code == 403 and r.json() == FORBIDDEN
    assert api.post(f"/jobs/{jid}/images", files=image_files(1)).status_code == 401
    assert get_job(api, u["token"], jid)["images"] == []


# ================================================================ PATCH /jobs/:id/status

def test_status_moves_one_step_at_a_time(api):
    f = Flow(api).accepted()
    jid, pro = f.job_id, f.pro
    rival = provider(api, [f.zip])
    assert f.job["status"] == "ACCEPTED" and f.job["providerId"] == pro["id"]

    conflict(set_status(api, pro, jid, "IN_PROGRESS"),
             error_body(409, "A job moves to IN_PROGRESS only from ON_THE_WAY (it is ACCEPTED)", "invalid_state"))
    conflict(set_status(api, pro, jid, "COMPLETED"),
             error_body(409, "A job moves to COMPLETED only from IN_PROGRESS (it is ACCEPTED)", "invalid_state"))
    r = set_status(api, rival, jid, "ON_THE_WAY")
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    r = api.patch(f"/jobs/{jid}/status", token=f.user["token"], json={"status": "ON_THE_WAY"})
    assert r.status_code == 403 and r.json() == FORBIDDEN

    job = step(api, pro, jid, "ON_THE_WAY")
    assert set(job) == JOB_FIELDS
    assert job["status"] == "ON_THE_WAY" and job["etaMinutes"] is None
    conflict(set_status(api, pro, jid, "ON_THE_WAY"),
             error_body(409, "A job moves to ON_THE_WAY only from ACCEPTED (it is ON_THE_WAY)", "invalid_state"))
    conflict(set_status(api, pro, jid, "COMPLETED"),
             error_body(409, "A job moves to COMPLETED only from IN_PROGRESS (it is ON_THE_WAY)", "invalid_state"))
    assert step(api, pro, jid, "IN_PROGRESS")["status"] == "IN_PROGRESS"
    conflict(set_status(api, pro, jid, "ON_THE_WAY"),
             error_body(409, "A job moves to ON_THE_WAY only from ACCEPTED (it is IN_PROGRESS)", "invalid_state"))
    assert get_job(api, f.user["token"], jid)["payment"]["status"] == "AUTHORIZED"

    job = step(api, pro, jid, "COMPLETED")
    assert job["status"] == "COMPLETED"
    conflict(set_status(api, pro, jid, "COMPLETED"),
             error_body(409, "A job moves to COMPLETED only from IN_PROGRESS (it is COMPLETED)", "invalid_state"))
    conflict(set_status(api, pro, jid, "IN_PROGRESS"),
             error_body(409, "A job moves to IN_PROGRESS only from ON_THE_WAY (it is COMPLETED)", "invalid_state"))
    view = get_job(api, f.user["token"], jid)
    assert view["status"] == "COMPLETED"
    assert view["payment"]["status"] == "PAID" and view["payment"]["amount"] == 118.0


@pytest.mark.parametrize("body, message", [
    ({}, "status: is required"),
    ({"status": "ACCEPTED"}, STEP_STATUS_MSG),
    ({"status": "PENDING"}, STEP_STATUS_MSG),
    ({"status": "CANCELLED"}, STEP_STATUS_MSG),
    ({"status": "on_the_way"}, STEP_STATUS_MSG),
    ({"status": "ON_THE_WAY", "fromLat": 90.5, "fromLng": 0}, "fromLat: must be between -90 and 90"),
    ({"status": "ON_THE_WAY", "fromLat": -91, "fromLng": 0}, "fromLat: must be between -90 and 90"),
    ({"status": "ON_THE_WAY", "fromLat": 0, "fromLng": 180.01}, "fromLng: must be between -180 and 180"),
    ({"status": "ON_THE_WAY", "fromLat": 0, "fromLng": -181}, "fromLng: must be between -180 and 180"),
    ({"status": "ON_THE_WAY", "fromLat": "40.7", "fromLng": 0}, "fromLat: must be a number"),
])
def test_status_validation(api, body, message):
    # validation comes before any job lookup, so an unknown job id shows it as well
    pro = provider(api, verified=False)
    bad_request(api.patch("/jobs/cnosuchjob000000000000000/status", token=pro["token"], json=body), message)


def test_status_validation_leaves_the_job_alone(api):
    f = Flow(api).accepted()
    bad_request(set_status(api, f.pro, f.job_id, "ACCEPTED"), STEP_STATUS_MSG)
    bad_request(set_status(api, f.pro, f.job_id, "ON_THE_WAY", fromLat=95, fromLng=0),
                "fromLat: must be between -90 and 90")
    assert get_job(api, f.user["token"], f.job_id)["status"] == "ACCEPTED"


def test_on_the_way_with_a_start_point_gives_an_eta(api):
    f = Flow(api).accepted()
    from_lat, from_lng = f.job["lat"] + 0.3, f.job["lng"] - 0.2
    job = step(api, f.pro, f.job_id, "ON_THE_WAY", fromLat=from_lat, fromLng=from_lng)
    expected = drive_minutes(from_lat, from_lng, f.job["lat"], f.job["lng"])
    assert expected > 20  # about 22 miles
    assert job["etaMinutes"] == expected
    assert get_job(api, f.user["token"], f.job_id)["etaMinutes"] == expected


def test_eta_is_at_least_one_minute_and_needs_both_coordinates(api):
    near = Flow(api).accepted()
    job = step(api, near.pro, near.job_id, "ON_THE_WAY", fromLat=near.job["lat"], fromLng=near.job["lng"])
    assert job["etaMinutes"] == 1
    half = Flow(api).accepted()
    job = step(api, half.pro, half.job_id, "ON_THE_WAY", fromLat=half.job["lat"])
    assert job["status"] == "ON_THE_WAY" and job["etaMinutes"] is None


# ================================================================ start and complete with photos

def test_start_and_complete_with_photos(api):
    f = Flow(api).accepted()
    jid, pro = f.job_id, f.pro
    rival = provider(api, [f.zip])
    bad_request(api.post(f"/jobs/{jid}/start", token=pro["token"], files=image_files(1)), "The job must be ON_THE_WAY", "invalid_state")
    bad_request(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(1)),
                "The job must be IN_PROGRESS", "invalid_state")
    step(api, pro, jid, "ON_THE_WAY")
    bad_request(api.post(f"/jobs/{jid}/start", token=pro["token"], files=image_files(0)), NO_PHOTOS["error"], "validation_failed", "images")
    bad_request(api.post(f"/jobs/{jid}/start", token=pro["token"], files=image_files(11)), "images: at most 10 files")
    bad_request(api.post(f"/jobs/{jid}/start", token=pro["token"],
                         files={"images": ("x.png", b"%PDF-1.4 not an image", "image/png")}),
                "images: must be a PNG, JPEG or WebP image")
    r = api.post(f"/jobs/{jid}/start", token=rival["token"], files=image_files(1))
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    r = api.post(f"/jobs/{jid}/start", token=f.user["token"], files=image_files(1))
    assert r.status_code == 403 and r.json() == FORBIDDEN
    bad_request(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(1)),
                "The job must be IN_PROGRESS", "invalid_state")
    assert get_job(api, f.user["token"], jid)["status"] == "ON_THE_WAY"

    before = image_files(2, seed=21)
    r = api.post(f"/jobs/{jid}/start", token=pro["token"], files=before)
    assert r.status_code == 200, r.text
    job = r.json()
    assert set(job) == JOB_FIELDS
    assert job["status"] == "IN_PROGRESS" and job["afterImages"] == []
    assert len(job["beforeImages"]) == 2
    for url, (_, (_, data, _)) in zip(job["beforeImages"], before):
        assert_served(url, data)
    bad_request(api.post(f"/jobs/{jid}/start", token=pro["token"], files=image_files(1)), "The job must be ON_THE_WAY", "invalid_state")
    bad_request(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(0)), NO_PHOTOS["error"], "validation_failed", "images")
    bad_request(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(11)),
                "images: at most 10 files")
    assert get_job(api, f.user["token"], jid)["payment"]["status"] == "AUTHORIZED"

    after = image_files(10, seed=22)
    r = api.post(f"/jobs/{jid}/complete", token=pro["token"], files=after)
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["status"] == "COMPLETED"
    assert len(job["beforeImages"]) == 2 and len(job["afterImages"]) == 10
    assert_served(job["afterImages"][9], after[9][1][1])
    view = get_job(api, f.user["token"], jid)
    assert len(view["beforeImages"]) == 2 and len(view["afterImages"]) == 10
    assert view["payment"]["status"] == "PAID" and view["payment"]["amount"] == 118.0
    bad_request(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(1)),
                "The job must be IN_PROGRESS", "invalid_state")


# ================================================================ POST /jobs/:id/cancel

def cancel(api, user, job_id):
    return api.post(f"/jobs/{job_id}/cancel", token=user["token"])


def test_cancel_pending_and_quoted_jobs(api):
    zip_code = private_zip()
    u = customer(api, zip_code)
    pro = provider(api, [zip_code])
    pending = post_job(api, u)["id"]
    quoted = post_job(api, u)["id"]
    q = quote(api, pro, quoted)
    r = cancel(api, u, pending)
    assert r.status_code == 200, r.text
    job = r.json()
    assert set(job) == JOB_FIELDS and job["id"] == pending and job["status"] == "CANCELLED"
    job = ok(cancel(api, u, quoted))
    assert job["status"] == "CANCELLED"
    bad_request(cancel(api, u, pending), NOT_CANCELLABLE["error"], "invalid_state")
    # a cancelled job takes no quote and no acceptance
    conflict(api.post("/quotes", token=provider(api, [zip_code])["token"], json={"jobId": quoted, "amount": 50}),
             error_body(409, "The job is not open for quotes", "invalid_state"))
    conflict(api.post(f"/quotes/{q['id']}/accept", token=u["token"]),
             error_body(409, "The job is no longer open for acceptance", "invalid_state"))
    assert get_job(api, u["token"], quoted)["status"] == "CANCELLED"


def test_cancel_access(api):
    u = customer(api)
    jid = post_job(api, u)["id"]
    r = cancel(api, customer(api), jid)
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    r = api.post(f"/jobs/{jid}/cancel", token=provider(api, verified=False)["token"])
    assert r.status_code == 403 and r.json() == FORBIDDEN
    assert api.post(f"/jobs/{jid}/cancel").status_code == 401
    r = cancel(api, u, "cnosuchjob000000000000000")
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    assert get_job(api, u["token"], jid)["status"] == "PENDING"


def test_accepted_job_is_locked_for_48_hours(api):
    f = Flow(api).accepted()
    conflict(cancel(api, f.user, f.job_id), CANCEL_CONFLICT)
    view = get_job(api, f.user["token"], f.job_id)
    assert view["status"] == "ACCEPTED" and view["payment"]["status"] == "AUTHORIZED"


def test_jobs_on_the_way_or_later_cannot_be_cancelled(api):
    f = Flow(api).accepted()
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        f.moved_to(status)
        bad_request(cancel(api, f.user, f.job_id), NOT_CANCELLABLE["error"], "invalid_state")
    assert get_job(api, f.user["token"], f.job_id)["status"] == "COMPLETED"


def test_accepted_job_cancels_after_48_hours_and_voids_the_payment(server_factory):
    api = Api(server_factory())
    f = Flow(api).accepted()
    api.advance_clock(48 * HOUR_MS - 1000)
    conflict(cancel(api, f.user, f.job_id), CANCEL_CONFLICT)
    api.advance_clock(2000)
    r = cancel(api, f.user, f.job_id)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "CANCELLED"
    view = get_job(api, f.user["token"], f.job_id)
    assert view["status"] == "CANCELLED"
    assert view["payment"]["status"] == "CANCELED" and view["payment"]["amount"] == 118.0
    bad_request(cancel(api, f.user, f.job_id), NOT_CANCELLABLE["error"], "invalid_state")
    # the provider can no longer move it
    assert set_status(api, f.pro, f.job_id, "ON_THE_WAY").status_code == 409


# ================================================================ POST /jobs/:id/tip

def tip(api, user, job_id, amount):
    return api.post(f"/jobs/{job_id}/tip", token=user["token"], json={"amount": amount})


@pytest.mark.parametrize("body, message", [
    ({}, "amount: is required"),
    ({"amount": 0.99}, "amount: must be between 1 and 25"),
    ({"amount": 25.01}, "amount: must be between 1 and 25"),
    ({"amount": 0}, "amount: must be between 1 and 25"),
    ({"amount": -5}, "amount: must be between 1 and 25"),
    ({"amount": "5"}, "amount: must be a number"),
])
def test_tip_validation(api, body, message):
    u = customer(api)
    bad_request(api.post("/jobs/cnosuchjob000000000000000/tip", token=u["token"], json=body), message)


def tip_payment(server, job_id):
    """The tip's payment record (status, amount in dollars), read from the database."""
    rows = db_rows(server.env["DATABASE_URL"], server.data_dir,
                   f"SELECT status, amount_cents FROM payments WHERE job_id = '{job_id}' AND kind = 'tip'")
    assert len(rows) == 1, rows
    return {"status": rows[0][0], "amount": int(rows[0][1]) / 100}


def test_tip_success_and_only_once(api, server):
    f = completed_flow(api)
    r = tip(api, f.user, f.job_id, 25)
    assert r.status_code == 200, r.text
    assert r.json() == {"success": True, "tipAmount": 25.0}
    conflict(tip(api, f.user, f.job_id, 1), error_body(409, "A tip was already submitted for this job"))
    view = get_job(api, f.user["token"], f.job_id)
    assert view["tipAmount"] == 25.0
    assert view["payment"]["status"] == "PAID" and view["payment"]["amount"] == 118.0  # the job payment is apart
    assert tip_payment(server, f.job_id) == {"status": "PAID", "amount": 25.0}


def test_concurrent_tips_charge_once(api, server):
    f = completed_flow(api)
    amounts = (3, 4, 5, 6)
    results = race(server, [lambda c, a=a: c.post(f"/jobs/{f.job_id}/tip", token=f.user["token"], json={"amount": a})
                            for a in amounts])
    assert sorted(r.status_code for r in results) == [200, 409, 409, 409], [r.text for r in results]
    won = next(a for a, r in zip(amounts, results) if r.status_code == 200)
    assert all(r.json() == error_body(409, "A tip was already submitted for this job") for r in results if r.status_code == 409)
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] == won
    assert tip_payment(server, f.job_id) == {"status": "PAID", "amount": won}


def test_tip_of_one_dollar(api):
    f = completed_flow(api)
    assert ok(tip(api, f.user, f.job_id, 1.00)) == {"success": True, "tipAmount": 1.0}
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] == 1.0


def test_tip_needs_a_completed_job_of_ones_own(api):
    f = Flow(api).accepted()
    conflict(tip(api, f.user, f.job_id, 5), NOT_COMPLETED)
    f.moved_to("IN_PROGRESS")
    conflict(tip(api, f.user, f.job_id, 5), NOT_COMPLETED)
    f.completed()
    r = tip(api, customer(api, f.zip, "pm_card_visa"), f.job_id, 5)
    assert r.status_code == 403 and r.json() == NOT_YOUR_JOB
    r = api.post(f"/jobs/{f.job_id}/tip", token=f.pro["token"], json={"amount": 5})
    assert r.status_code == 403 and r.json() == FORBIDDEN
    r = tip(api, f.user, "cnosuchjob000000000000000", 5)
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] is None


def test_tip_without_a_saved_card_is_400(api):
    f = completed_flow(api, card=None)
    assert get_job(api, f.user["token"], f.job_id)["payment"]["status"] == "FAILED"
    bad_request(tip(api, f.user, f.job_id, 5), "A saved payment method is required")
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] is None


def test_declined_tip_is_402_and_can_be_retried(api):
    f = completed_flow(api, card="pm_card_chargeDeclined")
    r = tip(api, f.user, f.job_id, 5)
    assert r.status_code == 402, r.text
    assert r.json() == error_body(402, "Your card was declined.")
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] is None
    ok(api.post("/payments/payment-method", token=f.user["token"], json={"paymentMethodId": "pm_card_visa"}))
    assert ok(tip(api, f.user, f.job_id, 7.5)) == {"success": True, "tipAmount": 7.5}
    assert get_job(api, f.user["token"], f.job_id)["tipAmount"] == 7.5


# ================================================================ POST /reviews

def review(api, user, job_id, **body):
    return api.post("/reviews", token=user["token"], json={"jobId": job_id, **body})


@pytest.mark.parametrize("body, message", [
    ({"rating": 5}, "jobId: is required"),
    ({"jobId": "x"}, "rating: is required"),
    ({"jobId": "x", "rating": 0}, "rating: must be between 1 and 5"),
    ({"jobId": "x", "rating": 6}, "rating: must be between 1 and 5"),
    ({"jobId": "x", "rating": -1}, "rating: must be between 1 and 5"),
    ({"jobId": "x", "rating": 4.5}, "rating: must be an integer"),
    ({"jobId": "x", "rating": "5"}, "rating: must be an integer"),
    ({"jobId": "x", "rating": True}, "rating: must be an integer"),
    ({"jobId": "x", "rating": 5, "comment": "c" * 2001}, "comment: must be at most 2000 characters"),
    ({"jobId": "x", "rating": 5, "comment": 5}, "comment: must be a string"),
])
def test_review_validation(api, body, message):
    u = customer(api)
    bad_request(api.post("/reviews", token=u["token"], json=body), message)


def test_review_a_completed_job_once(api):
    f = Flow(api).accepted()
    conflict(review(api, f.user, f.job_id, rating=5), NOT_COMPLETED)
    f.completed()
    r = review(api, customer(api, f.zip), f.job_id, rating=5)
    assert r.status_code == 403 and r.json() == NOT_YOUR_JOB
    r = api.post("/reviews", token=f.pro["token"], json={"jobId": f.job_id, "rating": 5})
    assert r.status_code == 403 and r.json() == FORBIDDEN
    assert api.post("/reviews", json={"jobId": f.job_id, "rating": 5}).status_code == 401
    r = review(api, f.user, "cnosuchjob000000000000000", rating=5)
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND

    r = review(api, f.user, f.job_id, rating=4, comment="ü" * 2000)
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"id", "jobId", "providerId", "rating", "comment", "createdAt"}
    assert ID_RE.match(body["id"]) and ISO_RE.match(body["createdAt"])
    assert body["jobId"] == f.job_id and body["providerId"] == f.pro["id"]
    assert body["rating"] == 4 and body["comment"] == "ü" * 2000
    conflict(review(api, f.user, f.job_id, rating=1), error_body(409, "This job was already reviewed"))


def test_concurrent_reviews_and_reports_store_one_each(api, server):
    f = completed_flow(api)
    results = race(server, [lambda c, n=n: c.post("/reviews", token=f.user["token"], json={"jobId": f.job_id, "rating": n})
                            for n in (1, 3, 5)])
    assert sorted(r.status_code for r in results) == [201, 409, 409], [r.text for r in results]
    results = race(server, [lambda c, n=n: c.post(f"/jobs/{f.job_id}/report", token=f.user["token"],
                                                  json={"description": f"report {n}"}) for n in range(3)])
    assert sorted(r.status_code for r in results) == [201, 409, 409], [r.text for r in results]
    assert all(r.json() == error_body(409, "This job was already reported") for r in results if r.status_code == 409)


def test_review_without_comment(api):
    f = completed_flow(api)
    r = review(api, f.user, f.job_id, rating=1)
    assert r.status_code == 201, r.text
    assert r.json()["rating"] == 1 and r.json()["comment"] is None


# ================================================================ reports

def report(api, user, job_id, description="The hedge was not trimmed"):
    return api.post(f"/jobs/{job_id}/report", token=user["token"], json={"description": description})


def reportable(api, user):
    return ok(api.get("/jobs/reportable", token=user["token"]))


def test_reportable_jobs_and_one_report_each(api):
    zip_code = private_zip()
    u = customer(api, zip_code, "pm_card_visa")
    pro = provider(api, [zip_code], name="Robin Reporter")
    ok(api.patch("/providers/me", token=pro["token"], json={"companyName": "Robin & Co"}))
    flows = []
    for _ in range(3):
        job = post_job(api, u)
        q = quote(api, pro, job["id"])
        accept(api, u, q["id"])
        flows.append(job["id"])
    first, second, open_one = flows
    for jid in (first, second):
        for s in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
            step(api, pro, jid, s)
        api.advance_clock(10)
    post_job(api, u)  # a PENDING job is not reportable either
    assert reportable(api, customer(api, zip_code)) == []

    listed = reportable(api, u)
    assert [j["id"] for j in listed] == [second, first]
    for j in listed:
        assert set(j) == JOB_FIELDS | {"provider"}
        assert j["status"] == "COMPLETED"
        assert j["provider"] == {"name": "Robin Reporter", "companyName": "Robin & Co"}

    r = report(api, u, second, "Broke a window")
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"id", "jobId", "customerId", "description", "createdAt"}
    assert ID_RE.match(body["id"]) and ISO_RE.match(body["createdAt"])
    assert body["jobId"] == second and body["customerId"] == u["id"] and body["description"] == "Broke a window"
    conflict(report(api, u, second), error_body(409, "This job was already reported"))
    assert [j["id"] for j in reportable(api, u)] == [first]

    conflict(report(api, u, open_one), NOT_COMPLETED)
    r = report(api, customer(api, zip_code), first)
    assert r.status_code == 403 and r.json() == NOT_YOUR_JOB
    r = api.post(f"/jobs/{first}/report", token=pro["token"], json={"description": "x"})
    assert r.status_code == 403 and r.json() == FORBIDDEN
    r = report(api, u, "cnosuchjob000000000000000")
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND
    assert ok(report(api, u, first, "d" * 5000), 201)["description"] == "d" * 5000
    assert reportable(api, u) == []


@pytest.mark.parametrize("body, message", [
    ({}, "description: is required"),
    ({"description": ""}, "description: must not be empty"),
    ({"description": "   "}, "description: must not be empty"),
    ({"description": "x" * 5001}, "description: must be at most 5000 characters"),
    ({"description": 42}, "description: must be a string"),
])
def test_report_validation(api, body, message):
    u = customer(api)
    bad_request(api.post("/jobs/cnosuchjob000000000000000/report", token=u["token"], json=body), message)


def test_reportable_needs_a_customer(api):
    r = api.get("/jobs/reportable", token=provider(api, verified=False)["token"])
    assert r.status_code == 403 and r.json() == FORBIDDEN
    assert api.get("/jobs/reportable").status_code == 401


def test_report_window_closes_after_72_hours(server_factory):
    api = Api(server_factory())
    closing = completed_flow(api)
    api.advance_clock(72 * HOUR_MS - 1000)
    assert [j["id"] for j in reportable(api, closing.user)] == [closing.job_id]
    api.advance_clock(2000)
    assert reportable(api, closing.user) == []
    conflict(report(api, closing.user, closing.job_id), error_body(409, "Reports are accepted within 72 hours of completion"))
    # a job completed now is reportable again, so the window is per job
    fresh = completed_flow(api)
    assert [j["id"] for j in reportable(api, fresh.user)] == [fresh.job_id]
    assert ok(report(api, fresh.user, fresh.job_id), 201)["jobId"] == fresh.job_id


def test_photos_added_after_completion_do_not_reopen_the_report_window(server_factory):
    api = Api(server_factory())
    late = completed_flow(api)
    api.advance_clock(72 * HOUR_MS + 1000)
    before = get_job(api, late.user["token"], late.job_id)["updatedAt"]
    r = api.post(f"/jobs/{late.job_id}/images", token=late.user["token"], files=image_files(1, seed=31))
    assert r.status_code == 200, r.text
    assert get_job(api, late.user["token"], late.job_id)["updatedAt"] > before  # the job did change
    assert reportable(api, late.user) == []
    conflict(report(api, late.user, late.job_id), error_body(409, "Reports are accepted within 72 hours of completion"))


# ================================================================ POST /jobs/:id/recurring

def recurring(api, user, job_id, **body):
    full = {"dayOfWeek": 1, "timeSlot": "morning", "endDate": "2031-12-31"}
    full.update(body)
    return api.post(f"/jobs/{job_id}/recurring", token=user["token"], json=full)


@pytest.mark.parametrize("body, message", [
    ({"timeSlot": "morning", "endDate": "2031-12-31"}, "dayOfWeek: is required"),
    ({"dayOfWeek": 7, "timeSlot": "morning", "endDate": "2031-12-31"}, "dayOfWeek: must be between 0 and 6"),
    ({"dayOfWeek": -1, "timeSlot": "morning", "endDate": "2031-12-31"}, "dayOfWeek: must be between 0 and 6"),
    ({"dayOfWeek": 1.5, "timeSlot": "morning", "endDate": "2031-12-31"}, "dayOfWeek: must be an integer"),
    ({"dayOfWeek": "1", "timeSlot": "morning", "endDate": "2031-12-31"}, "dayOfWeek: must be an integer"),
    ({"dayOfWeek": 1, "endDate": "2031-12-31"}, "timeSlot: is required"),
    ({"dayOfWeek": 1, "timeSlot": "night", "endDate": "2031-12-31"},
     "timeSlot: must be one of: morning, afternoon, evening"),
    ({"dayOfWeek": 1, "timeSlot": "Morning", "endDate": "2031-12-31"},
     "timeSlot: must be one of: morning, afternoon, evening"),
    ({"dayOfWeek": 1, "timeSlot": "morning"}, "endDate: is required"),
    ({"dayOfWeek": 1, "timeSlot": "morning", "endDate": "someday"}, "endDate: must be a valid ISO 8601 date-time"),
    ({"dayOfWeek": 1, "timeSlot": "morning", "endDate": "2031-13-01"}, "endDate: must be a valid ISO 8601 date-time"),
])
def test_recurring_validation(api, body, message):
    u = customer(api)
    bad_request(api.post("/jobs/cnosuchjob000000000000000/recurring", token=u["token"], json=body), message)


def test_recurring_request_goes_to_the_provider(api, server):
    f = Flow(api).accepted()
    conflict(recurring(api, f.user, f.job_id), NOT_COMPLETED)
    f.completed()
    r = recurring(api, customer(api, f.zip), f.job_id)
    assert r.status_code == 403 and r.json() == NOT_YOUR_JOB
    r = api.post(f"/jobs/{f.job_id}/recurring", token=f.pro["token"],
                 json={"dayOfWeek": 1, "timeSlot": "morning", "endDate": "2031-12-31"})
    assert r.status_code == 403 and r.json() == FORBIDDEN
    r = recurring(api, f.user, "cnosuchjob000000000000000")
    assert r.status_code == 404 and r.json() == JOB_NOT_FOUND

    r = recurring(api, f.user, f.job_id, dayOfWeek=0, timeSlot="evening", endDate="2031-12-31T00:00:00Z")
    assert r.status_code == 200, r.text
    assert r.json() == {"requested": True}
    server.wait_mail(f.pro["email"], count=2)  # the acceptance, then the request
    api.wait_queue_idle()
    mails = server.mails(f.pro["email"])
    asked = [m for m in mails if m["subject"] == "A customer asked for a recurring service"]
    assert len(asked) == 1, [m["subject"] for m in mails]
    assert f.job_id in asked[0]["body"]
    assert "every Sunday (evening) until 2031-12-31T00:00:00Z" in asked[0]["body"]
    # every slot and weekday is accepted
    for day, slot in ((6, "morning"), (3, "afternoon")):
        assert ok(recurring(api, f.user, f.job_id, dayOfWeek=day, timeSlot=slot, endDate="2032-01-15")) == {
            "requested": True}
    server.wait_mail(f.pro["email"], count=4)


# ================================================================ the whole flow

def test_marketplace_flow_end_to_end(api, server):
    zip_code, lat, lng = fresh_zip()
    # a customer registers and saves a card
    u = customer(api, zip_code, name="Erin End")
    assert ok(api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "pm_card_visa"})) == {
        "brand": "visa", "last4": "4242", "expMonth": 12, "expYear": 2034}
    # posts a job
    job = post_job(api, u, service="home_cleaning", description="Deep clean, 2 bedrooms",
                   preferredAt="2031-09-10T14:00:00Z")
    jid = job["id"]
    # a provider registers, is not yet verified, then verifies and finds the job in its feed
    pro = provider(api, [zip_code], ["home_cleaning"], verified=False, name="Pat Pro")
    r = api.post("/quotes", token=pro["token"], json={"jobId": jid, "amount": 150})
    assert r.status_code == 400 and r.json()["code"] == "verification_required"
    verify(api, pro)
    assert jid in [j["id"] for j in feed(api, pro["token"])]
    # quotes; the customer is told
    q = quote(api, pro, jid, 150, note="Two cleaners, 3 hours", scheduledAt="2031-09-10T14:00:00Z")
    assert (q["amount"], q["platformFee"], q["totalAmount"]) == (150.0, 27.0, 177.0)
    mail = server.wait_mail(u["email"])[0]
    assert mail["subject"] == "You received a quote"
    # the customer compares and accepts; the card is authorized; the provider is told
    listed = ok(api.get(f"/quotes/job/{jid}", token=u["token"]))
    assert [x["id"] for x in listed] == [q["id"]] and listed[0]["provider"]["name"] == "Pat Pro"
    accepted = accept(api, u, q["id"])
    assert accepted["job"]["status"] == "ACCEPTED" and accepted["job"]["providerId"] == pro["id"]
    assert accepted["quote"]["status"] == "ACCEPTED"
    assert server.wait_mail(pro["email"])[0]["subject"] == "Your quote was accepted"
    payment = get_job(api, u["token"], jid)["payment"]
    assert payment["status"] == "AUTHORIZED" and payment["amount"] == 177.0
    # on the way, with an ETA from 10 km away
    job = step(api, pro, jid, "ON_THE_WAY", fromLat=lat + 0.09, fromLng=lng)
    assert job["etaMinutes"] == drive_minutes(lat + 0.09, lng, job["lat"], job["lng"])
    # start with before photos, complete with after photos
    job = ok(api.post(f"/jobs/{jid}/start", token=pro["token"], files=image_files(1, seed=31)))
    assert job["status"] == "IN_PROGRESS" and len(job["beforeImages"]) == 1
    job = ok(api.post(f"/jobs/{jid}/complete", token=pro["token"], files=image_files(2, seed=32)))
    assert job["status"] == "COMPLETED" and len(job["afterImages"]) == 2
    # the authorization was captured
    view = get_job(api, u["token"], jid)
    assert view["payment"] == {**payment, "status": "PAID", "holdExpiresAt": None}
    # tip and review
    assert ok(tip(api, u, jid, 10)) == {"success": True, "tipAmount": 10.0}
    rv = ok(review(api, u, jid, rating=5, comment="Spotless"), 201)
    assert rv["rating"] == 5 and rv["providerId"] == pro["id"]
    assert get_job(api, u["token"], jid)["tipAmount"] == 10.0
    # the customer can still report it, and the provider's rating shows on its quotes
    assert [j["id"] for j in reportable(api, u)] == [jid]
    assert ok(api.get(f"/quotes/job/{jid}", token=u["token"]))[0]["provider"]["averageRating"] == 5.0
    assert jid not in [j["id"] for j in feed(api, pro["token"])]
