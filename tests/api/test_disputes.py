"""Disputes (issue 30): chargebacks and inquiries recorded from the processor's charge.dispute.*
events (created, funds_withdrawn, updated, funds_reinstated, closed) and shown as the Payment
JSON's `dispute`; the job's unpaid transfers held while a dispute is open (past the report
window), released when it is won or an inquiry closes, cancelled when it is lost, and reversed
when it is lost after the payout, the part the processor will not reverse becoming the
provider's negative balance netted from its next transfer; the provider notified and every
customer_support staff member emailed; GET /staff/disputes (roles, filters, paging, each row
with the job's photos as signed urls); POST /staff/disputes/:id/evidence (text, the job's and
its messages' photos sent as PDFs, audited; every refusal changes nothing); refunds refused
while a dispute is open; the customer's receipts; and, against the fake Stripe only, what the
service's PaymentIntents and transfers carry and a partial capture made in Stripe's Dashboard.

Every behaviour runs against both processors, as test_payouts.py does: the simulated one (its
objects in processor_sim_objects; its test cards dispute each charge right after it succeeds
and its dispute events reach the service as queued work) and the real Stripe client against
tests/api/fake_stripe.py (its test cards dispute the same way; the events Stripe would send are
signed and posted to POST /webhooks by the test). A dispute opened after the payout, which the
test cards cannot make, is the fake's `open_dispute` with Stripe, and with the simulated
processor the events Stripe would send, signed and posted as webhooks. Against the fake Stripe
only: the events one at a time, evidence whose answers were lost, and a dispute whose events
arrive before the service recorded the tip it disputes. The clock moves by days, so each
processor has a server of its own; each test makes its own provider, customers and jobs and
asserts on them only; after the last, money is conserved on both servers (money.py). One test
runs on the session's shared server, so that both routes answer a success there (route
coverage).
"""
import datetime
import json
import re
import urllib.parse
import uuid

import pytest
import requests

from conftest import Api, admin_login, sign_webhook
from flow_helpers import FILE_URL_RE, ID_RE, accept, customer, image_files, ok, post_job, private_zip, provider, \
    quote, step
from helpers import error_body, eventually, pages, png_bytes
from processor_worlds import started_fake_stripe, world_in_step, worlds_of
from staff_helpers import make_staff
from test_payments import db, event, parse_iso, server_now
from test_payouts import DAY_MS, HOUR_MS, STRIPE_ENV, Job, World, new_provider, paid_mails, past_window, \
    payouts, relogin, transfer, wait_transfer

DISPUTE_CARD = "pm_card_createDispute"
INQUIRY_CARD = "pm_card_createDisputeInquiry"
VISA = "pm_card_visa"
EVIDENCE_DAYS = datetime.timedelta(days=7)
DISPUTE_FIELDS = {"id", "processorDisputeId", "jobId", "paymentId", "paymentKind", "status", "reason", "amount",
                  "lostAmount", "evidenceDueBy", "fundsWithdrawn", "evidenceSubmittedAt", "closedAt", "createdAt",
                  "job", "customer", "provider", "files"}
DISPUTED_REFUND = error_body(409, "This payment is disputed: answer the dispute instead of refunding it")
CLOSED = error_body(409, "This dispute is closed")
ALREADY = error_body(409, "Evidence was already submitted for this dispute")
PAST_DUE = error_body(409, "The deadline for this dispute's evidence has passed")
NOT_FOUND = error_body(404, "Dispute not found")
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
RECEIPT = "Your receipt: "


# ---------------------------------------------------------------- the two processors

class DisputeWorld(World):
    """test_payouts' World (a server of its own, its processor, its staff) with what disputes
    need: technical_support staff too, and the processor's dispute events delivered."""

    def __init__(self, mode, server, fake=None):
        super().__init__(mode, server, fake)
        admin = admin_login(self.api)
        self.staff["technical_support"] = make_staff(self.api, "technical_support", admin=admin)
        self.delivered = set()  # Stripe events already posted
        self.crafted = {}       # intent -> the dispute whose events the test posted (simulated processor)

    def post_event(self, ev):
        """One event as Stripe's webhook delivers it: signed with the endpoint's secret at the
        service's clock."""
        raw = json.dumps(ev)
        header = sign_webhook(raw, timestamp=server_now(self.api).timestamp())
        r = self.api.post("/webhooks", data=raw, headers={"Content-Type": "application/json",
                                                          "Stripe-Signature": header})
        assert (r.status_code, r.json()) == (200, {"received": True, "duplicate": False}), r.text

    def deliver(self, intent, types=None):
        """What the processor announced about the disputes of intent reaches the service: Stripe's
        events (those of `types` only, when given) posted in order; the simulated processor's,
        queued to the service itself, applied. Returns the types posted."""
        posted = []
        if self.fake:
            for ev in self.fake.events_of():
                if ev["id"] in self.delivered or not ev["type"].startswith("charge.dispute.") or \
                        ev["data"]["object"].get("payment_intent") != intent or (types and ev["type"] not in types):
                    continue
                self.delivered.add(ev["id"])
                self.post_event(ev)
                posted.append(ev["type"])
        self.api.wait_queue_idle()
        return posted

    def dispute_later(self, job, cents=None):
        """The cardholder's bank disputes the job's charge now, all of it or `cents` (the test cards
        dispute all of it, and only at the charge): the fake's open_dispute with Stripe; for the
        simulated processor, the events Stripe would send, signed and posted."""
        intent = job.intent()
        cents = int(round(job.payment()["amount"] * 100)) if cents is None else cents
        if self.fake:
            self.fake.open_dispute(intent, amount=cents)
            self.deliver(intent)
            return
        now = int(server_now(self.api).timestamp())
        du = {"id": f"du_{uuid.uuid4().hex[:24]}", "object": "dispute", "amount": cents,
              "charge": self.intent_charge(intent), "payment_intent": intent, "currency": "usd", "created": now,
              "reason": "fraudulent", "status": "needs_response", "is_charge_refundable": False, "livemode": False,
              "metadata": {}, "evidence_details": {"due_by": now + 7 * 86400, "has_evidence": False,
                                                   "past_due": False, "submission_count": 0}}
        self.crafted[intent] = du
        for type_ in ("charge.dispute.created", "charge.dispute.funds_withdrawn"):
            self.post_event(event(type_, du))
        self.api.wait_queue_idle()

    def lose(self, job):
        """The dispute of the job is lost: losing_evidence submitted (Stripe's test mode), or the
        closing event of a dispute the test made up."""
        intent = job.intent()
        if intent in self.crafted:
            self.post_event(event("charge.dispute.closed", dict(self.crafted[intent], status="lost")))
            self.api.wait_queue_idle()
            return
        ok(submit(self, dispute_of(self, job)["id"], "losing_evidence"))
        self.deliver(intent)

    def sim_object(self, ident):
        [(data,)] = db(self.server, f"SELECT data FROM processor_sim_objects WHERE id = '{ident}'")
        return json.loads(data)

    def audits(self, dispute_id):
        return db(self.server, "SELECT actor_id, actor_role, target_role, body FROM audit_log "
                               f"WHERE action = 'dispute.evidence' AND target_id = '{dispute_id}' ORDER BY seq")


@pytest.fixture(scope="module")
def fake_stripe():
    yield from started_fake_stripe()


@pytest.fixture(scope="module")
def worlds(make_server, fake_stripe):
    # after every dispute test: each cent charged is accounted for, lost disputes included
    yield from worlds_of(make_server, fake_stripe, DisputeWorld, {**STRIPE_ENV, "STRIPE_FILES_BASE": fake_stripe.url})


@pytest.fixture(params=["simulated", "stripe"])
def w(request, worlds, fake_stripe):
    yield from world_in_step(worlds, fake_stripe, request.param)


@pytest.fixture
def sw(worlds, fake_stripe):
    yield from world_in_step(worlds, fake_stripe, "stripe")


# ---------------------------------------------------------------- helpers

def completed_with_the_dispute_card(api, amount):
    """The id of a new job, quoted at amount by a provider of a private ZIP, paid with DISPUTE_CARD and completed."""
    pro = provider(api, [private_zip()])
    user = customer(api, pro["body"]["serviceZips"][0], DISPUTE_CARD)
    job_id = post_job(api, user)["id"]
    accept(api, user, quote(api, pro, job_id, amount)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, pro, job_id, status)
    return job_id


def key_of(url):
    """A stored file's key (its id in `files`) from its signed url."""
    return urllib.parse.urlsplit(url).path.rsplit("/", 1)[1]


class DJob(Job):
    """A customer's job paid with `card`: quoted by pro at amount, accepted, and completed unless
    told otherwise (with photos: one of the customer's, two before, one after, and a photo
    message from each side); what the processor announced about its disputes delivered."""

    def __init__(self, w, pro, amount=100, card=DISPUTE_CARD, complete=True, photos=False, seed=1):
        self.w, self.pro, self.photos, self.seed = w, pro, photos, seed
        self.user = customer(w.api, pro["body"]["serviceZips"][0], card)
        self.id = post_job(w.api, self.user)["id"]
        self.keys = {"job": [], "before": [], "after": [], "message": []}
        if photos:
            got = ok(w.api.post(f"/jobs/{self.id}/images", token=self.user["token"],
                                files=image_files(1, seed=seed * 10)))
            self.keys["job"] = [key_of(u) for u in got["images"]]
        self.quote_id = quote(w.api, pro, self.id, amount)["id"]
        accept(w.api, self.user, self.quote_id)
        self.done = None
        if complete:
            self.complete()

    def complete(self):
        api, pro = self.w.api, self.pro
        if self.photos:
            step(api, pro, self.id, "ON_THE_WAY")
            ok(api.post(f"/jobs/{self.id}/start", token=pro["token"], files=image_files(2, seed=self.seed * 10 + 1)))
            for who, n in ((self.user, 1), (pro, 2)):
                msg = ok(api.post(f"/jobs/{self.id}/messages/photo", token=who["token"],
                                  files={"photo": ("p.png", png_bytes(self.seed * 1000 + n), "image/png")}), 201)
                self.keys["message"].append(key_of(msg["content"][len("[IMAGE]"):]))
            job = ok(api.post(f"/jobs/{self.id}/complete", token=pro["token"],
                              files=image_files(1, seed=self.seed * 10 + 2)))
            self.keys["before"] = [key_of(u) for u in job["beforeImages"]]
            self.keys["after"] = [key_of(u) for u in job["afterImages"]]
            self.done = parse_iso(job["updatedAt"])
        else:
            super().complete()
        self.w.deliver(self.intent())
        return self

    def intent(self):
        return self.payment()["processorPaymentIntentId"]

    def files(self):
        """(id, source) of every photo evidence may use, sorted."""
        return sorted((k, source) for source, keys in self.keys.items() for k in keys)


def disputes(w, token=None, **params):
    """GET /staff/disputes, every page."""
    got = pages(w.api, "/staff/disputes", token or w.staff_token("customer_support"), params)
    rows = [d for page in got for d in page]
    assert all(set(d) == DISPUTE_FIELDS for d in rows), rows
    return rows


def dispute_of(w, job):
    [d] = [d for d in disputes(w) if d["jobId"] == job.id]
    return d


def without_urls(d):
    """A listed dispute without its signed urls (they change from one hour's window to the next)."""
    return {**d, "files": sorted((f["id"], f["source"]) for f in d["files"])}


def submit(w, dispute_id, text, file_ids=None, token=None, body=None):
    if body is None:
        body = {"text": text}
        if file_ids is not None:
            body["fileIds"] = file_ids
    return w.api.post(f"/staff/disputes/{dispute_id}/evidence", token=token or w.staff_token("customer_support"),
                      json=body)


def notes(w, pro, job):
    return [n["title"] for n in ok(w.api.get("/providers/me/notifications", token=pro["token"]))
            if n["jobId"] == job.id]


def refund(w, job, **body):
    return w.api.post(f"/staff/payments/{job.id}/refund", token=w.staff_token("customer_support"),
                      json={"reason": "The customer says the lawn was not mowed", **body})


def receipts(w, user):
    return [m for m in w.server.mails(user["email"]) if m["subject"].startswith(RECEIPT)]


def assert_due(dispute, done):
    """Evidence is due 7 days after the dispute opened, right after the charge at completion."""
    due = parse_iso(dispute["evidenceDueBy"])
    assert abs((due - (done + EVIDENCE_DAYS)).total_seconds()) < 10, (dispute, done)


def evidence_calls(w, d):
    return w.fake.calls("POST", f"/v1/disputes/{d['processorDisputeId']}")


def processor_untouched(w, d, files_before):
    """Nothing of an evidence request reached the processor: the dispute there has none, and no
    file was uploaded."""
    if w.fake:
        assert evidence_calls(w, d) == []
        assert len(w.fake.calls("POST", "/v1/files")) == files_before
        du = w.fake.get(d["processorDisputeId"])
        assert (du["status"], du["evidence_details"]["submission_count"]) == ("needs_response", 0)
    else:
        du = w.sim_object(d["processorDisputeId"])
        assert (du["status"], du["evidence_details"]["submission_count"]) == ("needs_response", 0)
        assert du["evidence"] == {}
        assert files_count(w) == files_before


def files_count(w):
    if w.fake:
        return len(w.fake.calls("POST", "/v1/files"))
    return int(db(w.server, "SELECT count(*) FROM processor_sim_objects WHERE kind = 'file'")[0][0])


# ================================================================ opening: who is told, what is held

def test_a_dispute_holds_the_transfer_and_tells_the_provider_and_support(w):
    pro = new_provider(w)
    other_support = make_staff(w.api, "customer_support", admin=admin_login(w.api))
    job = DJob(w, pro, amount=100)
    p = job.payment()
    assert (p["status"], p["amount"], p["refundedAmount"]) == ("PAID", 118, 0)
    assert p["dispute"] == {"status": "needs_response", "reason": "fraudulent", "amount": 118,
                            "evidenceDueBy": p["dispute"]["evidenceDueBy"]}
    assert_due(p["dispute"], job.done)
    # the provider's view of the job shows it too
    assert ok(w.api.get(f"/jobs/{job.id}", token=pro["token"]))["payment"]["dispute"] == p["dispute"]
    held = transfer(w.api, pro, job.id)
    assert (held["status"], held["amount"]) == ("on_hold", 100)
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 100, "paid": 0, "reversed": 0, "balance": 0}
    assert "Payment disputed" in notes(w, pro, job)
    row = dispute_of(w, job)
    assert (row["status"], row["fundsWithdrawn"], row["lostAmount"], row["closedAt"]) == \
        ("needs_response", True, 0, None)
    # every customer_support member is emailed, once; nobody else
    subject = f"Payment disputed: $118.00 for job {job.id}"
    for member in (w.staff["customer_support"], other_support):
        [mail] = eventually(lambda: [m for m in w.server.mails(member["email"]) if m["subject"] == subject], 20,
                            "the support email", interval=0.1)
        assert "fraudulent" in mail["body"] and row["id"] in mail["body"]
        assert p["dispute"]["evidenceDueBy"][:10] in mail["body"]
    w.api.wait_queue_idle()
    for someone in (w.staff["professional_support"], w.staff["technical_support"], job.user, pro):
        assert not [m for m in w.server.mails(someone["email"]) if m["subject"].startswith("Payment disputed")]
    # held past the report window
    past_window(w, 73, pro)
    w.api.wait_queue_idle()
    assert transfer(w.api, pro, job.id)["status"] == "on_hold" and w.transfers(pro) == []
    assert payouts(w.api, pro)["totals"]["onHold"] == 100


def test_without_customer_support_staff_the_support_address_is_emailed(server_factory):
    """A server with no customer_support member (simulated processor): SUPPORT_EMAIL gets it."""
    api = Api(server_factory(SUPPORT_EMAIL="disputes-desk@example.com"))
    job_id = completed_with_the_dispute_card(api, 60)
    [mail] = eventually(lambda: [m for m in api.server.mails("disputes-desk@example.com")
                                 if m["subject"] == f"Payment disputed: $70.80 for job {job_id}"], 20,
                        "the email to the support address", interval=0.1)
    assert "fraudulent" in mail["body"]


def test_a_dispute_of_a_charge_the_service_did_not_make_changes_nothing(w):
    before = [without_urls(d) for d in disputes(w)]
    now = int(server_now(w.api).timestamp())
    du = {"id": f"du_{uuid.uuid4().hex[:24]}", "object": "dispute", "amount": 5000, "charge": "ch_elsewhere",
          "payment_intent": "pi_made_elsewhere", "currency": "usd", "created": now, "reason": "fraudulent",
          "status": "needs_response", "evidence_details": {"due_by": now + 7 * 86400, "submission_count": 0}}
    for type_ in ("charge.dispute.created", "charge.dispute.funds_withdrawn"):
        w.post_event(event(type_, du))
    w.api.wait_queue_idle()
    assert [without_urls(d) for d in disputes(w)] == before


def test_funds_withdrawn_then_reinstated_show_in_the_list(sw):
    """Stripe's events posted one at a time: created opens the dispute (and holds the money)
    with the funds still there, funds_withdrawn marks them withdrawn, and once the dispute is
    won its funds_reinstated gives them back."""
    pro = new_provider(sw)
    job = DJob(sw, pro, complete=False)
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(sw.api, pro, job.id, status)
    intent = job.intent()
    assert sw.deliver(intent, types=["charge.dispute.created"]) == ["charge.dispute.created"]
    row = dispute_of(sw, job)
    assert (row["status"], row["fundsWithdrawn"]) == ("needs_response", False)
    assert transfer(sw.api, pro, job.id)["status"] == "on_hold"
    assert sw.deliver(intent, types=["charge.dispute.funds_withdrawn"]) == ["charge.dispute.funds_withdrawn"]
    assert dispute_of(sw, job)["fundsWithdrawn"] is True
    answer = ok(submit(sw, row["id"], "winning_evidence"))
    assert answer["status"] == "under_review"  # Stripe decides right after its answer
    assert sw.deliver(intent) == ["charge.dispute.updated", "charge.dispute.funds_reinstated",
                                  "charge.dispute.closed"]
    row = dispute_of(sw, job)
    assert (row["status"], row["fundsWithdrawn"], row["lostAmount"]) == ("won", False, 0)
    parse_iso(row["closedAt"])
    assert transfer(sw.api, pro, job.id)["status"] == "scheduled"
    # an event of a dispute that is closed changes nothing
    stale = sw.fake.events_of("charge.dispute.updated", payment_intent=intent)[-1]
    sw.post_event({**stale, "id": "evt_" + uuid.uuid4().hex})
    assert dispute_of(sw, job)["status"] == "won" and job.payment()["dispute"]["status"] == "won"


# ================================================================ outcomes

def test_a_won_dispute_releases_the_hold_and_the_transfer_goes_out(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100)
    past_window(w, 73, pro)
    w.api.wait_queue_idle()
    assert transfer(w.api, pro, job.id)["status"] == "on_hold"
    row = dispute_of(w, job)
    answer = ok(submit(w, row["id"], "winning_evidence"))
    assert answer["status"] in ("under_review", "won")  # Stripe decides after its answer, the simulator at once
    w.deliver(job.intent())
    won = dispute_of(w, job)
    assert (won["status"], won["fundsWithdrawn"], won["lostAmount"], won["amount"]) == ("won", False, 0, 118)
    parse_iso(won["closedAt"]), parse_iso(won["evidenceSubmittedAt"])
    p = job.payment()
    assert (p["status"], p["amount"], p["refundedAmount"], p["dispute"]["status"]) == ("PAID", 118, 0, "won")
    paid = wait_transfer(w.api, pro, job.id, "paid")
    assert (paid["amount"], paid["reversedAmount"], paid["netted"]) == (100, 0, 0)
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 0)]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 100, "reversed": 0, "balance": 0}
    assert "Dispute decided" in eventually(lambda: notes(w, pro, job), 10, "the outcome notification",
                                           until=lambda got: "Dispute decided" in got)
    # closed: no more evidence
    assert (lambda r: (r.status_code, r.json()))(submit(w, won["id"], "more")) == (409, CLOSED)
    assert without_urls(dispute_of(w, job)) == without_urls(won)


def test_a_lost_dispute_cancels_the_unpaid_transfer(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100)
    row = dispute_of(w, job)
    answer = ok(submit(w, row["id"], "losing_evidence"))
    assert answer["status"] in ("under_review", "lost")
    w.deliver(job.intent())
    lost = dispute_of(w, job)
    assert (lost["status"], lost["lostAmount"], lost["amount"], lost["fundsWithdrawn"]) == ("lost", 118, 118, True)
    parse_iso(lost["closedAt"])
    p = job.payment()
    assert (p["status"], p["amount"], p["refundedAmount"], p["dispute"]["status"]) == ("PAID", 118, 0, "lost")
    cancelled = transfer(w.api, pro, job.id)
    assert (cancelled["status"], cancelled["amount"]) == ("cancelled", 0)
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 0, "reversed": 0, "balance": 0}
    assert "Dispute decided" in eventually(lambda: notes(w, pro, job), 10, "the outcome notification",
                                           until=lambda got: "Dispute decided" in got)
    # the provider earns nothing, after the window too
    past_window(w, 73, pro)
    w.api.wait_queue_idle()
    assert transfer(w.api, pro, job.id)["status"] == "cancelled" and w.transfers(pro) == []
    # what the dispute took cannot be refunded again, nor answered again
    r = refund(w, job)
    assert (r.status_code, r.json()) == (409, error_body(409, "Nothing left to refund"))
    r = submit(w, lost["id"], "more")
    assert (r.status_code, r.json()) == (409, CLOSED)


def test_a_dispute_lost_after_the_payout_reverses_the_providers_share(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100, card=VISA)
    past_window(w, 73, pro)
    wait_transfer(w.api, pro, job.id, "paid")
    w.dispute_later(job)
    row = dispute_of(w, job)
    assert (row["status"], row["fundsWithdrawn"], row["amount"]) == ("needs_response", True, 118)
    assert job.payment()["dispute"]["status"] == "needs_response"
    assert transfer(w.api, pro, job.id)["status"] == "paid"  # already made: nothing to hold
    w.lose(job)
    assert dispute_of(w, job)["lostAmount"] == 118
    t = eventually(lambda: transfer(w.api, pro, job.id), 30, "the reversal", interval=0.1,
                   until=lambda t: t["reversedAmount"] == 100)
    assert (t["status"], t["amount"]) == ("reversed", 0)
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 10000)]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 0, "reversed": 100, "balance": 0}
    assert job.payment()["status"] == "PAID"
    # closed stays closed: a late event saying it is open changes nothing, and opens nothing again
    lost = dispute_of(w, job)
    opened = [ev for ev in (w.fake.events_of("charge.dispute.created", payment_intent=job.intent()) if w.fake else [])]
    late = opened[-1]["data"]["object"] if opened else w.crafted[job.intent()]
    w.post_event(event("charge.dispute.created", {**late, "status": "needs_response"}))
    w.api.wait_queue_idle()
    assert without_urls(dispute_of(w, job)) == without_urls(lost)
    assert job.payment()["dispute"]["status"] == "lost"
    assert (lambda t: (t["status"], t["amount"], t["reversedAmount"]))(transfer(w.api, pro, job.id)) == \
        ("reversed", 0, 100)
    assert notes(w, pro, job).count("Payment disputed") == 1
    subject = f"Payment disputed: $118.00 for job {job.id}"
    assert len([m for m in w.server.mails(w.staff["customer_support"]["email"]) if m["subject"] == subject]) == 1


def test_a_lost_share_the_processor_will_not_reverse_is_netted_from_the_next_transfer(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100, card=VISA)
    past_window(w, 73, pro)
    wait_transfer(w.api, pro, job.id, "paid")
    [(cents, _, _, _)] = w.transfers(pro)
    assert cents == 10000
    if w.fake:  # the provider's balance is gone: Stripe refuses the reversal
        [tr] = w.fake.transfers(w.account_id(pro))
        reversal_path = f"/v1/transfers/{tr['id']}/reversals"
        w.fake.fail_next("POST", reversal_path, status=400)
    else:  # the simulated account paid its balance out to its bank 2 days after the transfer
        w.advance(3 * DAY_MS)
        relogin(w.api, pro)
    w.dispute_later(job)
    w.lose(job)
    body = eventually(lambda: payouts(w.api, pro), 30, "the negative balance", interval=0.1,
                      until=lambda b: b["totals"]["balance"] == -100)
    assert body["totals"] == {"scheduled": 0, "onHold": 0, "paid": 100, "reversed": 0, "balance": -100}
    t = transfer(w.api, pro, job.id)
    assert (t["amount"], t["reversedAmount"]) == (0, 0)
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 0)]
    if w.fake:  # refused once, never asked again
        w.api.wait_queue_idle()
        assert len(w.fake.calls("POST", reversal_path)) == 1
    # the next transfer nets it
    nxt = DJob(w, pro, amount=150, card=VISA)
    past_window(w, 73, pro)
    paid = wait_transfer(w.api, pro, nxt.id, "paid")
    assert (paid["amount"], paid["netted"], paid["reversedAmount"]) == (150, 100, 0)
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 0), (5000, 0)]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 150, "reversed": 0, "balance": 0}
    mail = eventually(lambda: [m for m in paid_mails(w, pro) if nxt.id in m["body"]], 20, "the payout email",
                      interval=0.1)
    assert mail[0]["subject"] == "You've been paid $50.00"
    if w.fake:
        assert len(w.fake.calls("POST", reversal_path)) == 1


def test_a_partial_dispute_lost_takes_its_share_and_bounds_refunds(w):
    """A dispute of 59.00 of the 118.00, lost before the payout: the provider's transfer gives
    back its share (100 x 59 / 118 = 50) and goes out with the rest once the hold ends; refunds
    are then bounded by what the dispute left."""
    pro = new_provider(w)
    job = DJob(w, pro, amount=100, card=VISA)
    w.dispute_later(job, cents=5900)
    assert job.payment()["dispute"]["amount"] == 59
    held = transfer(w.api, pro, job.id)
    assert (held["status"], held["amount"]) == ("on_hold", 100)
    w.lose(job)
    lost = dispute_of(w, job)
    assert (lost["status"], lost["amount"], lost["lostAmount"]) == ("lost", 59, 59)
    t = transfer(w.api, pro, job.id)
    assert (t["status"], t["amount"]) == ("scheduled", 50)
    p = job.payment()
    assert (p["status"], p["amount"], p["refundedAmount"], p["dispute"]["status"]) == ("PAID", 118, 0, "lost")
    r = refund(w, job, amount=59.01)
    assert (r.status_code, r.json()) == (400, error_body(400, "amount: must be between 0.01 and 59.00"))
    past_window(w, 73, pro)
    paid = wait_transfer(w.api, pro, job.id, "paid")
    assert (paid["amount"], paid["netted"]) == (50, 0)
    assert [t[:2] for t in w.transfers(pro)] == [(5000, 0)]


def test_a_disputed_tip_is_held_and_decided_on_its_own(w):
    """Every charge on the dispute card is disputed, the tip's too: both of the job's transfers
    are held; the tip's dispute lost cancels the tip's transfer only, and the job's stays held
    while its own dispute is open."""
    pro = new_provider(w)
    job = DJob(w, pro, amount=100)
    job.tip(10)
    w.deliver(job.intent())
    [(tip_intent,)] = db(w.server, f"SELECT processor_payment_intent_id FROM payments WHERE job_id = '{job.id}' "
                                   "AND kind = 'tip'")
    w.deliver(tip_intent)
    rows = {d["paymentKind"]: d for d in disputes(w) if d["jobId"] == job.id}
    assert {k: (d["status"], d["amount"]) for k, d in rows.items()} == {"job": ("needs_response", 118),
                                                                        "tip": ("needs_response", 10)}
    assert {t["kind"]: t["status"] for t in payouts(w.api, pro)["transfers"]} == {"job": "on_hold", "tip": "on_hold"}
    r = refund(w, job, target="tip")
    assert (r.status_code, r.json()) == (409, DISPUTED_REFUND)
    ok(submit(w, rows["tip"]["id"], "losing_evidence"))
    w.deliver(tip_intent)
    tip = transfer(w.api, pro, job.id, "tip")
    assert (tip["status"], tip["amount"]) == ("cancelled", 0)
    assert transfer(w.api, pro, job.id)["status"] == "on_hold"
    assert job.payment()["dispute"]["status"] == "needs_response"
    ok(submit(w, rows["job"]["id"], "winning_evidence"))
    w.deliver(job.intent())
    assert (lambda t: (t["status"], t["amount"]))(transfer(w.api, pro, job.id)) == ("scheduled", 100)
    assert {d["paymentKind"]: (d["status"], d["lostAmount"]) for d in disputes(w) if d["jobId"] == job.id} == \
        {"job": ("won", 0), "tip": ("lost", 10)}


def test_an_inquiry_holds_the_money_until_winning_evidence_closes_it(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100, card=INQUIRY_CARD)
    p = job.payment()
    assert p["status"] == "PAID"
    assert p["dispute"] == {"status": "warning_needs_response", "reason": "fraudulent", "amount": 118,
                            "evidenceDueBy": p["dispute"]["evidenceDueBy"]}
    assert_due(p["dispute"], job.done)
    row = dispute_of(w, job)
    assert (row["status"], row["fundsWithdrawn"], row["lostAmount"]) == ("warning_needs_response", False, 0)
    assert transfer(w.api, pro, job.id)["status"] == "on_hold"
    assert "Payment disputed" in notes(w, pro, job)
    answer = ok(submit(w, row["id"], "winning_evidence"))
    assert answer["status"] in ("warning_under_review", "warning_closed")
    w.deliver(job.intent())
    closed = dispute_of(w, job)
    assert (closed["status"], closed["fundsWithdrawn"], closed["lostAmount"]) == ("warning_closed", False, 0)
    parse_iso(closed["closedAt"])
    assert job.payment()["dispute"]["status"] == "warning_closed"
    assert transfer(w.api, pro, job.id)["status"] == "scheduled"
    past_window(w, 73, pro)
    wait_transfer(w.api, pro, job.id, "paid")
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 0)]


def test_a_report_and_a_dispute_each_hold_on_their_own(w):
    """A report's hold and a dispute's are separate: a report resolved with a release leaves the
    dispute's hold; a dispute won leaves the report's 7 days to run."""
    pro = new_provider(w)
    first, second = DJob(w, pro), DJob(w, pro)
    w.advance(HOUR_MS)
    reported = {}
    for job in (first, second):
        r = w.api.post(f"/jobs/{job.id}/report", token=job.user["token"],
                       json={"description": "The hedge was not trimmed"})
        assert r.status_code == 201, r.text
        reported[job.id] = r.json()
    ok(w.api.post(f"/staff/reports/{reported[first.id]['id']}/resolve", token=w.staff_token("customer_support"),
                  json={"action": "release", "note": "The photos show the work done"}))
    assert transfer(w.api, pro, first.id)["status"] == "on_hold"  # the dispute still holds it
    ok(submit(w, dispute_of(w, second)["id"], "winning_evidence"))
    w.deliver(second.intent())
    assert dispute_of(w, second)["status"] == "won"
    assert transfer(w.api, pro, second.id)["status"] == "on_hold"  # the report's 7 days run on
    past_window(w, 73, pro)
    w.api.wait_queue_idle()
    assert [transfer(w.api, pro, j.id)["status"] for j in (first, second)] == ["on_hold", "on_hold"]
    until = parse_iso(reported[second.id]["createdAt"]) + datetime.timedelta(days=7, hours=1)
    w.advance((until - server_now(w.api)).total_seconds() * 1000)
    relogin(w.api, pro)
    wait_transfer(w.api, pro, second.id, "paid")
    assert transfer(w.api, pro, first.id)["status"] == "on_hold"  # its dispute is still open
    assert [t[:2] for t in w.transfers(pro)] == [(10000, 0)]


def test_a_refund_of_a_disputed_payment_is_refused(w):
    pro = new_provider(w)
    job = DJob(w, pro, amount=100)
    for body in ({}, {"amount": 10}):
        r = refund(w, job, **body)
        assert (r.status_code, r.json()) == (409, DISPUTED_REFUND)
    w.api.wait_queue_idle()
    p = job.payment()
    assert (p["status"], p["refundedAmount"], p["dispute"]["status"]) == ("PAID", 0, "needs_response")
    assert (lambda t: (t["status"], t["amount"]))(transfer(w.api, pro, job.id)) == ("on_hold", 100)
    assert not [m for m in w.server.mails(job.user["email"]) if m["subject"] == "Your payment was refunded"]
    if w.fake:
        assert w.fake.objects("refund", payment_intent=job.intent()) == []
    else:
        assert db(w.server, "SELECT count(*) FROM processor_sim_objects WHERE kind = 'refund' "
                            f"AND data LIKE '%{job.intent()}%'") == [("0",)]


# ================================================================ GET /staff/disputes

def test_dispute_routes_are_for_customer_support_only(w):
    pro = new_provider(w)
    job = DJob(w, pro)
    row = dispute_of(w, job)
    others = {"professional_support": w.staff_token("professional_support"),
              "technical_support": w.staff_token("technical_support"),
              "admin": admin_login(w.api), "customer": job.user["token"], "provider": pro["token"]}
    path = f"/staff/disputes/{row['id']}/evidence"
    for method, url, body in (("GET", "/staff/disputes", None), ("POST", path, {"text": "winning_evidence"})):
        r = w.api.request(method, url, json=body)
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED), url
        for who, token in others.items():
            r = w.api.request(method, url, token=token, json=body)
            assert (r.status_code, r.json()) == (403, FORBIDDEN), (who, url)
    assert without_urls(dispute_of(w, job)) == without_urls(row)
    assert w.audits(row["id"]) == []
    processor_untouched(w, row, files_count(w))


def test_the_list_filters_pages_and_describes_each_dispute(w):
    pro = new_provider(w)
    jobs = [DJob(w, pro, amount=40 + i) for i in range(3)]
    support = w.staff_token("customer_support")
    whole = ok(w.api.get("/staff/disputes", token=support))
    assert len(whole) < 100  # one page holds them all: the paged walk must give the same
    got = pages(w.api, "/staff/disputes", support, limit=2)
    assert all(len(page) <= 2 for page in got) and len(got) >= 2
    assert [without_urls(d) for page in got for d in page] == [without_urls(d) for d in whole]
    ids = [j.id for j in jobs]
    mine = [d for d in whole if d["jobId"] in ids]
    assert [d["jobId"] for d in mine] == list(reversed(ids))  # newest first
    assert [d["createdAt"] for d in whole] == sorted((d["createdAt"] for d in whole), reverse=True)
    # each row
    d = mine[1]
    p = jobs[1].payment()
    assert d == {"id": d["id"], "processorDisputeId": d["processorDisputeId"], "jobId": jobs[1].id,
                 "paymentId": p["id"], "paymentKind": "job", "status": "needs_response", "reason": "fraudulent",
                 "amount": 48.38, "lostAmount": 0, "evidenceDueBy": p["dispute"]["evidenceDueBy"],
                 "fundsWithdrawn": True, "evidenceSubmittedAt": None, "closedAt": None, "createdAt": d["createdAt"],
                 "job": {"service": "lawncare", "status": "COMPLETED"},
                 "customer": {"id": jobs[1].user["id"], "name": "Test User", "email": jobs[1].user["email"]},
                 "provider": {"id": pro["id"], "name": "Test Pro"}, "files": []}
    assert ID_RE.match(d["id"]) and d["processorDisputeId"].startswith("du_")
    assert abs((parse_iso(d["createdAt"]) - jobs[1].done).total_seconds()) < 60
    # filters
    open_ids = {x["jobId"] for x in disputes(w, status="open")}
    closed_ids = {x["jobId"] for x in disputes(w, status="closed")}
    assert set(ids) <= open_ids and not set(ids) & closed_ids
    w.lose(jobs[0])
    assert jobs[0].id in {x["jobId"] for x in disputes(w, status="closed")}
    assert jobs[0].id not in {x["jobId"] for x in disputes(w, status="open")}
    assert all(x["status"] in ("won", "lost", "warning_closed") for x in disputes(w, status="closed"))
    assert all(x["status"] not in ("won", "lost", "warning_closed") for x in disputes(w, status="open"))
    assert {x["jobId"] for x in disputes(w)} >= set(ids)
    # refused arguments
    for params, message in (({"status": "pending"}, "status: must be one of: open, closed"),
                            ({"status": ""}, "status: must be one of: open, closed"),
                            ({"limit": "0"}, "limit: must be an integer from 1 to 100"),
                            ({"limit": "101"}, "limit: must be an integer from 1 to 100"),
                            ({"cursor": "forged.0123456789abcdef0123456789abcdef"}, "cursor: is not valid")):
        r = w.api.get("/staff/disputes", token=support, params=params)
        assert (r.status_code, r.json()) == (400, error_body(400, message)), params


def test_each_dispute_lists_the_jobs_photos_with_signed_urls(w):
    pro = new_provider(w)
    job = DJob(w, pro, photos=True, seed=3)
    row = dispute_of(w, job)
    assert sorted((f["id"], f["source"]) for f in row["files"]) == job.files()
    assert [len(job.keys[s]) for s in ("job", "before", "after", "message")] == [1, 2, 1, 2]
    for f in row["files"]:
        assert FILE_URL_RE.match(f["url"]) and key_of(f["url"]) == f["id"], f
        got = requests.get(f["url"], timeout=10)
        assert got.status_code == 200 and got.content.startswith(b"\x89PNG"), f
        forged = f["url"][:-4] + ("0000" if not f["url"].endswith("0000") else "1111")
        assert requests.get(forged, timeout=10).status_code in (401, 403, 404)


# ================================================================ POST /staff/disputes/:id/evidence

def test_evidence_as_text_puts_the_dispute_under_review_once(w):
    pro = new_provider(w)
    job = DJob(w, pro)
    row = dispute_of(w, job)
    text = "The customer approved the work on site and messaged thanks."
    answer = ok(submit(w, row["id"], text))
    assert set(answer) == DISPUTE_FIELDS
    assert (answer["status"], answer["id"], answer["jobId"]) == ("under_review", row["id"], job.id)
    submitted = parse_iso(answer["evidenceSubmittedAt"])
    assert abs((submitted - server_now(w.api)).total_seconds()) < 60
    w.deliver(job.intent())
    listed = dispute_of(w, job)
    assert without_urls(listed) == without_urls(answer)
    assert without_urls(listed) == {**without_urls(row), "status": "under_review",
                                    "evidenceSubmittedAt": answer["evidenceSubmittedAt"]}
    assert job.payment()["dispute"]["status"] == "under_review"
    assert transfer(w.api, pro, job.id)["status"] == "on_hold"  # still open
    [(actor, role, target_role, detail)] = w.audits(row["id"])
    assert (actor, role, target_role) == (w.staff["customer_support"]["id"], "customer_support", "dispute")
    assert json.loads(detail).get("fileIds") in (None, [])
    if w.fake:
        [call] = evidence_calls(w, row)
        form = {k: v[-1] for k, v in call["form"].items()}
        assert (form["evidence[uncategorized_text]"], form["submit"]) == (text, "true")
        assert call["headers"]["idempotency-key"] == f"evidence-{row['id']}"
        assert "evidence[service_documentation]" not in form and "evidence[customer_communication]" not in form
        assert (form["evidence[customer_name]"], form["evidence[customer_email_address]"]) == \
            ("Test User", job.user["email"])
        assert form["evidence[service_date]"] == job.done.strftime("%Y-%m-%d")
        assert job.id in form["evidence[product_description]"]
        assert not call["refused"] and call["status"] == 200
        assert w.fake.get(row["processorDisputeId"])["status"] == "under_review"
    else:
        du = w.sim_object(row["processorDisputeId"])
        assert (du["status"], du["evidence"]["uncategorized_text"]) == ("under_review", text)
        assert du["evidence"]["customer_email_address"] == job.user["email"]
        assert du["evidence"]["service_date"] == job.done.strftime("%Y-%m-%d")
    # a second submission is refused and changes nothing
    r = submit(w, row["id"], "winning_evidence")
    assert (r.status_code, r.json()) == (409, ALREADY)
    w.api.wait_queue_idle()
    assert without_urls(dispute_of(w, job)) == without_urls(listed)
    assert len(w.audits(row["id"])) == 1
    if w.fake:
        assert len(evidence_calls(w, row)) == 1


def pdf_pages(data):
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


def test_evidence_with_the_jobs_photos_and_a_message_photo_goes_as_two_pdfs(w):
    pro = new_provider(w)
    job = DJob(w, pro, photos=True, seed=5)
    row = dispute_of(w, job)
    job_photos = job.keys["job"] + job.keys["before"] + job.keys["after"]
    chosen = job_photos + job.keys["message"][:1]
    files_before = files_count(w)
    text = "Photos of the finished lawn, and the customer's own photo sent in the chat."
    answer = ok(submit(w, row["id"], text, chosen))
    assert (answer["status"], answer["id"]) == ("under_review", row["id"])
    parse_iso(answer["evidenceSubmittedAt"])
    w.deliver(job.intent())
    assert without_urls(dispute_of(w, job)) == without_urls(answer)
    [(actor, _, _, detail)] = w.audits(row["id"])
    assert actor == w.staff["customer_support"]["id"] and json.loads(detail)["fileIds"] == chosen
    assert files_count(w) == files_before + 2
    if w.fake:
        [call] = evidence_calls(w, row)
        form = {k: v[-1] for k, v in call["form"].items()}
        assert (form["evidence[uncategorized_text]"], form["submit"]) == (text, "true")
        service_doc, messages_doc = form["evidence[service_documentation]"], form["evidence[customer_communication]"]
        for fid, pages_ in ((service_doc, len(job_photos)), (messages_doc, 1)):
            f = w.fake.get(fid)
            assert (f["purpose"], f["type"]) == ("dispute_evidence", "pdf")
            data = w.fake.file_bytes(fid)
            assert data.startswith(b"%PDF") and pdf_pages(data) == pages_, (fid, pdf_pages(data))
        uploads = w.fake.calls("POST", "/v1/files")[files_before:]
        assert [u["status"] for u in uploads] == [200, 200] and not any(u["refused"] for u in uploads)
        du = w.fake.get(row["processorDisputeId"])
        assert du["evidence"]["service_documentation"] == service_doc
        assert du["evidence"]["customer_communication"] == messages_doc
    else:
        du = w.sim_object(row["processorDisputeId"])
        assert du["status"] == "under_review" and du["evidence"]["uncategorized_text"] == text
        for field in ("service_documentation", "customer_communication"):
            f = w.sim_object(du["evidence"][field])
            assert (f["object"], f["purpose"], f["type"]) == ("file", "dispute_evidence", "pdf") and f["size"] > 0


def test_refused_evidence_changes_nothing(w):
    pro = new_provider(w)
    job = DJob(w, pro, photos=True, seed=7)
    other = DJob(w, pro, card=VISA, photos=True, seed=8)  # photos of another job
    row = dispute_of(w, job)
    files_before = files_count(w)
    mine = job.keys["before"][0]
    support = w.staff_token("customer_support")
    cases = [
        ("c" + "0" * 24, {"text": "x"}, 404, NOT_FOUND),
        (row["id"], {}, 400, error_body(400, "text: is required")),
        (row["id"], {"fileIds": [mine]}, 400, error_body(400, "text: is required")),
        (row["id"], {"text": ""}, 400, error_body(400, "text: must not be empty")),
        (row["id"], {"text": "   "}, 400, error_body(400, "text: must not be empty")),
        (row["id"], {"text": "x" * 20001}, 400, error_body(400, "text: must be at most 20000 characters")),
        (row["id"], {"text": 5}, 400, error_body(400, "text: must be a string")),
        (row["id"], {"text": "x", "fileIds": mine}, 400, error_body(400, "fileIds: must be an array")),
        (row["id"], {"text": "x", "fileIds": [mine] * 21}, 400,
         error_body(400, "fileIds: must contain at most 20 items")),
        (row["id"], {"text": "x", "fileIds": [mine, other.keys["after"][0]]}, 400,
         error_body(400, f"fileIds: {other.keys['after'][0]} is not a photo of this job or its messages")),
        (row["id"], {"text": "x", "fileIds": [other.keys["message"][0]]}, 400,
         error_body(400, f"fileIds: {other.keys['message'][0]} is not a photo of this job or its messages")),
        (row["id"], {"text": "x", "fileIds": ["cnotaphotoofanything00000.png"]}, 400,
         error_body(400, "fileIds: cnotaphotoofanything00000.png is not a photo of this job or its messages")),
    ]
    for dispute_id, body, status, expected in cases:
        r = submit(w, dispute_id, None, body=body, token=support)
        assert (r.status_code, r.json()) == (status, expected), body if len(str(body)) < 300 else status
    w.api.wait_queue_idle()
    assert without_urls(dispute_of(w, job)) == without_urls(row)
    assert w.audits(row["id"]) == []
    processor_untouched(w, row, files_before)
    # the longest text Stripe takes, and 20 files (the same photo chosen again), are taken
    answer = ok(submit(w, row["id"], "y" * 20000, [mine] * 20))
    assert answer["status"] == "under_review"
    if w.fake:
        [call] = evidence_calls(w, row)
        assert call["form"]["evidence[uncategorized_text]"] == ["y" * 20000] and not call["refused"]


def test_evidence_past_its_deadline_is_refused(w):
    pro = new_provider(w)
    job = DJob(w, pro)
    row = dispute_of(w, job)
    due = parse_iso(row["evidenceDueBy"])
    w.advance((due - server_now(w.api)).total_seconds() * 1000 + HOUR_MS)
    files_before = files_count(w)
    r = submit(w, row["id"], "winning_evidence", job.keys["before"])
    assert (r.status_code, r.json()) == (409, PAST_DUE)
    w.api.wait_queue_idle()
    assert without_urls(dispute_of(w, job)) == without_urls(row)
    assert w.audits(row["id"]) == []
    processor_untouched(w, row, files_before)
    relogin(w.api, pro)
    assert transfer(w.api, pro, job.id)["status"] == "on_hold"


# ================================================================ receipts

def test_completion_and_tip_email_receipts(w):
    name = f"Rosa Receipt {uuid.uuid4().hex[:6]}"
    pro = provider(w.api, [private_zip()], name=name)
    w.onboard(pro)
    job = DJob(w, pro, amount=100, card=VISA)
    p = job.payment()
    assert (p["status"], p["dispute"]) == ("PAID", None)
    [mail] = eventually(lambda: receipts(w, job.user), 20, "the receipt", interval=0.1)
    assert mail["subject"] == "Your receipt: $118.00 for your lawncare job"
    body = mail["body"]
    for part in (name, job.id, "$100.00", "$18.00", "$118.00", "visa ending in 4242", p["id"],
                 job.done.strftime("%Y-%m-%d")):
        assert part in body, (part, body)
    assert "Platform fee: $18.00" in body and "Total charged: $118.00" in body
    job.tip(12.5)
    [(tip_id,)] = db(w.server, f"SELECT id FROM payments WHERE job_id = '{job.id}' AND kind = 'tip'")
    got = eventually(lambda: receipts(w, job.user), 20, "the tip's receipt", interval=0.1,
                     until=lambda m: len(m) >= 2)
    w.api.wait_queue_idle()
    assert [m["subject"] for m in receipts(w, job.user)] == [
        "Your receipt: $118.00 for your lawncare job", "Your receipt: $12.50 for your lawncare job (tip)"]
    body = got[1]["body"]
    for part in (name, job.id, "$12.50", "visa ending in 4242", tip_id):
        assert part in body, (part, body)
    assert "Platform fee: $0.00" in body


# ================================================================ Stripe: what the requests carry, captures as captured

def form_of(call):
    return {k: v[-1] for k, v in call["form"].items()}


def test_stripe_payment_intents_and_transfers_are_described(sw):
    pro = new_provider(sw)
    job = DJob(sw, pro, amount=100, card=VISA)
    job.tip(5)
    made = [form_of(c) for c in sw.fake.calls("POST", "/v1/payment_intents")
            if c["form"].get("metadata[job_id]") == [job.id]]
    assert len(made) == 2, made
    hold, tip = made
    assert (hold["payment_method_types[]"], hold["description"], hold["transfer_group"]) == \
        ("card", f"lawncare job {job.id}", job.id)
    assert (hold["metadata[job_id]"], hold["metadata[quote_id]"], hold["metadata[kind]"]) == \
        (job.id, job.quote_id, "job")
    assert (tip["payment_method_types[]"], tip["description"], tip["transfer_group"]) == \
        ("card", f"lawncare tip for job {job.id}", job.id)
    assert (tip["metadata[job_id]"], tip["metadata[kind]"]) == (job.id, "tip")
    for c in sw.fake.calls("POST", "/v1/payment_intents"):
        if c["form"].get("metadata[job_id]") == [job.id]:
            assert c["status"] == 200 and not c["refused"], c["response"]
            assert "automatic_payment_methods[enabled]" not in c["form"]
    intent = sw.fake.get(job.intent())
    assert (intent["description"], intent["transfer_group"]) == (f"lawncare job {job.id}", job.id)
    past_window(sw, 73, pro)
    wait_transfer(sw.api, pro, job.id, "paid")
    wait_transfer(sw.api, pro, job.id, "paid", "tip")
    acct = sw.account_id(pro)
    sent = [form_of(c) for c in sw.fake.calls("POST", "/v1/transfers") if c["form"]["destination"] == [acct]]
    assert sorted(s["amount"] for s in sent) == ["10000", "500"]
    assert all(s["transfer_group"] == job.id and s["metadata[job_id]"] == job.id for s in sent), sent
    assert all(t["transfer_group"] == job.id for t in sw.fake.transfers(acct))


def test_stripe_a_partial_capture_in_the_dashboard_is_recorded_as_captured(sw):
    pro = new_provider(sw)
    job = DJob(sw, pro, amount=100, card=VISA, complete=False)
    assert job.payment()["status"] == "AUTHORIZED"
    intent = job.intent()
    succeeded = sw.fake.capture_in_dashboard(intent, 7000)  # 70.00 of the 118.00 held
    assert succeeded["data"]["object"]["amount_received"] == 7000
    sw.post_event(succeeded)
    p = job.payment()
    assert (p["status"], p["amount"], p["refundedAmount"]) == ("PAID", 70, 0)
    job.complete()
    assert (lambda q: (q["status"], q["amount"]))(job.payment()) == ("PAID", 70)
    assert sw.fake.calls("POST", f"/v1/payment_intents/{intent}/capture") == []
    t = transfer(sw.api, pro, job.id)
    assert (t["amount"], t["status"]) == (59.32, "scheduled")  # 100 x 70 / 118, to the cent
    [mail] = eventually(lambda: receipts(sw, job.user), 20, "the receipt", interval=0.1)
    assert mail["subject"] == "Your receipt: $70.00 for your lawncare job"
    assert "$59.32" in mail["body"] and "$10.68" in mail["body"] and "visa ending in 4242" in mail["body"]
    sw.api.wait_queue_idle()
    assert len(receipts(sw, job.user)) == 1
    # refunds are bounded by what was captured
    r = refund(sw, job, amount=70.01)
    assert (r.status_code, r.json()) == (400, error_body(400, "amount: must be between 0.01 and 70.00"))
    past_window(sw, 73, pro)
    wait_transfer(sw.api, pro, job.id, "paid")
    assert [t[:2] for t in sw.transfers(pro)] == [(5932, 0)]


# ================================================================ Stripe: answers lost, events early

def test_stripe_evidence_the_processor_did_not_answer_is_503_and_sends_nothing(sw):
    pro = new_provider(sw)
    job = DJob(sw, pro, photos=True, seed=9)
    row = dispute_of(sw, job)
    chosen = job.keys["after"] + job.keys["message"][:1]
    # the Files API does not answer: nothing is submitted
    sw.fake.fail_next("POST", "/v1/files", count=3, status=500)
    r = submit(sw, row["id"], "The lawn was mowed.", chosen)
    assert (r.status_code, r.json()) == (503, error_body(503, "Payment processor unavailable"))
    assert evidence_calls(sw, row) == []
    assert without_urls(dispute_of(sw, job)) == without_urls(row) and sw.audits(row["id"]) == []
    # the dispute update does not answer: nothing is recorded
    sw.fake.fail_next("POST", f"/v1/disputes/{row['processorDisputeId']}", count=3, status=500)
    r = submit(sw, row["id"], "The lawn was mowed.", chosen)
    assert (r.status_code, r.json()) == (503, error_body(503, "Payment processor unavailable"))
    assert without_urls(dispute_of(sw, job)) == without_urls(row) and sw.audits(row["id"]) == []
    assert sw.fake.get(row["processorDisputeId"])["evidence_details"]["submission_count"] == 0
    # answered now: submitted once
    answer = ok(submit(sw, row["id"], "The lawn was mowed.", chosen))
    assert answer["status"] == "under_review"
    assert sw.fake.get(row["processorDisputeId"])["evidence_details"]["submission_count"] == 1
    assert len(sw.audits(row["id"])) == 1


def test_stripe_evidence_whose_answer_was_lost_is_recorded_once(sw):
    """Stripe took the evidence (photos included) but every answer was lost: the service finds
    it submitted by asking for the dispute and answers as Stripe would have; when that look-up
    is lost too it answers 503, and the staff member's retry (its photos uploaded again, so not
    the same parameters under the key `evidence-<disputeId>`) is settled the same way. Either
    way the evidence is recorded, and audited, once."""
    pro = new_provider(sw)
    for seed, lookup_lost in ((11, False), (12, True)):
        job = DJob(sw, pro, photos=True, seed=seed)
        row = dispute_of(sw, job)
        chosen = job.keys["after"] + job.keys["message"][:1]
        path = f"/v1/disputes/{row['processorDisputeId']}"
        sw.fake.fail_next("POST", path, count=3, status=500, after_processing=True)
        if lookup_lost:
            sw.fake.fail_next("GET", path, count=3, status=500)
            r = submit(sw, row["id"], "The lawn was mowed.", chosen)
            assert (r.status_code, r.json()) == (503, error_body(503, "Payment processor unavailable"))
            assert sw.fake.get(row["processorDisputeId"])["status"] == "under_review"  # Stripe has it
            assert sw.audits(row["id"]) == []
        r = submit(sw, row["id"], "The lawn was mowed.", chosen)
        assert r.status_code == 200, (lookup_lost, r.text)
        answer = r.json()
        assert (answer["status"], answer["id"]) == ("under_review", row["id"])
        parse_iso(answer["evidenceSubmittedAt"])
        assert len(sw.audits(row["id"])) == 1
        assert {c["headers"]["idempotency-key"] for c in evidence_calls(sw, row)} == {f"evidence-{row['id']}"}
        du = sw.fake.get(row["processorDisputeId"])
        assert (du["status"], du["evidence_details"]["submission_count"]) == ("under_review", 1)
        sw.deliver(job.intent())
        assert without_urls(dispute_of(sw, job)) == without_urls(answer)


def test_stripe_a_dispute_announced_before_the_tip_is_recorded_is_kept(sw):
    """Stripe disputes the tip's charge (the dispute card) and its events reach the service
    while the tip's own request is still unsettled (its answers lost): the dispute is of a charge
    the service made, so it is recorded once the tip settles (an event the service does not
    acknowledge meanwhile is delivered again, as Stripe does), and the tip's transfer held."""
    pro = new_provider(sw)
    job = DJob(sw, pro, amount=100, card=VISA)
    ok(sw.api.post("/payments/payment-method", token=job.user["token"], json={"paymentMethodId": DISPUTE_CARD}))
    sw.fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=True)
    sw.fake.fail_next("GET", "/v1/payment_intents", count=3, status=500)
    r = sw.api.post(f"/jobs/{job.id}/tip", token=job.user["token"], json={"amount": 10})
    assert (r.status_code, r.json()) == (503, error_body(503, "Payment processor unavailable")), r.text
    [pi] = [o for o in sw.fake.objects("payment_intent") if o["metadata"].get("job_id") == job.id
            and o["metadata"].get("kind") == "tip"]
    events = [ev for ev in sw.fake.events_of() if ev["type"].startswith("charge.dispute.")
              and ev["data"]["object"]["payment_intent"] == pi["id"]]
    assert [ev["type"] for ev in events] == ["charge.dispute.created", "charge.dispute.funds_withdrawn"]

    def post(ev):
        raw = json.dumps(ev)
        return sw.api.post("/webhooks", data=raw, headers={
            "Content-Type": "application/json",
            "Stripe-Signature": sign_webhook(raw, timestamp=server_now(sw.api).timestamp())})

    unacknowledged = []
    for ev in events:
        r = post(ev)
        assert r.status_code in (200, 503), r.text
        if r.status_code != 200:
            unacknowledged.append(ev)
    # the customer's next tip settles the first, as the same request
    ok(sw.api.post(f"/jobs/{job.id}/tip", token=job.user["token"], json={"amount": 10}))
    sw.api.wait_queue_idle()
    [(intent, status)] = db(sw.server, "SELECT processor_payment_intent_id, status FROM payments "
                                       f"WHERE job_id = '{job.id}' AND kind = 'tip'")
    assert (intent, status) == (pi["id"], "PAID")
    for ev in unacknowledged:  # Stripe delivers again what was not acknowledged
        r = post(ev)
        assert (r.status_code, r.json()) == (200, {"received": True, "duplicate": False}), r.text
    sw.api.wait_queue_idle()
    rows = eventually(lambda: [d for d in disputes(sw) if d["jobId"] == job.id], 5, "the tip's dispute")
    assert [(d["paymentKind"], d["status"], d["amount"], d["fundsWithdrawn"]) for d in rows] == \
        [("tip", "needs_response", 10, True)]
    assert transfer(sw.api, pro, job.id, "tip")["status"] == "on_hold"


# ================================================================ the shared server

def test_disputes_on_the_shared_server(api):
    """Both routes answer a success on the session's shared server (simulated processor): a
    job paid with the dispute card, listed, answered with text."""
    support = make_staff(api, "customer_support")
    job_id = completed_with_the_dispute_card(api, 80)
    api.wait_queue_idle()
    rows = [d for page in pages(api, "/staff/disputes", support["token"], {"status": "open"}) for d in page
            if d["jobId"] == job_id]
    assert [(d["status"], d["amount"]) for d in rows] == [("needs_response", 94.4)]
    answer = ok(api.post(f"/staff/disputes/{rows[0]['id']}/evidence", token=support["token"],
                         json={"text": "The work was done as quoted."}))
    assert (answer["status"], answer["jobId"]) == ("under_review", job_id)
