"""Notifications: push tokens, the persistent notification list (last 50), mark-all-read,
pushes through PUSH_URL (Expo message format, durable and retried), and the one-shot banner.

Spec: marketplace-api.md 2 (Notification, Queued banner), 4 (Providers and Users tables:
push-token, notification, notifications, notifications/read), 5 (access), 6 (events), 8 (lists:
notifications last 50); decisions.md 2 (PUSH_URL), 4 (which operations notify whom; banners kept
in the database) and 6 (background work is durable and retried). Banners are queued through the
administrator's POST /admin/notify {userId, role, title, body, icon?} (its own tests are in
test_admin.py).

Every test makes its own accounts in a ZIP of the embedded table that no other test of this
file uses, so only its own providers match its jobs.
"""
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from flow_helpers import accept, asap_job, fresh_zip, named_customer, named_provider, ok, post_job, quote
from raw_http import pipelined_posts
from helpers import error_body, eventually, pages, png_bytes

from conftest import ADMIN_ENV, Api, admin_login
from staff_helpers import sql

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
NOTIFICATION_FIELDS = {"id", "title", "body", "jobId", "read", "createdAt"}
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
OK = {"ok": True}

# ---------------------------------------------------------------- accounts and jobs


def user_list(api, user):
    return ok(api.get("/users/me/notifications", token=user["token"]))


def pro_list(api, pro):
    return ok(api.get("/providers/me/notifications", token=pro["token"]))


def strip(items):
    """The notifications without their generated id and createdAt (checked separately)."""
    out = []
    for n in items:
        assert set(n) == NOTIFICATION_FIELDS, n
        assert ID_RE.match(n["id"]) and ISO_RE.match(n["createdAt"]), n
        out.append({k: n[k] for k in ("title", "body", "jobId", "read")})
    return out


def note(title, body, job_id, read=False):
    return {"title": title, "body": body, "jobId": job_id, "read": read}


def message(api, token, job_id, content, **extra):
    return ok(api.post(f"/jobs/{job_id}/messages", token=token, json={"content": content, **extra}), 201)


class Flow:
    """A customer and a verified provider in a fresh ZIP, a scheduled job (not ASAP, so the
    provider is not notified of it), optionally quoted/accepted."""

    def __init__(self, api, amount=80):
        self.api = api
        self.zip = fresh_zip()[0]
        # a saved card: a payment that cannot be authorized on acceptance is news of its own
        self.user = named_customer(api, self.zip, card="pm_card_visa")
        self.pro = named_provider(api, [self.zip])
        self.job = post_job(api, self.user)
        self.job_id = self.job["id"]
        self.amount = amount
        self.quote = None

    def quoted(self):
        self.quote = quote(self.api, self.pro, self.job_id, self.amount)
        self.api.advance_clock(3)  # later notifications get later timestamps
        return self

    def accepted(self):
        if not self.quote:
            self.quoted()
        accept(self.api, self.user, self.quote["id"])
        self.api.advance_clock(3)
        return self




# ---------------------------------------------------------------- push tokens


@pytest.mark.parametrize("path,role", [("/users/me/push-token", "user"), ("/providers/me/push-token", "provider")])
def test_push_token_is_saved(api, path, role):
    acct = api.register_user() if role == "user" else api.register_provider()
    r = api.post(path, token=acct["token"], json={"token": "ExponentPushToken[abc123]"})
    assert (r.status_code, r.json()) == (200, OK)
    # replacing it is allowed
    r = api.post(path, token=acct["token"], json={"token": "ExponentPushToken[def456]", "extra": 1})
    assert (r.status_code, r.json()) == (200, OK)


@pytest.mark.parametrize("path,role", [("/users/me/push-token", "user"), ("/providers/me/push-token", "provider")])
def test_push_token_validation(api, path, role):
    acct = api.register_user() if role == "user" else api.register_provider()
    for body, error in [({}, "token: is required"), ({"token": None}, "token: is required"),
                        ({"token": ""}, "token: must not be empty"), ({"token": "   "}, "token: must not be empty"),
                        ({"token": 123}, "token: must be a string"), ({"token": ["a"]}, "token: must be a string")]:
        r = api.post(path, token=acct["token"], json=body)
        assert (r.status_code, r.json()) == (400, error_body(400, error)), body
    r = api.post(path, token=acct["token"], data="{", headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()) == (400, error_body(400, "body: malformed JSON"))


def test_wrong_role_is_403_and_no_token_is_401(api):
    user, pro = api.register_user(), api.register_provider()
    user_routes = [("POST", "/users/me/push-token", {"token": "t"}), ("GET", "/users/me/notifications", None),
                   ("POST", "/users/me/notifications/read", None), ("GET", "/users/me/notification", None)]
    pro_routes = [("POST", "/providers/me/push-token", {"token": "t"}),
                  ("GET", "/providers/me/notifications", None),
                  ("POST", "/providers/me/notifications/read", None), ("GET", "/providers/me/notification", None)]
    for routes, wrong in ((user_routes, pro), (pro_routes, user)):
        for method, path, body in routes:
            r = api.request(method, path, token=wrong["token"], json=body)
            assert (r.status_code, r.json()) == (403, FORBIDDEN), path
            r = api.request(method, path, json=body)
            assert (r.status_code, r.json()) == (401, UNAUTHORIZED), path
            r = api.request(method, path, token="garbage", json=body)
            assert (r.status_code, r.json()) == (401, UNAUTHORIZED), path


# ---------------------------------------------------------------- what creates notifications


def test_new_accounts_have_no_notifications(api):
    user, pro = api.register_user(zip=fresh_zip()[0]), api.register_provider(serviceZips=[fresh_zip()[0]])
    assert user_list(api, user) == []
    assert pro_list(api, pro) == []


def test_quote_received_notifies_the_customer(api):
    f = Flow(api, amount=80).quoted()
    items = user_list(api, f.user)
    # 80 + 18 % fee = 94.40
    assert strip(items) == [note("New quote", f"{f.pro['name']} quoted $94.40 for your lawncare job", f.job_id)]
    assert pro_list(api, f.pro) == []  # quoting notifies nobody else


def test_quote_uses_the_company_name_when_set(api):
    f = Flow(api, amount=100)
    ok(api.patch("/providers/me", token=f.pro["token"], json={"companyName": "Green Acres LLC"}))
    f.quoted()
    assert strip(user_list(api, f.user)) == [
        note("New quote", "Green Acres LLC quoted $118.00 for your lawncare job", f.job_id)]


def test_quote_accepted_notifies_the_provider(api):
    f = Flow(api)
    other = named_provider(api, [f.zip])
    f.quoted()
    quote(api, other, f.job_id, 90)
    before = len(pro_list(api, f.pro))
    f.accepted()
    items = pro_list(api, f.pro)
    assert len(items) == before + 1
    assert strip(items)[0] == note("Quote accepted", f"{f.user['name']} accepted your quote", f.job_id)
    assert all(n["title"] != "Quote accepted" for n in pro_list(api, other))
    assert all(n["title"] != "Quote accepted" for n in user_list(api, f.user))


def test_status_changes_notify_the_customer(api):
    f = Flow(api).accepted()
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        job = ok(api.patch(f"/jobs/{f.job_id}/status", token=f.pro["token"], json={"status": status}))
        assert job["status"] == status
        api.advance_clock(3)  # distinct timestamps: this test is not about same-millisecond ordering
    items = strip(user_list(api, f.user))
    assert items[:3] == [
        note("Job update", "Your job is completed (lawncare)", f.job_id),
        note("Job update", "Work on your job has started (lawncare)", f.job_id),
        note("Job update", "Your provider is on the way (lawncare)", f.job_id),
    ]
    assert items[3:] == [note("New quote", f"{f.pro['name']} quoted $94.40 for your lawncare job", f.job_id)]
    assert all(n["title"] != "Job update" for n in pro_list(api, f.pro))



def test_start_and_complete_with_photos_notify_the_customer(api):
    f = Flow(api).accepted()
    ok(api.patch(f"/jobs/{f.job_id}/status", token=f.pro["token"], json={"status": "ON_THE_WAY"}))
    api.advance_clock(3)
    job = ok(api.post(f"/jobs/{f.job_id}/start", token=f.pro["token"],
                      files={"images": ("before.png", png_bytes(41), "image/png")}))
    assert job["status"] == "IN_PROGRESS"
    api.advance_clock(3)
    job = ok(api.post(f"/jobs/{f.job_id}/complete", token=f.pro["token"],
                      files={"images": ("after.png", png_bytes(42), "image/png")}))
    assert job["status"] == "COMPLETED"
    assert strip(user_list(api, f.user))[:3] == [
        note("Job update", "Your job is completed (lawncare)", f.job_id),
        note("Job update", "Work on your job has started (lawncare)", f.job_id),
        note("Job update", "Your provider is on the way (lawncare)", f.job_id),
    ]

def test_refused_status_change_notifies_nobody(api):
    f = Flow(api).accepted()
    r = api.patch(f"/jobs/{f.job_id}/status", token=f.pro["token"], json={"status": "COMPLETED"})
    assert r.status_code == 409
    assert all(n["title"] != "Job update" for n in user_list(api, f.user))


def test_new_message_notifies_the_other_party(api):
    f = Flow(api).quoted()
    message(api, f.user["token"], f.job_id, "Can you bring a trimmer?", providerId=f.pro["id"])
    assert strip(pro_list(api, f.pro)) == [
        note(f"New message from {f.user['name']}", "Can you bring a trimmer?", f.job_id)]
    api.advance_clock(3)
    message(api, f.pro["token"], f.job_id, "Yes, no problem")
    assert strip(user_list(api, f.user))[0] == note(f"New message from {f.pro['name']}", "Yes, no problem", f.job_id)
    # the sender is not notified of its own message
    assert len(pro_list(api, f.pro)) == 1
    assert len(user_list(api, f.user)) == 2  # the quote and the provider's message
    api.advance_clock(3)
    # a photo message reads as a photo
    ok(api.post(f"/jobs/{f.job_id}/messages/photo", token=f.pro["token"],
                files={"photo": ("p.png", png_bytes(3), "image/png")}), 201)
    assert strip(user_list(api, f.user))[0] == note(f"New message from {f.pro['name']}", "Sent a photo", f.job_id)


def test_refused_message_notifies_nobody(api):
    f = Flow(api).quoted()
    r = api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"], json={"content": "", "providerId": f.pro["id"]})
    assert r.status_code == 400
    assert pro_list(api, f.pro) == []


def test_asap_job_notifies_every_matching_provider(api):
    z, elsewhere = fresh_zip()[0], fresh_zip()[0]
    a = named_provider(api, [z], verified=False)
    b = named_provider(api, [z], verified=True)
    both = named_provider(api, [elsewhere, z], services=("snowplowing", "lawncare"), verified=False)
    wrong_service = named_provider(api, [z], services=("snowplowing",), verified=False)
    wrong_zip = named_provider(api, [elsewhere], verified=False)
    user = named_customer(api, z)
    job = asap_job(api, user)
    expected = [note("Urgent job nearby", f"An ASAP lawncare job was posted in {z}", job["id"])]
    for p in (a, b, both):
        assert strip(pro_list(api, p)) == expected
    for p in (wrong_service, wrong_zip):
        assert pro_list(api, p) == []
    assert user_list(api, user) == []
    # a scheduled (not ASAP) job notifies nobody
    post_job(api, user)
    for p in (a, b, both):
        assert strip(pro_list(api, p)) == expected


def test_recurring_request_notifies_the_provider(api):
    f = Flow(api).accepted()
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        ok(api.patch(f"/jobs/{f.job_id}/status", token=f.pro["token"], json={"status": status}))
    api.advance_clock(3)
    r = api.post(f"/jobs/{f.job_id}/recurring", token=f.user["token"],
                 json={"dayOfWeek": 1, "timeSlot": "morning", "endDate": "2031-12-31T00:00:00.000Z"})
    assert (r.status_code, r.json()) == (200, {"requested": True})
    assert strip(pro_list(api, f.pro))[0] == note(
        "Recurring service requested",
        "A customer asked for this job every Monday (morning) until 2031-12-31T00:00:00.000Z",
        f.job_id)


# ---------------------------------------------------------------- the list


def test_list_keeps_only_the_50_newest_newest_first(api):
    f = Flow(api).accepted()
    for i in range(55):
        message(api, f.pro["token"], f.job_id, f"update {i}")
        api.advance_clock(2)  # distinct timestamps: this test is not about same-millisecond ordering
    items = user_list(api, f.user)
    assert len(items) == 50
    assert strip(items) == [note(f"New message from {f.pro['name']}", f"update {i}", f.job_id)
                            for i in range(54, 4, -1)]
    stamps = [n["createdAt"] for n in items]
    assert stamps == sorted(stamps, reverse=True)
    assert len({n["id"] for n in items}) == 50


def test_notifications_created_back_to_back_are_newest_first(server_factory):
    """50 messages pipelined on one connection (answered in order) make 50 notifications for the
    customer, listed newest first also when they share a millisecond: the server's clock is
    frozen, so all of them do, and random tie-breaking cannot pass by luck."""
    api = Api(server_factory())
    f = Flow(api).accepted()
    api.freeze_clock()
    answers = pipelined_posts(api, f"/jobs/{f.job_id}/messages", f.pro["token"],
                              [{"content": f"n{i:03d}"} for i in range(50)])
    assert [st for st, _ in answers] == [201] * 50
    assert len({m["createdAt"] for _, m in answers}) == 1
    assert [n["body"] for n in user_list(api, f.user)] == [f"n{i:03d}" for i in range(49, -1, -1)]


# ---------------------------------------------------------------- paging (issue 24, item 2)

LIMIT_ERROR = error_body(400, "limit: must be an integer from 1 to 100")
CURSOR_ERROR = error_body(400, "cursor: is not valid")


def test_paging_through_230_notifications_while_new_ones_arrive(server_factory):
    """230 notifications made in one millisecond (the clock is frozen, so their order comes
    from the service's sequence), read in pages of 100: every one exactly once, newest first,
    older ones past the list's cap of 50 included, while new ones arrive between the pages;
    the new ones wait at the head of the list."""
    api = Api(server_factory())
    f = Flow(api).accepted()
    before = [n["body"] for n in user_list(api, f.user)]  # the flow's own notifications
    api.freeze_clock()
    answers = pipelined_posts(api, f"/jobs/{f.job_id}/messages", f.pro["token"],
                              [{"content": f"n{i:03d}"} for i in range(230)])
    assert [st for st, _ in answers] == [201] * 230
    assert len({m["createdAt"] for _, m in answers}) == 1
    late = []

    def arrive(i):
        late.append(message(api, f.pro["token"], f.job_id, f"late {i}")["content"])

    got = pages(api, "/users/me/notifications", f.user["token"], between=arrive)
    assert [len(p) for p in got] == [100, 100, 30 + len(before)]
    bodies = [n["body"] for p in got for n in p]
    assert bodies == [f"n{i:03d}" for i in range(229, -1, -1)] + before
    assert len({n["id"] for p in got for n in p}) == len(bodies)
    assert late == ["late 0", "late 1"]
    # the new ones lead a fresh first page; without a limit the list is its last 50, as before
    first = api.get("/users/me/notifications", token=f.user["token"], params={"limit": 3})
    assert [n["body"] for n in first.json()] == ["late 1", "late 0", "n229"]
    r = api.get("/users/me/notifications", token=f.user["token"])
    assert "Link" not in r.headers
    assert [n["body"] for n in r.json()] == ["late 1", "late 0"] + [f"n{i:03d}" for i in range(229, 181, -1)]


def test_unread_filter_pages_too(api):
    f = Flow(api).quoted()
    for i in range(3):
        message(api, f.pro["token"], f.job_id, f"old {i}")
    ok(api.post("/users/me/notifications/read", token=f.user["token"]))
    for i in range(5):
        message(api, f.pro["token"], f.job_id, f"new {i}")
    unread = ok(api.get("/users/me/notifications", token=f.user["token"], params={"unread": "true"}))
    assert [n["body"] for n in unread] == [f"new {i}" for i in range(4, -1, -1)]
    assert all(not n["read"] for n in unread)
    got = pages(api, "/users/me/notifications", f.user["token"], {"unread": "true"}, limit=2)
    assert [[n["body"] for n in p] for p in got] == [["new 4", "new 3"], ["new 2", "new 1"], ["new 0"]]
    everything = ok(api.get("/users/me/notifications", token=f.user["token"], params={"unread": "false"}))
    assert len(everything) == 9  # the quote's, 3 read, 5 unread: unread=false filters nothing
    # the provider's list takes the same filter
    message(api, f.user["token"], f.job_id, "question", providerId=f.pro["id"])
    ok(api.post("/providers/me/notifications/read", token=f.pro["token"]))
    message(api, f.user["token"], f.job_id, "another", providerId=f.pro["id"])
    unread = ok(api.get("/providers/me/notifications", token=f.pro["token"], params={"unread": "1"}))
    assert [n["body"] for n in unread] == ["another"]
    got = pages(api, "/providers/me/notifications", f.pro["token"], limit=1)
    assert [[n["body"] for n in p] for p in got] == [["another"], ["question"]]


@pytest.mark.parametrize("path", ["/users/me/notifications", "/providers/me/notifications"])
def test_paging_arguments_are_checked(api, path):
    f = Flow(api).quoted()
    token = f.user["token"] if path.startswith("/users") else f.pro["token"]
    for bad in ("0", "101", "-1", "1.5", "ten", "", " 5", "1e2"):
        r = api.get(path, token=token, params={"limit": bad})
        assert (r.status_code, r.json()) == (400, LIMIT_ERROR), bad
    for bad in ("", "x", "garbage.0123456789abcdef0123456789abcdef", "W10.00000000000000000000000000000000"):
        r = api.get(path, token=token, params={"cursor": bad})
        assert (r.status_code, r.json()) == (400, CURSOR_ERROR), bad
    r = api.get(path, token=token, params={"unread": "maybe"})
    assert (r.status_code, r.json()) == (400, error_body(400, "unread: must be a boolean"))
    r = api.get(path, token=token, params={"limit": 100})
    assert r.status_code == 200 and "Link" not in r.headers


def test_a_cursor_works_only_on_its_own_list(api):
    """A cursor from another list, another account or another role's list, or one changed by a
    character, is refused; the list's own cursor works with or without the Link's other
    arguments."""
    f = Flow(api).quoted()
    for i in range(3):
        message(api, f.pro["token"], f.job_id, f"m{i}")
        message(api, f.user["token"], f.job_id, f"r{i}", providerId=f.pro["id"])
    r = api.get("/users/me/notifications", token=f.user["token"], params={"limit": 1})
    cursor = urlsplit(r.headers["Link"][1:].split(">")[0]).query.split("cursor=")[1]
    assert ok(api.get("/users/me/notifications", token=f.user["token"], params={"cursor": cursor}))[0]["body"] == "m1"
    other = named_customer(api, f.zip)
    for token, path in ((other["token"], "/users/me/notifications"),  # another account
                        (f.pro["token"], "/providers/me/notifications"),  # another list of the same kind
                        (f.user["token"], "/users/me/addresses"), (f.user["token"], "/jobs")):
        r = api.get(path, token=token, params={"cursor": cursor})
        assert (r.status_code, r.json()) == (400, CURSOR_ERROR), path
    for i in range(len(cursor)):  # every character counts
        changed = cursor[:i] + ("A" if cursor[i] != "A" else "B") + cursor[i + 1:]
        if changed != cursor and i % 7 == 0:
            r = api.get("/users/me/notifications", token=f.user["token"], params={"cursor": changed})
            assert (r.status_code, r.json()) == (400, CURSOR_ERROR), changed


def test_mark_all_read(api):
    f = Flow(api).quoted()
    message(api, f.pro["token"], f.job_id, "hello")
    message(api, f.user["token"], f.job_id, "hi", providerId=f.pro["id"])
    assert [n["read"] for n in user_list(api, f.user)] == [False, False]
    r = api.post("/users/me/notifications/read", token=f.user["token"])
    assert (r.status_code, r.json()) == (200, OK)
    items = user_list(api, f.user)
    assert [n["read"] for n in items] == [True, True]
    # the provider's own notifications are untouched
    assert [n["read"] for n in pro_list(api, f.pro)] == [False]
    # a later notification is unread; marking again is harmless
    api.advance_clock(3)
    message(api, f.pro["token"], f.job_id, "one more")
    assert [n["read"] for n in user_list(api, f.user)] == [False, True, True]
    assert (api.post("/users/me/notifications/read", token=f.user["token"]).json()) == OK
    assert (api.post("/users/me/notifications/read", token=f.user["token"]).json()) == OK
    assert [n["read"] for n in user_list(api, f.user)] == [True, True, True]
    r = api.post("/providers/me/notifications/read", token=f.pro["token"])
    assert (r.status_code, r.json()) == (200, OK)
    assert [n["read"] for n in pro_list(api, f.pro)] == [True]
    # reading does not change anything else
    assert [n["body"] for n in user_list(api, f.user)] == ["one more", "hello",
                                                          f"{f.pro['name']} quoted $94.40 for your lawncare job"]


def test_each_account_sees_only_its_own(api):
    f = Flow(api).quoted()
    message(api, f.user["token"], f.job_id, "for the pro", providerId=f.pro["id"])
    other_user, other_pro = named_customer(api, f.zip), named_provider(api, [fresh_zip()[0]], verified=False)
    assert user_list(api, other_user) == []
    assert pro_list(api, other_pro) == []
    assert [n["body"] for n in pro_list(api, f.pro)] == ["for the pro"]
    assert [n["title"] for n in user_list(api, f.user)] == ["New quote"]
    ok(api.post("/users/me/notifications/read", token=other_user["token"]))
    assert [n["read"] for n in user_list(api, f.user)] == [False]


@pytest.mark.parametrize("role", ["user", "provider"])
def test_mark_one_read(api, role):
    """POST /users/me/notifications/:id/read (and the provider's): that notification only, and
    only the caller's own; the answer is the notification as it is now."""
    f = Flow(api).quoted()
    message(api, f.pro["token"], f.job_id, "first")
    message(api, f.user["token"], f.job_id, "second", providerId=f.pro["id"])
    api.advance_clock(3)
    message(api, f.pro["token"], f.job_id, "third")
    message(api, f.user["token"], f.job_id, "fourth", providerId=f.pro["id"])
    me, other = (f.user, f.pro) if role == "user" else (f.pro, f.user)
    listing = user_list if role == "user" else pro_list
    base = "/users/me/notifications" if role == "user" else "/providers/me/notifications"
    items = listing(api, me)
    target = items[1]
    r = api.post(f"{base}/{target['id']}/read", token=me["token"])
    assert r.status_code == 200, r.text
    assert r.json() == {**target, "read": True}
    assert [n["read"] for n in listing(api, me)] == [n["id"] == target["id"] for n in items]
    again = api.post(f"{base}/{target['id']}/read", token=me["token"])  # harmless twice
    assert (again.status_code, again.json()["read"]) == (200, True)
    # another account's notification (or none at all) does not exist for the caller
    theirs = (pro_list if role == "user" else user_list)(api, other)[0]
    for nid in (theirs["id"], "cnosuchnotification000000"):
        r = api.post(f"{base}/{nid}/read", token=me["token"])
        assert (r.status_code, r.json()["error"]) == (404, "Notification not found")
    assert not any(n["read"] for n in (pro_list if role == "user" else user_list)(api, other))
    # the other role's route and no token
    r = api.post(f"{base}/{target['id']}/read", token=other["token"])
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
    r = api.post(f"{base}/{target['id']}/read")
    assert (r.status_code, r.json()["error"]) == (401, "Unauthorized")


# ---------------------------------------------------------------- pushes


class FakePush:
    """A local Expo-compatible push endpoint recording every POST; answers with the queued
    statuses first, then 200. A 200 carries Expo's push tickets (`data`: one ticket for a single
    message, an array of them in the messages' order for an array): `{status: "ok", id}`, or for
    a token in `unregistered` the error ticket Expo documents, `{status: "error", message,
    details: {error: "DeviceNotRegistered"}}`."""

    def __init__(self, statuses=()):
        self.requests = []
        self.statuses = list(statuses)
        self.default = 200
        self.unregistered = set()
        self.lock = threading.RLock()
        fake = self

        def ticket(message):
            to = message.get("to") if isinstance(message, dict) else None
            if to in fake.unregistered:
                return {"status": "error", "message": f'"{to}" is not a registered push notification recipient',
                        "details": {"error": "DeviceNotRegistered"}}
            return {"status": "ok", "id": str(uuid.uuid4())}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with fake.lock:
                    status = fake.statuses.pop(0) if fake.statuses else fake.default
                    fake.requests.append({"path": self.path, "headers": dict(self.headers), "raw": body,
                                          "status": status})
                if status == 200:
                    sent = json.loads(body)
                    data = [ticket(m) for m in sent] if isinstance(sent, list) else ticket(sent)
                    reply = json.dumps({"data": data}).encode()
                else:
                    reply = json.dumps({"errors": [{"code": "INTERNAL_SERVER_ERROR",
                                                    "message": "An unknown error occurred."}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/--/api/v2/push/send"

    def bodies(self):
        with self.lock:
            return [json.loads(r["raw"]) for r in self.requests]

    def wait(self, count, timeout=10):
        return eventually(self.bodies, timeout, f"{count} push request(s)", until=lambda got: len(got) >= count)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_push():
    fakes = []

    def make(statuses=()):
        fake = FakePush(statuses)
        fakes.append(fake)
        return fake

    yield make
    for fake in fakes:
        fake.close()


def test_without_push_url_a_push_is_skipped_without_logging_the_token(server, api):
    z = fresh_zip()[0]
    pro = named_provider(api, [z], verified=False)
    secret = f"ExponentPushToken[secret-{uuid.uuid4().hex}]"
    ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": secret}))
    job = asap_job(api, named_customer(api, z))
    api.wait_queue_idle()
    # the log is flushed every 100 ms
    skipped = server.wait_log(lambda line: line.get("jobId") == job["id"], timeout=5)
    assert [line["msg"] for line in skipped] == ["push skipped: PUSH_URL is not set"], skipped
    log = server.read_log()
    assert secret not in log and "secret-" not in log
    assert f"An ASAP lawncare job was posted in {z}" not in log


def test_push_is_posted_in_expo_format(server_factory, fake_push):
    push = fake_push()
    api = Api(server_factory(PUSH_URL=push.url))
    z = fresh_zip()[0]
    pro = named_provider(api, [z])
    ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": "ExponentPushToken[old]"}))
    ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": "ExponentPushToken[pro1]"}))
    user = named_customer(api, z)
    ok(api.post("/users/me/push-token", token=user["token"], json={"token": "ExponentPushToken[user1]"}))
    job = asap_job(api, user)
    got = push.wait(1)
    assert got == [{"to": "ExponentPushToken[pro1]", "title": "Urgent job nearby",
                    "body": f"An ASAP lawncare job was posted in {z}", "data": {"jobId": job["id"]}}]
    assert push.requests[0]["headers"]["Content-Type"] == "application/json"
    assert urlsplit(push.url).path == push.requests[0]["path"]
    # the customer's device hears of the quote
    quote(api, pro, job["id"], 50)
    got = push.wait(2)
    assert got[1] == {"to": "ExponentPushToken[user1]", "title": "New quote",
                      "body": f"{pro['name']} quoted $59.00 for your lawncare job", "data": {"jobId": job["id"]}}
    api.wait_queue_idle()
    assert len(push.requests) == 2  # one push per notification


def test_no_push_without_a_push_token(server_factory, fake_push):
    push = fake_push()
    api = Api(server_factory(PUSH_URL=push.url))
    z = fresh_zip()[0]
    silent = named_provider(api, [z], verified=False)
    loud = named_provider(api, [z], verified=False)
    ok(api.post("/providers/me/push-token", token=loud["token"], json={"token": "ExponentPushToken[loud]"}))
    user = named_customer(api, z)  # no push token either
    job = asap_job(api, user)
    got = push.wait(1)
    assert [b["to"] for b in got] == ["ExponentPushToken[loud]"]
    api.wait_queue_idle()
    assert len(push.requests) == 1
    # the notification without a push is still recorded
    assert strip(pro_list(api, silent)) == [note("Urgent job nearby", f"An ASAP lawncare job was posted in {z}",
                                                 job["id"])]


def test_push_service_error_is_retried(server_factory, fake_push):
    push = fake_push(statuses=[500, 503])
    api = Api(server_factory(PUSH_URL=push.url))
    z = fresh_zip()[0]
    pro = named_provider(api, [z], verified=False)
    ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": "ExponentPushToken[retry]"}))
    user = named_customer(api, z)
    job = asap_job(api, user)
    for sent in (1, 2):  # each failure is retried after a backoff of the service clock (1 s, then 2 s)
        push.wait(sent)
        api.wait_queue_idle()  # the retry is queued and not due yet
        assert len(push.requests) == sent
        api.advance_clock(60 * 1000)
    got = push.wait(3)
    expected = {"to": "ExponentPushToken[retry]", "title": "Urgent job nearby",
                "body": f"An ASAP lawncare job was posted in {z}", "data": {"jobId": job["id"]}}
    assert got == [expected] * 3
    assert [r["status"] for r in push.requests] == [500, 503, 200]
    api.wait_queue_idle()
    assert len(push.requests) == 3  # delivered: not sent again


def test_undelivered_push_is_delivered_after_a_restart(server_factory, fake_push):
    # decisions.md 6: pushes are queued in the database and finished after a restart
    push = fake_push()
    push.default = 500
    srv = server_factory(PUSH_URL=push.url)
    api = Api(srv)
    z = fresh_zip()[0]
    pro = named_provider(api, [z], verified=False)
    ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": "ExponentPushToken[durable]"}))
    job = asap_job(api, named_customer(api, z))
    push.wait(1)
    srv.stop()
    push.default = 200
    failed = len(push.requests)
    srv.start()
    eventually(lambda: [r for r in push.requests if r["status"] == 200], 15, "the push delivered", interval=0.1)
    api.wait_queue_idle()  # a second delivery would show by now
    delivered = [r for r in push.requests if r["status"] == 200]
    assert len(delivered) == 1, push.requests
    assert json.loads(delivered[0]["raw"]) == {"to": "ExponentPushToken[durable]", "title": "Urgent job nearby",
                                               "body": f"An ASAP lawncare job was posted in {z}",
                                               "data": {"jobId": job["id"]}}
    assert failed >= 1


# ---------------------------------------------------------------- push per device (issue 33)

DEVICE_PATHS = {"user": "/users/me/push-token", "provider": "/providers/me/push-token"}
BAD_DEVICE = "deviceId: must be 1 to 100 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'"


def account_of(api, role):
    return api.register_user() if role == "user" else api.register_provider()


def register_device(api, acct, role, token, device=None):
    body = {"token": token} if device is None else {"token": token, "deviceId": device}
    ok(api.post(DEVICE_PATHS[role], token=acct["token"], json=body))


def devices(api, acct, role):
    """The account's devices as the database holds them: {deviceId: token}."""
    rows = sql(api.server, PG[0], f"SELECT device_id, token FROM push_devices WHERE account_id = '{acct['id']}' "
                                  f"AND role = '{role}'")
    return {r[0]: r[1] for r in rows}


PG = [None]  # the PostgreSQL cluster, when the engine is PostgreSQL (the `cluster` fixture sets it)


@pytest.fixture(autouse=True)
def cluster(pg_cluster):
    PG[0] = pg_cluster


def login_again(api, acct, role):
    path = "/auth/login" if role == "user" else "/auth/provider/login"
    return {**ok(api.post(path, json={"email": acct["email"], "password": acct["password"]})), "id": acct["id"]}


@pytest.mark.parametrize("role", ["user", "provider"])
def test_each_device_keeps_its_token_and_one_is_removed(api, role):
    acct = account_of(api, role)
    register_device(api, acct, role, "ExponentPushToken[first]")  # no deviceId: the one default device
    register_device(api, acct, role, "ExponentPushToken[phone]", "phone-1")
    register_device(api, acct, role, "ExponentPushToken[tablet]", "tablet_2.a:b")
    register_device(api, acct, role, "ExponentPushToken[default]")  # replaces the default device's token
    assert devices(api, acct, role) == {"default": "ExponentPushToken[default]", "phone-1": "ExponentPushToken[phone]",
                                        "tablet_2.a:b": "ExponentPushToken[tablet]"}
    # a token is one device's: registered under another id, it moves there
    register_device(api, acct, role, "ExponentPushToken[phone]", "phone-2")
    assert devices(api, acct, role) == {"default": "ExponentPushToken[default]", "phone-2": "ExponentPushToken[phone]",
                                        "tablet_2.a:b": "ExponentPushToken[tablet]"}
    r = api.delete(f"{DEVICE_PATHS[role]}/tablet_2.a:b", token=acct["token"])
    assert (r.status_code, r.json()) == (200, OK)
    r = api.delete(f"{DEVICE_PATHS[role]}/tablet_2.a:b", token=acct["token"])
    assert (r.status_code, r.json()) == (404, error_body(404, "Device not found"))
    r = api.delete(f"{DEVICE_PATHS[role]}/default", token=acct["token"])
    assert (r.status_code, r.json()) == (200, OK)
    assert devices(api, acct, role) == {"phone-2": "ExponentPushToken[phone]"}


@pytest.mark.parametrize("role", ["user", "provider"])
def test_bad_device_ids_are_refused(api, role):
    acct = account_of(api, role)
    register_device(api, acct, role, "ExponentPushToken[kept]", "kept")
    for device, message in [("", "deviceId: must not be empty"), (12, "deviceId: must be a string"),
                            ("a" * 101, "deviceId: must be at most 100 characters"), ("a b", BAD_DEVICE),
                            ("phone/1", BAD_DEVICE), ("t\u00e9l\u00e9phone", BAD_DEVICE), ("x;y", BAD_DEVICE)]:
        r = api.post(DEVICE_PATHS[role], token=acct["token"], json={"token": "ExponentPushToken[bad]", "deviceId": device})
        assert (r.status_code, r.json()) == (400, error_body(400, message, field="deviceId")), device
    assert devices(api, acct, role) == {"kept": "ExponentPushToken[kept]"}
    for device in ("a%20b", "a" * 101, "x;y"):
        r = api.delete(f"{DEVICE_PATHS[role]}/{device}", token=acct["token"])
        assert (r.status_code, r.json()) == (400, error_body(400, BAD_DEVICE, field="deviceId")), device
    assert api.delete(f"{DEVICE_PATHS[role]}/{'a' * 100}", token=acct["token"]).status_code == 404
    assert devices(api, acct, role) == {"kept": "ExponentPushToken[kept]"}


def test_another_accounts_device_is_not_deletable(api):
    a, b = api.register_user(), api.register_user()
    register_device(api, a, "user", "ExponentPushToken[mine]", "phone")
    r = api.delete("/users/me/push-token/phone", token=b["token"])
    assert (r.status_code, r.json()) == (404, error_body(404, "Device not found"))
    # a provider's device of the same id is another account's as well
    pro = api.register_provider()
    register_device(api, pro, "provider", "ExponentPushToken[pro]", "phone")
    assert api.delete("/providers/me/push-token/phone", token=pro["token"]).status_code == 200
    assert devices(api, a, "user") == {"phone": "ExponentPushToken[mine]"}


def test_device_routes_refuse_the_other_role_and_no_token(api):
    user, pro = api.register_user(), api.register_provider()
    for path, wrong in (("/users/me/push-token/phone", pro), ("/providers/me/push-token/phone", user)):
        r = api.delete(path, token=wrong["token"])
        assert (r.status_code, r.json()) == (403, FORBIDDEN), path
        r = api.delete(path)
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED), path
    for path, wrong in (("/users/me/push-token", pro), ("/providers/me/push-token", user)):
        r = api.post(path, token=wrong["token"], json={"token": "ExponentPushToken[x]", "deviceId": "phone"})
        assert (r.status_code, r.json()) == (403, FORBIDDEN), path


@pytest.mark.parametrize("role", ["user", "provider"])
def test_logging_a_token_out_removes_the_devices_it_registered(api, role):
    acct = account_of(api, role)
    phone, tablet = login_again(api, acct, role), login_again(api, acct, role)
    register_device(api, phone, role, "ExponentPushToken[phone]", "phone")
    register_device(api, tablet, role, "ExponentPushToken[tablet]", "tablet")
    # the phone's session refreshes its token; the device stays the session's
    refreshed = ok(api.post("/auth/refresh", json={"refreshToken": phone["refreshToken"]}))
    assert devices(api, acct, role) == {"phone": "ExponentPushToken[phone]", "tablet": "ExponentPushToken[tablet]"}
    ok(api.post("/auth/logout", token=refreshed["token"]))
    assert devices(api, acct, role) == {"tablet": "ExponentPushToken[tablet]"}
    # logout-all: every token is logged out, every device goes
    register_device(api, acct, role, "ExponentPushToken[again]", "phone")
    ok(api.post("/auth/logout-all", token=tablet["token"]))
    fresh = login_again(api, acct, role)
    assert devices(api, fresh, role) == {}


def test_a_reused_refresh_token_removes_its_sessions_devices(api):
    acct = api.register_user()
    s = login_again(api, acct, "user")
    register_device(api, s, "user", "ExponentPushToken[stolen]", "phone")
    register_device(api, acct, "user", "ExponentPushToken[kept]", "laptop")
    ok(api.post("/auth/refresh", json={"refreshToken": s["refreshToken"]}))
    assert api.post("/auth/refresh", json={"refreshToken": s["refreshToken"]}).status_code == 401  # reuse
    assert devices(api, acct, "user") == {"laptop": "ExponentPushToken[kept]"}


def test_a_push_reaches_every_device_and_an_unregistered_one_is_removed(server_factory, fake_push):
    push = fake_push()
    api = Api(server_factory(PUSH_URL=push.url))
    z = fresh_zip()[0]
    pro = named_provider(api, [z], verified=False)
    register_device(api, pro, "provider", "ExponentPushToken[phone]", "phone")
    register_device(api, pro, "provider", "ExponentPushToken[tablet]", "tablet")
    user = named_customer(api, z)
    job = asap_job(api, user)
    message = {"title": "Urgent job nearby", "body": f"An ASAP lawncare job was posted in {z}",
               "data": {"jobId": job["id"]}}
    got = push.wait(1)
    # one request, an array of one message per device (Expo's batch)
    assert got == [[{"to": "ExponentPushToken[phone]", **message}, {"to": "ExponentPushToken[tablet]", **message}]]
    # one device is removed: the next push goes to the other alone, as a single message
    ok(api.delete("/providers/me/push-token/tablet", token=pro["token"]))
    job2 = asap_job(api, user)
    got = push.wait(2)
    assert got[1] == {"to": "ExponentPushToken[phone]", **message, "data": {"jobId": job2["id"]}}
    # the push service says a device is registered no more: it is removed
    register_device(api, pro, "provider", "ExponentPushToken[tablet]", "tablet")
    push.unregistered.add("ExponentPushToken[phone]")
    asap_job(api, user)
    got = push.wait(3)
    assert [m["to"] for m in got[2]] == ["ExponentPushToken[phone]", "ExponentPushToken[tablet]"]
    api.wait_queue_idle()
    eventually(lambda: devices(api, pro, "provider"), 10, "the unregistered device removed",
               until=lambda d: d == {"tablet": "ExponentPushToken[tablet]"})
    job4 = asap_job(api, user)
    got = push.wait(4)
    assert got[3] == {"to": "ExponentPushToken[tablet]", **message, "data": {"jobId": job4["id"]}}
    api.wait_queue_idle()
    assert len(push.requests) == 4


# ---------------------------------------------------------------- banners


def queue_banner(api, account_id, role, title, body, icon=None):
    payload = {"userId": account_id, "role": role, "title": title, "body": body}
    if icon is not None:
        payload["icon"] = icon
    r = api.post("/admin/notify", json=payload, token=admin_login(api))
    assert (r.status_code, r.json()) == (200, {"ok": True, "queued": {"userId": account_id, "role": role,
                                                                       "title": title}})


def poll(api, acct, role):
    r = api.get("/users/me/notification" if role == "user" else "/providers/me/notification", token=acct["token"])
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("role", ["user", "provider"])
def test_banner_is_null_when_none_is_queued(api, role):
    acct = api.register_user() if role == "user" else api.register_provider()
    r = api.get("/users/me/notification" if role == "user" else "/providers/me/notification", token=acct["token"])
    assert (r.status_code, r.text.strip()) == (200, "null")
    assert r.headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("role", ["user", "provider"])
def test_banner_is_returned_once(api, role):
    acct = api.register_user() if role == "user" else api.register_provider()
    queue_banner(api, acct["id"], role, "Spring special", "20% off your next mow", icon="leaf")
    assert poll(api, acct, role) == {"icon": "leaf", "title": "Spring special", "body": "20% off your next mow"}
    assert poll(api, acct, role) is None
    assert poll(api, acct, role) is None
    # a banner is not a persistent notification
    path = "/users/me/notifications" if role == "user" else "/providers/me/notifications"
    assert ok(api.get(path, token=acct["token"])) == []


def test_banner_without_icon_has_null_icon(api):
    user = api.register_user()
    queue_banner(api, user["id"], "user", "Heads up", "Storm tomorrow")
    assert poll(api, user, "user") == {"icon": None, "title": "Heads up", "body": "Storm tomorrow"}
    assert poll(api, user, "user") is None


def test_second_banner_replaces_the_first(api):
    user, pro = api.register_user(), api.register_provider()
    queue_banner(api, user["id"], "user", "First", "one", icon="a")
    queue_banner(api, user["id"], "user", "Second", "two")
    assert poll(api, user, "user") == {"icon": None, "title": "Second", "body": "two"}
    assert poll(api, user, "user") is None
    queue_banner(api, pro["id"], "provider", "P1", "one")
    queue_banner(api, pro["id"], "provider", "P2", "two", icon="b")
    assert poll(api, pro, "provider") == {"icon": "b", "title": "P2", "body": "two"}
    assert poll(api, pro, "provider") is None


def test_banners_are_per_account_and_role(api):
    user, other_user, pro = api.register_user(), api.register_user(), api.register_provider()
    queue_banner(api, user["id"], "user", "Hi customer", "c")
    queue_banner(api, pro["id"], "provider", "Hi pro", "p")
    assert poll(api, other_user, "user") is None
    assert poll(api, pro, "provider") == {"icon": None, "title": "Hi pro", "body": "p"}
    assert poll(api, user, "user") == {"icon": None, "title": "Hi customer", "body": "c"}
    assert poll(api, user, "user") is None and poll(api, pro, "provider") is None


def test_test_banner_route_is_gone(api):
    # issue 10: banners are queued through POST /admin/notify; the test-only route is removed
    user = api.register_user()
    r = api.post("/__test/banner", json={"accountId": user["id"], "role": "user", "title": "T", "body": "B"})
    assert (r.status_code, r.json()) == (404, error_body(404, "Not found"))
    assert poll(api, user, "user") is None


def test_banner_survives_a_restart(server_factory):
    # decisions.md 4: the banner queue is kept in the database
    srv = server_factory(**ADMIN_ENV)
    api = Api(srv)
    user = api.register_user()
    queue_banner(api, user["id"], "user", "Kept", "across restarts", icon="i")
    srv.restart()
    assert poll(api, user, "user") == {"icon": "i", "title": "Kept", "body": "across restarts"}
    assert poll(api, user, "user") is None
