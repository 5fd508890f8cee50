"""Job message threads: GET/POST /jobs/:id/messages and POST /jobs/:id/messages/photo; the
caller's threads with unread counts (GET /users/me/threads, /providers/me/threads) and POST
/jobs/:id/messages/read.

Spec: marketplace-api.md 2 (Message), 4 (Jobs table), 5 (access), 7 (errors), 8 (limits:
thread 250, text 1-2000, photo 1 file 10 MB PNG/JPG/WebP); decisions.md 4 (threads per
(job, provider): the customer picks the thread with providerId, body on POST and query on GET,
default the assigned provider, 400 when neither; a provider may use its own thread when it is
assigned or has quoted; anyone else 404).

Every test makes its own accounts in a ZIP of the embedded table that no other test of this
file uses, so only its own providers match its jobs.
"""
import base64
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from calendar import timegm
from datetime import datetime
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from conftest import Api
from flow_helpers import accept, asap_job, fresh_zip, named_customer, named_provider, ok, quote
from raw_http import pipelined_posts
from staff_helpers import sql
from helpers import error_body, png_bytes

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
IMAGE_URL_RE = re.compile(
    r"^http://localhost:\d+/files/(c[0-9a-z]{24})\.(png|jpg|webp)\?expires=(\d+)&sig=[0-9a-f]{64}$")
MESSAGE_FIELDS = {"id", "senderId", "senderRole", "senderName", "content", "createdAt"}
UNAUTHORIZED = error_body(401, "Unauthorized")
JOB_NOT_FOUND = error_body(404, "Job not found")
NO_THREAD = error_body(404, "No thread with that provider on this job")
PROVIDER_REQUIRED = error_body(400, "providerId: is required until a provider is assigned")
CANCELLED = error_body(409, "The job is cancelled", "invalid_state")
THREAD_FULL = error_body(429, "This thread has reached 250 messages", "thread_full")
YEAR_S = 365 * 24 * 3600
MB = 1024 * 1024

# ---------------------------------------------------------------- images

# 2x2 white images made with ImageMagick (`convert -size 2x2 xc:white -strip t.jpg`, `... t.webp`)
JPEG_BYTES = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgICAgMCAgIDAwMDBAYEBAQEBAgGBgUGCQgKCgkICQkKDA8MCgsOCwkJDRENDg8QEBEQ"
    "CgwSExIQEw8QEBD/wAALCAACAAIBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8A"
    "VN//2Q==")
WEBP_BYTES = base64.b64decode("UklGRh4AAABXRUJQVlA4TBEAAAAvAUAAAAfQ//73v/+BiOh/AAA=")


def iso_to_epoch(s):
    return timegm(datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").timetuple()) + int(s[20:23]) / 1000


# ---------------------------------------------------------------- accounts and jobs


class Setup:
    """A customer, `pros` verified providers of one fresh ZIP, one ASAP job; each provider quoted."""

    def __init__(self, api, pros=1, quoted=True):
        self.api = api
        self.zip = fresh_zip()[0]
        self.user = named_customer(api, self.zip)
        self.pros = [named_provider(api, [self.zip]) for _ in range(pros)]
        self.job = asap_job(api, self.user)
        self.quotes = [quote(api, p, self.job_id, 80) for p in self.pros] if quoted else []

    @property
    def job_id(self):
        return self.job["id"]

    @property
    def pro(self):
        return self.pros[0]

    def accept(self, i=0):
        accept(self.api, self.user, self.quotes[i]["id"])
        return self


def post(api, token, job_id, content, **extra):
    return api.post(f"/jobs/{job_id}/messages", token=token, json={"content": content, **extra})


def get(api, token, job_id, provider_id=None):
    params = {"providerId": provider_id} if provider_id else None
    return api.get(f"/jobs/{job_id}/messages", token=token, params=params)


def thread(api, token, job_id, provider_id=None):
    body = ok(get(api, token, job_id, provider_id))
    assert set(body) == {"messages"}
    return body["messages"]


def contents(messages):
    return [m["content"] for m in messages]


def post_photo(api, token, job_id, files, data=None):
    return api.post(f"/jobs/{job_id}/messages/photo", token=token, files=files, data=data)


def assert_message(m, sender, role, name, content):
    assert set(m) == MESSAGE_FIELDS
    assert ID_RE.match(m["id"]), m
    assert ISO_RE.match(m["createdAt"]), m
    assert (m["senderId"], m["senderRole"], m["senderName"], m["content"]) == (sender, role, name, content)


def local(api, url):
    """A file URL of the service, fetched through the test's address (same path and query)."""
    parts = urlsplit(url)
    return api.session.get(api.url + parts.path + "?" + parts.query, timeout=30)


# ---------------------------------------------------------------- posting and reading


def test_customer_posts_to_a_quoting_provider_by_provider_id(api):
    s = Setup(api)
    m = ok(post(api, s.user["token"], s.job_id, "Hello, can you come today?", providerId=s.pro["id"]), 201)
    assert_message(m, s.user["id"], "user", s.user["name"], "Hello, can you come today?")
    assert thread(api, s.pro["token"], s.job_id) == [m]
    assert thread(api, s.user["token"], s.job_id, s.pro["id"]) == [m]


def test_customer_without_provider_id_before_acceptance_is_400(api):
    s = Setup(api)
    r = post(api, s.user["token"], s.job_id, "Hello")
    assert (r.status_code, r.json()) == (400, PROVIDER_REQUIRED)
    r = get(api, s.user["token"], s.job_id)
    assert (r.status_code, r.json()) == (400, PROVIDER_REQUIRED)
    # the same on a job nobody quoted yet
    s2 = Setup(api, pros=0)
    r = post(api, s2.user["token"], s2.job_id, "Anyone?")
    assert (r.status_code, r.json()) == (400, PROVIDER_REQUIRED)
    assert thread(api, s.pro["token"], s.job_id) == []


def test_customer_defaults_to_the_assigned_provider_after_acceptance(api):
    s = Setup(api, pros=2).accept(0)
    m = ok(post(api, s.user["token"], s.job_id, "See you tomorrow"), 201)
    assert_message(m, s.user["id"], "user", s.user["name"], "See you tomorrow")
    assert thread(api, s.user["token"], s.job_id) == [m]
    assert thread(api, s.pros[0]["token"], s.job_id) == [m]
    assert thread(api, s.pros[1]["token"], s.job_id) == []
    # an explicit providerId still picks the other (quoted) thread
    m2 = ok(post(api, s.user["token"], s.job_id, "Thanks anyway", providerId=s.pros[1]["id"]), 201)
    assert thread(api, s.pros[1]["token"], s.job_id) == [m2]
    assert thread(api, s.user["token"], s.job_id, s.pros[1]["id"]) == [m2]
    assert thread(api, s.user["token"], s.job_id) == [m]


def test_quoting_provider_posts_in_its_own_thread(api):
    s = Setup(api)
    m = ok(post(api, s.pro["token"], s.job_id, "I can be there at 3 pm"), 201)
    assert_message(m, s.pro["id"], "provider", s.pro["name"], "I can be there at 3 pm")
    assert thread(api, s.user["token"], s.job_id, s.pro["id"]) == [m]
    assert thread(api, s.pro["token"], s.job_id) == [m]


def test_assigned_provider_posts_and_both_read_oldest_first(api):
    s = Setup(api).accept()
    sent = []
    for who, text in [("pro", "On my way soon"), ("user", "Great"), ("pro", "Gate code?"), ("user", "1234")]:
        token = s.pro["token"] if who == "pro" else s.user["token"]
        sent.append(ok(post(api, token, s.job_id, text), 201))
        api.advance_clock(3)  # distinct timestamps: this test is not about same-millisecond ordering
    assert_message(sent[0], s.pro["id"], "provider", s.pro["name"], "On my way soon")
    assert_message(sent[1], s.user["id"], "user", s.user["name"], "Great")
    assert thread(api, s.user["token"], s.job_id) == sent
    assert thread(api, s.pro["token"], s.job_id) == sent
    assert thread(api, s.user["token"], s.job_id, s.pro["id"]) == sent
    times = [iso_to_epoch(m["createdAt"]) for m in sent]
    assert times == sorted(times)


def test_threads_are_separate_per_provider(api):
    s = Setup(api, pros=2)
    a, b = s.pros
    m_ua = ok(post(api, s.user["token"], s.job_id, "to A", providerId=a["id"]), 201)
    api.advance_clock(3)
    m_ub = ok(post(api, s.user["token"], s.job_id, "to B", providerId=b["id"]), 201)
    api.advance_clock(3)
    m_a = ok(post(api, a["token"], s.job_id, "from A"), 201)
    api.advance_clock(3)
    m_b = ok(post(api, b["token"], s.job_id, "from B"), 201)
    assert thread(api, a["token"], s.job_id) == [m_ua, m_a]
    assert thread(api, b["token"], s.job_id) == [m_ub, m_b]
    assert thread(api, s.user["token"], s.job_id, a["id"]) == [m_ua, m_a]
    assert thread(api, s.user["token"], s.job_id, b["id"]) == [m_ub, m_b]
    # a provider's providerId (query or body) cannot reach a competitor's thread: it is its own
    assert thread(api, a["token"], s.job_id, b["id"]) == [m_ua, m_a]
    m = ok(post(api, a["token"], s.job_id, "still mine", providerId=b["id"]), 201)
    assert contents(thread(api, a["token"], s.job_id)) == ["to A", "from A", "still mine"]
    assert contents(thread(api, b["token"], s.job_id)) == ["to B", "from B"]
    assert m["senderId"] == a["id"]


def test_quoting_provider_keeps_its_thread_after_another_is_accepted(api):
    s = Setup(api, pros=2)
    before = ok(post(api, s.pros[1]["token"], s.job_id, "my offer stands"), 201)
    s.accept(0)
    api.advance_clock(3)
    assert thread(api, s.pros[1]["token"], s.job_id) == [before]
    after = ok(post(api, s.pros[1]["token"], s.job_id, "good luck"), 201)
    assert thread(api, s.user["token"], s.job_id, s.pros[1]["id"]) == [before, after]


# ---------------------------------------------------------------- who may not


def test_provider_who_neither_quoted_nor_is_assigned_gets_404(api):
    s = Setup(api)
    ok(post(api, s.pro["token"], s.job_id, "private"), 201)
    outsider = named_provider(api, [s.zip])  # matches the job (same ZIP and service) but never quoted
    for r in (get(api, outsider["token"], s.job_id), post(api, outsider["token"], s.job_id, "hi"),
              get(api, outsider["token"], s.job_id, s.pro["id"]),
              post(api, outsider["token"], s.job_id, "hi", providerId=s.pro["id"]),
              post_photo(api, outsider["token"], s.job_id, {"photo": ("p.png", png_bytes(1), "image/png")})):
        assert (r.status_code, r.json()) == (404, JOB_NOT_FOUND)
    assert contents(thread(api, s.pro["token"], s.job_id)) == ["private"]


def test_other_customer_gets_404(api):
    s = Setup(api)
    ok(post(api, s.pro["token"], s.job_id, "private"), 201)
    other = named_customer(api, s.zip)
    for r in (get(api, other["token"], s.job_id, s.pro["id"]), get(api, other["token"], s.job_id),
              post(api, other["token"], s.job_id, "hi", providerId=s.pro["id"]),
              post_photo(api, other["token"], s.job_id, {"photo": ("p.png", png_bytes(1), "image/png")},
                         {"providerId": s.pro["id"]})):
        assert (r.status_code, r.json()) == (404, JOB_NOT_FOUND)
    assert contents(thread(api, s.pro["token"], s.job_id)) == ["private"]


def test_customer_naming_a_provider_without_a_thread_gets_404(api):
    s = Setup(api)
    stranger = named_provider(api, [s.zip])  # never quoted on the job
    for pid in (stranger["id"], "c" + "0" * 24):
        r = post(api, s.user["token"], s.job_id, "hello?", providerId=pid)
        assert (r.status_code, r.json()) == (404, NO_THREAD)
        r = get(api, s.user["token"], s.job_id, pid)
        assert (r.status_code, r.json()) == (404, NO_THREAD)
    r = get(api, stranger["token"], s.job_id)
    assert (r.status_code, r.json()) == (404, JOB_NOT_FOUND)


def test_unknown_job_is_404(api):
    user = named_customer(api, fresh_zip()[0])
    pro = api.register_provider()
    missing = "c" + "z" * 24
    for token in (user["token"], pro["token"]):
        for r in (get(api, token, missing), post(api, token, missing, "hi"),
                  post(api, token, missing, "hi", providerId=pro["id"]),
                  post_photo(api, token, missing, {"photo": ("p.png", png_bytes(1), "image/png")})):
            assert (r.status_code, r.json()) == (404, JOB_NOT_FOUND)


def test_no_token_is_401(api):
    s = Setup(api)
    for r in (api.get(f"/jobs/{s.job_id}/messages"),
              api.post(f"/jobs/{s.job_id}/messages", json={"content": "hi", "providerId": s.pro["id"]}),
              api.post(f"/jobs/{s.job_id}/messages/photo", files={"photo": ("p.png", png_bytes(1), "image/png")}),
              api.get(f"/jobs/{s.job_id}/messages", token="not.a.token"),
              api.post(f"/jobs/{s.job_id}/messages", token="not.a.token", json={"content": "hi"})):
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    assert thread(api, s.pro["token"], s.job_id) == []


# ---------------------------------------------------------------- content validation


def test_content_validation(api):
    s = Setup(api).accept()
    cases = [
        ({"content": ""}, "content: must not be empty"),
        ({"content": "   "}, "content: must not be empty"),
        ({}, "content: is required"),
        ({"content": None}, "content: is required"),
        ({"content": 5}, "content: must be a string"),
        ({"content": "x" * 2001}, "content: must be at most 2000 characters"),
        ({"content": "é" * 2001}, "content: must be at most 2000 characters"),
        ({"content": "hi", "providerId": ""}, "providerId: must not be empty"),
        # only photo messages carry the prefix that apps render as an image
        ({"content": "[IMAGE]https://tracker.example/pixel.png"}, "content: must not start with [IMAGE]"),
    ]
    for body, error in cases:
        for token in (s.user["token"], s.pro["token"]):
            r = api.post(f"/jobs/{s.job_id}/messages", token=token, json=body)
            assert (r.status_code, r.json()) == (400, error_body(400, error)), body
    assert thread(api, s.pro["token"], s.job_id) == []
    m1 = ok(post(api, s.user["token"], s.job_id, "x" * 2000), 201)
    m2 = ok(post(api, s.pro["token"], s.job_id, "é" * 2000), 201)  # characters, not bytes
    m3 = ok(post(api, s.pro["token"], s.job_id, "k"), 201)
    assert (m1["content"], m2["content"], m3["content"]) == ("x" * 2000, "é" * 2000, "k")
    assert sorted(contents(thread(api, s.user["token"], s.job_id))) == sorted(["x" * 2000, "é" * 2000, "k"])


def test_malformed_json_is_400(api):
    s = Setup(api).accept()
    r = api.post(f"/jobs/{s.job_id}/messages", token=s.user["token"], data="{not json",
                 headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()) == (400, error_body(400, "body: malformed JSON"))


def test_cancelled_job_refuses_messages_with_409(api):
    s = Setup(api)
    before = ok(post(api, s.pro["token"], s.job_id, "quoted, any questions?"), 201)
    job = ok(api.post(f"/jobs/{s.job_id}/cancel", token=s.user["token"]))
    assert job["status"] == "CANCELLED"
    for r in (post(api, s.user["token"], s.job_id, "never mind", providerId=s.pro["id"]),
              post(api, s.pro["token"], s.job_id, "ok"),
              post_photo(api, s.pro["token"], s.job_id, {"photo": ("p.png", png_bytes(3), "image/png")}),
              post_photo(api, s.user["token"], s.job_id, {"photo": ("p.png", png_bytes(3), "image/png")},
                         {"providerId": s.pro["id"]})):
        assert (r.status_code, r.json()) == (409, CANCELLED)
    # the history stays readable
    assert thread(api, s.user["token"], s.job_id, s.pro["id"]) == [before]
    assert thread(api, s.pro["token"], s.job_id) == [before]


# ---------------------------------------------------------------- threads and read marks (issue 24)

THREAD_FIELDS = {"jobId", "service", "counterpart", "lastMessage", "unreadCount", "updatedAt"}


def threads(api, account, role):
    return ok(api.get("/users/me/threads" if role == "user" else "/providers/me/threads", token=account["token"]))


def summary(items):
    """(jobId, counterpart id, last content, unreadCount) of each thread, checking its shape."""
    out = []
    for t in items:
        assert set(t) == THREAD_FIELDS, t
        assert set(t["lastMessage"]) == MESSAGE_FIELDS and t["updatedAt"] == t["lastMessage"]["createdAt"]
        out.append((t["jobId"], t["counterpart"]["id"], t["lastMessage"]["content"], t["unreadCount"]))
    return out


def mark_read(api, token, job_id, **body):
    return api.post(f"/jobs/{job_id}/messages/read", token=token, json=body)


def test_threads_with_unread_counts_moving_as_messages_are_read(api):
    s = Setup(api, pros=2)
    a, b = s.pros
    assert threads(api, s.user, "user") == [] and threads(api, a, "provider") == []
    ok(post(api, a["token"], s.job_id, "Hi, I can come Tuesday"), 201)
    ok(post(api, b["token"], s.job_id, "Hello from B"), 201)
    ok(post(api, a["token"], s.job_id, "Or Wednesday"), 201)
    mine = threads(api, s.user, "user")
    assert summary(mine) == [(s.job_id, a["id"], "Or Wednesday", 2), (s.job_id, b["id"], "Hello from B", 1)]
    assert mine[0]["counterpart"] == {"id": a["id"], "name": a["name"], "role": "provider"}
    assert mine[0]["service"] == "lawncare"
    # the customer answers A: its own message is news for A, not for itself
    ok(post(api, s.user["token"], s.job_id, "Tuesday works", providerId=a["id"]), 201)
    assert summary(threads(api, s.user, "user")) == [(s.job_id, a["id"], "Tuesday works", 2),
                                                     (s.job_id, b["id"], "Hello from B", 1)]
    theirs = threads(api, a, "provider")
    assert summary(theirs) == [(s.job_id, s.user["id"], "Tuesday works", 1)]
    assert theirs[0]["counterpart"] == {"id": s.user["id"], "name": s.user["name"], "role": "user"}
    assert summary(threads(api, b, "provider")) == [(s.job_id, s.user["id"], "Hello from B", 0)]
    # reading one thread zeroes it, and only it
    assert ok(mark_read(api, s.user["token"], s.job_id, providerId=a["id"])) == {"ok": True}
    assert [t["unreadCount"] for t in threads(api, s.user, "user")] == [0, 1]
    ok(post(api, a["token"], s.job_id, "See you then"), 201)
    assert [t["unreadCount"] for t in threads(api, s.user, "user")] == [1, 1]
    ok(mark_read(api, s.user["token"], s.job_id, providerId=b["id"]))
    assert [t["unreadCount"] for t in threads(api, s.user, "user")] == [1, 0]
    # the provider's side has a read mark of its own
    assert threads(api, a, "provider")[0]["unreadCount"] == 1
    ok(mark_read(api, a["token"], s.job_id))
    assert threads(api, a, "provider")[0]["unreadCount"] == 0
    assert [t["unreadCount"] for t in threads(api, s.user, "user")] == [1, 0]
    # once a provider is assigned, the customer's mark needs no providerId
    s.accept(0)
    ok(post(api, a["token"], s.job_id, "Accepted, thanks"), 201)
    assert threads(api, s.user, "user")[0]["unreadCount"] == 2
    ok(mark_read(api, s.user["token"], s.job_id))
    assert [t["unreadCount"] for t in threads(api, s.user, "user")] == [0, 0]


def test_threads_list_each_job_newest_first(api):
    first, second = Setup(api), Setup(api)
    ok(post(api, first.pro["token"], first.job_id, "one"), 201)
    ok(post(api, second.pro["token"], second.job_id, "two"), 201)
    # the same customer on both jobs: one customer posting twice
    job = asap_job(api, first.user)
    ok(api.post("/quotes", token=first.pro["token"], json={"jobId": job["id"], "amount": 50}), 201)
    ok(post(api, first.pro["token"], job["id"], "three"), 201)
    assert summary(threads(api, first.user, "user")) == [(job["id"], first.pro["id"], "three", 1),
                                                         (first.job_id, first.pro["id"], "one", 1)]
    assert summary(threads(api, first.pro, "provider")) == [(job["id"], first.user["id"], "three", 0),
                                                            (first.job_id, first.user["id"], "one", 0)]
    assert [t["jobId"] for t in threads(api, second.user, "user")] == [second.job_id]


def test_mark_read_refusals(api, admin_token):
    s = Setup(api, pros=2, quoted=False)
    quote(api, s.pros[0], s.job_id, 80)
    stranger, other_customer = s.pros[1], named_customer(api, s.zip)
    r = mark_read(api, s.user["token"], s.job_id)
    assert (r.status_code, r.json()["error"]) == (400, PROVIDER_REQUIRED["error"])
    r = mark_read(api, s.user["token"], s.job_id, providerId=stranger["id"])
    assert (r.status_code, r.json()["error"]) == (404, NO_THREAD["error"])
    r = mark_read(api, s.user["token"], s.job_id, providerId=7)
    assert (r.status_code, r.json()["error"]) == (400, "providerId: must be a string")
    for token, job_id in ((stranger["token"], s.job_id), (other_customer["token"], s.job_id),
                          (s.user["token"], "cnosuchjob000000000000000")):
        r = mark_read(api, token, job_id, providerId=s.pros[0]["id"])
        assert (r.status_code, r.json()["error"]) == (404, JOB_NOT_FOUND["error"])
    r = api.post(f"/jobs/{s.job_id}/messages/read")
    assert (r.status_code, r.json()["error"]) == (401, "Unauthorized")
    r = api.post(f"/jobs/{s.job_id}/messages/read", token=admin_token, json={})
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")


def test_threads_routes_refuse_other_roles(api, admin_token):
    u, p = api.register_user(), api.register_provider()
    for path, wrong in (("/users/me/threads", p), ("/providers/me/threads", u)):
        r = api.get(path, token=wrong["token"])
        assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
        r = api.get(path, token=admin_token)
        assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
        r = api.get(path)
        assert (r.status_code, r.json()["error"]) == (401, "Unauthorized")


# ---------------------------------------------------------------- the 250 cap


def turn(s, pro, i):
    """Who posts the i-th message of the thread between s's customer and pro, the two in turn:
    (token, the extra fields of a customer's post)."""
    return (pro["token"], {}) if i % 2 else (s.user["token"], {"providerId": pro["id"]})


def test_thread_cap_is_250_per_thread(api):
    s = Setup(api, pros=2)
    a, b = s.pros
    started = time.time()
    for i in range(250):
        token, extra = turn(s, a, i)
        r = post(api, token, s.job_id, f"m{i}", **extra)
        assert r.status_code == 201, f"message {i}: {r.status_code} {r.text}"
    assert time.time() - started < 30
    for r in (post(api, a["token"], s.job_id, "one too many"),
              post(api, s.user["token"], s.job_id, "one too many", providerId=a["id"]),
              post_photo(api, a["token"], s.job_id, {"photo": ("p.png", png_bytes(4), "image/png")})):
        assert (r.status_code, r.json()) == (429, THREAD_FULL)
    msgs = thread(api, a["token"], s.job_id)
    assert len(msgs) == 250
    assert sorted(contents(msgs)) == sorted(f"m{i}" for i in range(250))
    # the other provider's thread on the same job is not affected
    mb = ok(post(api, b["token"], s.job_id, "still open"), 201)
    ok(post(api, s.user["token"], s.job_id, "yes", providerId=b["id"]), 201)
    assert contents(thread(api, s.user["token"], s.job_id, b["id"]))[0] == mb["content"]
    assert len(thread(api, s.user["token"], s.job_id, a["id"])) == 250


def test_the_last_places_of_a_thread_go_once_to_posts_side_by_side(api, server):
    """Both parties post 32 messages at once into a thread with 240: the job's row lock has
    them count the cap one after another, so 10 land and 22 are refused, never 251."""
    s = Setup(api, pros=1)
    (a,) = s.pros
    for i in range(240):
        token, extra = turn(s, a, i)
        assert post(api, token, s.job_id, f"m{i}", **extra).status_code == 201

    def one(i):
        token, extra = turn(s, a, i)
        return post(Api(server), token, s.job_id, f"late{i}", **extra).status_code

    with ThreadPoolExecutor(32) as pool:
        statuses = list(pool.map(one, range(32)))
    assert sorted(statuses) == [201] * 10 + [429] * 22, statuses
    assert len(thread(api, a["token"], s.job_id)) == 250




def test_messages_posted_back_to_back_are_listed_in_posting_order(server_factory):
    """Messages pipelined on one connection are answered in order and listed in posting order,
    also when they share a millisecond: the server's clock is frozen, so all of them do, and a
    service that breaks such ties at random cannot pass by luck."""
    api = Api(server_factory())
    s = Setup(api).accept()
    api.freeze_clock()
    expected = [f"n{i:03d}" for i in range(250)]
    answers = pipelined_posts(api, f"/jobs/{s.job_id}/messages", s.pro["token"], [{"content": c} for c in expected])
    assert [status for status, _ in answers] == [201] * 250
    assert [m["content"] for _, m in answers] == expected  # answered in posting order
    assert len({m["createdAt"] for _, m in answers}) == 1
    assert contents(thread(api, s.user["token"], s.job_id)) == expected
    assert contents(thread(api, s.pro["token"], s.job_id)) == expected


# ---------------------------------------------------------------- photo messages


@pytest.mark.parametrize("name,data,mime,ext", [
    ("photo.png", png_bytes(21), "image/png", "png"),
    ("photo.jpg", JPEG_BYTES, "image/jpeg", "jpg"),
    ("photo.webp", WEBP_BYTES, "image/webp", "webp"),
])
def test_photo_message_by_provider(api, name, data, mime, ext):
    s = Setup(api)
    m = ok(post_photo(api, s.pro["token"], s.job_id, {"photo": (name, data, mime)}), 201)
    assert set(m) == MESSAGE_FIELDS
    assert (m["senderId"], m["senderRole"], m["senderName"]) == (s.pro["id"], "provider", s.pro["name"])
    assert m["content"].startswith("[IMAGE]")
    url = m["content"][len("[IMAGE]"):]
    match = IMAGE_URL_RE.match(url)
    assert match, url
    assert match.group(2) == ext
    # valid one year (counted from the service's clock, which the message's createdAt shows)
    expires = int(parse_qs(urlsplit(url).query)["expires"][0])
    assert expires % 3600 == 0 and 0 <= expires - (iso_to_epoch(m["createdAt"]) + YEAR_S) <= 3600 + 120
    got = local(api, url)
    assert got.status_code == 200
    assert got.headers["Content-Type"].startswith(mime)
    if ext == "png":
        assert got.content == data
    else:
        assert got.content[:4] == data[:4]
    assert thread(api, s.user["token"], s.job_id, s.pro["id"]) == [m]


def test_photo_message_by_customer_picks_the_thread(api):
    s = Setup(api, pros=2)
    a, b = s.pros
    r = post_photo(api, s.user["token"], s.job_id, {"photo": ("p.png", png_bytes(31), "image/png")})
    assert (r.status_code, r.json()) == (400, PROVIDER_REQUIRED)
    m = ok(post_photo(api, s.user["token"], s.job_id, {"photo": ("p.png", png_bytes(31), "image/png")},
                      {"providerId": b["id"]}), 201)
    assert (m["senderId"], m["senderRole"], m["senderName"]) == (s.user["id"], "user", s.user["name"])
    assert m["content"].startswith("[IMAGE]http://localhost:")
    assert thread(api, b["token"], s.job_id) == [m]
    assert thread(api, a["token"], s.job_id) == []
    assert local(api, m["content"][7:]).content == png_bytes(31)
    # after acceptance the default is the assigned provider
    s.accept(0)
    m2 = ok(post_photo(api, s.user["token"], s.job_id, {"photo": ("q.png", png_bytes(32), "image/png")}), 201)
    assert thread(api, a["token"], s.job_id) == [m2]


def test_photo_message_keeps_its_key_and_is_signed_when_read(server_factory, pg_cluster):
    """Issue 24, item 1: a photo message keeps its file's key, not a URL signed once; every read
    signs it afresh (the same URL within its hour), so a link never outlives its signature."""
    srv = server_factory()
    api = Api(srv)
    s = Setup(api)
    m = ok(post_photo(api, s.pro["token"], s.job_id, {"photo": ("p.png", png_bytes(41), "image/png")}), 201)
    key = IMAGE_URL_RE.match(m["content"][len("[IMAGE]"):]).group(1) + ".png"
    assert sql(srv, pg_cluster, f"SELECT content FROM messages WHERE id = '{m['id']}'") == [("[IMAGE]" + key,)]
    assert thread(api, s.pro["token"], s.job_id) == [m]  # the same hour: the same URL
    api.advance_clock(366 * 24 * 3600 * 1000)  # the first URL has expired; a read signs a new one
    assert local(api, m["content"][len("[IMAGE]"):]).status_code == 403
    login = api.post("/auth/provider/login", json={"email": s.pro["email"], "password": s.pro["password"]})
    again = thread(api, login.json()["token"], s.job_id)[0]
    assert again["content"] != m["content"] and again["content"].startswith("[IMAGE]")
    assert local(api, again["content"][len("[IMAGE]"):]).content == png_bytes(41)


def test_photo_messages_of_before_keep_their_content(server_factory, pg_cluster):
    """Migration 0017: a photo message stored as "[IMAGE]<URL signed for a year>" keeps its
    file's key instead; a text message, even one naming a file link, is left as it was."""
    srv = server_factory()
    api = Api(srv)
    s = Setup(api)
    m = ok(post_photo(api, s.pro["token"], s.job_id, {"photo": ("p.png", png_bytes(42), "image/png")}), 201)
    text = ok(post(api, s.pro["token"], s.job_id, "see http://x.test/files/cabc.png?expires=1"), 201)
    key = IMAGE_URL_RE.match(m["content"][len("[IMAGE]"):]).group(1) + ".png"
    legacy = "[IMAGE]" + m["content"][len("[IMAGE]"):]  # what 0.x stored: the URL of the answer
    sql(srv, pg_cluster, f"UPDATE messages SET content = '{legacy}' WHERE id = '{m['id']}'")
    sql(srv, pg_cluster, "DELETE FROM schema_migrations WHERE version = 17")
    srv.restart()
    rows = sql(srv, pg_cluster, f"SELECT id, content FROM messages WHERE job_id = '{s.job_id}'")
    assert sorted(rows) == sorted([(m["id"], "[IMAGE]" + key), (text["id"], text["content"])])
    got = {x["id"]: x["content"] for x in thread(api, s.pro["token"], s.job_id)}
    assert got[text["id"]] == text["content"]
    assert local(api, got[m["id"]][len("[IMAGE]"):]).content == png_bytes(42)


def test_photo_message_rejects_bad_uploads(api):
    s = Setup(api).accept()
    path = f"/jobs/{s.job_id}/messages/photo"
    token = s.pro["token"]
    cases = [
        ({"photo": ("notes.txt", b"just some text, not an image\n", "text/plain")},
         400, "photo: must be a PNG, JPEG or WebP image"),
        ({"photo": ("fake.png", b"plain text named like a png", "image/png")},
         400, "photo: must be a PNG, JPEG or WebP image"),
        ({"caption": (None, "no file here")}, 400, "No file uploaded"),  # validation_failed, field photo
        ([("photo", ("a.png", png_bytes(1), "image/png")), ("photo", ("b.png", png_bytes(2), "image/png"))],
         400, "photo: at most 1 file"),
        ({"picture": ("a.png", png_bytes(1), "image/png")}, 400, "picture: unexpected file field"),
    ]
    for files, status, error in cases:
        r = api.post(path, token=token, files=files)
        field = "photo" if error == "No file uploaded" else None
        assert (r.status_code, r.json()) == (status, error_body(status, error, field and "validation_failed", field)), error
    r = api.post(path, token=token, json={"content": "not multipart"})
    assert (r.status_code, r.json()) == (400, error_body(400, "body: must be multipart/form-data"))
    assert thread(api, token, s.job_id) == []


def test_photo_message_over_10_mb_is_413(api):
    s = Setup(api).accept()
    big = png_bytes(5) + b"\0" * (10 * MB)  # 10 MB + a little: over the per-file limit
    r = post_photo(api, s.pro["token"], s.job_id, {"photo": ("big.png", big, "image/png")})
    assert (r.status_code, r.json()) == (413, error_body(413, "photo: file larger than 10 MB"))
    exact = png_bytes(5)
    exact = exact + b"\0" * (10 * MB - len(exact))  # exactly 10 MB (trailing bytes after IEND)
    r = post_photo(api, s.pro["token"], s.job_id, {"photo": ("edge.png", exact, "image/png")})
    assert r.status_code == 201, r.text
    assert len(thread(api, s.pro["token"], s.job_id)) == 1



def test_concurrent_posts_never_overshoot_the_cap(api, engine, request):
    """Posts race across the cap from many connections at once; every round (a new thread each
    time) must end with exactly 250 messages, the other posts answered 429."""
    s = Setup(api).accept()
    for round_no in range(8 if engine == "postgres" else 2):
        job = asap_job(api, s.user)
        pro = named_provider(api, [s.zip])
        quote(api, pro, job["id"], 80)
        path = f"/jobs/{job['id']}/messages"
        answers = pipelined_posts(api, path, pro["token"], [{"content": f"f{i}"} for i in range(220)])
        assert [st for st, _ in answers] == [201] * 220

        def one(i):
            body = {"content": f"c{i}"} if i % 2 else {"content": f"c{i}", "providerId": pro["id"]}
            token = pro["token"] if i % 2 else s.user["token"]
            return requests.post(api.url + path, json=body, headers={"Authorization": f"Bearer {token}"},
                                 timeout=30).status_code

        with ThreadPoolExecutor(max_workers=40) as pool:
            codes = list(pool.map(one, range(80)))
        size = len(thread(api, pro["token"], job["id"]))
        assert (sorted(codes), size) == ([201] * 30 + [429] * 50, 250), f"round {round_no}: {size} messages"
