"""Retention (issue 35; docs/operations.md "Retention"): every table that grows with time is
pruned by its owner's periodic task once its period has passed, and not before: the
live-update outbox, idempotency keys, rate-limit counters, finished background work, ended
tokens, email changes and their requests, reset links, lapsed elevations, and the development
mail outbox's files. The periods are shortened through their RETAIN_* settings (outside
production) and the test clock moves the tasks' hourly slots."""
import datetime
import os
import time

from conftest import ADMIN_ENV, Api, admin_login, unique_email, unique_ip
from flow_helpers import Flow, ok
from helpers import eventually
from staff_helpers import make_staff, request_elevation, sql

HOUR = 3600 * 1000
SHORT = {"RETAIN_EVENTS": "2h", "RETAIN_IDEMPOTENCY": "2h", "RETAIN_RATE_LIMITS": "2h", "RETAIN_QUEUE": "2h",
         "RETAIN_ELEVATIONS": "2h", "RETAIN_MAIL": "1s"}


def one(server, pg_cluster, statement):
    return int(sql(server, pg_cluster, statement)[0][0])


def test_each_table_is_pruned_after_its_period(server_factory, pg_cluster):
    # the outbox's events, finished background work and idempotency keys are pruned 2 rows a
    # transaction here (500 in production): each prune's loop over its batches, every one gone
    srv = server_factory(**ADMIN_ENV, **SHORT, TEST_LIMIT="prune-batch:2")
    api = Api(srv)
    count = lambda statement: one(srv, pg_cluster, statement)  # noqa: E731
    f = Flow(api).quoted()  # events, emails (queue rows, .eml files), a registration counter
    for n in range(3):
        ok(api.post("/jobs", token=f.user["token"], headers={"Idempotency-Key": f"retention-{n}"},
                    json={"service": "lawncare", "isAsap": True}), 201)
    ok(api.post("/auth/change-email", token=f.user["token"],
                json={"currentPassword": "password123", "email": unique_email("moving")}))
    r = api.post("/auth/forgot-password", json={"email": f.user["email"], "role": "user"}, ip=unique_ip())
    assert r.status_code == 200, r.text
    admin = admin_login(api)
    staff = make_staff(api, "customer_support", admin)
    request_elevation(api, staff, f.user["id"])  # nobody answers it: it lapses after 24 hours
    ok(api.post("/auth/logout", token=staff["token"]))  # a 12-hour token, ended
    api.wait_queue_idle()
    mail_dir = os.path.join(srv.data_dir, "mail")
    last_event = count("SELECT MAX(id) FROM events")
    tables = {
        "events": f"SELECT COUNT(*) FROM events WHERE id <= {last_event}",
        "idempotency_keys": "SELECT COUNT(*) FROM idempotency_keys WHERE key LIKE 'retention-%'",
        "rate_limits": "SELECT COUNT(*) FROM rate_limits WHERE key LIKE 'register:%'",
        "job_queue": "SELECT COUNT(*) FROM job_queue WHERE kind = 'email' AND status = 'done'",
        "ended_tokens": "SELECT COUNT(*) FROM ended_tokens",
        "email_changes": f"SELECT COUNT(*) FROM email_changes WHERE account_id = '{f.user['id']}'",
        "email_change_requests": f"SELECT COUNT(*) FROM email_change_requests WHERE account_id = '{f.user['id']}'",
        "password_reset_tokens": f"SELECT COUNT(*) FROM password_reset_tokens WHERE email = '{f.user['email']}'",
        "elevation_requests": f"SELECT COUNT(*) FROM elevation_requests WHERE staff_id = '{staff['id']}'",
    }
    assert all(count(q) > 0 for q in tables.values()), {t: count(q) for t, q in tables.items()}
    assert all(count(tables[t]) > 2 for t in ("events", "idempotency_keys", "job_queue"))  # more than a batch
    assert any(n.endswith(".eml") for n in os.listdir(mail_dir))

    def left():
        return {t: count(q) for t, q in tables.items() if count(q) > 0}

    tasks = ("SELECT COUNT(*) FROM job_queue WHERE status = 'done' AND kind IN "
             "('housekeeping', 'events_prune', 'auth_prune', 'staff_prune')")

    def sweep(ms):
        """Moves the clock into a new hourly slot and waits until every pruning task ran in it."""
        done = count(tasks)
        api.advance_clock(ms)
        eventually(lambda: count(tasks) >= done + 4, 20, "the pruning tasks of the new slot")

    sweep(HOUR)  # an hour on: nothing has passed its period yet
    assert set(left()) == set(tables), left()
    time.sleep(1.5)  # the mail files' period is counted by the real clock
    sweep(2 * HOUR)  # three hours: the 2-hour periods have passed
    assert set(left()) == {"ended_tokens", "email_changes", "email_change_requests", "password_reset_tokens",
                           "elevation_requests"}, left()
    assert not [n for n in os.listdir(mail_dir) if n.endswith(".eml")]
    sweep(11 * HOUR)  # 14 hours: the staff token would have expired, so its ended id goes
    assert set(left()) == {"email_changes", "email_change_requests", "password_reset_tokens",
                           "elevation_requests"}, left()
    sweep(12 * HOUR)  # 26 hours: the email change and its request expired, the reset link a day
    # past its hour; the elevation lapsed (EXPIRED) now and is kept RETAIN_ELEVATIONS from now
    assert set(left()) == {"elevation_requests"}, left()
    sweep(3 * HOUR)
    assert left() == {}, left()


def test_processor_event_ids_are_kept_30_days(server_factory, pg_cluster):
    srv = server_factory()
    api = Api(srv)
    iso = api.advance_clock(0)  # the service clock, "2026-11-27T23:31:05.123Z"
    now = int(datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    for name, age_days in (("evt_old", 31), ("evt_recent", 28)):
        sql(srv, pg_cluster, f"INSERT INTO webhook_events (id, type, received_at) "
                             f"VALUES ('{name}', 'charge.refunded', {now - age_days * 24 * HOUR})")
    api.advance_clock(24 * HOUR)  # the daily slot: webhook_events_prune runs
    ids = lambda: sorted(r[0] for r in sql(srv, pg_cluster, "SELECT id FROM webhook_events"))  # noqa: E731
    eventually(lambda: ids() == ["evt_recent"], 20, "the 31-day-old event id pruned")
