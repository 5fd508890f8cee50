"""Crash safety (issue 14, item 5): the service is killed with SIGKILL in the middle of
concurrent writes (jobs, quotes, acceptances with their card authorizations through the
simulated processor, messages, photos, password-reset emails) and started again. Every write
that was answered 2xx is there and consistent, every email queued by such a write is sent,
exactly once, and no temporary upload file is left behind. Runs on the session's engine."""
import os
import re
import threading
import time

import requests

from conftest import Api, unique_ip
from flow_helpers import customer, private_zip, provider
from helpers import eventually, png_bytes
from test_system import db_rows

import pytest

pytestmark = pytest.mark.pooler

LOAD_SECONDS = 2.5
# work a killed process had claimed runs again once its lease lapses (real clock): 2 s here,
# not the default 20 s
SHORT_LEASE_MS = 2000


class Load:
    """Client threads that record what the service acknowledged."""

    def __init__(self, srv, customers, pros):
        self.srv, self.customers, self.pros = srv, customers, pros
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.jobs, self.quotes, self.accepted, self.messages, self.photos, self.resets = [], [], [], [], [], []

    def call(self, method, path, token=None, **kw):
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            return requests.request(method, self.srv.url + path, headers=headers, timeout=10, **kw)
        except requests.RequestException:
            return None  # killed mid-request: not acknowledged

    def keep(self, name, value):
        with self.lock:
            getattr(self, name).append(value)

    def customer_loop(self, i):
        user, n = self.customers[i], 0
        while not self.stop.is_set():
            n += 1
            r = self.call("POST", "/jobs", user["token"], json={
                "service": "lawncare", "description": f"Crash job {i}-{n}", "preferredAt": "2031-05-01T09:00:00.000Z"})
            if r is None or r.status_code != 201:
                continue
            job = r.json()["id"]
            self.keep("jobs", (job, user["token"]))
            quote_ids = []
            for pro in self.pros:
                q = self.call("POST", "/quotes", pro["token"], json={"jobId": job, "amount": 40 + n})
                if q is not None and q.status_code == 201:
                    quote_ids.append(q.json()["id"])
                    self.keep("quotes", (job, q.json()["id"], user["token"]))
                m = self.call("POST", f"/jobs/{job}/messages", pro["token"], json={"content": f"hello {i}-{n}"})
                if m is not None and m.status_code == 201:
                    self.keep("messages", (job, m.json()["id"], pro["token"]))
            p = self.call("POST", f"/jobs/{job}/images", user["token"],
                          files={"images": ("p.png", png_bytes(seed=300 + n % 50), "image/png")})
            if p is not None and p.status_code == 200:
                self.keep("photos", (job, user["token"], len(p.json()["images"])))
            if quote_ids:
                a = self.call("POST", f"/quotes/{quote_ids[0]}/accept", user["token"])
                if a is not None and a.status_code == 200:
                    self.keep("accepted", (job, user["token"]))
            f = self.call("POST", "/auth/forgot-password", headers={"X-Forwarded-For": unique_ip()},
                          json={"email": user["email"], "role": "user"})
            if f is not None and f.status_code == 200:
                self.keep("resets", user["email"])


def email_rows(srv, where):
    return db_rows(srv.env["DATABASE_URL"], srv.data_dir, f"SELECT id, status FROM job_queue WHERE kind = 'email' {where}")


def test_sigkill_mid_load_loses_nothing_acknowledged(server_factory):
    srv = server_factory(QUEUE_WORKERS="2", QUEUE_LEASE_MS=str(SHORT_LEASE_MS))
    api = Api(srv)
    z = private_zip()
    pros = [provider(api, [z]) for _ in range(2)]
    customers = [customer(api, z, card="pm_card_visa") for _ in range(4)]
    load = Load(srv, customers, pros)
    threads = [threading.Thread(target=load.customer_loop, args=(i,)) for i in range(len(customers))]
    for t in threads:
        t.start()
    time.sleep(LOAD_SECONDS)
    # on a loaded machine the first acceptances take longer: the kill waits for one (and for
    # work of every kind), so what follows always has acknowledged writes to look for
    eventually(lambda: len(load.jobs) >= 4 and load.quotes and load.accepted, 30, "the load getting going",
               interval=0.1)
    srv.proc.kill()  # SIGKILL: no shutdown path runs
    srv.proc.wait()
    load.stop.set()
    for t in threads:
        t.join(timeout=30)
    assert len(load.jobs) >= 4 and load.quotes and load.accepted, "the load did not get going"
    srv.log.close()
    srv.start()

    # every acknowledged record is there
    for job, token in load.jobs:
        r = api.get(f"/jobs/{job}", token=token)
        assert r.status_code == 200, r.text
    for job, quote, token in load.quotes:
        assert quote in [q["id"] for q in api.get(f"/jobs/{job}", token=token).json()["quotes"]]
    for job, message, token in load.messages:
        r = api.get(f"/jobs/{job}/messages", token=token)
        assert message in [m["id"] for m in r.json()["messages"]], r.text
    for job, token, count in load.photos:
        assert len(api.get(f"/jobs/{job}", token=token).json()["images"]) >= count

    # and consistent: a quoted job has its quote, an accepted one its accepted quote
    url, data = srv.env["DATABASE_URL"], srv.data_dir
    assert db_rows(url, data, "SELECT id FROM jobs j WHERE status = 'QUOTED' AND NOT EXISTS "
                              "(SELECT 1 FROM quotes q WHERE q.job_id = j.id)") == []
    assert db_rows(url, data, "SELECT id FROM jobs j WHERE status = 'ACCEPTED' AND NOT EXISTS "
                              "(SELECT 1 FROM quotes q WHERE q.job_id = j.id AND q.status = 'ACCEPTED')") == []
    # an acceptance whose authorization the crash cut off gets it from its follow-up
    api.advance_clock(3 * 60 * 1000)
    eventually(lambda: db_rows(url, data, "SELECT id FROM jobs j WHERE status = 'ACCEPTED' AND NOT EXISTS "
                                          "(SELECT 1 FROM payments p WHERE p.job_id = j.id AND p.kind = 'job')"),
               30, "no accepted job without a payment", interval=0.2, until=lambda rows: rows == [])
    for job, token in load.accepted:
        payment = api.get(f"/jobs/{job}", token=token).json()["payment"]
        assert payment and payment["status"] == "AUTHORIZED", (job, payment)

    # every queued email is sent (work claimed by the dead process is claimed again once its
    # lease, 2 s here, runs out), and exactly once
    eventually(lambda: email_rows(srv, "AND status <> 'done'"), 15, "every email sent", interval=0.2,
               until=lambda rows: rows == [])
    api.wait_queue_idle()
    sent = [m["headers"]["message-id"] for m in srv.mails()]
    assert len(sent) == len(set(sent)), "an email was sent twice"
    rows = email_rows(srv, "")
    assert sorted(re.sub(r"^<|@marketplace>$", "", s) for s in sent) == sorted(r[0] for r in rows)
    for email in set(load.resets):
        assert len(srv.mails(email)) >= load.resets.count(email)

    # no temporary file of the dead process is left; the live one holds only its lock
    tmp = os.path.join(srv.data_dir, "tmp")
    dirs = os.listdir(tmp)
    assert len(dirs) == 1 and os.listdir(os.path.join(tmp, dirs[0])) == [".lock"], \
        {d: os.listdir(os.path.join(tmp, d)) for d in dirs}


@pytest.mark.once
def test_crashed_process_temporary_files_are_removed_at_start(server_factory):
    """Directly: files of a process that died mid-upload go; a live instance's stay."""
    srv = server_factory()
    tmp = os.path.join(srv.data_dir, "tmp")
    dead = os.path.join(tmp, "99999-deadbeef")
    os.makedirs(dead)
    with open(os.path.join(dead, ".lock"), "w"):
        pass
    with open(os.path.join(dead, "upload-abc123"), "wb") as f:
        f.write(b"half a photo")
    with open(os.path.join(tmp, "upload-old"), "wb") as f:  # the layout before per-process directories
        f.write(b"older half")
    srv.restart()
    dirs = os.listdir(tmp)
    assert len(dirs) == 1 and dirs[0] != "99999-deadbeef", dirs


# ---------------------------------------------------------------- crashes at chosen points
# CRASH_POINT (APP_ENV=test only) makes the process SIGKILL itself where a crash leaves work
# half done, so each of these runs the case that a random kill hits only sometimes.

def crash_then_restart(srv, call):
    """Runs call (which makes the server reach its CRASH_POINT), expects no answer, waits for
    the process to die, and starts it again without the crash point."""
    try:
        r = call()
    except requests.RequestException:
        r = None
    assert r is None, f"the server answered {r.status_code} {r.text} instead of crashing"
    assert srv.proc.wait(timeout=10) == -9
    srv.log.close()
    srv.env.pop("CRASH_POINT")
    srv.start()


def test_crash_after_an_acceptance_commits_authorizes_in_its_follow_up(server_factory):
    srv = server_factory(CRASH_POINT="accept-committed")
    api = Api(srv)
    z = private_zip()
    pro = provider(api, [z])
    user = customer(api, z, card="pm_card_visa")
    job = api.post("/jobs", token=user["token"], json={"service": "lawncare", "description": "Crash",
                                                        "preferredAt": "2031-05-01T09:00:00.000Z"}).json()["id"]
    q = api.post("/quotes", token=pro["token"], json={"jobId": job, "amount": 80})
    assert q.status_code == 201, q.text
    crash_then_restart(srv, lambda: api.post(f"/quotes/{q.json()['id']}/accept", token=user["token"]))
    got = api.get(f"/jobs/{job}", token=user["token"]).json()
    assert got["status"] == "ACCEPTED" and got["payment"] is None  # committed, not yet authorized
    api.advance_clock(3 * 60 * 1000)
    # the payment row shows (FAILED, authorization pending) while the processor is asked
    payment = eventually(lambda: api.get(f"/jobs/{job}", token=user["token"]).json()["payment"], 15,
                         "the follow-up authorizes the payment", interval=0.1,
                         until=lambda p: p is not None and p["status"] == "AUTHORIZED")
    assert payment["amount"] == 94.4, payment
    (done,) = srv.wait_log(lambda line: line.get("kind") == "payment_follow_up")
    assert done["outcome"] == "done", done


@pytest.mark.once
def test_crash_after_an_email_is_written_does_not_send_it_again(server_factory):
    srv = server_factory(CRASH_POINT="email-written", QUEUE_LEASE_MS=str(SHORT_LEASE_MS))
    api = Api(srv)
    user = api.register_user()
    try:  # the worker may write the email (and die) before the answer leaves
        assert api.post("/auth/forgot-password", json={"email": user["email"], "role": "user"}).status_code == 200
    except requests.ConnectionError:
        pass
    srv.proc.wait(timeout=15)  # the worker dies once the message is in the outbox
    assert srv.proc.returncode == -9
    (first,) = srv.mails(user["email"])
    srv.log.close()
    srv.env.pop("CRASH_POINT")
    srv.start()
    # the row is claimed again once the dead worker's lease (2 s here) runs out, and finds its file
    # (well before the default 20 s lease would end: the short one is what frees it)
    eventually(lambda: email_rows(srv, "AND status <> 'done'"), 10, "the email's queue row finished", interval=0.2,
               until=lambda rows: rows == [])
    again = [m["raw"] for m in srv.mails(user["email"])]
    assert again == [first["raw"]]
    runs = srv.wait_log(lambda line: line.get("kind") == "email" and line.get("msg") == "background job done")
    assert [line["attempt"] for line in runs] == [2], runs


@pytest.mark.once
def test_crash_mid_upload_leaves_no_temporary_file(server_factory):
    srv = server_factory(CRASH_POINT="upload-received")
    api = Api(srv)
    pro = api.register_provider()
    crash_then_restart(srv, lambda: api.post("/providers/me/logo", token=pro["token"],
                                             files={"logo": ("logo.png", png_bytes(seed=77), "image/png")}))
    tmp = os.path.join(srv.data_dir, "tmp")
    (live,) = os.listdir(tmp)
    assert os.listdir(os.path.join(tmp, live)) == [".lock"]
    assert api.get("/providers/me", token=pro["token"]).json()["logoUrl"] is None
