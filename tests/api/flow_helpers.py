"""Helpers shared by the API test files (test_jobs.py and test_quotes.py first): accounts,
verified providers, jobs, quotes and the lifecycle steps, each asserting the status code of the
step it takes. `named_customer()` and `named_provider()` give each account a name of its own,
for tests that read names back (message senders, thread counterparts, notification texts).

ZIPs: every provider registered with the harness defaults (10001, lawncare) matches every
lawncare job in 10001 for the whole session, so a test that cares about matching takes its
own ZIP:
- `fresh_zip()`: a ZIP of the embedded US table (assets/us_zip_centroids.csv, the file the
  service's geocoder is generated from) that no test of these two files used yet, for tests
  that need the job's coordinates (centroid, ETA). Other suites draw from the same table with
  their own bookkeeping, so a test on a fresh_zip() asserts on ids, not on whole feeds.
- `private_zip()`: a 5-digit ZIP that is not in the table (so jobs there have null
  coordinates) and that no test file names literally: no other suite draws these, so a test
  may assert on the whole provider feed of such a ZIP, and its ASAP jobs notify nobody else.
"""
import csv
import math
import os
import random
import re
import threading
import uuid

from conftest import Api
from helpers import error_body, png_bytes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ZIP_TABLE = os.path.join(ROOT, "assets", "us_zip_centroids.csv")

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
FILE_URL_RE = re.compile(r"^http://localhost:\d+/files/c[0-9a-z]{24}\.png\?expires=\d+&sig=[0-9a-f]{64}$")
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
JOB_NOT_FOUND = error_body(404, "Job not found")
SERVICES_MSG = "must be one of: lawncare, snowplowing, handyman, home_cleaning"

# decisions.md 4: the Job JSON (plus `images`, the customer's own photos)
JOB_FIELDS = {
    "id", "customerId", "providerId", "service", "description", "preferredAt", "isAsap", "details", "address",
    "zip", "lat", "lng", "status", "images", "beforeImages", "afterImages", "tipAmount", "etaMinutes",
    "createdAt", "updatedAt",
}
QUOTE_FIELDS = {"id", "jobId", "providerId", "amount", "platformFee", "totalAmount", "note", "scheduledAt",
                "status", "createdAt"}
PAYMENT_FIELDS = {"id", "status", "amount", "processorPaymentIntentId", "holdExpiresAt", "failureReason",
                  "refundedAmount", "dispute"}

# ---------------------------------------------------------------- ZIPs


def _load_zips():
    with open(ZIP_TABLE, newline="") as f:
        rows = [(r["zip"], float(r["lat"]), float(r["lng"])) for r in csv.DictReader(f)]
    return [r for r in rows if r[0] != "10001"]


_ZIPS = _load_zips()
_USED = set()
_TABLE = {z[0] for z in _ZIPS} | {"10001"}


def _literal_zips():
    """5-digit strings that any test file spells out (kept out of private_zip())."""
    here = os.path.dirname(__file__)
    found = set()
    for name in os.listdir(here):
        if name.endswith(".py"):
            with open(os.path.join(here, name), encoding="utf-8") as f:
                found |= set(re.findall(r"(?<![0-9])[0-9]{5}(?![0-9])", f.read()))
    return found


_RESERVED = _literal_zips()


def fresh_zip():
    """(zip, lat, lng) of a ZIP in the embedded table that this session has not handed out."""
    while True:
        z = random.choice(_ZIPS)
        if z[0] not in _USED and z[0] not in _RESERVED:
            _USED.add(z[0])
            return z


def private_zip():
    """A 5-digit ZIP outside the table and outside every test file's literals, not handed out
    before in this session."""
    while True:
        z = f"{random.randrange(100000):05d}"
        if z not in _TABLE and z not in _RESERVED and z not in _USED and len(set(z)) > 2:
            _USED.add(z)
            return z


def zip_centroid(zip_code):
    for z, lat, lng in _ZIPS:
        if z == zip_code:
            return lat, lng
    if zip_code == "10001":
        return 40.75065, -73.997293
    raise KeyError(zip_code)


def drive_minutes(lat1, lng1, lat2, lng2):
    """The embedded router's estimate (decisions.md 2): great-circle miles x 1.3 at 35 mph,
    rounded up, at least 1 minute."""
    rad = math.pi / 180
    dlat, dlng = (lat2 - lat1) * rad, (lng2 - lng1) * rad
    a = math.sin(dlat / 2) ** 2 + math.cos(lat1 * rad) * math.cos(lat2 * rad) * math.sin(dlng / 2) ** 2
    miles = 2 * 3958.8 * math.asin(min(1.0, math.sqrt(a)))
    return max(1, math.ceil(miles * 1.3 / 35 * 60))


# ---------------------------------------------------------------- images


def image_files(n, field="images", seed=0):
    """A multipart file list of n distinct PNGs; with n == 0 a text field only, so the body is
    still multipart/form-data but carries no file."""
    if n == 0:
        return {"note": (None, "no photos")}
    return [(field, (f"photo{i}.png", png_bytes(seed * 100 + i + 1), "image/png")) for i in range(n)]


# ---------------------------------------------------------------- accounts


def customer(api, zip_code=None, card=None, **over):
    """A new customer with the profile ZIP (default: a private_zip()); card: a test
    PaymentMethod id to save, or None."""
    u = api.register_user(zip=zip_code or private_zip(), **over)
    if card:
        save_card(api, u, card)
    return u


def save_card(api, user, pm="pm_card_visa"):
    r = api.post("/payments/payment-method", token=user["token"], json={"paymentMethodId": pm})
    assert r.status_code == 200, r.text
    return r.json()


def verify(api, pro):
    r = api.post("/providers/me/headshots", token=pro["token"],
                 files={"headshot": ("head.png", png_bytes(7), "image/png")})
    assert r.status_code == 200, r.text
    r = api.post("/providers/me/id-documents", token=pro["token"],
                 files={"front": ("front.png", png_bytes(8), "image/png"),
                        "back": ("back.png", png_bytes(9), "image/png")})
    assert r.status_code == 200, r.text
    return pro


def provider(api, zips=None, services=("lawncare",), verified=True, **over):
    """A new provider (default: in a private_zip() of its own), verified unless told otherwise."""
    pro = api.register_provider(serviceZips=list(zips or [private_zip()]), services=list(services), **over)
    return verify(api, pro) if verified else pro


def named_customer(api, zip_code=None, **over):
    """A customer() named "Customer <6 hex>", a name no other account has, kept in its "name"."""
    user = customer(api, zip_code, name=f"Customer {uuid.uuid4().hex[:6]}", **over)
    user["name"] = user["body"]["name"]
    return user


def named_provider(api, zips=None, **over):
    """A provider() named "Pro <6 hex>", a name no other account has, kept in its "name"."""
    pro = provider(api, zips, name=f"Pro {uuid.uuid4().hex[:6]}", **over)
    pro["name"] = pro["body"]["name"]
    return pro


# ---------------------------------------------------------------- jobs and quotes


def ok(r, status=200):
    assert r.status_code == status, f"{r.status_code} {r.text}"
    return r.json()


def post_job(api, user, **over):
    body = {"service": "lawncare", "description": "Mow the front lawn", "preferredAt": "2031-05-01T09:00:00.000Z"}
    body.update(over)
    return ok(api.post("/jobs", token=user["token"], json=body), 201)


def asap_job(api, user, **over):
    """An ASAP lawncare job, {"service": "lawncare", "isAsap": true} and over as its body."""
    return ok(api.post("/jobs", token=user["token"], json={"service": "lawncare", "isAsap": True, **over}), 201)


def get_job(api, token, job_id):
    return ok(api.get(f"/jobs/{job_id}", token=token))


def submit_quote(api, pro, job_id, amount=100, **over):
    body = {"jobId": job_id, "amount": amount}
    body.update(over)
    return api.post("/quotes", token=pro["token"], json=body)


def quote(api, pro, job_id, amount=100, **over):
    return ok(submit_quote(api, pro, job_id, amount, **over), 201)


def accept(api, user, quote_id):
    return ok(api.post(f"/quotes/{quote_id}/accept", token=user["token"]))


def set_status(api, pro, job_id, status, **extra):
    return api.patch(f"/jobs/{job_id}/status", token=pro["token"], json={"status": status, **extra})


def step(api, pro, job_id, status, **extra):
    return ok(set_status(api, pro, job_id, status, **extra))


def feed(api, token):
    return ok(api.get("/jobs", token=token))["jobs"]


def payment_of(api, user, job_id):
    return get_job(api, user["token"], job_id)["payment"]


def race(server, calls):
    """Runs the callables (each given its own Api client) at once, released together by a
    barrier; returns their responses in order."""
    barrier = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(i):
        client = Api(server)
        barrier.wait()
        out[i] = calls[i](client)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in out)
    return out


class Flow:
    """A customer, a verified provider in a ZIP of their own, and one job between them."""

    def __init__(self, api, card="pm_card_visa", service="lawncare", amount=100, pro_over=None):
        self.zip, self.lat, self.lng = fresh_zip()
        self.user = customer(api, self.zip, card)
        self.pro = provider(api, [self.zip], [service], **(pro_over or {}))
        self.job = post_job(api, self.user, service=service)
        self.quote = None
        self.api = api
        self.amount = amount

    @property
    def job_id(self):
        return self.job["id"]

    def quoted(self):
        self.quote = quote(self.api, self.pro, self.job_id, self.amount)
        return self

    def accepted(self):
        if not self.quote:
            self.quoted()
        self.job = accept(self.api, self.user, self.quote["id"])["job"]
        return self

    def moved_to(self, status):
        """Walks the job to status (ACCEPTED, ON_THE_WAY, IN_PROGRESS or COMPLETED) by PATCH."""
        order = ["ACCEPTED", "ON_THE_WAY", "IN_PROGRESS", "COMPLETED"]
        if self.job["status"] in ("PENDING", "QUOTED"):
            self.accepted()
        for s in order[order.index(self.job["status"]) + 1: order.index(status) + 1]:
            self.job = step(self.api, self.pro, self.job_id, s)
        assert self.job["status"] == status
        return self

    def completed(self):
        return self.moved_to("COMPLETED")


def completed_flow(api, **kw):
    return Flow(api, **kw).completed()
