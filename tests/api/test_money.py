"""Money as the processor sees it (issue 30): provider balances (a reversal the processor
refuses is owed, never asked again, and netted from the provider's next transfers, after a
member's fee), refunds of the tip and of everything left (with the receipts of both captures),
refunds the platform bears alone (`providerShare: "none"`), a refund whose answer was lost
that never doubles (`refund_pending`), reports that customer support lists and resolves (and
that outlive the customer's account for the dispute window), Preferred Pro cancelled at the
month's end, and a revoked processor key (GET /ready, the metrics, one probe an hour, queued
work that waits without running out of attempts).

Like test_payouts.py, every behaviour runs against both processors (the simulated one, and the
real Stripe client against tests/api/fake_stripe.py) unless its name says otherwise, each on a
server of its own whose clock moves by days; each test makes its own provider, customers and
jobs. Reports run on the simulated processor only (nothing in them talks to the processor but
the refund, covered on both), the revoked key on Stripe only, on a server and a fake of its
own. After the module, every cent each world's customers were charged is accounted for
(money.py: the money-conservation check).

Spec: docs/decisions.md "Payments" (the processor refusing the key, receipts), "Payment states
and recovery" (refunds), "Payouts (issue 22)" (provider balances), "Provider tools" (Preferred
Pro, insights' membershipFee), "Staff portal" (reports); issue 30.
"""
import datetime
import json
import re
import subprocess
import uuid

import pytest

from conftest import Api, admin_login
from fake_stripe import FakeStripe
from flow_helpers import (FORBIDDEN, UNAUTHORIZED, accept, customer, ok, payment_of, post_job, private_zip, provider,
                          quote, step)
from helpers import error_body, eventually, pages
from processor_worlds import started_fake_stripe, worlds_of
from staff_helpers import make_staff
from test_payments import UNAVAILABLE, db, parse_iso, server_now
from test_payouts import (DAY_MS, HOUR_MS, PRICE, STRIPE_ENV, Job, World, iso_ms, insights, ledger, new_provider,
                          next_month_start, paid_job, paid_mails, past_window, payouts, relogin, transfer,
                          wait_transfer)

pytestmark = pytest.mark.pooler

REFUNDED_MAIL = "Your payment was refunded"
PENDING = {"error": "A refund of this payment is still being settled", "code": "refund_pending"}
NOT_MEMBER = error_body(409, "You are not a Preferred Pro member", "invalid_state")
HOLD = datetime.timedelta(days=7)
BALANCES_LINE = "provider balances: {n} provider{s} owe{o} {total:.2f}, netted from their next transfers"


# ---------------------------------------------------------------- the two processors

@pytest.fixture(scope="module")
def fake_stripe():
    yield from started_fake_stripe()


@pytest.fixture(scope="module")
def worlds(make_server, fake_stripe):
    # after every test of the module: each cent charged is accounted for
    yield from worlds_of(make_server, fake_stripe, World, STRIPE_ENV)


def _world(worlds, fake_stripe, mode):
    fake_stripe.reset_controls()
    world = worlds(mode)
    world.sync()
    return world


@pytest.fixture(params=["simulated", "stripe"])
def w(request, worlds, fake_stripe):
    yield _world(worlds, fake_stripe, request.param)
    fake_stripe.reset_controls()


@pytest.fixture
def sim(worlds, fake_stripe):
    yield _world(worlds, fake_stripe, "simulated")


@pytest.fixture
def sw(worlds, fake_stripe):
    yield _world(worlds, fake_stripe, "stripe")
    fake_stripe.reset_controls()


# ---------------------------------------------------------------- helpers

def staff_refund(w, job_id, headers=None, **body):
    body.setdefault("reason", "Part of the work was not done")
    return w.api.post(f"/staff/payments/{job_id}/refund", token=w.staff_token("customer_support"), json=body,
                      headers=headers)


def refunded_mails(w, user):
    return [m for m in w.server.mails(user["email"]) if m["subject"] == REFUNDED_MAIL]


def transfer_mails(w, pro, job_id):
    """The emails of the provider's transfers for the job (what each earned, netted and sent)."""
    return [m for m in w.server.mails(pro["email"]) if job_id in m["body"] and "Sent: $" in m["body"]]


def transfer_row(w, transfer_id):
    """attempts and debited cents of a transfer, as recorded."""
    [(attempts, debited)] = db(w.server, "SELECT attempts, debited_cents FROM payout_transfers "
                                         f"WHERE id = '{transfer_id}'")
    return int(attempts), int(debited)


def processor_transfer_id(w, transfer_id):
    return db(w.server, f"SELECT processor_transfer_id FROM payout_transfers WHERE id = '{transfer_id}'")[0][0]


def reversal_requests(w, t):
    """What asked the processor to reverse transfer t: the fake's log of reversal requests; the
    simulated processor's reversals and the service's log lines of its answers."""
    if w.fake:
        return len(w.fake.calls("POST", f"/v1/transfers/{processor_transfer_id(w, t['id'])}/reversals"))
    made = db(w.server, "SELECT count(*) FROM processor_sim_objects WHERE kind = 'transfer_reversal' "
                        f"AND data LIKE '%\"transfer\":\"{processor_transfer_id(w, t['id'])}\"%'")
    answered = [line for line in w.server.log_lines() if line.get("transferId") == t["id"]
                and line.get("msg") in ("transfer reversed", "transfer reversal refused")]
    return int(made[0][0]) + len(answered)


def refuse_reversals(w, pro):
    """Makes the processor refuse to take back what the provider's last transfer sent: the
    simulated one does once the account's balance went out to its bank (2 days after the
    transfer); the fake Stripe is told to refuse it."""
    if w.fake:
        [tr] = w.fake.transfers(w.account_id(pro))[-1:]
        w.fake.fail_next("POST", f"/v1/transfers/{tr['id']}/reversals", status=400)
    else:
        w.advance(2 * DAY_MS + HOUR_MS)
        relogin(w.api, pro)


def owing(w):
    """What each provider owes (cents), from its records: unpaid fees and balances."""
    rows = db(w.server, "SELECT provider_id, SUM(c) FROM (SELECT provider_id, amount_cents AS c FROM payout_fees "
                        "UNION ALL SELECT provider_id, amount_cents FROM payout_transfers WHERE kind = 'fee' "
                        "AND status IN ('scheduled', 'paid') UNION ALL SELECT provider_id, amount_cents "
                        "FROM payout_debts WHERE status <> 'cancelled') o GROUP BY provider_id")
    return {p: int(c) for p, c in rows if int(c) > 0}


def reconcile(srv):
    """`marketplace payments reconcile` (as test_payments.reconcile_cli runs it): its two lines
    of output and its log lines."""
    out = subprocess.run([srv.binary, "payments", "reconcile"], env=dict(srv.env), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and re.fullmatch(r"payments reconciled: \d+ checked, \d+ corrected", lines[0]), out.stdout
    return lines[1], [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]


def balances_line(owed):
    n = len(owed)
    return BALANCES_LINE.format(n=n, s="" if n == 1 else "s", o="s" if n == 1 else "", total=sum(owed.values()) / 100)


def line_of(line, pro, w):
    """Checks the reconcile command's balances line against the records; returns what pro owes."""
    owed = owing(w)
    assert line == balances_line(owed), (line, owed)
    return owed.get(pro["id"], 0)


def staff_balance(w, pro):
    return ok(w.api.get(f"/staff/providers/{pro['id']}", token=w.staff_token("professional_support")))["balance"]


def month_start_after(now):
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime.datetime(year, month, 1, tzinfo=datetime.timezone.utc)


# ================================================================ provider balances

def test_a_refused_reversal_becomes_a_balance_netted_from_the_next_transfers(w):
    """A job paid out, then refunded after the provider's balance went to its bank: the
    processor refuses the reversal of the provider's 80. It is not asked again (by the
    reconciliation or anyone): it is the provider's balance of -80, shown everywhere, and
    netted from the next transfers: one of 50 sends nothing (paid, "Your earnings paid off your
    balance"), the next of 100 sends 70; the balance is 0 again."""
    pro = new_provider(w)
    first = paid_job(w, pro, 100)
    refuse_reversals(w, pro)
    t = transfer(w.api, pro, first.id)
    attempts = transfer_row(w, t["id"])[0]
    asked = reversal_requests(w, t)
    first.refund(94.4)  # 80 of the provider's 100
    body = eventually(lambda: payouts(w.api, pro), 30, "the refused reversal owed", interval=0.1,
                      until=lambda b: b["totals"]["balance"] == -80)
    assert body["totals"] == {"scheduled": 0, "onHold": 0, "paid": 100, "reversed": 0, "balance": -80}
    t = transfer(w.api, pro, first.id)
    assert (t["status"], t["amount"], t["reversedAmount"], t["netted"]) == ("paid", 20, 0, 0)
    assert [x[:2] for x in w.transfers(pro)] == [(10000, 0)]
    refused_once = reversal_requests(w, t)
    assert refused_once == asked + 1
    assert transfer_row(w, t["id"]) == (attempts + 1, 8000)
    # never asked again: not by the reconciliation, not by the periodic run
    line, logged = reconcile(w.server)
    assert line == balances_line(owing(w)) and owing(w)[pro["id"]] == 8000
    if owing(w).keys() == {pro["id"]}:
        assert line == "provider balances: 1 provider owes 80.00, netted from their next transfers"
    assert not [x for x in logged if x.get("transferId") == t["id"]], logged
    w.advance(16 * 60 * 1000)
    w.api.wait_queue_idle()
    assert reversal_requests(w, t) == refused_once and transfer_row(w, t["id"]) == (attempts + 1, 8000)
    # shown to the provider and the staff
    assert staff_balance(w, pro) == -80
    assert insights(w.api, pro)["membershipFee"] == {"owed": False, "amount": 0, "reason": "Not a Preferred Pro member",
                                                     "balance": -80}
    # a transfer smaller than the balance sends nothing and pays part of it off
    second = paid_job(w, pro, 50)
    t2 = transfer(w.api, pro, second.id)
    assert (t2["status"], t2["amount"], t2["netted"], t2["reversedAmount"]) == ("paid", 50, 50, 0)
    assert [x[0] for x in w.transfers(pro)] == [10000]  # nothing moved
    assert payouts(w.api, pro)["totals"]["balance"] == -30
    [mail] = eventually(lambda: transfer_mails(w, pro, second.id), 20, "the email of the transfer that sent nothing",
                        interval=0.1)
    assert mail["subject"] == "Your earnings paid off your balance"
    assert "Balance you owed (refunds and disputes): -$50.00" in mail["body"] and "Sent: $0.00" in mail["body"]
    assert not [m for m in w.server.mails(pro["email"]) if m["subject"].startswith("You've been paid $0.00")]
    assert line_of(reconcile(w.server)[0], pro, w) == 3000
    # the next one nets the rest and sends what is left
    third = paid_job(w, pro, 100)
    t3 = transfer(w.api, pro, third.id)
    assert (t3["status"], t3["amount"], t3["netted"]) == ("paid", 100, 30)
    assert [x[:2] for x in w.transfers(pro)] == [(10000, 0), (7000, 0)]
    [mail] = eventually(lambda: [m for m in paid_mails(w, pro) if third.id in m["body"]], 20, "the payout email",
                        interval=0.1)
    assert mail["subject"] == "You've been paid $70.00"
    assert "Balance you owed (refunds and disputes): -$30.00" in mail["body"] and "Sent: $70.00" in mail["body"]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 170, "reversed": 0, "balance": 0}
    assert staff_balance(w, pro) == 0 and insights(w.api, pro)["membershipFee"]["balance"] == 0
    assert sum(m["netted"] for m in ledger(w, pro)) == 80
    assert pro["id"] not in owing(w)
    # a refund that takes a transfer's earnings below what it netted makes that part owed again
    third.refund()
    t3 = wait_transfer(w.api, pro, third.id, "reversed")
    assert (t3["amount"], t3["reversedAmount"]) == (0, 70)  # what was sent went back
    assert [x[:2] for x in w.transfers(pro)] == [(10000, 0), (7000, 7000)]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 100, "reversed": 70, "balance": -30}
    assert staff_balance(w, pro) == -30
    assert line_of(reconcile(w.server)[0], pro, w) == 3000


def test_a_members_fee_is_taken_before_its_balance(w):
    """A Preferred Pro member's refunded job whose reversal is refused: the fee that job carried
    shrinks with it (19 of the month's 39 owed again) and the 61 it sent cannot come back: -80
    in all. Its next transfer of 50 pays the fee first, then 31 of the balance, and sends
    nothing: it is paid, and says the fee was collected."""
    pro = new_provider(w, premium=True)
    start = next_month_start(w)
    relogin(w.api, pro)
    month = start.strftime("%Y-%m")
    first = paid_job(w, pro, 100)
    assert [x[:2] for x in w.transfers(pro)] == [(6100, 0)]
    refuse_reversals(w, pro)
    first.refund(94.4)  # 80 of the provider's 100: 20 earned, all of it the fee's
    body = eventually(lambda: payouts(w.api, pro), 30, "the refused reversal owed", interval=0.1,
                      until=lambda b: b["totals"]["balance"] == -80)
    assert {(t["kind"], t["amount"]) for t in body["transfers"] if t["jobId"] == first.id} == \
        {("job", 20), ("fee", -20)}
    assert [x[:2] for x in w.transfers(pro)] == [(6100, 0)]
    assert insights(w.api, pro)["membershipFee"] == {
        "owed": True, "amount": 19, "month": month, "cancelAtMonthEnd": False, "balance": -80,
        "reason": "A Preferred Pro fee billed is not paid yet: it is taken from your next transfers"}
    second = paid_job(w, pro, 50)
    t = transfer(w.api, pro, second.id)
    assert (t["status"], t["amount"], t["netted"]) == ("paid", 50, 50)
    assert [x["amount"] for x in payouts(w.api, pro)["transfers"] if x["kind"] == "fee" and x["jobId"] == second.id] \
        == [-19]
    assert [x[:2] for x in w.transfers(pro)] == [(6100, 0)]  # nothing moved
    assert payouts(w.api, pro)["totals"]["balance"] == -30 and staff_balance(w, pro) == -30
    assert insights(w.api, pro)["membershipFee"] == {
        "owed": False, "amount": 0, "month": month, "cancelAtMonthEnd": False, "balance": -30,
        "reason": "This month's fee is paid"}
    [mail] = eventually(lambda: transfer_mails(w, pro, second.id), 20, "the transfer's email", interval=0.1)
    assert mail["subject"] == "Your Preferred Pro fee of $19.00 was collected"
    for line in ("Preferred Pro membership fee: -$19.00", "Balance you owed (refunds and disputes): -$31.00",
                 "Sent: $0.00"):
        assert line in mail["body"], mail["body"]


# ================================================================ refunds: the tip, everything, goodwill

def test_the_tip_is_refunded_then_everything_left_in_one_call(w):
    pro = new_provider(w)
    job = Job(w, pro, 100)
    job.tip(10)
    # part of the tip before its transfer is made: the transfer is reduced
    body = ok(staff_refund(w, job.id, target="tip", amount=4))
    assert {k: body["refund"][k] for k in ("target", "amount", "providerShare", "status")} == \
        {"target": "tip", "amount": 4.0, "providerShare": "prorata", "status": "SUCCEEDED"}
    assert body["refunds"] == [body["refund"]]
    assert (body["tip"]["status"], body["tip"]["amount"], body["tip"]["refundedAmount"]) == ("PAID", 10, 4)
    assert (body["payment"]["status"], body["payment"]["refundedAmount"]) == ("PAID", 0)
    tip = transfer(w.api, pro, job.id, "tip")
    assert (tip["amount"], tip["status"]) == (6, "scheduled")
    assert transfer(w.api, pro, job.id)["amount"] == 100
    # each capture was receipted: the job's total and the tip, on the card charged
    receipts = eventually(lambda: [m for m in w.server.mails(job.user["email"])
                                   if m["subject"].startswith("Your receipt")],
                          20, "two receipts", interval=0.1, until=lambda m: len(m) == 2)
    by_subject = {m["subject"]: m["body"] for m in receipts}
    assert set(by_subject) == {"Your receipt: $118.00 for your lawncare job",
                               "Your receipt: $10.00 for your lawncare job (tip)"}
    for subject, lines in (("Your receipt: $118.00 for your lawncare job",
                            ["Service: $100.00", "Platform fee: $18.00", "Total charged: $118.00"]),
                           ("Your receipt: $10.00 for your lawncare job (tip)",
                            ["Tip for your provider: $10.00", "Platform fee: $0.00", "Total charged: $10.00"])):
        for line in lines + [f"({job.id})", "Card: visa ending in 4242"]:
            assert line in by_subject[subject], (subject, line, by_subject[subject])
    assert f"Payment: {job.payment()['id']}" in by_subject["Your receipt: $118.00 for your lawncare job"]
    past_window(w, 73, pro, job.user)
    wait_transfer(w.api, pro, job.id, "paid", "tip")
    wait_transfer(w.api, pro, job.id, "paid")
    assert sorted(x[0] for x in w.transfers(pro)) == [600, 10000]
    # everything left, of both, in one call (it takes no amount)
    r = staff_refund(w, job.id, target="all", amount=1)
    assert (r.status_code, r.json()) == (400, error_body(
        400, "amount: is not allowed with target all (everything left is refunded)"))
    body = ok(staff_refund(w, job.id, target="all", reason="The job was not done"))
    assert [(x["target"], x["amount"]) for x in body["refunds"]] == [("job", 118.0), ("tip", 6.0)]
    assert body["refund"] == body["refunds"][0]
    assert (body["payment"]["status"], body["payment"]["refundedAmount"]) == ("REFUNDED", 118)
    assert (body["tip"]["status"], body["tip"]["refundedAmount"]) == ("REFUNDED", 10)
    # both transfers, already paid, are reversed
    for kind, sent in (("job", 100), ("tip", 6)):
        t = wait_transfer(w.api, pro, job.id, "reversed", kind)
        assert (t["amount"], t["reversedAmount"]) == (0, sent)
    assert sorted(x[:2] for x in w.transfers(pro)) == [(600, 600), (10000, 10000)]
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 0, "reversed": 106, "balance": 0}
    r = staff_refund(w, job.id, target="tip")
    assert (r.status_code, r.json()) == (409, error_body(409, "Nothing left to refund"))
    mails = eventually(lambda: refunded_mails(w, job.user), 20, "three refund emails", interval=0.1,
                       until=lambda m: len(m) == 3)
    assert sorted(("$4.00" in m["body"], "$6.00" in m["body"], "$118.00" in m["body"]) for m in mails) == \
        [(False, False, True), (False, True, False), (True, False, False)]


def test_refund_targets_and_shares_are_checked(w):
    pro = new_provider(w, onboard=False)
    job = Job(w, pro, 50)
    r = staff_refund(w, job.id, target="tip")
    assert (r.status_code, r.json()) == (404, error_body(404, "This job has no captured tip"))
    r = staff_refund(w, job.id, target="tip", amount=1)
    assert (r.status_code, r.json()) == (404, error_body(404, "This job has no captured tip"))
    for body, message in (({"target": "everything"}, "target: must be one of: job, tip, all"),
                          ({"target": 1}, "target: must be one of: job, tip, all"),
                          ({"providerShare": "half"}, "providerShare: must be one of: prorata, none")):
        r = staff_refund(w, job.id, **body)
        assert (r.status_code, r.json()) == (400, error_body(400, message)), body
    assert job.payment()["refundedAmount"] == 0


def test_a_refund_the_platform_bears_leaves_the_providers_transfer_whole(w):
    pro = new_provider(w)
    job = paid_job(w, pro, 100)
    intent = job.payment()["processorPaymentIntentId"]
    asked = reversal_requests(w, transfer(w.api, pro, job.id))
    body = ok(staff_refund(w, job.id, amount=59, providerShare="none", reason="Goodwill: the customer waited"))
    assert (body["refund"]["providerShare"], body["refund"]["amount"], body["payment"]["refundedAmount"]) == \
        ("none", 59.0, 59)
    w.api.wait_queue_idle()
    t = transfer(w.api, pro, job.id)
    assert (t["status"], t["amount"], t["reversedAmount"]) == ("paid", 100, 0)
    assert [x[:2] for x in w.transfers(pro)] == [(10000, 0)] and reversal_requests(w, t) == asked
    income = [insights(w.api, pro)["incomeByService"]]  # checked last
    # the customer got it back
    if w.fake:
        assert [x["amount"] for x in w.fake.objects("refund", payment_intent=intent)] == [5900]
    else:
        made = db(w.server, "SELECT data FROM processor_sim_objects WHERE kind = 'refund' "
                            f"AND data LIKE '%\"payment_intent\":\"{intent}\"%'")
        assert [json.loads(r[0])["amount"] for r in made] == [5900]
    # a refund the provider shares, after it: only its share comes back (100 x 11.80 / 118)
    assert ok(staff_refund(w, job.id, amount=11.8))["refund"]["providerShare"] == "prorata"
    t = eventually(lambda: transfer(w.api, pro, job.id), 30, "the prorata share reversed", interval=0.1,
                   until=lambda t: t["reversedAmount"] == 10)
    assert (t["status"], t["amount"]) == ("paid", 90)
    assert payouts(w.api, pro)["totals"] == {"scheduled": 0, "onHold": 0, "paid": 90, "reversed": 10, "balance": 0}
    # the staff's view of the customer lists each refund with who bore it
    pays = ok(w.api.get(f"/staff/customers/{job.user['id']}", token=w.staff_token("customer_support")))["payments"]
    [paid] = [p for p in pays if p["jobId"] == job.id and p["kind"] == "job"]
    assert sorted((x["amount"], x["providerShare"], x["source"], x["status"]) for x in paid["refunds"]) == \
        [(11.8, "prorata", "staff", "SUCCEEDED"), (59.0, "none", "staff", "SUCCEEDED")]
    assert {x["staffId"] for x in paid["refunds"]} == {w.staff["customer_support"]["id"]}
    eventually(lambda: refunded_mails(w, job.user), 20, "two refund emails", interval=0.1,
               until=lambda m: len(m) == 2)
    assert sum(m["paidOut"] for m in ledger(w, pro)) == 90
    # the provider's income (insights) loses only the share it bore
    income.append(insights(w.api, pro)["incomeByService"])
    assert income == [{"lawncare": 100}, {"lawncare": 90}]


# ================================================================ refunds never double (Stripe: a lost answer)

def test_stripe_a_refund_whose_answer_was_lost_is_pending_until_it_settles_once(sw):
    """Stripe makes the refund but every answer, and every look-up after it, is lost: 503. A
    second refund of the payment, without an Idempotency-Key (or with another one), is 409
    refund_pending while the background's look-up (held here) has not settled it; once it has,
    there is one refund at Stripe, the amount asked once, one email. Then a refund retried with
    its Idempotency-Key after a lost answer is the first refund and makes none."""
    fake = sw.fake
    pro = new_provider(sw, onboard=False)
    job = Job(sw, pro, 100)
    intent = job.payment()["processorPaymentIntentId"]
    fake.fail_next("POST", "/v1/refunds", count=3, status=500, after_processing=True)
    fake.fail_next("GET", "/v1/refunds", count=3, status=500)
    with fake.held("GET", "/v1/refunds"):  # the look-up after the lost ones waits for the test
        r = staff_refund(sw, job.id, amount=25, reason="Broken gate")
        assert (r.status_code, r.json()) == (503, UNAVAILABLE)
        assert "Retry-After" in r.headers
        for headers, amount in ((None, 25), (None, 10), ({"Idempotency-Key": f"other-{uuid.uuid4()}"}, 25)):
            again = staff_refund(sw, job.id, headers=headers, amount=amount, reason="Broken gate")
            assert (again.status_code, again.json()) == (409, PENDING), (headers, amount)
        assert job.payment()["refundedAmount"] == 0
    paid = eventually(job.payment, 30, "the refund settled in the background", interval=0.1,
                      until=lambda p: p["refundedAmount"] == 25)
    assert paid["status"] == "PAID"
    assert [x["amount"] for x in fake.objects("refund", payment_intent=intent)] == [2500]
    sw.api.wait_queue_idle()
    mails = eventually(lambda: refunded_mails(sw, job.user), 20, "the refund email", interval=0.1)
    assert len(mails) == 1 and "$25.00" in mails[0]["body"]
    # settled: a new request is a new refund; retried with its key after a lost answer, it is that one
    key = {"Idempotency-Key": f"refund-{uuid.uuid4()}"}
    fake.fail_next("POST", "/v1/refunds", count=3, status=500, after_processing=True)
    fake.fail_next("GET", "/v1/refunds", count=3, status=500)
    with fake.held("GET", "/v1/refunds"):  # else the background may settle it before the answer: 200
        r = staff_refund(sw, job.id, headers=key, amount=10, reason="Late")
        assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    body = ok(staff_refund(sw, job.id, headers=key, amount=10, reason="Late"))
    assert (body["refund"]["amount"], body["payment"]["refundedAmount"]) == (10.0, 35)
    replay = staff_refund(sw, job.id, headers=key, amount=10, reason="Late")
    assert replay.status_code == 200 and replay.json() == body and replay.headers.get("Idempotent-Replayed") == "true"
    assert sorted(x["amount"] for x in fake.objects("refund", payment_intent=intent)) == [1000, 2500]
    assert job.payment()["refundedAmount"] == 35
    sw.api.wait_queue_idle()
    assert len(eventually(lambda: refunded_mails(sw, job.user), 20, "two refund emails", interval=0.1,
                          until=lambda m: len(m) >= 2)) == 2


# ================================================================ reports (the simulated processor)

def report(w, job, text="The hedge was not trimmed"):
    return ok(w.api.post(f"/jobs/{job.id}/report", token=job.user["token"], json={"description": text}), 201)


def all_reports(w, **params):
    token = w.staff_token("customer_support")
    return [x for page in pages(w.api, "/staff/reports", token, params) for x in page]


def the_report(w, report_id, **params):
    found = [x for x in all_reports(w, **params) if x["id"] == report_id]
    return found[0] if found else None


def resolve(w, report_id, **body):
    return w.api.post(f"/staff/reports/{report_id}/resolve", token=w.staff_token("customer_support"), json=body)


def test_reports_are_listed_for_customer_support_and_released(sim):
    w = sim
    other = make_staff(w.api, "customer_support", admin=admin_login(w.api))  # every member is told
    pro = new_provider(w)
    job = Job(w, pro, 100)
    w.advance(HOUR_MS)
    made = report(w, job, "The hedge was not trimmed at all")
    created = parse_iso(made["createdAt"])
    [held] = [t for t in payouts(w.api, pro)["transfers"] if t["jobId"] == job.id]
    for staff in (w.staff["customer_support"], other):
        [mail] = eventually(lambda: [m for m in w.server.mails(staff["email"]) if job.id in m["subject"]], 20,
                            "the report's email to customer support", interval=0.1)
        assert mail["subject"] == f"A report holds $100.00 of job {job.id}"
        assert "The hedge was not trimmed at all" in mail["body"] and f"/staff/reports/{made['id']}/resolve" in \
            mail["body"]
    job.tip(5)  # captured after the report: held until the same time
    tip = transfer(w.api, pro, job.id, "tip")
    assert tip["status"] == "on_hold"
    listed = the_report(w, made["id"], status="open")
    assert listed == {
        "id": made["id"], "jobId": job.id, "customerId": job.user["id"],
        "description": "The hedge was not trimmed at all", "status": "open", "createdAt": made["createdAt"],
        "holdEndsAt": iso_ms(created + HOLD),
        "job": {"service": "lawncare", "status": "COMPLETED", "providerId": pro["id"]},
        "heldTransfers": [{"id": held["id"], "kind": "job", "amount": 100, "status": "on_hold",
                           "holdUntil": iso_ms(created + HOLD)},
                          {"id": tip["id"], "kind": "tip", "amount": 5, "status": "on_hold",
                           "holdUntil": iso_ms(created + HOLD)}],
        "resolution": None}
    # customer support only
    r = w.api.get("/staff/reports")
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    for token in (w.staff_token("professional_support"), job.user["token"], pro["token"]):
        r = w.api.get("/staff/reports", token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN)
        r = w.api.post(f"/staff/reports/{made['id']}/resolve", token=token, json={"action": "release", "note": "x"})
        assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = w.api.get("/staff/reports", token=w.staff_token("customer_support"), params={"status": "closed"})
    assert (r.status_code, r.json()) == (400, error_body(400, "status: must be one of: open, resolved"))
    # paged, newest first
    second = Job(w, pro, 100)
    made2 = report(w, second)
    got = pages(w.api, "/staff/reports", w.staff_token("customer_support"), {"status": "open"}, limit=1)
    ids = [p[0]["id"] for p in got]
    assert all(len(p) == 1 for p in got[:-1]) and ids.index(made2["id"]) < ids.index(made["id"])
    # refused resolutions change nothing
    for body, status, message in (
            ({"action": "release"}, 400, "note: is required"),
            ({"action": "release", "note": ""}, 400, "note: must not be empty"),
            ({"action": "forgive", "note": "x"}, 400, "action: must be one of: release, refund"),
            ({"note": "x"}, 400, "action: is required"),
            ({"action": "release", "amount": 5, "note": "x"}, 400, "amount: is only for action refund")):
        r = resolve(w, made["id"], **body)
        assert (r.status_code, r.json()) == (status, error_body(status, message)), body
    r = resolve(w, "cnosuchreport00000000000000", action="release", note="x")
    assert (r.status_code, r.json()) == (404, error_body(404, "Report not found"))
    assert the_report(w, made["id"]) == listed
    # released: the hold ends at once, the transfer goes out when due
    body = ok(resolve(w, made["id"], action="release", note="The photos show the hedge trimmed"))
    assert body["refund"] is None
    done = body["report"]
    resolution = done["resolution"]
    assert done == dict(listed, status="resolved", holdEndsAt=None, heldTransfers=[], resolution=resolution)
    assert {k: resolution[k] for k in ("action", "note", "resolvedBy")} == \
        {"action": "release", "note": "The photos show the hedge trimmed",
         "resolvedBy": w.staff["customer_support"]["id"]}
    parse_iso(resolution["resolvedAt"])
    assert the_report(w, made["id"]) == done
    assert {t["kind"]: t["status"] for t in payouts(w.api, pro)["transfers"] if t["jobId"] == job.id} == \
        {"job": "scheduled", "tip": "scheduled"}
    assert db(w.server, "SELECT actor_id, actor_role FROM audit_log WHERE action = 'report.resolve' "
                        f"AND target_id = '{made['id']}'") == [(w.staff["customer_support"]["id"], "customer_support")]
    r = resolve(w, made["id"], action="release", note="again")
    assert (r.status_code, r.json()) == (409, error_body(409, "This report was already resolved"))
    assert made["id"] in [x["id"] for x in all_reports(w, status="resolved")]
    assert made["id"] not in [x["id"] for x in all_reports(w, status="open")]
    past_window(w, 73, pro)
    paid = wait_transfer(w.api, pro, job.id, "paid")
    wait_transfer(w.api, pro, job.id, "paid", "tip")
    assert parse_iso(paid["paidAt"]) < created + HOLD
    # refunded: the customer gets part back, the provider's share is taken, the rest goes out
    r = resolve(w, made2["id"], action="refund", amount=500, note="Too much")
    assert (r.status_code, r.json()) == (400, error_body(400, "amount: must be between 0.01 and 118.00"))
    assert the_report(w, made2["id"])["status"] == "open" and second.payment()["refundedAmount"] == 0
    body = ok(resolve(w, made2["id"], action="refund", amount=59, note="Half the hedge was left"))
    refund = body["refund"]
    assert set(refund) == {"refund", "refunds", "payment", "tip"}
    assert {k: refund["refund"][k] for k in ("target", "amount", "reason", "providerShare")} == \
        {"target": "job", "amount": 59.0, "reason": "Half the hedge was left", "providerShare": "prorata"}
    assert refund["payment"]["refundedAmount"] == 59 and second.payment()["refundedAmount"] == 59
    assert body["report"]["resolution"]["action"] == "refund" and body["report"]["status"] == "resolved"
    t = wait_transfer(w.api, pro, second.id, "paid")  # the hold ended and it was due: out at once
    assert (t["amount"], t["reversedAmount"]) == (50, 0)
    r = resolve(w, made2["id"], action="refund", note="again")
    assert (r.status_code, r.json()) == (409, error_body(409, "This report was already resolved"))
    eventually(lambda: refunded_mails(w, second.user), 20, "the refund email", interval=0.1)


def test_a_report_outlives_its_customers_account_for_120_days(sim):
    w = sim
    pro = new_provider(w)
    job = Job(w, pro, 100)
    made = report(w, job, "Paint on the carpet")
    r = w.api.delete("/users/me", token=job.user["token"], json={"password": job.user["password"]})
    assert r.status_code == 204, r.text
    kept = the_report(w, made["id"])
    assert (kept["customerId"], kept["description"], kept["jobId"]) == (None, "Paint on the carpet", job.id)
    w.advance(119 * DAY_MS)
    w.api.wait_queue_idle()
    assert the_report(w, made["id"]) is not None
    w.advance(2 * DAY_MS)
    eventually(lambda: the_report(w, made["id"]), 20, "the report deleted by the daily task", interval=0.2,
               until=lambda found: found is None)


# ================================================================ Preferred Pro

def cancel(w, pro):
    return w.api.post("/providers/me/preferred-pro/cancel", token=pro["token"])


def me(w, pro):
    return ok(w.api.get("/providers/me", token=pro["token"]))


def test_preferred_pro_cancelled_ends_with_the_month_and_bills_no_more(w):
    pro = new_provider(w, premium=True)
    start = next_month_start(w)
    relogin(w.api, pro)
    month = start.strftime("%Y-%m")
    ends = iso_ms(month_start_after(start))
    answer = {"isPremium": True, "cancelAtMonthEnd": True, "endsAt": ends}
    assert ok(cancel(w, pro)) == answer
    assert ok(cancel(w, pro)) == answer  # again: the same
    got = me(w, pro)
    assert (got["isPremium"], got["premiumEndsAt"]) == (True, ends)
    assert insights(w.api, pro)["membershipFee"] == {
        "owed": True, "amount": 39, "month": month, "cancelAtMonthEnd": True, "balance": 0,
        "reason": "Preferred Pro membership fee for this month"}
    # applying again before the end keeps it going
    assert ok(w.api.post("/providers/me/preferred-pro/apply", token=pro["token"])) == \
        {"ok": True, "message": "Your Preferred Pro membership continues"}
    got = me(w, pro)
    assert (got["isPremium"], got["premiumEndsAt"]) == (True, None)
    assert insights(w.api, pro)["membershipFee"]["cancelAtMonthEnd"] is False
    assert ok(cancel(w, pro)) == answer
    # this month's fee is billed from its first transfer: 25 of it, 14 owed and shown so
    small = Job(w, pro, 25)
    past_window(w, 73, pro)
    wait_transfer(w.api, pro, small.id, "paid")
    assert insights(w.api, pro)["membershipFee"] == {
        "owed": True, "amount": 14, "month": month, "cancelAtMonthEnd": True, "balance": -14,
        "reason": "A Preferred Pro fee billed is not paid yet: it is taken from your next transfers"}
    paid_job(w, pro, 100)
    assert [x[0] for x in w.transfers(pro)] == [8600]
    assert insights(w.api, pro)["membershipFee"] == {
        "owed": False, "amount": 0, "month": month, "cancelAtMonthEnd": True, "balance": 0,
        "reason": "This month's fee is paid"}
    # the next month: no longer a member, nothing billed
    next_month_start(w)
    relogin(w.api, pro)
    w.api.wait_queue_idle()  # the hourly task ends the membership
    got = me(w, pro)
    assert (got["isPremium"], got["premiumBilledMonth"]) == (False, month)
    assert insights(w.api, pro)["membershipFee"] == {"owed": False, "amount": 0, "reason": "Not a Preferred Pro member",
                                                     "balance": 0}
    later = paid_job(w, pro, 100)
    t = transfer(w.api, pro, later.id)
    assert (t["amount"], t["netted"], t["status"]) == (100, 0, "paid")
    assert not [x for x in payouts(w.api, pro)["transfers"] if x["kind"] == "fee" and x["jobId"] == later.id]
    assert [x[0] for x in w.transfers(pro)] == [8600, 10000]
    assert me(w, pro)["premiumBilledMonth"] == month
    r = cancel(w, pro)
    assert (r.status_code, r.json()) == (409, NOT_MEMBER)
    # applying after the end is a new membership
    assert ok(w.api.post("/providers/me/preferred-pro/apply", token=pro["token"])) == \
        {"ok": True, "message": "Welcome to Preferred Pro"}
    assert insights(w.api, pro)["membershipFee"]["owed"] is True


def test_a_preferred_pro_membership_ended_is_new_when_applied_for_again(sim):
    """The membership ended at the month's start and the hourly task has not cleared its row yet
    (the clock is not moved: the end is written as a second ago): the provider reads as no
    member, cannot cancel, and may apply again: a new membership."""
    w = sim
    pro = new_provider(w, onboard=False, premium=True)
    ok(cancel(w, pro))
    w.api.wait_queue_idle()
    ended = int(server_now(w.api).timestamp() * 1000) - 1000
    db(w.server, f"UPDATE providers SET premium_ends_at = {ended} WHERE id = '{pro['id']}'")
    assert me(w, pro)["isPremium"] is False
    r = cancel(w, pro)
    assert (r.status_code, r.json()) == (409, NOT_MEMBER)
    r = w.api.post("/providers/me/preferred-pro/apply", token=pro["token"])
    assert (r.status_code, r.json()) == (200, {"ok": True, "message": "Welcome to Preferred Pro"})
    got = me(w, pro)
    assert (got["isPremium"], got["premiumEndsAt"]) == (True, None)


def test_preferred_pro_cancel_is_for_members(w):
    pro = new_provider(w, onboard=False)
    r = cancel(w, pro)
    assert (r.status_code, r.json()) == (409, NOT_MEMBER)
    assert me(w, pro)["premiumEndsAt"] is None
    user = w.api.register_user()
    for token in (user["token"], w.staff_token("professional_support")):
        r = w.api.post("/providers/me/preferred-pro/cancel", token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = w.api.post("/providers/me/preferred-pro/cancel")
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)


# ================================================================ a revoked key (Stripe)

def metric(api, name):
    r = api.get("/metrics")
    assert r.status_code == 200, r.text
    [value] = [line.split()[-1] for line in r.text.splitlines() if line.startswith(name + " ")]
    return float(value)


@pytest.mark.parametrize("status", [401, 403])
def test_stripe_a_revoked_key_makes_the_processor_unauthorized_until_a_probe_succeeds(server_factory, status):
    """On a server and a fake of its own (the state is the process's): Stripe refuses the key
    (revoked: 401; restricted: 403). The call answers 503, /ready says why, the metric shows it;
    within the hour nothing reaches Stripe, and the capture of a job completed meanwhile waits
    in the background; the hour's probe, still refused, keeps it so another hour; once the key
    works again, the first call after that probes and succeeds: the service is ready and the
    capture is made, once."""
    fake = FakeStripe(api_key="sk_test_fake", prices={PRICE: 999}).start()
    try:
        srv = server_factory(STRIPE_API_BASE=fake.url, **STRIPE_ENV)
        api = Api(srv)
        fake.set_clock(server_now(api).timestamp())
        pro = provider(api)
        user = customer(api, pro["body"]["serviceZips"][0], "pm_card_visa")
        job_id = post_job(api, user)["id"]
        accept(api, user, quote(api, pro, job_id, 100)["id"])
        step(api, pro, job_id, "ON_THE_WAY")
        step(api, pro, job_id, "IN_PROGRESS")
        hold = payment_of(api, user, job_id)
        assert hold["status"] == "AUTHORIZED"
        card = ok(api.get("/payments/method", token=user["token"]))
        assert ok(api.get("/ready")) == {"status": "ready"}
        assert metric(api, "marketplace_payment_processor_unauthorized") == 0
        fake.deny(status)
        before = len(fake.calls())
        r = api.get("/payments/method", token=user["token"])
        assert (r.status_code, r.json()) == (503, UNAVAILABLE) and "Retry-After" in r.headers
        assert [c["status"] for c in fake.calls()[before:]] == [status]  # not tried again
        r = api.get("/ready")
        assert (r.status_code, r.json()) == \
            (503, {"status": "unavailable", "reason": "payment processor: unauthorized"})
        assert metric(api, "marketplace_payment_processor_unauthorized") == 1
        assert metric(api, "marketplace_payment_processor_auth_failures_total") == 1
        srv.wait_log(lambda line: line.get("msg") == "stripe refused the key" and line.get("status") == status)
        # within the hour nothing is sent: the calls answer at once, the capture waits
        sent = len(fake.calls())
        assert step(api, pro, job_id, "COMPLETED")["status"] == "COMPLETED"
        api.advance_clock(30 * 60 * 1000)
        for method, path, body in (("GET", "/payments/method", None), ("POST", "/payments/setup-intent", None),
                                   ("POST", "/payments/payment-method", {"paymentMethodId": "pm_card_mastercard"})):
            r = api.request(method, path, token=user["token"], json=body)
            assert (r.status_code, r.json()) == (503, UNAVAILABLE), path
        api.wait_queue_idle()
        assert len(fake.calls()) == sent
        assert payment_of(api, user, job_id)["status"] == "AUTHORIZED"
        assert api.get("/ready").status_code == 503
        # the hour's probe (a call, or the waiting capture), still refused: one request, and another hour
        api.advance_clock(31 * 60 * 1000)
        fake.set_clock(server_now(api).timestamp())
        r = api.get("/payments/method", token=user["token"])
        assert (r.status_code, r.json()) == (503, UNAVAILABLE)
        api.wait_queue_idle()
        assert [c["status"] for c in fake.calls()[sent:]] == [status]
        assert metric(api, "marketplace_payment_processor_auth_failures_total") == 2
        # hour after hour, one request an hour, and the waiting capture does not run out of attempts (8)
        for hour in range(1, 10):
            api.advance_clock(61 * 60 * 1000)
            api.wait_queue_idle()
            assert [c["status"] for c in fake.calls()[sent:]] == [status] * (hour + 1), hour
        assert metric(api, "marketplace_payment_processor_auth_failures_total") == 11
        assert payment_of(api, user, job_id)["status"] == "AUTHORIZED"
        # the key works again: the hour's probe clears it. The waiting capture comes due with the
        # clock and may probe first; while a probe is out a call answers 503 at once, so the call
        # waits for the queue (both orders end the same: ready, the capture made once)
        fake.deny(None)
        api.advance_clock(61 * 60 * 1000)
        fake.set_clock(server_now(api).timestamp())
        api.wait_queue_idle()
        assert ok(api.get("/payments/method", token=user["token"])) == card
        assert ok(api.get("/ready")) == {"status": "ready"}
        assert metric(api, "marketplace_payment_processor_unauthorized") == 0
        paid = eventually(lambda: payment_of(api, user, job_id), 30, "the waiting capture made", interval=0.1,
                          until=lambda p: p["status"] == "PAID")
        assert paid["processorPaymentIntentId"] == hold["processorPaymentIntentId"]
        captures = fake.calls("POST", f"/v1/payment_intents/{hold['processorPaymentIntentId']}/capture")
        assert [c["status"] for c in captures if c["status"] == 200] == [200]
    finally:
        fake.stop()


def test_reports_and_preferred_pro_on_the_shared_server(api):
    """The report and Preferred Pro routes answer a success on the session's shared server
    (simulated processor): a completed job reported, listed, released; a membership cancelled."""
    support = make_staff(api, "customer_support")
    pro = provider(api, [private_zip()])
    user = customer(api, pro["body"]["serviceZips"][0], "pm_card_visa")
    job_id = post_job(api, user)["id"]
    accept(api, user, quote(api, pro, job_id, 80)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, pro, job_id, status)
    made = ok(api.post(f"/jobs/{job_id}/report", token=user["token"], json={"description": "Not finished"}), 201)
    rows = [r for page in pages(api, "/staff/reports", support["token"], {"status": "open"}) for r in page
            if r["id"] == made["id"]]
    assert [(r["jobId"], r["status"]) for r in rows] == [(job_id, "open")]
    done = ok(api.post(f"/staff/reports/{made['id']}/resolve", token=support["token"],
                       json={"action": "release", "note": "Checked with the provider"}))
    assert (done["report"]["status"], done["report"]["resolution"]["action"], done["refund"]) == \
        ("resolved", "release", None)
    ok(api.post("/providers/me/preferred-pro/apply", token=pro["token"]))
    ended = ok(api.post("/providers/me/preferred-pro/cancel", token=pro["token"]))
    assert (ended["isPremium"], ended["cancelAtMonthEnd"]) == (True, True)
