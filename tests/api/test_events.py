"""Live updates (issue 25): GET /events, the Server-Sent Events stream of a signed-in app, and
POST /events/ticket.

Each test holds real streams (sse_client.Stream) and drives the REST routes. "Nobody else got
it" is proven with a later event that the other account does receive: the outbox delivers a
stream's events in commit order, so once that later event has arrived an earlier one that was
meant for it would have arrived first. Customers and providers get that later event from a
GODMODE banner (POST /admin/notify); staff roles with no event of their own get a `replaced`
event, which a sixth stream of the account makes the first one receive after everything
committed before.
"""
import datetime
import os
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

from conftest import ADMIN_ENV, ROOT, Api, Server, _CONTRACTS, _fail_on, _stop_all, admin_login, unique_ip
from flow_helpers import Flow, accept, customer, image_files, ok, post_job, private_zip, provider, quote
from helpers import eventually, server_seconds
from sse_client import Stream, ended_within, still_open
from staff_helpers import forge, make_staff, sql

pytestmark = pytest.mark.pooler

SECRET = "two-instances-events-secret-0123456789"


def stream_schema(server):
    doc = _CONTRACTS[f"127.0.0.1:{server.port}"].doc
    return jsonschema.Draft202012Validator({"$ref": "#/components/schemas/StreamEvent",
                                            "components": doc["components"]})


@pytest.fixture
def streams(server):
    """open(token=..., **kw) -> a Stream on the shared server (or server=...), answered 200;
    every stream is closed at the end, and every event it got must have matched the document."""
    opened = []

    def open_stream(token=None, status=200, on=None, **kw):
        srv = on or server
        s = Stream(srv.url, token=token, schema=stream_schema(srv), **kw)
        opened.append(s)
        assert s.wait_head() == status, (s.status, s.body)
        if status == 200:
            eventually(lambda: s.ids or s.events or s.retry is not None, 10, "the stream's first lines")
        return s

    yield open_stream
    problems = [p for s in opened for p in s.problems]
    for s in opened:
        s.close()
    assert not problems, problems


def settle(api, admin, stream, account, role="user"):
    """Makes sure every event committed so far that stream would get has arrived: a banner
    queued now reaches it after all of them."""
    title = "sync " + uuid.uuid4().hex[:8]
    r = api.post("/admin/notify", token=admin, json={"userId": account["id"], "role": role, "title": title,
                                                      "body": "sync"})
    assert r.status_code == 200, r.text
    stream.wait("banner", lambda d: d["title"] == title)


def epoch(iso):
    """Seconds since the epoch of an ISO 8601 UTC timestamp."""
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def about(job_id):
    """Matches an event's data that concerns job_id."""
    return lambda d: d.get("id") == job_id or d.get("jobId") == job_id


# ---------------------------------------------------------------- the stream itself


def test_a_stream_is_server_sent_events(api, streams):
    u = api.register_user()
    s = streams(u["token"])
    assert s.headers["content-type"] == "text/event-stream"
    assert s.headers["cache-control"] == "no-cache"
    assert s.headers["transfer-encoding"] == "chunked" and s.headers["x-request-id"]
    assert s.retry == 2000
    # the stream starts with its position, so even an app that gets no event can reconnect from it
    eventually(lambda: s.ids, 10, "the starting id")
    assert s.ids[0].isdigit()
    job = post_job(api, u)
    ev = s.wait("job.created", about(job["id"]))[0]
    assert ev["json"] == job
    assert int(ev["id"]) > int(s.ids[0])


def test_who_may_open_a_stream(api, streams, admin_token):
    r = api.get("/events")
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    r = api.get("/events", token="not-a-token")
    assert r.status_code == 401
    r = api.get("/events", token=admin_token)
    assert r.status_code == 403 and r.json()["error"] == "Forbidden"
    r = api.post("/events/ticket")
    assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    r = api.post("/events/ticket", token=admin_token)
    assert r.status_code == 403 and r.json()["error"] == "Forbidden"
    for role in ("customer_support", "technical_support"):
        staff = make_staff(api, role, admin=admin_token)
        streams(staff["token"])
    streams(api.register_provider()["token"])


def test_a_ticket_opens_one_stream_once(api, streams):
    u = api.register_user()
    api.freeze_clock()
    try:
        now = server_seconds(api)
        r = api.post("/events/ticket", token=u["token"])
    finally:
        api.freeze_clock(False)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"ticket", "expiresAt"} and len(body["ticket"]) == 64
    assert epoch(body["expiresAt"]) - now == 60
    s = streams(ticket=body["ticket"])
    job = post_job(api, u)
    s.wait("job.created", about(job["id"]))  # the ticket's account's stream
    # single use
    r = api.get("/events", params={"ticket": body["ticket"]})
    assert r.status_code == 401 and r.json()["error"] == "Invalid or expired ticket"
    # unknown, malformed
    for bad in ("0" * 64, "nope"):
        r = api.get("/events", params={"ticket": bad})
        assert r.status_code == 401 and r.json()["error"] == "Invalid or expired ticket"


def test_a_ticket_lasts_sixty_seconds(api):
    u = api.register_user()
    late = api.post("/events/ticket", token=u["token"]).json()["ticket"]
    api.advance_clock(61_000)
    r = api.get("/events", params={"ticket": late})
    assert r.status_code == 401 and r.json()["error"] == "Invalid or expired ticket"


def test_a_comment_line_every_25_seconds(api, streams):
    s = streams(api.register_user()["token"])
    assert not s.comments
    api.advance_clock(25_000)
    eventually(lambda: s.comments, 10, "a keep-alive comment")
    assert s.comments[0] == "keep-alive"


def test_the_stream_ends_with_its_token(api, server, streams):
    u = api.register_user()
    now = int(server_seconds(api))
    token = forge(server, {"id": u["id"], "role": "user", "iat": now, "exp": now + 120})
    s = streams(token)
    api.advance_clock(121_000)
    s.wait("token.expired")
    s.wait_ended()
    assert s.clean_end and s.kinds()[-1] == "token.expired"


def test_a_stream_ends_once_its_token_is_refused(api, streams, admin_token):
    """A deleted account (or a password reset, a disabled staff member, an ended impersonation:
    whatever makes the token refused) ends its open streams within a minute."""
    u, other = api.register_user(), api.register_user()
    s, s_other = streams(u["token"]), streams(other["token"])
    r = api.delete(f"/admin/accounts/{u['id']}", token=admin_token, params={"role": "user"})
    assert r.status_code == 200, r.text
    api.advance_clock(60_000)
    s.wait("token.expired")
    s.wait_ended()
    assert s.clean_end
    assert not s_other.ended and not s_other.of("token.expired")


def test_a_logged_out_token_ends_its_streams_ticket_included(api, streams):
    """POST /auth/logout ends the token: its streams (one opened with the header, one with a
    ticket issued for it) end within a minute; a stream of another token of the account stays."""
    u = api.register_user()
    other_token = api.post("/auth/login", json={"email": u["email"], "password": u["password"]},
                           ip=unique_ip()).json()["token"]
    ticket = api.post("/events/ticket", token=u["token"]).json()["ticket"]
    by_header, by_ticket, kept = streams(u["token"]), streams(ticket=ticket), streams(other_token)
    r = api.post("/auth/logout", token=u["token"])
    assert r.status_code == 200, r.text
    api.advance_clock(60_000)
    for s in (by_header, by_ticket):
        s.wait("token.expired")
        s.wait_ended()
    assert not kept.ended and not kept.of("token.expired")


def test_a_sixth_stream_replaces_the_first(api, streams):
    u = api.register_user()
    first = streams(u["token"])
    others = [streams(u["token"]) for _ in range(4)]
    sixth = streams(u["token"])
    first.wait("replaced")
    first.wait_ended()
    assert first.clean_end
    for s in others + [sixth]:
        assert not s.of("replaced")
    job = post_job(api, u)
    for s in others + [sixth]:
        s.wait("job.created", about(job["id"]))
    assert not first.of("job.created", about(job["id"]))
    # another account's streams are not counted with these
    streams(api.register_user()["token"])
    assert all(not s.ended for s in others + [sixth])


# ---------------------------------------------------------------- who gets which event


def test_message_created_reaches_both_parties_and_nobody_else(api, streams, admin_token):
    f = Flow(api).quoted()
    rival = provider(api, [f.zip])
    quote(api, rival, f.job_id)
    outsider = api.register_user()
    s_user, s_pro, s_rival, s_out = (streams(x["token"]) for x in (f.user, f.pro, rival, outsider))
    r = api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "On my way soon"})
    posted = ok(r, 201)
    for s in (s_user, s_pro):
        ev = s.wait("message.created")[0]
        assert ev["json"] == {"jobId": f.job_id, "providerId": f.pro["id"], "message": posted}
    r = api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"],
                 json={"content": "Thanks", "providerId": f.pro["id"]})
    reply = ok(r, 201)
    s_pro.wait("message.created", lambda d: d["message"]["id"] == reply["id"])
    settle(api, admin_token, s_rival, rival, "provider")
    settle(api, admin_token, s_out, outsider)
    assert not s_rival.of("message.created") and not s_out.of("message.created")
    # a photo message is the same JSON as its answer
    r = api.post(f"/jobs/{f.job_id}/messages/photo", token=f.user["token"],
                 data={"providerId": f.pro["id"]}, files=image_files(1, "photo"))
    photo = ok(r, 201)
    ev = s_pro.wait("message.created", lambda d: d["message"]["id"] == photo["id"])[0]
    assert ev["json"]["message"] == photo


def test_quote_created_and_its_notification(api, streams, admin_token):
    zip_code = private_zip()
    user = customer(api, zip_code)
    pro, other = provider(api, [zip_code]), provider(api, [zip_code])
    outsider = api.register_user()
    job = post_job(api, user)
    s_user, s_pro, s_other, s_out = (streams(x["token"]) for x in (user, pro, other, outsider))
    q = quote(api, pro, job["id"], 120)
    for s in (s_user, s_pro):
        assert s.wait("quote.created")[0]["json"] == q
    # the customer's notification of it, hers alone
    note = s_user.wait("notification.created", about(job["id"]))[0]["json"]
    assert note["read"] is False and note["title"]
    listed = ok(api.get("/users/me/notifications", token=user["token"]))
    assert note in listed
    # the job moved to QUOTED: the matching providers, who may still read it, hear of that
    for s in (s_user, s_pro, s_other):
        s.wait("job.updated", lambda d: d["id"] == job["id"] and d["status"] == "QUOTED")
    settle(api, admin_token, s_other, other, "provider")
    settle(api, admin_token, s_out, outsider)
    assert not s_other.of("quote.created") and not s_out.kinds().count("quote.created")
    assert not s_other.of("notification.created") and not s_out.of("job.updated")
    assert not s_pro.of("notification.created", about(job["id"]))


def test_job_created_reaches_the_owner_and_the_matching_feed(api, streams, admin_token):
    zip_code = private_zip()
    user = customer(api, zip_code)
    matching = provider(api, [zip_code], ["handyman", "lawncare"], verified=False)
    other_service = provider(api, [zip_code], ["snowplowing"], verified=False)
    other_zip = provider(api, [private_zip()], ["lawncare"], verified=False)
    stranger = api.register_user()
    s_user, s_match, s_service, s_zip, s_stranger = (
        streams(x["token"]) for x in (user, matching, other_service, other_zip, stranger))
    job = post_job(api, user, service="lawncare")
    for s in (s_user, s_match):
        assert s.wait("job.created", about(job["id"]))[0]["json"] == job
    for s, who, role in ((s_service, other_service, "provider"), (s_zip, other_zip, "provider"),
                         (s_stranger, stranger, "user")):
        settle(api, admin_token, s, who, role)
        assert not s.of("job.created")


def test_job_updated_follows_status_photos_and_assignment(api, streams, admin_token):
    f = Flow(api).quoted()
    loser = provider(api, [f.zip])
    quote(api, loser, f.job_id)
    s_user, s_pro, s_loser = (streams(x["token"]) for x in (f.user, f.pro, loser))
    accepted = accept(api, f.user, f.quote["id"])["job"]
    for s in (s_user, s_pro):
        ev = s.wait("job.updated", lambda d: d["id"] == f.job_id and d["status"] == "ACCEPTED")[0]
        assert ev["json"] == accepted and ev["json"]["providerId"] == f.pro["id"]
    on_way = ok(api.patch(f"/jobs/{f.job_id}/status", token=f.pro["token"], json={"status": "ON_THE_WAY"}))
    assert s_user.wait("job.updated", lambda d: d["status"] == "ON_THE_WAY")[0]["json"] == on_way
    r = api.post(f"/jobs/{f.job_id}/images", token=f.user["token"], files=image_files(2))
    ok(r)
    ev = s_pro.wait("job.updated", lambda d: d["id"] == f.job_id and len(d["images"]) == 2)[0]
    assert ev["json"]["status"] == "ON_THE_WAY"
    started = ok(api.post(f"/jobs/{f.job_id}/start", token=f.pro["token"], files=image_files(1, seed=3)))
    assert s_user.wait("job.updated", lambda d: d["status"] == "IN_PROGRESS")[0]["json"]["beforeImages"] == \
        started["beforeImages"]
    # the provider that lost may no longer read the job: nothing since its acceptance
    settle(api, admin_token, s_loser, loser, "provider")
    assert not s_loser.of("job.updated", lambda d: d["status"] != "QUOTED")


def test_payment_updated_reaches_the_customer_and_the_provider(api, streams, admin_token):
    f = Flow(api).quoted()
    outsider = api.register_user()
    s_user, s_pro, s_out = (streams(x["token"]) for x in (f.user, f.pro, outsider))
    f.accepted()
    for s in (s_user, s_pro):
        ev = s.wait("payment.updated", lambda d: d["jobId"] == f.job_id and d["payment"]["status"] == "AUTHORIZED")
        assert ev[0]["json"]["payment"]["amount"] == 118
    detail = ok(api.get(f"/jobs/{f.job_id}", token=f.user["token"]))
    assert s_user.of("payment.updated")[-1]["json"]["payment"] == detail["payment"]
    f.completed()
    s_pro.wait("payment.updated", lambda d: d["payment"]["status"] == "PAID")
    settle(api, admin_token, s_out, outsider)
    assert not s_out.of("payment.updated")


def test_the_banner_is_delivered_at_once_and_cleared(api, streams, admin_token):
    u = api.register_user()
    s = streams(u["token"])
    r = api.post("/admin/notify", token=admin_token,
                 json={"userId": u["id"], "role": "user", "title": "Storm", "body": "Plows are out", "icon": "snow"})
    assert r.status_code == 200, r.text
    ev = s.wait("banner")[0]
    assert ev["json"] == {"icon": "snow", "title": "Storm", "body": "Plows are out"}
    assert ev["explicit_id"]
    # cleared, as its GET would: the poll no longer returns it
    eventually(lambda: api.get("/users/me/notification", token=u["token"]).json() is None, 10, "the banner cleared")
    # queued while no stream was open: the next stream delivers it at once, and clears it
    pro = api.register_provider()
    r = api.post("/admin/notify", token=admin_token,
                 json={"userId": pro["id"], "role": "provider", "title": "Welcome", "body": "Hello"})
    assert r.status_code == 200
    later = streams(pro["token"])
    assert later.wait("banner")[0]["json"] == {"icon": None, "title": "Welcome", "body": "Hello"}
    assert ok(api.get("/providers/me/notification", token=pro["token"])) is None
    # a connection the app dropped is noticed at the next write: the banner may be written to it,
    # and the reconnect from the app's last id brings it back
    s.close()
    ok(api.post("/admin/notify", token=admin_token, json={"userId": u["id"], "role": "user", "title": "Missed",
                                                          "body": "x"}))
    back = streams(u["token"], last_event_id=s.last_event_id)
    assert back.wait("banner")[0]["json"]["title"] == "Missed"
    # without a stream the poll gets it, and keeps getting the newest
    other = api.register_user()
    for title in ("First", "Polled"):
        ok(api.post("/admin/notify", token=admin_token, json={"userId": other["id"], "role": "user", "title": title,
                                                              "body": "x"}))
    assert ok(api.get("/users/me/notification", token=other["token"]))["title"] == "Polled"


def test_staff_streams_carry_what_their_role_reads(api, streams, admin_token):
    cs = make_staff(api, "customer_support", admin=admin_token)
    ps = make_staff(api, "professional_support", admin=admin_token)
    ts = make_staff(api, "technical_support", admin=admin_token)
    s_cs, s_ps, s_ts = streams(cs["token"]), streams(ps["token"]), streams(ts["token"])
    f = Flow(api).quoted()
    s_cs.wait("job.created", about(f.job_id))
    s_cs.wait("quote.created", lambda d: d["id"] == f.quote["id"])
    f.accepted()
    # a provider is assigned: professional support reads the job through the provider now
    for s in (s_cs, s_ps):
        s.wait("job.updated", lambda d: d["id"] == f.job_id and d["status"] == "ACCEPTED")
        s.wait("payment.updated", lambda d: d["jobId"] == f.job_id)
    assert not s_ps.of("job.created", about(f.job_id)) and not s_ps.of("quote.created")
    # technical support reads none of these: a sixth stream of the same account ends the first
    # one after everything committed so far
    for _ in range(5):
        streams(ts["token"])
    s_ts.wait("replaced")
    assert s_ts.kinds() == ["replaced"]
    # no customer's own notification or message reaches staff
    assert not s_cs.of("notification.created") and not s_cs.of("banner")


# ---------------------------------------------------------------- nothing lost, nothing invented


def test_a_rolled_back_change_sends_nothing(api, server, pg_cluster, streams, admin_token):
    zip_code = private_zip()
    user = customer(api, zip_code)
    pro = provider(api, [zip_code])
    job = post_job(api, user)
    s_user, s_pro = streams(user["token"]), streams(pro["token"])
    # the quote's transaction writes the quote and its events, then the customer's notification,
    # which a trigger refuses for this job (a constraint, on both engines): the whole transaction
    # rolls back, and the quote answers as a conflict
    if server.env["DATABASE_URL"].startswith("sqlite:"):
        sql(server, pg_cluster, f"CREATE TRIGGER refuse_note BEFORE INSERT ON notifications "
                                f"WHEN NEW.job_id = '{job['id']}' BEGIN SELECT RAISE(ABORT, 'refused'); END")
    else:
        sql(server, pg_cluster,
            "CREATE FUNCTION refuse_note() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'check_violation'; END $$; "
            f"CREATE TRIGGER refuse_note BEFORE INSERT ON notifications FOR EACH ROW "
            f"WHEN (NEW.job_id = '{job['id']}') EXECUTE FUNCTION refuse_note()")
    try:
        r = api.post("/quotes", token=pro["token"], json={"jobId": job["id"], "amount": 80})
        assert r.status_code == 409, r.text
    finally:
        sql(server, pg_cluster, "DROP TRIGGER refuse_note" if server.env["DATABASE_URL"].startswith("sqlite:")
            else "DROP TRIGGER refuse_note ON notifications; DROP FUNCTION refuse_note()")
    assert ok(api.get(f"/quotes/job/{job['id']}", token=user["token"])) == []
    q = quote(api, pro, job["id"], 90)  # the change made again, committed this time
    # everything committed so far has arrived once a banner queued now has: then count exactly
    settle(api, admin_token, s_user, user)
    settle(api, admin_token, s_pro, pro, role="provider")
    for s in (s_user, s_pro):
        assert [e["json"] for e in s.of("quote.created", about(job["id"]))] == [q]
        assert [e["json"]["status"] for e in s.of("job.updated", about(job["id"]))] == ["QUOTED"]
    assert len(s_user.of("quote.created")) == 1 and len(s_user.of("notification.created", about(job["id"]))) == 1


def test_a_reconnect_replays_exactly_what_it_missed_in_order(api, streams, admin_token):
    f = Flow(api)
    s = streams(f.user["token"])
    first = post_job(api, f.user)
    seen = s.wait("job.created", about(first["id"]))[0]
    s.close()
    # while the app is away: a quote, two messages, a status change, other accounts' events
    f.quoted()
    api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "one"})
    api.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "two"})
    post_job(api, api.register_user())
    f.accepted()
    missed_hint = api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"], json={"content": "three"}).json()
    back = streams(f.user["token"], last_event_id=seen["id"])
    back.wait("message.created", lambda d: d["message"]["id"] == missed_hint["id"])
    got = [(e["event"], e["json"].get("id") or e["json"].get("jobId")) for e in back.events]
    ids = [int(e["id"]) for e in back.events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and min(ids) > int(seen["id"])
    kinds = [k for k, _ in got]
    assert kinds.count("quote.created") == 1 and kinds.count("message.created") == 3
    assert kinds.index("quote.created") < kinds.index("message.created")
    assert "job.created" not in kinds  # nothing from before, nothing of others
    contents = [e["json"]["message"]["content"] for e in back.events if e["event"] == "message.created"]
    assert contents == ["one", "two", "three"]
    # the same through the query parameter (a first connection that cannot send the header),
    # and nothing twice after the replay: a new event follows at once
    again = streams(f.user["token"], query={"lastEventId": seen["id"]})
    again.wait("message.created", count=3)
    last = post_job(api, f.user)
    again.wait("job.created", about(last["id"]))
    assert len(again.of("message.created")) == 3


class Session:
    """A psql session on the server's database (through the pooler when there is one: a
    transaction keeps its server connection), for transactions held open across steps."""

    def __init__(self, url, pg_cluster):
        self.proc = subprocess.Popen([os.path.join(pg_cluster.bindir, "psql"), url, "-X", "-q", "-v",
                                      "ON_ERROR_STOP=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def run(self, statements):
        """Sends statements and returns once psql has run them."""
        marker = "done-" + uuid.uuid4().hex[:8]
        self.proc.stdin.write(f"{statements}\n\\echo {marker}\n")
        self.proc.stdin.flush()
        while (line := self.proc.stdout.readline()) and line.strip() != marker:
            pass
        assert line, self.proc.stderr.read()

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(10) == 0, self.proc.stderr.read()


def banner_rows(api, server, streams):
    """PostgreSQL only: a new customer, a stream of theirs, its first position, and event(title,
    notify=True): the SQL that writes a banner event for them as the service does (the row, then
    its recipient by the id the sequence gave), tagged with tag, notifying the instances or not."""
    if not server.env["DATABASE_URL"].startswith("postgres"):
        pytest.skip("PostgreSQL only: SQLite has one writer, and positions are its ids")
    u = api.register_user()
    s = streams(u["token"])
    now = int(server_seconds(api) * 1000)
    tag = uuid.uuid4().hex[:8]

    def event(title, notify=True):
        data = '{"icon":null,"title":"%s","body":"%s"}' % (title, tag)
        return (f"INSERT INTO events (kind, data, created_at) VALUES ('banner', '{data}', {now}); "
                f"INSERT INTO event_recipients (recipient, event_id) VALUES ('user:{u['id']}', "
                "currval('events_id_seq'));" + (" NOTIFY marketplace_events;" if notify else ""))

    return u, s, int(s.ids[0]), event, tag


def test_positions_follow_the_commits_not_the_starts(api, server, pg_cluster, streams, admin_token):
    """On PostgreSQL events are written without a lock and positioned after their commit. Two
    transactions write an event each as the service does (the row, then its recipient by the
    id the sequence gave); the first to start, with the smaller id, commits last, and a third
    rolls back. The stream gets both, in position order (the commits'), once each; a replay
    from the first one's id gives the second exactly; the rolled-back one appears nowhere."""
    u, s, start, event, tag = banner_rows(api, server, streams)

    mine = lambda d: d["body"] == tag  # noqa: E731
    url = server.env["DATABASE_URL"]
    t1, t2, t3 = (Session(url, pg_cluster) for _ in range(3))
    try:
        t1.run("BEGIN; " + event("started first"))
        t3.run("BEGIN; " + event("rolled back"))
        t2.run("BEGIN; " + event("started second"))
        t2.run("COMMIT;")
        t3.run("ROLLBACK;")
        s.wait("banner", mine)
        t1.run("COMMIT;")
    finally:
        for t in (t1, t2, t3):
            t.close()
    ids = {r[0]: int(r[1]) for r in sql(server, pg_cluster, f"SELECT data::json->>'title', id FROM events "
                                                            f"WHERE data LIKE '%{tag}%'")}
    assert set(ids) == {"started first", "started second"} and ids["started first"] < ids["started second"]
    s.wait("banner", mine, count=2)
    settle(api, admin_token, s, u)
    got = s.of("banner", mine)
    assert [e["json"]["title"] for e in got] == ["started second", "started first"]
    positions = [int(e["id"]) for e in got]
    assert start < positions[0] < positions[1]
    # a replay from the first one's id: the second, exactly
    back = streams(u["token"], last_event_id=got[0]["id"])
    back.wait("banner", mine)
    settle(api, admin_token, back, u)
    assert [(e["id"], e["json"]["title"]) for e in back.of("banner", mine)] == [(got[1]["id"], "started first")]
    # then the account's later ones, the settling banners (the first stream's, replayed, and its
    # own), in order, nothing twice
    synced = [e["json"]["title"] for e in s.wait("banner", lambda d: d["body"] == "sync", count=2)]
    assert [e["json"]["title"] for e in back.events] == ["started first", *synced]
    replayed = [int(e["id"]) for e in back.events]
    assert replayed == sorted(set(replayed)) and replayed[0] == positions[1]


def test_an_event_its_writer_left_without_a_position_is_delivered(api, server, pg_cluster, streams):
    """A writer that stops between its commit and its pump's positioning leaves its rows without
    a position, and no instance is told (its NOTIFY is the pump's). Another pump finds them
    waiting at two of its looks a second apart and positions them: the stream gets the event."""
    _, s, start, event, tag = banner_rows(api, server, streams)
    sql(server, pg_cluster, event("left behind", notify=False))
    got = s.wait("banner", lambda d: d["body"] == tag, timeout=10)
    assert int(got[0]["id"]) > start
    assert sql(server, pg_cluster, f"SELECT count(*) FROM events WHERE data LIKE '%{tag}%' AND pos IS NULL") == [("0",)]


def test_a_provider_replays_the_open_jobs_of_its_pairs_once(api, streams, admin_token):
    """An open job's events reach the providers matching its service and ZIP when the outbox is
    read: live, and on a reconnect, in order and once each, mixed with the events that name the
    provider (its quote)."""
    zip_code = private_zip()
    user = customer(api, zip_code)
    pro = provider(api, [zip_code], ["lawncare"])
    other = provider(api, [zip_code], ["snowplowing"])
    s, s_other = streams(pro["token"]), streams(other["token"])
    first = post_job(api, user, service="lawncare")
    seen = s.wait("job.created", about(first["id"]))[0]
    s.close()
    second = post_job(api, user, service="lawncare")
    q = quote(api, pro, second["id"], 90)  # quote.created names pro; job.updated (QUOTED) matches its pair
    third = post_job(api, user, service="lawncare")
    back = streams(pro["token"], last_event_id=seen["id"])
    back.wait("job.created", about(third["id"]))
    settle(api, admin_token, back, pro, "provider")
    got = [(e["event"], e["json"].get("id")) for e in back.events if e["event"] != "banner"]
    assert got == [("job.created", second["id"]), ("quote.created", q["id"]), ("job.updated", second["id"]),
                   ("job.created", third["id"])]
    settle(api, admin_token, s_other, other, "provider")
    assert not s_other.of("job.created") and not s_other.of("job.updated")


def test_streams_joining_during_a_burst_get_every_event_after_their_position(api, streams, admin_token):
    """The pump reads an open job's matching providers only while a provider's stream is joined
    (and no recipient at all with no stream joined), so a stream that joins while a round is
    being read is owed that round's events: each stream that joins during a burst of jobs gets
    every event after its first position that a stream open throughout got, in the same order."""
    zip_code = private_zip()
    user = customer(api, zip_code)
    pro = provider(api, [zip_code], ["lawncare"], verified=False)
    throughout = streams(pro["token"])
    posted, stop = [], threading.Event()

    def burst():
        while not stop.is_set() and len(posted) < 400:
            posted.append(post_job(api, user, service="lawncare")["id"])

    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(burst)
        joined = []
        for i in range(4):  # the account's fifth stream at most
            eventually(lambda: len(posted) >= 5 * (i + 1) or done.done(), 30, "jobs posted between the joins")
            joined.append(streams(pro["token"]))
        # the job in flight as the last stream joined may have committed before it: the one after
        # it was posted after the join
        after = len(posted) + 2
        eventually(lambda: len(posted) >= after or done.done(), 30, "jobs posted after the last join")
        stop.set()
        done.result()
    assert len(posted) < 400, "the burst ended before the streams joined"
    throughout.wait("job.created", about(posted[-1]))
    for s in joined:
        settle(api, admin_token, s, pro, "provider")
        start = int(s.ids[0])
        owed = [(e["id"], e["json"]["id"]) for e in throughout.of("job.created") if int(e["id"]) > start]
        assert owed, "a stream joined after the burst"
        assert [(e["id"], e["json"]["id"]) for e in s.of("job.created")] == owed


@pytest.mark.parametrize("providers", ["named", "all"])
def test_a_stream_that_joins_while_its_round_is_read_is_owed_the_round(server_factory, providers):
    """The race the burst above can only hit by chance, made certain: PAUSE_POINT holds the pump
    after it read a round's recipients (the customer's, the one stream then). A provider whose
    stream joins meanwhile joins at the position before the round, so the round's job.created
    is owed to it: the pump reads the recipients again before writing the round out. Both ways
    the pump reads an open job's matching providers: those with a stream here named in the read
    (up to 32 streams), and all of them past that (TEST_LIMIT sets it to 0 streams)."""
    limit = {"TEST_LIMIT": "events-provider-list:0"} if providers == "all" else {}
    srv = server_factory(PAUSE_POINT="events-recipients-read:1500", **limit)
    api = Api(srv)
    zip_code = private_zip()
    user = customer(api, zip_code)
    pro = provider(api, [zip_code], ["lawncare"], verified=False)
    opened = [Stream(srv.url, token=user["token"], schema=stream_schema(srv))]
    eventually(lambda: opened[0].ids, 10, "the customer's stream joined")
    job = post_job(api, user, service="lawncare")
    time.sleep(0.3)  # the pump reads the round at once (5 ms), then sleeps in its pause
    opened.append(Stream(srv.url, token=pro["token"], schema=stream_schema(srv)))
    late = opened[1]
    eventually(lambda: late.ids, 10, "the provider's stream joined")
    assert opened[0].of("job.created") == [], "the round was written out before the provider joined"
    assert int(late.ids[0]) < int(opened[0].wait("job.created", about(job["id"]))[0]["id"])
    late.wait("job.created", about(job["id"]), timeout=10)
    for s in opened:
        assert not s.problems, s.problems
        s.close()


def test_an_unknown_or_old_id_gets_a_reset(api, streams):
    u = api.register_user()
    s = streams(u["token"], last_event_id="999999999")
    assert s.wait("reset")[0]["json"] == {"reason": "unknown"}
    s2 = streams(u["token"], last_event_id="banana")
    assert s2.wait("reset")[0]["json"] == {"reason": "unknown"}
    job = post_job(api, u)
    ev = s.wait("job.created", about(job["id"]))[0]  # it goes on from now
    api.advance_clock(24 * 3600 * 1000 + 60_000)
    s3 = streams(u["token"], last_event_id=ev["id"])
    assert s3.wait("reset")[0]["json"] == {"reason": "expired"}
    assert not s3.of("job.created")


def test_a_slow_reader_is_cut_and_catches_up(api, server, streams):
    f = Flow(api).quoted()
    pros = [f.pro] + [provider(api, [f.zip]) for _ in range(2)]
    for pro in pros[1:]:
        quote(api, pro, f.job_id)
    # a reader that takes nothing: its socket holds a few kilobytes, the stream at most 1 MiB
    slow = Stream(server.url, token=f.user["token"], rcvbuf=4096, paused=True, schema=stream_schema(server))

    def joined():  # its first position, written once it has joined the hub, waits in its socket
        try:
            return b"\nid: " in slow.sock.recv(4096, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False

    eventually(joined, 10, "the stream's position")  # else the first messages may come before it
    text = "x" * 1990

    def post_all(n, pro):  # 250 messages of 2 kB from one provider, in order
        own = Api(server)
        return [ok(own.post(f"/jobs/{f.job_id}/messages", token=pro["token"], json={"content": f"{n}{i:04d}{text}"}),
                   201)["id"] for i in range(250)]

    with ThreadPoolExecutor(len(pros)) as pool:  # the three side by side: 1.5 MB for a reader that reads none
        by_pro = list(pool.map(post_all, range(len(pros)), pros))
    posted = {m for own in by_pro for m in own}

    def in_order(ids):  # no repeat, and each provider's messages a prefix of what it posted, in order
        assert len(ids) == len(set(ids)) and set(ids) <= posted
        for own in by_pro:
            mine = set(own)
            theirs = [m for m in ids if m in mine]
            assert theirs == own[:len(theirs)]

    slow.resume()
    slow.wait_ended(30)
    # cut, not ended: what it got is what the sockets held, far less than was sent
    assert slow.status == 200 and not slow.clean_end
    got = [e["json"]["message"]["id"] for e in slow.of("message.created")]
    in_order(got)
    assert len(got) < len(posted)
    server.wait_log(lambda line: line.get("msg", "").startswith("stream cut: the client's backlog passed 1048576"))
    slow.close()
    # the app reconnects from the last id it read, as often as the server ends the replay, and
    # gets the rest in order, each once
    last, seen, reconnects = slow.last_event_id, list(got), 0
    for reconnects in range(1, 11):
        back = streams(f.user["token"], last_event_id=last)
        eventually(lambda: back.ended or len(seen) + len(back.of("message.created")) >= len(posted), 60,
                   "the replay")
        seen += [e["json"]["message"]["id"] for e in back.of("message.created")]
        last = back.last_event_id
        if len(seen) >= len(posted):
            break
    in_order(seen)
    assert set(seen) == posted
    assert reconnects >= 2  # a replay sends at most 512 KiB: the backlog came in parts


# ---------------------------------------------------------------- stopping, and two instances


def test_sigterm_closes_streams_with_shutdown(server_factory):
    srv = server_factory(**ADMIN_ENV)
    api = Api(srv)
    u = api.register_user()
    s = Stream(srv.url, token=u["token"], schema=stream_schema(srv))
    assert s.wait_head() == 200
    eventually(lambda: s.ids, 10, "the stream's position")
    assert srv.stop() == 0
    s.wait("shutdown")
    s.wait_ended()
    assert s.clean_end and s.kinds() == ["shutdown"] and not s.problems
    s.close()


@pytest.fixture(scope="module")
def pair(request, engine, pg_cluster):
    """Two instances on one PostgreSQL database, as behind a load balancer."""
    if engine != "postgres":
        pytest.skip("PostgreSQL only: instances share a database server")
    url = pg_cluster.new_database()
    env = {"JWT_SECRET": SECRET, "DB_POOL_SIZE": "4", **ADMIN_ENV}
    servers = [Server(request.config.getoption("--binary"), url, env) for _ in range(2)]
    for srv in servers:
        srv.start()
    yield servers
    _fail_on(_stop_all(servers))


def test_two_instances_deliver_across(pair):
    a, b = pair
    api_a, api_b = Api(a), Api(b)
    f = Flow(api_a).quoted()
    s_user = Stream(b.url, token=f.user["token"], schema=stream_schema(b))
    s_pro = Stream(a.url, token=f.pro["token"], schema=stream_schema(a))
    for s in (s_user, s_pro):
        assert s.wait_head() == 200
    # a message posted through one instance reaches a stream held by the other
    posted = ok(api_a.post(f"/jobs/{f.job_id}/messages", token=f.pro["token"], json={"content": "across"}), 201)
    assert s_user.wait("message.created")[0]["json"]["message"] == posted
    reply = ok(api_b.post(f"/jobs/{f.job_id}/messages", token=f.user["token"],
                          json={"content": "back", "providerId": f.pro["id"]}), 201)
    assert s_pro.wait("message.created", lambda d: d["message"]["id"] == reply["id"])[0]["json"]["message"] == reply
    # a banner queued through A is delivered by B and cleared for both
    admin = admin_login(api_a)
    ok(api_a.post("/admin/notify", token=admin, json={"userId": f.user["id"], "role": "user", "title": "Both",
                                                      "body": "x"}))
    s_user.wait("banner", lambda d: d["title"] == "Both")
    eventually(lambda: api_a.get("/users/me/notification", token=f.user["token"]).json() is None, 10,
               "the banner cleared")
    # a reconnect to the other instance replays from the same outbox
    last = s_user.events[-1]["id"]
    s_user.close()
    f.accepted()
    again = Stream(a.url, token=f.user["token"], last_event_id=last, schema=stream_schema(a))
    again.wait("job.updated", lambda d: d["status"] == "ACCEPTED")
    again.wait("payment.updated")
    assert not again.of("message.created") and not again.of("banner")
    for s in (s_pro, again):
        assert not s.problems, s.problems
        s.close()


def test_concurrent_writers_on_two_instances_are_seen_in_one_order(pair):
    """Writers on both instances at once (no lock orders them any more): each stream, on either
    instance, gets every message once, with growing ids, each writer's in the order it posted
    them; the streams of both instances agree on that order, and a replay from the start gives
    it again."""
    a, b = pair
    api_a, api_b = Api(a), Api(b)
    f = Flow(api_a).quoted()
    watchers = [Stream(a.url, token=f.user["token"], schema=stream_schema(a)),
                Stream(b.url, token=f.pro["token"], schema=stream_schema(b))]
    for s in watchers:
        assert s.wait_head() == 200
        eventually(lambda: s.ids, 10, "the stream's position")
    start = min(int(s.ids[0]) for s in watchers)
    posted, errors = {}, []

    def writer(n, api, account, extra):
        try:
            posted[n] = [ok(api.post(f"/jobs/{f.job_id}/messages", token=account["token"],
                                     json={"content": f"w{n} #{i}", **extra}), 201)["id"] for i in range(12)]
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n, api, who, extra)) for n, (api, who, extra) in enumerate(
        [(api_a, f.user, {"providerId": f.pro["id"]}), (api_b, f.user, {"providerId": f.pro["id"]}),
         (api_a, f.pro, {}), (api_b, f.pro, {})])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    total = sum(len(ids) for ids in posted.values())
    orders = []
    for s in watchers:
        got = s.wait("message.created", count=total)
        ids = [int(e["id"]) for e in got]
        assert ids == sorted(set(ids)) and ids[0] > start
        order = [e["json"]["message"]["id"] for e in got]
        assert len(order) == total == len(set(order))
        for mine in posted.values():  # each writer's in its order
            assert [m for m in order if m in mine] == mine
        orders.append([(e["id"], m) for e, m in zip(got, order)])
    assert orders[0] == orders[1]
    again = Stream(b.url, token=f.user["token"], last_event_id=str(start), schema=stream_schema(b))
    got = again.wait("message.created", count=total)
    assert [(e["id"], e["json"]["message"]["id"]) for e in got] == orders[0]
    for s in (*watchers, again):
        assert not s.problems, s.problems
        s.close()


def test_a_token_ended_on_one_instance_ends_its_streams_on_the_other(pair):
    """A logout through A ends the token's stream held by B within a second (the outbox tells
    B's hub, woken by the NOTIFY), without the minute's re-check: the clock does not move."""
    a, b = pair
    api_a = Api(a)
    u = api_a.register_user()
    other = ok(api_a.post("/auth/login", json={"email": u["email"], "password": u["password"]}, ip=unique_ip()))
    s, kept = (Stream(b.url, token=t, schema=stream_schema(b)) for t in (u["token"], other["token"]))
    for x in (s, kept):
        assert x.wait_head() == 200
        eventually(lambda: x.ids, 10, "the stream's position")
    ok(api_a.post("/auth/logout", token=u["token"]))
    ended_within(s)
    still_open(kept)
    for x in (s, kept):
        assert not x.problems, x.problems
        x.close()


# ---------------------------------------------------------------- the TypeScript helper


@pytest.mark.once  # the client's helper: the server side of the same streams is tested in every pass
def test_the_typescript_events_helper(server, tmp_path):
    """clients/typescript/src/events.ts: tsc type-checks its test against the generated types, and
    Node runs it against the server (typed events, a dropped connection resumed from
    Last-Event-ID, a ticket, the parser)."""
    bin_dir = os.path.join(ROOT, "node_modules", ".bin")
    client = os.path.join(ROOT, "clients", "typescript")
    p = subprocess.run([os.path.join(bin_dir, "tsc"), "-p", os.path.join(client, "tsconfig.json"), "--outDir",
                        str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # the package is an ES module; its imports resolve to the repository's pinned npm packages
    (tmp_path / "package.json").write_text('{"type": "module", "private": true}')
    os.symlink(os.path.join(ROOT, "node_modules"), tmp_path / "node_modules")
    env = dict(os.environ, MARKETPLACE_URL=server.url)
    p = subprocess.run(["node", "--test", str(tmp_path / "test" / "events.test.js")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    assert "# pass 3" in p.stdout and "# fail 0" in p.stdout
