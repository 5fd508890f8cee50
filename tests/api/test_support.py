"""Support requests and the ticket desk: POST /users/me/support and POST /providers/me/support
(the support inbox's email and an OPEN ticket, in one transaction), GET /staff/tickets and PATCH
/staff/tickets/:id for technical_support staff.

Spec: marketplace-api.md 2 (SupportTicket), 3 (Support ticket status), 4 (Users, Providers and
Staff tables), 6 (email to the support inbox); decisions.md 2 (SUPPORT_EMAIL), 4 (support requests
open a ticket). The allowed ticket moves are this service's choice (docs/decisions.md). The
ticket list is shared by every test, so tests look only at their own tickets.
"""

import pytest

from conftest import Api
from flow_helpers import ISO_RE, ok
from helpers import error_body, eventually
from staff_helpers import FORBIDDEN, STAFF_ROLES, make_staff

SUPPORT = "support@localhost"
TICKET_FIELDS = {"id", "accountId", "accountRole", "account", "subject", "body", "category", "status", "notes",
                 "assignedToId", "assignedTo", "resolvedAt", "createdAt", "updatedAt"}


@pytest.fixture
def desk(api, admin_token):
    return make_staff(api, "technical_support", admin_token, name="Tess Tech")


def open_ticket(api, acct, role="user", subject=None, body="It does not work", category="technical"):
    subject = subject or f"Help {acct['id']}"
    path = "/users/me/support" if role == "user" else "/providers/me/support"
    r = api.post(path, token=acct["token"], json={"subject": subject, "body": body, "category": category})
    assert (r.status_code, r.json()) == (200, {"ok": True})
    return subject


def support_mail(server, needle, timeout=10):
    """The one support-inbox email whose subject contains needle (polled: delivery is queued)."""
    found = eventually(lambda: [m for m in server.mails(SUPPORT) if needle in (m["subject"] or "")], timeout,
                       f"a support email about {needle}")
    assert len(found) == 1, found
    return found[0]


def tickets(api, staff, status=None):
    r = api.get("/staff/tickets", token=staff["token"], params={"status": status} if status else None)
    assert r.status_code == 200, r.text
    return r.json()


def ticket_of(api, staff, acct, status=None):
    mine = [t for t in tickets(api, staff, status) if t["accountId"] == acct["id"]]
    assert len(mine) == 1, mine
    return mine[0]


def patch(api, staff, ticket_id, body):
    return api.patch(f"/staff/tickets/{ticket_id}", token=staff["token"], json=body)


# ---------------------------------------------------------------- support requests


@pytest.mark.parametrize("role", ["user", "provider"])
def test_support_request_emails_the_inbox_and_opens_a_ticket(api, server, desk, role):
    acct = api.register_user(name="Sue Sender") if role == "user" else api.register_provider(name="Sue Sender")
    subject = open_ticket(api, acct, role, body="The app crashes\nwhen I upload", category="feedback")
    mail = support_mail(server, subject)
    assert mail["subject"] == f"[Support: feedback] {subject}"
    text = mail["body"]
    for part in ("Sue Sender", acct["email"], "Category: feedback", subject, "The app crashes"):
        assert part in text
    t = ticket_of(api, desk, acct)
    assert set(t) == TICKET_FIELDS
    assert (t["accountRole"], t["subject"], t["body"], t["category"], t["status"]) == \
        (role, subject, "The app crashes\nwhen I upload", "feedback", "OPEN")
    assert t["account"] == {"name": "Sue Sender", "email": acct["email"]}
    assert (t["assignedToId"], t["assignedTo"], t["notes"], t["resolvedAt"]) == (None, None, None, None)
    assert ISO_RE.match(t["createdAt"]) and t["id"] in text


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b.pop("subject"), "subject: is required"),
    (lambda b: b.update(subject=""), "subject: must not be empty"),
    (lambda b: b.update(subject="   "), "subject: must not be empty"),
    (lambda b: b.update(subject=7), "subject: must be a string"),
    (lambda b: b.update(subject="s" * 201), "subject: must be at most 200 characters"),
    (lambda b: b.pop("body"), "body: is required"),
    (lambda b: b.update(body=""), "body: must not be empty"),
    (lambda b: b.update(body="b" * 5001), "body: must be at most 5000 characters"),
    (lambda b: b.pop("category"), "category: is required"),
    (lambda b: b.update(category="billing"), "category: must be one of: technical, feedback"),
    (lambda b: b.clear(), "subject: is required"),
])
@pytest.mark.parametrize("role", ["user", "provider"])
def test_support_request_validates_in_spec_order(api, desk, role, mutate, error):
    acct = api.register_user() if role == "user" else api.register_provider()
    body = {"subject": "Hi", "body": "Help", "category": "technical"}
    mutate(body)
    r = api.post("/users/me/support" if role == "user" else "/providers/me/support", token=acct["token"], json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))
    assert not [t for t in tickets(api, desk) if t["accountId"] == acct["id"]]


def test_support_bounds_are_accepted(api, desk):
    u = api.register_user()
    open_ticket(api, u, subject="s" * 200, body="b" * 5000)
    assert ticket_of(api, desk, u)["subject"] == "s" * 200


def test_support_subject_cannot_inject_headers(api, server, desk):
    u = api.register_user()
    subject = f"Help {u['id']}\r\nBcc: victim@example.com\nX-Injected: yes"
    open_ticket(api, u, subject=subject)
    mail = support_mail(server, u["id"])
    head = mail["raw"].split("\r\n\r\n")[0]
    assert "\nBcc:" not in head and "\nX-Injected:" not in head and "victim@example.com" in head
    assert [line for line in head.split("\r\n") if line.startswith("Subject:")] == \
        [f"Subject: [Support: technical] Help {u['id']}  Bcc: victim@example.com X-Injected: yes"]
    assert set(mail["headers"]) == {"from", "to", "subject", "date", "message-id", "mime-version", "content-type",
                                    "content-transfer-encoding"}
    assert ticket_of(api, desk, u)["subject"] == subject  # the ticket keeps what the customer wrote


def test_support_routes_are_per_role(api, desk):
    u, p = api.register_user(), api.register_provider()
    body = {"subject": "Hi", "body": "Help", "category": "technical"}
    assert api.post("/users/me/support", json=body).status_code == 401
    assert api.post("/providers/me/support", json=body).status_code == 401
    for path, token in (("/users/me/support", p["token"]), ("/providers/me/support", u["token"]),
                        ("/users/me/support", desk["token"]), ("/providers/me/support", desk["token"])):
        r = api.post(path, token=token, json=body)
        assert (r.status_code, r.json()) == (403, FORBIDDEN), path


# ---------------------------------------------------------------- the ticket desk


def test_tickets_are_for_technical_support_only(api, admin_token):
    assert api.get("/staff/tickets").status_code == 401
    assert api.patch("/staff/tickets/cnotanidnotanidnotanid000", json={}).status_code == 401
    others = [make_staff(api, role, admin_token)["token"] for role in STAFF_ROLES if role != "technical_support"]
    for token in others + [admin_token, api.register_user()["token"], api.register_provider()["token"]]:
        assert (api.get("/staff/tickets", token=token).json()) == FORBIDDEN
        r = api.patch("/staff/tickets/cnotanidnotanidnotanid000", token=token, json={"status": "CLOSED"})
        assert (r.status_code, r.json()) == (403, FORBIDDEN)


def test_default_list_is_open_and_in_progress_oldest_first(api, desk):
    first, second, third = api.register_user(), api.register_provider(), api.register_user()
    open_ticket(api, first)
    open_ticket(api, second, "provider")
    open_ticket(api, third)
    ids = [ticket_of(api, desk, a)["id"] for a in (first, second, third)]
    ok(patch(api, desk, ids[1], {"status": "IN_PROGRESS"}))
    ok(patch(api, desk, ids[2], {"status": "RESOLVED"}))
    listed = [t["id"] for t in tickets(api, desk) if t["id"] in ids]
    assert listed == ids[:2]
    assert [t["id"] for t in tickets(api, desk, "RESOLVED") if t["id"] in ids] == [ids[2]]
    assert [t["id"] for t in tickets(api, desk, "OPEN") if t["id"] in ids] == [ids[0]]
    assert [t["id"] for t in tickets(api, desk, "CLOSED") if t["id"] in ids] == []
    created = [t["createdAt"] for t in tickets(api, desk)]
    assert created == sorted(created)


def test_status_filter_is_validated(api, desk):
    r = api.get("/staff/tickets", token=desk["token"], params={"status": "DONE"})
    assert (r.status_code, r.json()) == (400, error_body(400, "status: must be one of: OPEN, IN_PROGRESS, RESOLVED, CLOSED"))


def test_in_progress_assigns_the_caller_and_ignores_assigned_to(api, admin_token, desk):
    other = make_staff(api, "technical_support", admin_token, name="Otto Other")
    u = api.register_user()
    open_ticket(api, u)
    t = ticket_of(api, desk, u)
    r = patch(api, desk, t["id"], {"status": "IN_PROGRESS", "assignedToId": other["id"], "resolvedAt": "2020-01-01"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert set(got) == TICKET_FIELDS
    assert (got["status"], got["assignedToId"], got["resolvedAt"]) == ("IN_PROGRESS", desk["id"], None)
    assert got["assignedTo"] == {"name": "Tess Tech", "email": desk["email"]}
    assert ticket_of(api, desk, u)["assignedTo"] == {"name": "Tess Tech", "email": desk["email"]}
    # another agent takes it over
    got = ok(patch(api, other, t["id"], {"status": "IN_PROGRESS"}))
    assert got["assignedTo"] == {"name": "Otto Other", "email": other["email"]}


def test_resolving_and_closing_set_resolved_at(api, desk):
    u = api.register_user()
    open_ticket(api, u)
    tid = ticket_of(api, desk, u)["id"]
    resolved = ok(patch(api, desk, tid, {"status": "RESOLVED", "notes": "Cleared the cache"}))
    assert resolved["status"] == "RESOLVED" and ISO_RE.match(resolved["resolvedAt"])
    assert resolved["notes"] == "Cleared the cache"
    closed = ok(patch(api, desk, tid, {"status": "CLOSED"}))
    assert (closed["status"], closed["resolvedAt"], closed["notes"]) == ("CLOSED", resolved["resolvedAt"],
                                                                         "Cleared the cache")
    # notes may still change; the status may not
    assert ok(patch(api, desk, tid, {"notes": "Customer thanked us"}))["notes"] == "Customer thanked us"
    for status in ("OPEN", "IN_PROGRESS", "RESOLVED"):
        r = patch(api, desk, tid, {"status": status})
        assert (r.status_code, r.json()) == (409, error_body(409, f"A ticket cannot move from CLOSED to {status}", "invalid_state"))
    assert ok(patch(api, desk, tid, {"status": "CLOSED"}))["status"] == "CLOSED"


@pytest.mark.parametrize("path, allowed", [
    (["IN_PROGRESS", "OPEN"], True),
    (["CLOSED"], True),
    (["RESOLVED", "IN_PROGRESS"], True),
    (["RESOLVED", "OPEN"], False),
    (["OPEN"], True),
])
def test_ticket_moves(api, desk, path, allowed):
    u = api.register_user()
    open_ticket(api, u)
    tid = ticket_of(api, desk, u)["id"]
    for status in path[:-1]:
        ok(patch(api, desk, tid, {"status": status}))
    r = patch(api, desk, tid, {"status": path[-1]})
    if not allowed:
        assert r.status_code == 409
        return
    got = ok(r)
    assert got["status"] == path[-1]
    if path[-1] == "OPEN":
        assert got["assignedToId"] is None and got["resolvedAt"] is None
    if path[-1] == "IN_PROGRESS":
        assert got["resolvedAt"] is None and got["assignedToId"] == desk["id"]


def test_patch_validation_and_404(api, desk):
    u = api.register_user()
    open_ticket(api, u)
    tid = ticket_of(api, desk, u)["id"]
    for body, error in (({"status": "DONE"}, "status: must be one of: OPEN, IN_PROGRESS, RESOLVED, CLOSED"),
                        ({"notes": 5}, "notes: must be a string"),
                        ({"notes": "n" * 5001}, "notes: must be at most 5000 characters")):
        r = patch(api, desk, tid, body)
        assert (r.status_code, r.json()) == (400, error_body(400, error))
    assert ok(patch(api, desk, tid, {}))["status"] == "OPEN"
    assert ok(patch(api, desk, tid, {"notes": "n" * 5000}))["notes"] == "n" * 5000
    r = patch(api, desk, "cnotanidnotanidnotanid000", {"status": "CLOSED"})
    assert (r.status_code, r.json()) == (404, error_body(404, "Ticket not found"))


# ---------------------------------------------------------------- limits (issue 20, item 4)


def test_the_sixth_ticket_in_an_hour_is_429(api, server, desk):
    """The attack: 25 of 25 support requests were accepted, each an email to the support inbox."""
    u, other = api.register_user(), api.register_user()
    for i in range(5):
        open_ticket(api, u, subject=f"Limit {u['id']} {i}")
    r = api.post("/users/me/support", token=u["token"], json={"subject": f"Limit {u['id']} 5", "body": "again",
                                                               "category": "feedback"})
    assert (r.status_code, r.json()) == (429, error_body(429, "Too many requests"))
    assert 3500 < int(r.headers["Retry-After"]) <= 3600
    api.wait_queue_idle()
    assert len([m for m in server.mails(SUPPORT) if f"Limit {u['id']}" in m["subject"]]) == 5
    assert len([t for t in tickets(api, desk) if t["accountId"] == u["id"]]) == 5
    open_ticket(api, other)  # per account: another customer is not held back


def test_providers_have_their_own_5_tickets_an_hour(server_factory):
    api = Api(server_factory())
    pro = api.register_provider()
    for i in range(5):
        open_ticket(api, pro, role="provider", subject=f"Pro {i}")
    r = api.post("/providers/me/support", token=pro["token"], json={"subject": "x", "body": "y", "category": "technical"})
    assert (r.status_code, r.json()) == (429, error_body(429, "Too many requests"))
    api.advance_clock(60 * 60 * 1000)  # the window has passed
    open_ticket(api, pro, role="provider", subject="Pro again")


def test_the_document_states_the_ticket_limit(api):
    doc = api.get("/openapi.json").json()
    for path in ("/users/me/support", "/providers/me/support"):
        op = doc["paths"][path]["post"]
        assert op["x-rate-limit"] == {"name": "support-ticket", "max": 5, "windowSeconds": 3600, "per": "account"}
        assert "429" in op["responses"]
