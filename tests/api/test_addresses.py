"""Saved addresses: /users/me/addresses (list, create, primary, delete, property details,
photos) and POST /jobs with addressId.

Spec: marketplace-api.md 2 (UserAddress), 4 (Users table: the /users/me/addresses routes; Jobs:
addressId), 5 (access: /users/me/* is user only), 7 (errors: premium_required, last or primary
address delete), 8 (limits: free-tier saved addresses 1, label 100, address 300, address photos
street view 1 file 10 MB and service area up to 10 files 10 MB each).
"""
import csv
import os
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from flow_helpers import ok
from helpers import error_body, png_bytes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
PHOTO_URL_RE = re.compile(r"^http://localhost:\d+/files/c[0-9a-z]{24}\.(png|jpg|webp)\?expires=\d+&sig=[0-9a-f]{64}$")
ADDRESS_FIELDS = {"id", "label", "address", "zip", "isPrimary", "drivewayLength", "lawnAcres", "streetViewPhoto",
                  "serviceAreaPhotos", "createdAt"}
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
NOT_FOUND = error_body(404, "Address not found")
PREMIUM_REQUIRED = error_body(403, "Saving more than one address requires premium", "premium_required")
PRIMARY_DELETE = error_body(400, "The primary address cannot be deleted", "invalid_state")
LAST_DELETE = error_body(400, "The last address cannot be deleted", "invalid_state")
MB = 1024 * 1024

with open(os.path.join(ROOT, "assets", "us_zip_centroids.csv"), newline="") as _f:
    CENTROIDS = {r["zip"]: (float(r["lat"]), float(r["lng"])) for r in csv.DictReader(_f)}
ZIPS = sorted(z for z in CENTROIDS if z != "10001")


def premium_user(api, **over):
    u = api.register_user(**over)
    ok(api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "pm_card_visa"}))
    sub = ok(api.post("/payments/premium/subscribe", token=u["token"]))
    assert sub["isPremium"] is True
    return u


def addresses(api, user):
    return ok(api.get("/users/me/addresses", token=user["token"]))


def add(api, user, address, zip_code, label=None, status=201):
    body = {"address": address, "zip": zip_code}
    if label is not None:
        body["label"] = label
    listed = ok(api.post("/users/me/addresses", token=user["token"], json=body), status)
    # distinct creation times, so the order after the primary (oldest first) is determined
    api.advance_clock(3)
    return listed


def expected(address, zip_code, primary, label="Address", driveway=None, acres=None):
    return {"label": label, "address": address, "zip": zip_code, "isPrimary": primary, "drivewayLength": driveway,
            "lawnAcres": acres, "streetViewPhoto": None, "serviceAreaPhotos": []}


def plain(a):
    """An address without its generated id and createdAt (both checked here)."""
    assert set(a) == ADDRESS_FIELDS, a
    assert ID_RE.match(a["id"]) and ISO_RE.match(a["createdAt"]), a
    return {k: v for k, v in a.items() if k not in ("id", "createdAt")}


def fetch(api, url):
    """A file URL of the service, fetched through the test's address (same path and query)."""
    parts = urlsplit(url)
    return api.session.get(api.url + parts.path + "?" + parts.query, timeout=30)


def upload(api, user, address_id, files):
    return api.post(f"/users/me/addresses/{address_id}/photos", token=user["token"], files=files)


def user_with_address(api):
    """A new customer with one saved address, 1 First St in 60601: (user, the address's id)."""
    user = api.register_user()
    return user, add(api, user, "1 First St", "60601")[0]["id"]


def assert_no_photos(api, user):
    """The customer's first address has no street-view photo and no service-area photo."""
    a = addresses(api, user)[0]
    assert (a["streetViewPhoto"], a["serviceAreaPhotos"]) == (None, [])


# ---------------------------------------------------------------- list and create


def test_new_customer_has_no_addresses(api):
    assert addresses(api, api.register_user()) == []


def test_first_address_is_primary_with_default_label(api):
    user = api.register_user()
    listed = add(api, user, "12 Oak Street, Springfield", "62704")
    assert [plain(a) for a in listed] == [expected("12 Oak Street, Springfield", "62704", True)]
    assert addresses(api, user) == listed


@pytest.mark.parametrize("label", ["", "   "])
def test_blank_label_gets_the_default(api, label):
    user = api.register_user()
    listed = add(api, user, "3 Birch Lane", "30301", label=label)
    assert [plain(a) for a in listed] == [expected("3 Birch Lane", "30301", True)]


def test_label_is_kept_when_given(api):
    user = premium_user(api)
    listed = add(api, user, "1 Elm St", "02139", label="Home")
    assert [plain(a) for a in listed] == [expected("1 Elm St", "02139", True, label="Home")]


@pytest.mark.parametrize("body,error", [
    ({"zip": "60601"}, "address: is required"),
    ({"address": None, "zip": "60601"}, "address: is required"),
    ({"address": "", "zip": "60601"}, "address: must not be empty"),
    ({"address": "   ", "zip": "60601"}, "address: must not be empty"),
    ({"address": "x" * 301, "zip": "60601"}, "address: must be at most 300 characters"),
    ({"address": 42, "zip": "60601"}, "address: must be a string"),
    ({"label": "l" * 101, "address": "1 Main St", "zip": "60601"}, "label: must be at most 100 characters"),
    ({"label": 7, "address": "1 Main St", "zip": "60601"}, "label: must be a string"),
    ({"address": "1 Main St"}, "zip: is required"),
    ({"address": "1 Main St", "zip": "6060"}, "zip: must be exactly 5 digits"),
    ({"address": "1 Main St", "zip": "606011"}, "zip: must be exactly 5 digits"),
    ({"address": "1 Main St", "zip": "6060a"}, "zip: must be exactly 5 digits"),
    ({"address": "1 Main St", "zip": "60601-1234"}, "zip: must be exactly 5 digits"),
    ({"address": "1 Main St", "zip": 60601}, "zip: must be exactly 5 digits"),
])
def test_create_validation(api, body, error):
    user = api.register_user()
    r = api.post("/users/me/addresses", token=user["token"], json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))
    assert addresses(api, user) == []


def test_create_accepts_the_length_limits(api):
    user = premium_user(api)
    add(api, user, "a" * 300, "60601", label="b" * 100)
    listed = add(api, user, "é" * 300, "00501", label="ü" * 100)  # characters, not bytes
    assert [(a["address"], a["label"], a["zip"]) for a in listed] == [("a" * 300, "b" * 100, "60601"),
                                                                     ("é" * 300, "ü" * 100, "00501")]


def test_validation_comes_before_the_premium_limit(api):
    user = api.register_user()
    add(api, user, "1 Main St", "60601")
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "", "zip": "60601"})
    assert (r.status_code, r.json()) == (400, error_body(400, "address: must not be empty"))


def test_free_tier_keeps_one_address(api):
    user = api.register_user()
    first = add(api, user, "1 Main St", "60601")
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "2 Second St", "zip": "60602"})
    assert (r.status_code, r.json()) == (403, PREMIUM_REQUIRED)
    assert addresses(api, user) == first
    # a card alone is not premium
    ok(api.post("/payments/payment-method", token=user["token"], json={"paymentMethodId": "pm_card_visa"}))
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "2 Second St", "zip": "60602"})
    assert (r.status_code, r.json()) == (403, PREMIUM_REQUIRED)


def test_premium_keeps_many_primary_first(api):
    user = premium_user(api)
    add(api, user, "1 First St", "60601", label="Home")
    listed = add(api, user, "2 Second St", "94103", label="Cabin")
    assert [plain(a) for a in listed] == [expected("1 First St", "60601", True, label="Home"),
                                          expected("2 Second St", "94103", False, label="Cabin")]
    listed = add(api, user, "3 Third St", "33101")
    assert [(a["address"], a["isPrimary"], a["label"]) for a in listed] == [
        ("1 First St", True, "Home"), ("2 Second St", False, "Cabin"), ("3 Third St", False, "Address")]
    assert len({a["id"] for a in listed}) == 3
    assert addresses(api, user) == listed


def test_addresses_are_per_customer(api):
    a, b = api.register_user(), api.register_user()
    add(api, a, "1 Mine St", "60601")
    assert addresses(api, b) == []
    listed = add(api, b, "9 Yours St", "80202")  # b's first address: free tier, primary
    assert [plain(x) for x in listed] == [expected("9 Yours St", "80202", True)]
    assert [x["address"] for x in addresses(api, a)] == ["1 Mine St"]


def test_simultaneous_first_addresses_of_a_free_customer(api, engine, request):
    """A free-tier customer firing ten first-address POSTs at once ends with one address (the
    primary) and nine 403 premium_required, a few rounds in a row."""
    n = 10
    for round_no in range(15):
        user = api.register_user()
        sessions = [requests.Session() for _ in range(n)]
        for s in sessions:  # open the connections first so the posts leave together
            s.get(api.url + "/health", timeout=30)
        barrier = threading.Barrier(n)

        def one(i):
            barrier.wait()
            return sessions[i].post(api.url + "/users/me/addresses", json={"address": f"{i} Race St", "zip": "60601"},
                                    headers={"Authorization": f"Bearer {user['token']}"}, timeout=30).status_code

        with ThreadPoolExecutor(max_workers=n) as pool:
            codes = list(pool.map(one, range(n)))
        for s in sessions:
            s.close()
        listed = addresses(api, user)
        assert (sorted(codes), len(listed), [a["isPrimary"] for a in listed]) == ([201] + [403] * (n - 1), 1, [True]), \
            f"round {round_no}: {codes}, {len(listed)} addresses"


# ---------------------------------------------------------------- primary and delete


def test_make_primary(api):
    user = premium_user(api)
    add(api, user, "1 First St", "60601")
    add(api, user, "2 Second St", "94103")
    listed = add(api, user, "3 Third St", "33101")
    third = listed[2]["id"]
    r = api.patch(f"/users/me/addresses/{third}/primary", token=user["token"])
    listed = ok(r)
    assert [(a["address"], a["isPrimary"]) for a in listed] == [
        ("3 Third St", True), ("1 First St", False), ("2 Second St", False)]
    assert sum(a["isPrimary"] for a in listed) == 1
    assert addresses(api, user) == listed
    # again on the current primary: unchanged
    assert ok(api.patch(f"/users/me/addresses/{third}/primary", token=user["token"])) == listed


def test_delete_primary_is_400(api):
    user = premium_user(api)
    listed = add(api, user, "1 First St", "60601")
    listed = add(api, user, "2 Second St", "94103")
    primary = listed[0]["id"]
    r = api.delete(f"/users/me/addresses/{primary}", token=user["token"])
    assert (r.status_code, r.json()) == (400, PRIMARY_DELETE)
    assert addresses(api, user) == listed


def test_delete_the_only_address_is_400(api):
    user = api.register_user()
    listed = add(api, user, "1 Only St", "60601")
    r = api.delete(f"/users/me/addresses/{listed[0]['id']}", token=user["token"])
    # the only address is also the primary one; either rule forbids it
    assert r.status_code == 400
    assert r.json() in (PRIMARY_DELETE, LAST_DELETE)
    assert addresses(api, user) == listed


def test_delete_a_secondary_address(api):
    user = premium_user(api)
    add(api, user, "1 First St", "60601")
    listed = add(api, user, "2 Second St", "94103")
    r = api.delete(f"/users/me/addresses/{listed[1]['id']}", token=user["token"])
    remaining = ok(r)
    assert remaining == [listed[0]]
    assert addresses(api, user) == remaining
    r = api.delete(f"/users/me/addresses/{listed[1]['id']}", token=user["token"])
    assert (r.status_code, r.json()) == (404, NOT_FOUND)


def test_delete_after_moving_primary(api):
    user = premium_user(api)
    add(api, user, "1 First St", "60601")
    listed = add(api, user, "2 Second St", "94103")
    first, second = listed[0]["id"], listed[1]["id"]
    ok(api.patch(f"/users/me/addresses/{second}/primary", token=user["token"]))
    remaining = ok(api.delete(f"/users/me/addresses/{first}", token=user["token"]))
    assert [(a["id"], a["isPrimary"]) for a in remaining] == [(second, True)]


# ---------------------------------------------------------------- property details


def test_update_property_details(api):
    user, aid = user_with_address(api)
    a = ok(api.patch(f"/users/me/addresses/{aid}", token=user["token"],
                     json={"drivewayLength": 42.5, "lawnAcres": 0.25}))
    assert a["id"] == aid
    assert plain(a) == expected("1 First St", "60601", True, driveway=42.5, acres=0.25)
    # one field at a time keeps the other
    a = ok(api.patch(f"/users/me/addresses/{aid}", token=user["token"], json={"lawnAcres": 1}))
    assert (a["drivewayLength"], a["lawnAcres"]) == (42.5, 1)
    a = ok(api.patch(f"/users/me/addresses/{aid}", token=user["token"], json={"drivewayLength": 0}))
    assert (a["drivewayLength"], a["lawnAcres"]) == (0, 1)
    a = ok(api.patch(f"/users/me/addresses/{aid}", token=user["token"], json={}))
    assert (a["drivewayLength"], a["lawnAcres"]) == (0, 1)
    assert addresses(api, user) == [a]


@pytest.mark.parametrize("body,error", [
    ({"drivewayLength": -1}, "drivewayLength: must be between 0 and 1000000"),
    ({"lawnAcres": -0.01}, "lawnAcres: must be between 0 and 1000000"),
    ({"drivewayLength": "40"}, "drivewayLength: must be a number"),
    ({"lawnAcres": "half"}, "lawnAcres: must be a number"),
    ({"drivewayLength": True}, "drivewayLength: must be a number"),
    ({"drivewayLength": 10, "lawnAcres": -1}, "lawnAcres: must be between 0 and 1000000"),
])
def test_update_validation(api, body, error):
    user, aid = user_with_address(api)
    ok(api.patch(f"/users/me/addresses/{aid}", token=user["token"], json={"drivewayLength": 5, "lawnAcres": 2}))
    r = api.patch(f"/users/me/addresses/{aid}", token=user["token"], json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))
    a = addresses(api, user)[0]
    assert (a["drivewayLength"], a["lawnAcres"]) == (5, 2)


# ---------------------------------------------------------------- photos


def test_upload_street_view_and_service_area_photos(api):
    user, aid = user_with_address(api)
    street = png_bytes(101)
    a = ok(upload(api, user, aid, {"streetViewPhoto": ("street.png", street, "image/png")}))
    assert a["id"] == aid and a["serviceAreaPhotos"] == []
    assert PHOTO_URL_RE.match(a["streetViewPhoto"]), a
    got = fetch(api, a["streetViewPhoto"])
    assert (got.status_code, got.headers["Content-Type"].split(";")[0], got.content) == (200, "image/png", street)
    area = [png_bytes(200 + i) for i in range(3)]
    a2 = ok(upload(api, user, aid, [("serviceAreaPhotos", (f"a{i}.png", area[i], "image/png")) for i in range(3)]))
    assert urlsplit(a2["streetViewPhoto"]).path == urlsplit(a["streetViewPhoto"]).path  # kept
    assert len(a2["serviceAreaPhotos"]) == 3
    for url, data in zip(a2["serviceAreaPhotos"], area):
        assert PHOTO_URL_RE.match(url), url
        got = fetch(api, url)
        assert (got.status_code, got.content) == (200, data)
    # signed for about a year
    expires = int(parse_qs(urlsplit(a2["serviceAreaPhotos"][0]).query)["expires"][0])
    now = int(parse_qs(urlsplit(a2["streetViewPhoto"]).query)["expires"][0]) - 365 * 24 * 3600
    assert abs(expires - (now + 365 * 24 * 3600)) < 120
    assert addresses(api, user)[0]["serviceAreaPhotos"].__len__() == 3


def test_upload_both_fields_at_once_and_append(api):
    user, aid = user_with_address(api)
    files = [("streetViewPhoto", ("s.png", png_bytes(1), "image/png"))] + [
        ("serviceAreaPhotos", (f"a{i}.png", png_bytes(10 + i), "image/png")) for i in range(2)]
    a = ok(upload(api, user, aid, files))
    assert a["streetViewPhoto"] is not None and len(a["serviceAreaPhotos"]) == 2
    old_street = a["streetViewPhoto"]
    # a new street view replaces the old one (its file is gone); area photos accumulate
    b = ok(upload(api, user, aid, [("streetViewPhoto", ("s2.png", png_bytes(2), "image/png")),
                                   ("serviceAreaPhotos", ("a9.png", png_bytes(19), "image/png"))]))
    assert urlsplit(b["streetViewPhoto"]).path != urlsplit(old_street).path
    assert fetch(api, b["streetViewPhoto"]).content == png_bytes(2)
    assert fetch(api, old_street).status_code == 404
    assert [fetch(api, u).content for u in b["serviceAreaPhotos"]] == [png_bytes(10), png_bytes(11), png_bytes(19)]


def test_upload_ten_service_area_photos(api):
    user, aid = user_with_address(api)
    a = ok(upload(api, user, aid, [("serviceAreaPhotos", (f"a{i}.png", png_bytes(300 + i), "image/png"))
                                   for i in range(10)]))
    assert len(a["serviceAreaPhotos"]) == 10
    assert a["streetViewPhoto"] is None


def test_simultaneous_photo_uploads_keep_every_photo(api):
    """Six of a customer's devices adding a service-area photo to one address at once: every photo is
    kept (none overwritten by a concurrent request's read of the list), each file is served."""
    user, aid = user_with_address(api)
    n = 6
    barrier = threading.Barrier(n)

    def one(i):
        with requests.Session() as s:
            s.get(api.url + "/health", timeout=30)
            barrier.wait()
            return s.post(api.url + f"/users/me/addresses/{aid}/photos",
                          headers={"Authorization": f"Bearer {user['token']}"},
                          files={"serviceAreaPhotos": (f"r{i}.png", png_bytes(500 + i), "image/png")}, timeout=60)

    with ThreadPoolExecutor(max_workers=n) as pool:
        answers = list(pool.map(one, range(n)))
    assert [r.status_code for r in answers] == [200] * n, [r.text for r in answers]
    urls = addresses(api, user)[0]["serviceAreaPhotos"]
    assert sorted(fetch(api, u).content for u in urls) == sorted(png_bytes(500 + i) for i in range(n))


def test_upload_rejections(api):
    user, aid = user_with_address(api)
    cases = [
        ({"caption": (None, "no files")}, "No files uploaded"),
        ([("streetViewPhoto", ("a.png", png_bytes(1), "image/png")),
          ("streetViewPhoto", ("b.png", png_bytes(2), "image/png"))], "streetViewPhoto: at most 1 file"),
        ([("serviceAreaPhotos", (f"a{i}.png", png_bytes(i), "image/png")) for i in range(11)],
         "serviceAreaPhotos: at most 10 files"),
        ({"streetViewPhoto": ("notes.txt", b"hello, not an image\n", "text/plain")},
         "streetViewPhoto: must be a PNG, JPEG or WebP image"),
        ([("serviceAreaPhotos", ("ok.png", png_bytes(1), "image/png")),
          ("serviceAreaPhotos", ("bad.pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", "application/pdf"))],
         "serviceAreaPhotos: must be a PNG, JPEG or WebP image"),
        ({"photo": ("a.png", png_bytes(1), "image/png")}, "photo: unexpected file field"),
    ]
    for files, error in cases:
        r = upload(api, user, aid, files)
        field = "body" if error == "No files uploaded" else None  # two file fields: no one field missing
        assert (r.status_code, r.json()) == (400, error_body(400, error, field and "validation_failed", field)), error
    r = api.post(f"/users/me/addresses/{aid}/photos", token=user["token"], json={"streetViewPhoto": "x"})
    assert (r.status_code, r.json()) == (400, error_body(400, "body: must be multipart/form-data"))
    assert_no_photos(api, user)


def test_upload_over_10_mb_is_413(api):
    user, aid = user_with_address(api)
    big = png_bytes(1) + b"\0" * (10 * MB)
    r = upload(api, user, aid, {"streetViewPhoto": ("big.png", big, "image/png")})
    assert (r.status_code, r.json()) == (413, error_body(413, "streetViewPhoto: file larger than 10 MB"))
    r = upload(api, user, aid, [("serviceAreaPhotos", ("ok.png", png_bytes(2), "image/png")),
                                ("serviceAreaPhotos", ("big.png", big, "image/png"))])
    assert (r.status_code, r.json()) == (413, error_body(413, "serviceAreaPhotos: file larger than 10 MB"))
    assert_no_photos(api, user)


def test_delete_photos(api):
    user, aid = user_with_address(api)
    a = ok(upload(api, user, aid, [("streetViewPhoto", ("s.png", png_bytes(1), "image/png")),
                                   ("serviceAreaPhotos", ("a.png", png_bytes(2), "image/png"))]))
    cleared = ok(api.delete(f"/users/me/addresses/{aid}/photos", token=user["token"]))
    assert plain(cleared) == expected("1 First St", "60601", True)
    assert cleared["id"] == aid
    assert addresses(api, user) == [cleared]
    for url in [a["streetViewPhoto"]] + a["serviceAreaPhotos"]:
        assert fetch(api, url).status_code == 404
    # clearing again is harmless
    assert ok(api.delete(f"/users/me/addresses/{aid}/photos", token=user["token"])) == cleared


# ---------------------------------------------------------------- access


def test_another_customers_address_is_404_everywhere(api):
    owner, other = premium_user(api), premium_user(api)
    add(api, owner, "1 First St", "60601")
    listed = add(api, owner, "2 Second St", "94103")
    primary, secondary = listed[0]["id"], listed[1]["id"]
    add(api, other, "9 Other St", "80202")
    png = ("s.png", png_bytes(1), "image/png")
    for aid in (primary, secondary, "c" + "0" * 24):
        for r in (api.patch(f"/users/me/addresses/{aid}/primary", token=other["token"]),
                  api.delete(f"/users/me/addresses/{aid}", token=other["token"]),
                  api.patch(f"/users/me/addresses/{aid}", token=other["token"], json={"lawnAcres": 3}),
                  api.post(f"/users/me/addresses/{aid}/photos", token=other["token"], files={"streetViewPhoto": png}),
                  api.delete(f"/users/me/addresses/{aid}/photos", token=other["token"])):
            assert (r.status_code, r.json()) == (404, NOT_FOUND), r.request.method + " " + r.request.url
    assert addresses(api, owner) == listed
    assert [a["address"] for a in addresses(api, other)] == ["9 Other St"]
    # nor can a job be posted at it
    r = api.post("/jobs", token=other["token"], json={"service": "lawncare", "isAsap": True, "addressId": secondary})
    assert (r.status_code, r.json()) == (404, NOT_FOUND)


def test_provider_token_is_403_and_no_token_is_401(api):
    user, pro = api.register_user(), api.register_provider()
    aid = add(api, user, "1 First St", "60601")[0]["id"]
    png = {"streetViewPhoto": ("s.png", png_bytes(1), "image/png")}
    calls = [("GET", "/users/me/addresses", {}),
             ("POST", "/users/me/addresses", {"json": {"address": "x", "zip": "60601"}}),
             ("PATCH", f"/users/me/addresses/{aid}/primary", {}), ("DELETE", f"/users/me/addresses/{aid}", {}),
             ("PATCH", f"/users/me/addresses/{aid}", {"json": {"lawnAcres": 1}}),
             ("POST", f"/users/me/addresses/{aid}/photos", {"files": png}),
             ("DELETE", f"/users/me/addresses/{aid}/photos", {})]
    for method, path, kw in calls:
        r = api.request(method, path, token=pro["token"], **kw)
        assert (r.status_code, r.json()) == (403, FORBIDDEN), f"{method} {path}"
        r = api.request(method, path, **kw)
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED), f"{method} {path}"
    a = addresses(api, user)
    assert [(x["address"], x["lawnAcres"], x["streetViewPhoto"]) for x in a] == [("1 First St", None, None)]


# ---------------------------------------------------------------- jobs at a saved address


def test_job_at_a_saved_address_uses_its_address_and_zip(api):
    # ZIPs of the embedded table picked at random, so the jobs match no other test's providers
    profile_zip, home_zip, office_zip = random.sample(ZIPS, 3)
    user = premium_user(api, address="5 Profile Rd", zip=profile_zip)
    add(api, user, "77 Lake Shore Dr", home_zip)
    listed = add(api, user, "500 Market St", office_zip, label="Office")
    office = listed[1]["id"]
    job = ok(api.post("/jobs", token=user["token"], json={"service": "lawncare", "isAsap": True,
                                                          "addressId": office}), 201)
    assert (job["address"], job["zip"]) == ("500 Market St", office_zip)
    assert ok(api.get(f"/jobs/{job['id']}", token=user["token"]))["zip"] == office_zip
    # without addressId the profile address is used
    job = ok(api.post("/jobs", token=user["token"], json={"service": "lawncare", "isAsap": True}), 201)
    assert (job["address"], job["zip"]) == ("5 Profile Rd", profile_zip)
    r = api.post("/jobs", token=user["token"], json={"service": "lawncare", "isAsap": True,
                                                     "addressId": "c" + "1" * 24})
    assert (r.status_code, r.json()) == (404, NOT_FOUND)


def test_asap_job_at_a_saved_address_reaches_the_providers_of_its_zip(api):
    saved_zip, profile_zip = random.sample(ZIPS, 2)
    near_saved = api.register_provider(serviceZips=[saved_zip], services=["lawncare"])
    near_profile = api.register_provider(serviceZips=[profile_zip], services=["lawncare"])
    user = api.register_user(zip=profile_zip, address=f"1 Profile Rd {profile_zip}")
    aid = add(api, user, f"8 Saved Ave {saved_zip}", saved_zip)[0]["id"]
    job = ok(api.post("/jobs", token=user["token"], json={"service": "lawncare", "isAsap": True, "addressId": aid}),
             201)
    assert (job["address"], job["zip"]) == (f"8 Saved Ave {saved_zip}", saved_zip)
    # placed at the saved ZIP's centroid
    lat, lng = CENTROIDS[saved_zip]
    assert abs(job["lat"] - lat) < 1e-4 and abs(job["lng"] - lng) < 1e-4
    got = ok(api.get("/providers/me/notifications", token=near_saved["token"]))
    assert [(n["title"], n["body"], n["jobId"]) for n in got] == [
        ("Urgent job nearby", f"An ASAP lawncare job was posted in {saved_zip}", job["id"])]
    assert ok(api.get("/providers/me/notifications", token=near_profile["token"])) == []
    assert [j["id"] for j in ok(api.get("/jobs", token=near_saved["token"]))["jobs"]] == [job["id"]]
    assert ok(api.get("/jobs", token=near_profile["token"]))["jobs"] == []
