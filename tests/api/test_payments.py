"""Payments: the saved card and the premium subscription (/payments/...), the payments of the
job flow through the real job endpoints (acceptance authorizes, completion captures or charges,
cancellation voids, tips charge at once), failures that people see and fix, card holds renewed
before they lapse, retries that never charge twice, reconciliation (periodic and
`marketplace payments reconcile`), the processor webhooks (POST /webhooks), and the real Stripe
client against a local fake Stripe (tests/api/fake_stripe.py).

Issue 21 (the last sections): a card saved while a charge runs is used, unknown outcomes read
PENDING, a refused renewal keeps its hold, a job back to PENDING gives its money back and is
paid afresh, refunds (POST /staff/payments/:jobId/refund and charge.refunded), charges made
twice refunded, resubscribing resumes, subscription events in order, and migration 0015 on
existing rows.

Spec: marketplace-api.md sections 2-6 (Payments, Payment status, Premium flags, Payment
authorization, inbound webhooks); decisions.md sections 2, 4 and 5; issues 15 and 21.

Every test that moves money counts the processor's PaymentIntents of its customer (the
simulated processor's processor_sim_objects, or the fake Stripe's store): exactly the expected
number, never more.

Webhook timestamps are taken from the service's clock (POST /__test/clock with 0), since other
suites move the shared server's clock forward and the 300 s tolerance is checked against it.
Tests that move the clock by days run on servers of their own.
"""
import concurrent.futures
import datetime
import glob
import json
import os
import re
import sqlite3
import subprocess
import threading
import time
import uuid

import pytest
import requests

from conftest import ADMIN_ENV, Api, WEBHOOK_SECRET, admin_login, free_port, sign_webhook
from helpers import assert_error, error_body, eventually, send_raw_json, server_seconds
from money import assert_money_conserved
from processor_worlds import PRICE, started_fake_stripe
from flow_helpers import fresh_zip, ok, provider as verified_provider
from staff_helpers import STAFF_ROLES, make_staff
from test_system import db_rows

UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

CARDS = [
    ("pm_card_visa", "visa", "4242"),
    ("pm_card_mastercard", "mastercard", "4444"),
    ("pm_card_amex", "amex", "8431"),
    ("pm_card_chargeDeclined", "visa", "0002"),
    ("pm_card_chargeDeclinedInsufficientFunds", "visa", "9995"),
]
VISA = {"brand": "visa", "last4": "4242", "expMonth": 12, "expYear": 2034}
MASTERCARD = {"brand": "mastercard", "last4": "4444", "expMonth": 12, "expYear": 2034}
DECLINED_CARD = {"brand": "visa", "last4": "0002", "expMonth": 12, "expYear": 2034}

NOT_PREMIUM = {"isPremium": False, "premiumSince": None, "processorSubscriptionId": None, "cancelAtPeriodEnd": False}
NEED_CARD = error_body(400, "A saved payment method is required")
NO_SUBSCRIPTION = error_body(400, "No active subscription", "invalid_state")
DECLINED = error_body(402, "Your card was declined.")
CANCEL_MESSAGE = "Premium is cancelled and stays active until the end of the current billing period"
ALREADY = "Already subscribed to premium"
TIP_TAKEN = error_body(409, "A tip was already submitted for this job")
UNAVAILABLE = error_body(503, "Payment processor unavailable")
RECEIVED = {"received": True, "duplicate": False}
DUPLICATE = {"received": True, "duplicate": True}

PAYMENT_FIELDS = {"id", "status", "amount", "processorPaymentIntentId", "holdExpiresAt", "failureReason",
                  "refundedAmount", "dispute"}
DECLINED_REASON = "card_declined: Your card was declined."
FUNDS_REASON = "card_declined: Your card has insufficient funds."
NO_CARD_REASON = "no_payment_method: No saved payment method"
FAILED_MAIL = "Your payment failed: please update your card"
TOTAL = 118.0  # a quote of 100 and its 18% fee
TOTAL_CENTS = 11800
DAY_MS = 24 * 3600 * 1000
HOLD = datetime.timedelta(days=7)

USER_ROUTES = [
    ("POST", "/payments/setup-intent", None),
    ("POST", "/payments/payment-method", {"paymentMethodId": "pm_card_visa"}),
    ("GET", "/payments/method", None),
    ("GET", "/payments/premium/status", None),
    ("POST", "/payments/premium/subscribe", None),
    ("POST", "/payments/premium/cancel", None),
]


# ---------------------------------------------------------------- helpers

def parse_iso(text):
    assert ISO_RE.match(text), text
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)


def server_now(api):
    """The service's clock (it may run ahead of the real one), as a datetime."""
    return parse_iso(api.advance_clock(0))


def save_card(api, user, pm="pm_card_visa"):
    r = api.post("/payments/payment-method", token=user["token"], json={"paymentMethodId": pm})
    assert r.status_code == 200, r.text
    return r.json()


def get_method(api, user):
    r = api.get("/payments/method", token=user["token"])
    assert r.status_code == 200, r.text
    return r.json()


def premium_status(api, user):
    r = api.get("/payments/premium/status", token=user["token"])
    assert r.status_code == 200, r.text
    return r.json()


def subscribe(api, user):
    return api.post("/payments/premium/subscribe", token=user["token"])


def subscribed(api, user):
    r = subscribe(api, user)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == {"isPremium": True, "subscriptionId": body["subscriptionId"], "status": "active"}, body
    return body["subscriptionId"]


def customer_with_card(api, pm="pm_card_visa"):
    u = api.register_user()
    save_card(api, u, pm)
    return u


def assert_payment(p, status, amount=TOTAL, intent=..., reason=None, hold=False, refunded=0):
    """p is the job's payment; intent=... means 'any pi_ id'; hold: an ISO holdExpiresAt is set."""
    assert p is not None
    assert set(p) == PAYMENT_FIELDS, p
    assert ID_RE.match(p["id"]), p
    assert p["status"] == status, p
    assert p["amount"] == amount, p
    assert p["refundedAmount"] == refunded, p
    if intent is ...:
        assert isinstance(p["processorPaymentIntentId"], str) and p["processorPaymentIntentId"].startswith("pi_"), p
    else:
        assert p["processorPaymentIntentId"] == intent, p
    assert p["failureReason"] == reason, p
    if hold:
        parse_iso(p["holdExpiresAt"])
    else:
        assert p["holdExpiresAt"] is None, p


def db(server, sql):
    return db_rows(server.env["DATABASE_URL"], server.data_dir, sql)


def tip_row(server, job_id):
    """The tip's payments row: status, amount in cents, intent, failure reason, pending request."""
    rows = db(server, "SELECT status, amount_cents, processor_payment_intent_id, failure_reason, pending_op "
                      f"FROM payments WHERE job_id = '{job_id}' AND kind = 'tip'")
    assert len(rows) <= 1
    if not rows:
        return None
    status, cents, intent, reason, pending = rows[0]
    none = ("None", "")  # how SQLite and psql print NULL
    return {"status": status, "cents": int(cents), "intent": None if intent in none else intent,
            "reason": None if reason in none else reason, "pending": None if pending in none else pending}


def sim_intents(server, user):
    """The simulated processor's PaymentIntents of the user's customer, as it stores them."""
    cus = db(server, f"SELECT processor_customer_id FROM users WHERE id = '{user['id']}'")[0][0]
    rows = db(server, "SELECT data FROM processor_sim_objects WHERE kind = 'payment_intent' "
                      f"AND data LIKE '%\"customer\":\"{cus}\"%'")
    return sorted((json.loads(r[0]) for r in rows), key=lambda pi: pi["id"])


def sim_charges(server, user):
    return [pi for pi in sim_intents(server, user) if pi["status"] == "succeeded"]


def login(api, acct, provider=False):
    path = "/auth/provider/login" if provider else "/auth/login"
    acct["token"] = ok(api.post(path, json={"email": acct["email"], "password": acct["password"]}))["token"]


class Market:
    """One verified provider in a ZIP of its own; each deal is a new customer's job that it
    quotes (100, so 118.00 with the fee) and the customer accepts when told."""

    def __init__(self, api):
        self.api = api
        self.zip = fresh_zip()[0]
        self.pro = verified_provider(api, [self.zip])

    def deal(self, card="pm_card_visa", amount=100, user=None):
        return Deal(self, card, amount, user)


class Deal:
    def __init__(self, market, card, amount, user):
        api = self.api = market.api
        self.market = market
        self.user = user or api.register_user(zip=market.zip)
        if card:
            save_card(api, self.user, card)
        self.job_id = ok(api.post("/jobs", token=self.user["token"],
                                  json={"service": "lawncare", "description": "Mow the lawn",
                                        "preferredAt": "2031-05-01T09:00:00.000Z"}), 201)["id"]
        self.quote_id = ok(api.post("/quotes", token=self.pro["token"],
                                    json={"jobId": self.job_id, "amount": amount}), 201)["id"]

    @property
    def pro(self):
        return self.market.pro

    def accept(self):
        ok(self.api.post(f"/quotes/{self.quote_id}/accept", token=self.user["token"]))
        return self.payment()

    def payment(self):
        p = ok(self.api.get(f"/jobs/{self.job_id}", token=self.user["token"]))["payment"]
        assert p is None or set(p) == PAYMENT_FIELDS, p
        return p

    def wait_payment(self, what, check, timeout=20):
        return eventually(self.payment, timeout, what, interval=0.1, until=lambda p: p is not None and check(p))

    def step(self, status):
        job = ok(self.api.patch(f"/jobs/{self.job_id}/status", token=self.pro["token"], json={"status": status}))
        assert job["status"] == status

    def complete(self):
        for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
            self.step(status)
        return self.payment()

    def cancel(self):
        return ok(self.api.post(f"/jobs/{self.job_id}/cancel", token=self.user["token"]))

    def tip(self, amount=5):
        return self.api.post(f"/jobs/{self.job_id}/tip", token=self.user["token"], json={"amount": amount})

    def notes(self, provider=False):
        """Titles of this job's notifications, newest first (the provider's or the customer's)."""
        path, token = (("/providers/me/notifications", self.pro["token"]) if provider
                       else ("/users/me/notifications", self.user["token"]))
        return [n["title"] for n in ok(self.api.get(path, token=token)) if n["jobId"] == self.job_id]

    def payment_notes(self, provider=False):
        return [t for t in self.notes(provider) if t.startswith("Payment")]

    def failure_mails(self):
        return [m for m in self.api.server.mails(self.user["email"]) if m["subject"] == FAILED_MAIL]

    def wait_failure_mails(self, count):
        got = eventually(self.failure_mails, 20, f"{count} failure mail(s)", interval=0.1,
                         until=lambda m: len(m) >= count)
        assert len(got) == count, got
        return got

    def relogin(self):
        """Tokens last 7 days: after a jump of the clock both parties log in again."""
        login(self.api, self.user)
        login(self.api, self.pro, provider=True)


@pytest.fixture(scope="module")
def market(server):
    return Market(Api(server))


def event(type_, obj, event_id=None):
    return {"id": event_id or f"evt_{uuid.uuid4().hex}", "object": "event", "type": type_,
            "created": int(time.time()), "data": {"object": obj}}


def post_webhook(api, payload, secret=WEBHOOK_SECRET, timestamp=None, header=...):
    """POSTs payload (a dict, or raw bytes/str) signed at the service's clock unless told otherwise."""
    raw = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    raw = raw.encode() if isinstance(raw, str) else raw
    headers = {"Content-Type": "application/json"}
    if header is ...:
        ts = server_now(api).timestamp() if timestamp is None else timestamp
        headers["Stripe-Signature"] = sign_webhook(raw, secret=secret, timestamp=ts)
    elif header is not None:
        headers["Stripe-Signature"] = header
    return api.post("/webhooks", data=raw, headers=headers)


def webhook(api, type_, obj, event_id=None):
    r = post_webhook(api, event(type_, obj, event_id))
    assert r.status_code == 200, r.text
    assert r.json() == RECEIVED
    return r


# ================================================================ access

@pytest.mark.parametrize("method,path,body", USER_ROUTES)
def test_payment_routes_need_a_token(api, method, path, body):
    r = api.request(method, path, json=body)
    assert r.status_code == 401, r.text
    assert r.json() == UNAUTHORIZED
    r = api.request(method, path, json=body, token="not-a-jwt")
    assert r.status_code == 401, r.text
    assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("method,path,body", USER_ROUTES)
def test_payment_routes_refuse_providers(api, method, path, body):
    p = api.register_provider()
    r = api.request(method, path, json=body, token=p["token"])
    assert r.status_code == 403, r.text
    assert r.json() == FORBIDDEN


# ================================================================ setup intent and saved card

def test_setup_intent_returns_client_secret(api):
    u = api.register_user()
    r = api.post("/payments/setup-intent", token=u["token"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["clientSecret"]
    assert re.match(r"^seti_\w+_secret_\w+$", body["clientSecret"]), body
    # a second call reuses the customer and makes a new SetupIntent
    again = ok(api.post("/payments/setup-intent", token=u["token"]))
    assert list(again) == ["clientSecret"]
    assert again["clientSecret"] != body["clientSecret"]
    # no card was saved by it
    assert get_method(api, u) is None


def test_method_is_null_before_a_card_is_saved(api):
    u = api.register_user()
    r = api.get("/payments/method", token=u["token"])
    assert r.status_code == 200
    assert r.text.strip() == "null"
    assert r.json() is None
    # also after a setup intent alone
    ok(api.post("/payments/setup-intent", token=u["token"]))
    assert get_method(api, u) is None


@pytest.mark.parametrize("pm,brand,last4", CARDS)
def test_save_test_cards(api, pm, brand, last4):
    u = api.register_user()
    ok(api.post("/payments/setup-intent", token=u["token"]))
    expected = {"brand": brand, "last4": last4, "expMonth": 12, "expYear": 2034}
    assert save_card(api, u, pm) == expected
    assert get_method(api, u) == expected


def test_save_card_without_setup_intent_creates_the_customer(api):
    u = api.register_user()
    assert save_card(api, u) == VISA
    assert get_method(api, u) == VISA


def test_a_new_card_replaces_the_saved_one(api):
    u = customer_with_card(api)
    assert save_card(api, u, "pm_card_mastercard") == MASTERCARD
    assert get_method(api, u) == MASTERCARD


def test_cards_are_per_customer(api):
    a = customer_with_card(api, "pm_card_amex")
    b = api.register_user()
    assert get_method(api, b) is None
    assert get_method(api, a)["brand"] == "amex"


def test_unknown_payment_method_is_400_and_keeps_the_saved_card(api):
    u = api.register_user()
    r = api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "pm_card_nope"})
    assert r.status_code == 400
    assert r.json() == error_body(400, "paymentMethodId: unknown payment method")
    assert get_method(api, u) is None
    save_card(api, u)
    r = api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "tok_visa"})
    assert r.status_code == 400
    assert r.json() == error_body(400, "paymentMethodId: unknown payment method")
    assert get_method(api, u) == VISA


@pytest.mark.parametrize("body", [
    {}, {"paymentMethodId": ""}, {"paymentMethodId": None}, {"paymentMethodId": 42}, {"paymentMethodId": True},
    {"paymentMethodId": ["pm_card_visa"]}, {"paymentMethodId": {"id": "pm_card_visa"}}, {"paymentmethodid": "pm_card_visa"},
    {"paymentMethodId": "p" * 256},
])
def test_payment_method_validation(api, body):
    u = api.register_user()
    r = api.post("/payments/payment-method", token=u["token"], json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("paymentMethodId: "), r.json()
    assert r.json() == error_body(400, r.json()["error"])
    assert get_method(api, u) is None


def test_payment_method_malformed_json(api):
    u = api.register_user()
    r = send_raw_json(api, "POST", "/payments/payment-method", u["token"], "{nope")
    assert_error(r, 400, "body: malformed JSON")


# ================================================================ premium

def test_premium_status_initially(api):
    u = api.register_user()
    assert premium_status(api, u) == NOT_PREMIUM


def test_subscribe_requires_a_saved_card(api):
    u = api.register_user()
    r = subscribe(api, u)
    assert r.status_code == 400
    assert r.json() == NEED_CARD
    # a customer without a card is still refused after a setup intent
    ok(api.post("/payments/setup-intent", token=u["token"]))
    r = subscribe(api, u)
    assert r.status_code == 400
    assert r.json() == NEED_CARD
    assert premium_status(api, u) == NOT_PREMIUM


def test_subscribe_with_a_card(api):
    u = customer_with_card(api)
    before = server_now(api)
    sub = subscribed(api, u)
    after = server_now(api)
    assert re.match(r"^sub_\w+$", sub), sub
    st = premium_status(api, u)
    assert st == {"isPremium": True, "premiumSince": st["premiumSince"], "processorSubscriptionId": sub,
                  "cancelAtPeriodEnd": False}
    since = parse_iso(st["premiumSince"])
    assert before - datetime.timedelta(seconds=1) <= since <= after + datetime.timedelta(seconds=1)
    # subscribing again answers 200 with a message and the same subscription
    r = subscribe(api, u)
    assert r.status_code == 200, r.text
    assert r.json() == {"message": ALREADY, "isPremium": True, "subscriptionId": sub, "status": "active"}
    assert premium_status(api, u) == st


def test_subscribe_with_a_declined_card_then_a_good_one(api):
    u = customer_with_card(api, "pm_card_chargeDeclined")
    r = subscribe(api, u)
    assert r.status_code == 402, r.text
    assert r.json() == DECLINED
    assert premium_status(api, u) == NOT_PREMIUM
    # a retry on the same card is declined again (no stale idempotent success)
    r = subscribe(api, u)
    assert r.status_code == 402, r.text
    assert premium_status(api, u) == NOT_PREMIUM
    save_card(api, u, "pm_card_visa")
    sub = subscribed(api, u)
    st = premium_status(api, u)
    assert st["isPremium"] is True and st["processorSubscriptionId"] == sub


def test_subscribe_with_insufficient_funds_is_402(api):
    u = customer_with_card(api, "pm_card_chargeDeclinedInsufficientFunds")
    r = subscribe(api, u)
    assert r.status_code == 402, r.text
    assert r.json() == error_body(402, r.json()["error"]) and r.json()["error"]
    assert premium_status(api, u) == NOT_PREMIUM


def test_cancel_without_subscription_is_400(api):
    u = api.register_user()
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 400
    assert r.json() == NO_SUBSCRIPTION
    save_card(api, u)
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 400
    assert r.json() == NO_SUBSCRIPTION
    assert premium_status(api, u) == NOT_PREMIUM


def test_cancel_keeps_premium_until_period_end(api):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    before = premium_status(api, u)
    now = server_now(api)
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == {"message": CANCEL_MESSAGE, "cancelAtPeriodEnd": True, "currentPeriodEnd": body["currentPeriodEnd"]}
    end = parse_iso(body["currentPeriodEnd"])
    assert now + datetime.timedelta(days=27) < end < now + datetime.timedelta(days=32), (now, end)
    st = premium_status(api, u)
    assert st == {"isPremium": True, "premiumSince": before["premiumSince"], "processorSubscriptionId": sub,
                  "cancelAtPeriodEnd": True}
    # cancelling again is harmless
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 200, r.text
    assert r.json()["cancelAtPeriodEnd"] is True
    assert premium_status(api, u) == st


def sim_subscription(server, sub):
    [row] = db(server, f"SELECT data FROM processor_sim_objects WHERE id = '{sub}'")
    return json.loads(row[0])


def test_subscribing_again_after_cancel_resumes_the_subscription(api, server):
    """Issue 21: subscribing while the subscription is set to end at the period's end resumes
    it, here and at the processor; subscribing once more then says it is already there."""
    u = customer_with_card(api)
    sub = subscribed(api, u)
    ok(api.post("/payments/premium/cancel", token=u["token"]))
    assert sim_subscription(server, sub)["cancel_at_period_end"] is True
    since = premium_status(api, u)["premiumSince"]
    r = subscribe(api, u)
    assert r.status_code == 200, r.text
    assert r.json() == {"isPremium": True, "subscriptionId": sub, "status": "active", "cancelAtPeriodEnd": False}
    assert premium_status(api, u) == {"isPremium": True, "premiumSince": since, "processorSubscriptionId": sub,
                                      "cancelAtPeriodEnd": False}
    assert sim_subscription(server, sub)["cancel_at_period_end"] is False
    r = subscribe(api, u)
    assert r.status_code == 200
    assert r.json() == {"message": ALREADY, "isPremium": True, "subscriptionId": sub, "status": "active"}
    # one subscription at the processor all along
    cus = db(server, f"SELECT processor_customer_id FROM users WHERE id = '{u['id']}'")[0][0]
    subs = db(server, "SELECT id FROM processor_sim_objects WHERE kind = 'subscription' "
                      f"AND data LIKE '%\"customer\":\"{cus}\"%'")
    assert [row[0] for row in subs] == [sub]


# ================================================================ job payments (simulated processor)

def test_acceptance_authorizes_and_completion_captures_once(api, server, market):
    d = market.deal()
    before = server_now(api)
    p = d.accept()
    assert_payment(p, "AUTHORIZED", hold=True)
    hold = parse_iso(p["holdExpiresAt"])
    assert before + HOLD - datetime.timedelta(seconds=5) <= hold <= server_now(api) + HOLD + datetime.timedelta(seconds=5)
    [pi] = sim_intents(server, d.user)
    assert (pi["id"], pi["status"], pi["amount"], pi["capture_method"]) == \
        (p["processorPaymentIntentId"], "requires_capture", TOTAL_CENTS, "manual")
    assert pi["latest_charge"]["payment_method_details"]["card"]["capture_before"] * 1000 == \
        int(round(hold.timestamp() * 1000))
    assert d.complete() == dict(p, status="PAID", holdExpiresAt=None)
    [pi] = sim_intents(server, d.user)
    assert pi["status"] == "succeeded"
    # the assigned provider sees the same payment; nobody was told of a failure
    assert ok(api.get(f"/jobs/{d.job_id}", token=d.pro["token"]))["payment"] == d.payment()
    api.wait_queue_idle()
    assert d.failure_mails() == [] and d.payment_notes() == [] and d.payment_notes(provider=True) == []


@pytest.mark.parametrize("pm,reason", [("pm_card_chargeDeclined", DECLINED_REASON),
                                       ("pm_card_chargeDeclinedInsufficientFunds", FUNDS_REASON)])
def test_a_declined_authorization_is_told_and_a_good_card_recovers_it(api, server, market, pm, reason):
    d = market.deal(card=pm)
    p = d.accept()  # the acceptance itself succeeds
    assert_payment(p, "FAILED", reason=reason)
    [declined] = sim_intents(server, d.user)
    assert declined["id"] == p["processorPaymentIntentId"] and declined["status"] == "requires_payment_method"
    # the customer is emailed and notified with the reason, the provider notified
    [mail] = d.wait_failure_mails(1)
    assert mail["subject"] == FAILED_MAIL
    assert reason in mail["body"] and "update your card" in mail["body"] and "$118.00" in mail["body"]
    assert d.payment_notes() == ["Payment failed"]
    assert d.payment_notes(provider=True) == ["Payment failed"]
    # saving a good card retries the authorization in the background, under a new key
    save_card(api, d.user, "pm_card_visa")
    got = d.wait_payment("the recovered authorization", lambda q: q["status"] == "AUTHORIZED")
    assert_payment(got, "AUTHORIZED", hold=True)
    assert got["id"] == p["id"] and got["processorPaymentIntentId"] != p["processorPaymentIntentId"]
    assert d.payment_notes(provider=True) == ["Payment recovered", "Payment failed"]
    api.wait_queue_idle()
    assert len(d.failure_mails()) == 1 and d.payment_notes() == ["Payment failed"]
    intents = sim_intents(server, d.user)
    assert sorted(pi["status"] for pi in intents) == ["requires_capture", "requires_payment_method"]
    assert sim_charges(server, d.user) == []
    # and it is captured once on completion
    assert d.complete()["status"] == "PAID"
    [charge] = sim_charges(server, d.user)
    assert (charge["id"], charge["amount"]) == (got["processorPaymentIntentId"], TOTAL_CENTS)


def test_no_saved_card_at_acceptance_is_a_failure_that_a_card_recovers(api, server, market):
    d = market.deal(card=None)
    p = d.accept()
    assert_payment(p, "FAILED", intent=None, reason=NO_CARD_REASON)
    [mail] = d.wait_failure_mails(1)
    assert mail["subject"] == FAILED_MAIL and NO_CARD_REASON in mail["body"]
    assert d.payment_notes(provider=True) == ["Payment failed"]
    save_card(api, d.user)
    got = d.wait_payment("the authorization", lambda q: q["status"] == "AUTHORIZED")
    assert_payment(got, "AUTHORIZED", hold=True)
    assert d.payment_notes(provider=True) == ["Payment recovered", "Payment failed"]
    assert [pi["status"] for pi in sim_intents(server, d.user)] == ["requires_capture"]


def test_a_new_card_does_not_touch_authorized_or_paid_payments(api, server, market):
    d = market.deal()
    p = d.accept()
    save_card(api, d.user, "pm_card_mastercard")
    api.wait_queue_idle()
    assert d.payment() == p
    assert len(sim_intents(server, d.user)) == 1


def test_completion_without_a_live_hold_charges_the_total_once(api, server, market):
    d = market.deal()
    p = d.accept()
    # the processor cancels the hold (here: its object edited, then its event)
    hold = p["processorPaymentIntentId"]
    db(server, "UPDATE processor_sim_objects SET data = REPLACE(data, '\"status\":\"requires_capture\"', "
               f"'\"status\":\"canceled\"') WHERE id = '{hold}'")
    webhook(api, "payment_intent.canceled", {"id": hold, "object": "payment_intent",
                                             "cancellation_reason": "abandoned"})
    failed = d.payment()
    assert_payment(failed, "FAILED", intent=hold,
                   reason="canceled: The authorization was cancelled at the payment processor (abandoned).")
    d.wait_failure_mails(1)
    done = d.complete()
    assert_payment(done, "PAID")
    assert done["processorPaymentIntentId"] != hold
    assert d.payment_notes(provider=True) == ["Payment recovered", "Payment failed"]
    [charge] = sim_charges(server, d.user)
    assert (charge["id"], charge["amount"], charge["capture_method"]) == \
        (done["processorPaymentIntentId"], TOTAL_CENTS, "automatic")
    assert len(sim_intents(server, d.user)) == 2


def test_a_declined_completion_charge_stays_failed_and_the_next_card_charges_it(api, server, market):
    d = market.deal(card="pm_card_chargeDeclined")
    assert d.accept()["status"] == "FAILED"
    done = d.complete()  # the job completes all the same
    assert ok(api.get(f"/jobs/{d.job_id}", token=d.user["token"]))["status"] == "COMPLETED"
    assert_payment(done, "FAILED", reason=DECLINED_REASON)
    d.wait_failure_mails(2)  # acceptance, then the charge
    assert d.payment_notes(provider=True) == ["Payment failed"]  # told once
    assert sim_charges(server, d.user) == []
    save_card(api, d.user, "pm_card_amex")
    paid = d.wait_payment("the charge", lambda q: q["status"] == "PAID")
    assert_payment(paid, "PAID")
    [charge] = sim_charges(server, d.user)
    assert (charge["id"], charge["amount"], charge["capture_method"]) == \
        (paid["processorPaymentIntentId"], TOTAL_CENTS, "automatic")
    assert d.payment_notes(provider=True) == ["Payment recovered", "Payment failed"]


def test_cancellation_after_48_hours_voids_the_hold(clock_api):
    api = clock_api
    d = Market(api).deal()
    p = d.accept()
    api.advance_clock(49 * 3600 * 1000)
    d.cancel()
    assert_payment(d.payment(), "CANCELED", intent=p["processorPaymentIntentId"])
    assert [pi["status"] for pi in sim_intents(api.server, d.user)] == ["canceled"]
    api.wait_queue_idle()
    assert d.payment_notes(provider=True) == []


def test_tip_charges_once_and_sets_the_tip_amount(api, server, market):
    d = market.deal()
    d.accept()
    d.complete()
    assert ok(d.tip(7.5)) == {"success": True, "tipAmount": 7.5}
    row = tip_row(server, d.job_id)
    assert (row["status"], row["cents"], row["reason"], row["pending"]) == ("PAID", 750, None, None)
    charges = sim_charges(server, d.user)
    assert sorted((c["amount"], c["capture_method"]) for c in charges) == [(750, "automatic"), (TOTAL_CENTS, "manual")]
    r = d.tip(3)
    assert (r.status_code, r.json()) == (409, TIP_TAKEN)
    assert len(sim_charges(server, d.user)) == 2
    assert ok(api.get(f"/jobs/{d.job_id}", token=d.user["token"]))["tipAmount"] == 7.5


@pytest.mark.parametrize("pm,message", [("pm_card_chargeDeclined", "Your card was declined."),
                                        ("pm_card_chargeDeclinedInsufficientFunds", "Your card has insufficient funds.")])
def test_a_declined_tip_is_402_is_kept_and_another_card_may_tip(api, server, market, pm, message):
    d = market.deal()
    d.accept()
    d.complete()
    save_card(api, d.user, pm)
    r = d.tip(5)
    assert (r.status_code, r.json()) == (402, error_body(402, message))
    row = tip_row(server, d.job_id)  # recorded, not deleted
    assert (row["status"], row["reason"]) == ("FAILED", f"card_declined: {message}")
    r = d.tip(5)  # the same card again: a new attempt, declined again
    assert r.status_code == 402
    save_card(api, d.user)
    assert ok(d.tip(6)) == {"success": True, "tipAmount": 6.0}
    row = tip_row(server, d.job_id)
    assert (row["status"], row["cents"], row["reason"]) == ("PAID", 600, None)
    tips = [c for c in sim_charges(server, d.user) if c["capture_method"] == "automatic"]
    assert [(c["id"], c["amount"]) for c in tips] == [(row["intent"], 600)]


def test_tip_without_a_card_is_400_and_records_nothing(api, server, market):
    d = market.deal(card=None)
    d.accept()
    d.complete()
    r = d.tip(5)
    assert (r.status_code, r.json()) == (400, NEED_CARD)
    assert tip_row(server, d.job_id) is None


# ================================================================ card holds and the clock (a server of their own)

@pytest.fixture(scope="module")
def clock_api(make_server):
    api = Api(make_server())
    yield api
    assert_money_conserved(api.server)  # after the module's tests: each cent charged is accounted for


def advance_days(api, days):
    return parse_iso(api.advance_clock(int(days * DAY_MS)))


def test_a_job_completed_ten_days_after_acceptance_renews_its_hold_once(clock_api):
    api = clock_api
    d = Market(api).deal()
    p = d.accept()
    first = p["processorPaymentIntentId"]
    # six days and a bit later the hold lapses within 24 hours: the hourly task renews it
    now = advance_days(api, 6.1)
    renewed = d.wait_payment("the renewal", lambda q: q["processorPaymentIntentId"] != first)
    assert_payment(renewed, "AUTHORIZED", hold=True)
    assert renewed["id"] == p["id"]
    hold = parse_iso(renewed["holdExpiresAt"])
    assert now + HOLD - datetime.timedelta(seconds=5) <= hold <= now + HOLD + datetime.timedelta(seconds=30)
    old = eventually(lambda: [pi for pi in sim_intents(api.server, d.user) if pi["id"] == first and pi["status"] == "canceled"],
                     20, "the old hold cancelled", interval=0.1)
    assert old[0]["cancellation_reason"] == "requested_by_customer"
    # ten days after acceptance: the renewed hold has days left, nothing more is renewed
    advance_days(api, 3.9)
    d.relogin()
    api.wait_queue_idle()
    assert d.payment() == renewed
    done = d.complete()
    assert_payment(done, "PAID", intent=renewed["processorPaymentIntentId"])
    intents = sim_intents(api.server, d.user)
    assert sorted((pi["status"], pi["amount"]) for pi in intents) == \
        [("canceled", TOTAL_CENTS), ("succeeded", TOTAL_CENTS)]
    api.wait_queue_idle()
    assert d.payment_notes(provider=True) == [] and d.failure_mails() == []


def kept_hold_after_a_refused_renewal(api):
    """A deal accepted on a visa, then the customer saves a declined card; 6.5 days later the
    renewal on it is refused. Returns (deal, acceptance payment, kept payment, the visa's id)."""
    d = Market(api).deal()
    p = d.accept()
    visa = saved_card_id(api.server, d.user)
    save_card(api, d.user, "pm_card_chargeDeclined")  # the customer's card changes; nothing to recover
    api.wait_queue_idle()
    assert d.payment() == p
    advance_days(api, 6.5)
    d.relogin()
    kept = d.wait_payment("the refused renewal", lambda q: q["failureReason"] is not None)
    return d, p, kept, visa


def test_a_renewal_refused_on_a_new_card_keeps_the_old_hold_which_completion_captures(clock_api):
    """Issue 21: the customer saves a card that is declined after acceptance; at renewal time
    the new authorization on it fails, yet the payment keeps its good hold (AUTHORIZED, its own
    holdExpiresAt, the refusal's reason shown) and completion captures it. Nobody is told of a
    failure: nothing failed."""
    api = clock_api
    d, p, kept, visa = kept_hold_after_a_refused_renewal(api)
    assert kept == dict(p, failureReason=DECLINED_REASON)
    [declined] = [pi for pi in sim_intents(api.server, d.user) if pi["status"] == "requires_payment_method"]
    assert declined["payment_method"] != visa and declined["metadata"]["idempotency_key"] == f"renew-{p['id']}-2"
    api.wait_queue_idle()
    assert d.failure_mails() == [] and d.payment_notes() == [] and d.payment_notes(provider=True) == []
    done = d.complete()
    assert_payment(done, "PAID", intent=p["processorPaymentIntentId"])
    [charge] = sim_charges(api.server, d.user)
    assert (charge["id"], charge["amount"], charge["payment_method"]) == (p["processorPaymentIntentId"], TOTAL_CENTS,
                                                                          visa)


def test_a_kept_hold_is_renewed_on_its_own_card_at_the_next_run(clock_api):
    """The renewal after a refused one is made on the hold's own card: a new hold there replaces
    the old one (cancelled), the saved card's refusal stays shown, completion captures it."""
    api = clock_api
    d, p, kept, visa = kept_hold_after_a_refused_renewal(api)
    now = parse_iso(api.advance_clock(3600 * 1000))
    renewed = d.wait_payment("the renewal on the hold's card", lambda q: q["processorPaymentIntentId"] !=
                             p["processorPaymentIntentId"])
    assert_payment(renewed, "AUTHORIZED", reason=DECLINED_REASON, hold=True)
    hold = parse_iso(renewed["holdExpiresAt"])
    assert now + HOLD - datetime.timedelta(seconds=5) <= hold <= now + HOLD + datetime.timedelta(seconds=60)
    new = {pi["id"]: pi for pi in sim_intents(api.server, d.user)}[renewed["processorPaymentIntentId"]]
    assert (new["status"], new["payment_method"]) == ("requires_capture", visa)
    assert new["metadata"]["idempotency_key"] == f"renew-{p['id']}-3"
    eventually(lambda: [pi for pi in sim_intents(api.server, d.user)
                        if pi["id"] == p["processorPaymentIntentId"] and pi["status"] == "canceled"],
               20, "the replaced hold cancelled", interval=0.1)
    api.wait_queue_idle()
    assert d.failure_mails() == [] and d.payment_notes(provider=True) == []
    assert_payment(d.complete(), "PAID", intent=renewed["processorPaymentIntentId"])
    assert [c["id"] for c in sim_charges(api.server, d.user)] == [renewed["processorPaymentIntentId"]]


def test_a_hold_without_its_expiry_is_renewed_seven_days_after_it_was_made(clock_api):
    """Holds authorized before holdExpiresAt existed have none: they lapse 7 days after they were
    made (the migration writes that; the renewal reads it so as well), so they are renewed."""
    api = clock_api
    d = Market(api).deal()
    p = d.accept()
    db(api.server, f"UPDATE payments SET hold_expires_at = NULL WHERE id = '{p['id']}'")
    assert d.payment()["holdExpiresAt"] is None
    advance_days(api, 6.1)
    d.relogin()
    renewed = d.wait_payment("the renewal", lambda q: q["processorPaymentIntentId"] != p["processorPaymentIntentId"])
    assert_payment(renewed, "AUTHORIZED", hold=True)
    assert d.complete()["status"] == "PAID"
    assert len(sim_charges(api.server, d.user)) == 1


def test_a_capture_missed_until_the_hold_lapsed_is_charged_by_the_reconciliation(clock_api):
    """The simulated processor models the 7-day hold: a capture after it fails as Stripe's
    charge_expired_for_capture, and the total is charged instead. The missed capture is made
    here by completing the job in the database, as if the service had stopped right then."""
    api = clock_api
    d = Market(api).deal()
    p = d.accept()
    db(api.server, f"UPDATE jobs SET status = 'COMPLETED', completed_at = 1 WHERE id = '{d.job_id}'")
    advance_days(api, 8)
    d.relogin()
    paid = d.wait_payment("the reconciliation's charge", lambda q: q["status"] == "PAID")
    assert paid["processorPaymentIntentId"] != p["processorPaymentIntentId"]
    intents = {pi["id"]: pi for pi in sim_intents(api.server, d.user)}
    lapsed = intents[p["processorPaymentIntentId"]]
    assert (lapsed["status"], lapsed["cancellation_reason"]) == ("canceled", "automatic")
    [charge] = sim_charges(api.server, d.user)
    assert (charge["id"], charge["amount"], charge["capture_method"]) == \
        (paid["processorPaymentIntentId"], TOTAL_CENTS, "automatic")
    logs = [line for line in api.server.log_lines()
            if line.get("msg") == "no live authorization at capture: charging instead"]
    assert any(line.get("paymentId") == p["id"] for line in logs), logs


RECONCILE_PERIOD_MS = 15 * 60 * 1000


def test_the_periodic_reconciliation_leaves_a_job_just_moved_to_its_request(clock_api):
    """A job completed a minute before a reconciliation runs is its completing request's to
    capture (else that request found the capture under way, answered AUTHORIZED and queued its
    own): the run leaves it alone, and a run once it was moved 4 minutes ago or more captures
    the hold the request missed. The completion is made in the database, as if the request were
    still at it."""
    api = clock_api
    d = Market(api).deal()
    p = d.accept()
    api.wait_queue_idle()
    now = int(server_seconds(api) * 1000)
    slot = now - now % RECONCILE_PERIOD_MS + RECONCILE_PERIOD_MS  # the next run's
    db(api.server, f"UPDATE jobs SET status = 'COMPLETED', completed_at = {slot - 60000}, "
                   f"updated_at = {slot - 60000} WHERE id = '{d.job_id}'")
    runs = lambda line: line.get("kind") == "payment_reconcile" and line.get("outcome") == "done"
    before = len([line for line in api.server.log_lines() if runs(line)])
    api.advance_clock(slot + 1000 - now)
    api.server.wait_log(runs, count=before + 1)
    assert d.payment() == p  # AUTHORIZED, its hold untouched
    api.advance_clock(RECONCILE_PERIOD_MS)
    api.server.wait_log(runs, count=before + 2)
    paid = d.wait_payment("the reconciliation's capture", lambda q: q["status"] == "PAID")
    assert paid["processorPaymentIntentId"] == p["processorPaymentIntentId"]


# ================================================================ reconciliation on demand

def reconcile_cli(srv, env=None):
    run_env = dict(srv.env)
    run_env.update(env or {})
    out = subprocess.run([srv.binary, "payments", "reconcile"], env=run_env, capture_output=True, text=True,
                         timeout=60)
    assert not any(m in out.stderr for m in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")), \
        out.stderr[-5000:]
    assert out.returncode == 0, out.stderr
    m = re.fullmatch(r"payments reconciled: (\d+) checked, (\d+) corrected\n"
                     r"provider balances: \d+ providers? owes? \d+\.\d\d, netted from their next transfers\n", out.stdout)
    assert m, out.stdout
    logged = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    return int(m.group(1)), int(m.group(2)), logged


def test_reconcile_command_settles_a_capture_whose_answer_was_lost(api, server, market):
    d = market.deal()
    p = d.accept()
    paid = d.complete()
    # as if the service had stopped after the processor captured, before it recorded it
    db(server, "UPDATE payments SET status = 'AUTHORIZED', pending_op = 'capture', "
               f"idem_key = 'capture-{p['processorPaymentIntentId']}', op_started_at = 1 WHERE id = '{p['id']}'")
    assert d.payment()["status"] == "AUTHORIZED"
    checked, corrected, logged = reconcile_cli(server)
    assert checked >= 1 and corrected >= 1
    assert d.payment() == paid
    assert len(sim_charges(server, d.user)) == 1
    assert any(line.get("msg") == "payment reconciled" and line.get("paymentId") == p["id"] and line.get("to") == "PAID"
               for line in logged), logged


def test_reconcile_command_finds_an_authorization_whose_answer_was_lost(api, server, market):
    d = market.deal()
    p = d.accept()
    # as if the service had stopped after the processor made the hold, before it recorded it
    db(server, "UPDATE payments SET status = 'FAILED', processor_payment_intent_id = NULL, hold_expires_at = NULL, "
               f"pending_op = 'authorize', op_started_at = 1 WHERE id = '{p['id']}'")
    reconcile_cli(server)
    assert d.payment() == p
    assert len(sim_intents(server, d.user)) == 1  # found under its key, not made again


def test_reconcile_command_is_in_the_help(server):
    out = subprocess.run([server.binary, "--help"], capture_output=True, text=True, timeout=30)
    assert "payments reconcile" in out.stdout


# ================================================================ webhooks: signature

@pytest.mark.parametrize("header", ["", "garbage", "t=123", "v1=abc", "t=abc,v1=00", "t=,v1=00", "t=12x,v1=00",
                                    "v0=00,t=1700000000", "T=1700000000,V1=00"])
def test_webhook_malformed_signature_header(api, header):
    body = json.dumps(event("payment_intent.succeeded", {"id": "pi_x"}))
    r = post_webhook(api, body, header=header)
    assert r.status_code == 400, r.text
    assert r.json() == (error_body(400, "Missing Stripe-Signature header") if header == ""
                        else error_body(400, "Malformed Stripe-Signature header"))


def test_webhook_missing_signature_header(api):
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), header=None)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Missing Stripe-Signature header")


def test_webhook_wrong_secret(api):
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), secret="whsec_other")
    assert r.status_code == 400
    assert r.json() == error_body(400, "Invalid webhook signature")


def test_webhook_signature_over_another_body(api):
    now = server_now(api).timestamp()
    signed = json.dumps(event("payment_intent.amount_capturable_updated", {"id": "pi_x"}))
    header = sign_webhook(signed, timestamp=now)
    r = post_webhook(api, json.dumps(event("payment_intent.succeeded", {"id": "pi_x"})), header=header)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Invalid webhook signature")
    # whitespace matters: the raw body is what is signed
    r = post_webhook(api, signed + " ", header=header)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Invalid webhook signature")


# 306, not 301, ahead: the seconds the request takes on a busy machine bring a future stamp nearer
@pytest.mark.parametrize("offset", [-301, 306, -3600])
def test_webhook_timestamp_outside_tolerance(api, offset):
    ts = server_now(api).timestamp() + offset
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), timestamp=ts)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Webhook timestamp outside the tolerance")


def test_webhook_timestamp_inside_tolerance(api):
    ts = server_now(api).timestamp() - 280
    r = post_webhook(api, event("payment_intent.amount_capturable_updated", {"id": "pi_x"}), timestamp=ts)
    assert r.status_code == 200, r.text
    assert r.json() == RECEIVED


def test_webhook_stale_real_clock_signature(api):
    """As the brief words it: a signature made 301 s ago by the real clock is refused."""
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), timestamp=time.time() - 301)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Webhook timestamp outside the tolerance")


def test_webhook_accepts_any_matching_v1_of_several(api):
    raw = json.dumps(event("payment_intent.amount_capturable_updated", {"id": "pi_x"}))
    ts = int(server_now(api).timestamp())
    good = sign_webhook(raw, timestamp=ts).split(",")[1]
    bad = sign_webhook(raw, secret="whsec_old", timestamp=ts).split(",")[1]
    r = post_webhook(api, raw, header=f"t={ts},{bad},{good},v0=deadbeef")
    assert r.status_code == 200, r.text
    assert r.json() == RECEIVED


def test_webhook_header_with_spaces(api):
    raw = json.dumps(event("payment_intent.amount_capturable_updated", {"id": "pi_x"}))
    t, v1 = sign_webhook(raw, timestamp=server_now(api).timestamp()).split(",")
    r = post_webhook(api, raw, header=f"{t}, {v1}")
    assert r.status_code == 200, r.text
    assert r.json() == RECEIVED


def test_webhook_body_over_1_mb_is_413(api):
    evt = event("payment_intent.amount_capturable_updated", {"id": "pi_x", "metadata": {"pad": "x" * (1024 * 1024)}})
    r = post_webhook(api, evt)
    assert r.status_code == 413
    assert r.json() == error_body(413, "Request body too large")


def test_webhook_refused_signature_does_not_consume_the_event_id(api, market):
    d = market.deal()
    auth = d.accept()
    evt = event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"]})
    r = post_webhook(api, evt, secret="whsec_wrong")
    assert r.status_code == 400
    assert d.payment()["status"] == "AUTHORIZED"
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == RECEIVED
    assert d.payment()["status"] == "PAID"


@pytest.mark.parametrize("raw,error", [
    ("{not json", "body: malformed JSON"),
    ("[]", "body: malformed JSON"),
    (json.dumps({"type": "payment_intent.succeeded", "data": {"object": {"id": "pi_x"}}}), "id: is required"),
    (json.dumps({"id": "", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_x"}}}), "id: is required"),
    (json.dumps({"id": "evt_1", "data": {"object": {"id": "pi_x"}}}), "type: is required"),
    (json.dumps({"id": "evt_1", "type": "payment_intent.succeeded"}), "data.object: must be an object"),
    (json.dumps({"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": "pi_x"}}),
     "data.object: must be an object"),
])
def test_webhook_signed_but_invalid_event(api, raw, error):
    r = post_webhook(api, raw)
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, error)


def test_webhook_without_configured_secret_is_refused(server_factory):
    srv = server_factory(STRIPE_WEBHOOK_SECRET=None)
    api = Api(srv)
    for secret in (WEBHOOK_SECRET, ""):
        r = post_webhook(api, event("payment_intent.amount_capturable_updated", {"id": "pi_x"}), secret=secret)
        assert r.status_code == 400, r.text
        assert r.json() == error_body(400, "Webhooks are not configured")
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), header=None)
    assert r.status_code == 400
    assert r.json() == error_body(400, "Webhooks are not configured")


# ================================================================ webhooks: events

def test_webhook_payment_succeeded_marks_paid(api, server, market):
    d = market.deal()
    auth = d.accept()
    evt = event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"], "object": "payment_intent",
                                             "status": "succeeded"})
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == RECEIVED
    paid = dict(auth, status="PAID", holdExpiresAt=None)
    assert d.payment() == paid
    # the same event id again: received, duplicate, nothing changes
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == DUPLICATE
    assert d.payment() == paid
    # completion afterwards has nothing to capture
    assert d.complete() == paid
    assert sim_charges(server, d.user) == []  # (the simulated processor was told nothing)


@pytest.mark.parametrize("type_,obj,reason", [
    ("payment_intent.payment_failed", {"last_payment_error": {"code": "card_declined", "message": "Declined late."}},
     "card_declined: Declined late."),
    ("payment_intent.canceled", {"cancellation_reason": "fraudulent"},
     "canceled: The authorization was cancelled at the payment processor (fraudulent)."),
    ("payment_intent.canceled", {}, "canceled: The authorization was cancelled at the payment processor (no reason given)."),
])
def test_webhook_failure_events_mark_failed_with_a_reason(api, market, type_, obj, reason):
    d = market.deal()
    auth = d.accept()
    webhook(api, type_, dict(obj, id=auth["processorPaymentIntentId"], object="payment_intent"))
    assert d.payment() == dict(auth, status="FAILED", holdExpiresAt=None, failureReason=reason)
    # told as any failure: the customer asked to update the card, the provider notified
    [mail] = d.wait_failure_mails(1)
    assert reason in mail["body"]
    assert d.payment_notes() == ["Payment failed"] and d.payment_notes(provider=True) == ["Payment failed"]


def test_webhook_failure_after_paid_is_ignored(api, market):
    d = market.deal()
    auth = d.accept()
    paid = d.complete()
    webhook(api, "payment_intent.payment_failed", {"id": auth["processorPaymentIntentId"]})
    webhook(api, "payment_intent.canceled", {"id": auth["processorPaymentIntentId"]})
    assert d.payment() == paid


def test_webhook_succeeded_after_declined_authorization_marks_paid(api, market):
    d = market.deal(card="pm_card_chargeDeclined")
    failed = d.accept()
    assert failed["status"] == "FAILED" and failed["processorPaymentIntentId"]
    webhook(api, "payment_intent.succeeded", {"id": failed["processorPaymentIntentId"]})
    assert d.payment() == dict(failed, status="PAID", failureReason=None)


def test_webhook_amount_capturable_updated_changes_nothing(api, server, market):
    d = market.deal()
    auth = d.accept()
    webhook(api, "payment_intent.amount_capturable_updated",
            {"id": auth["processorPaymentIntentId"], "amount_capturable": TOTAL_CENTS})
    assert d.payment() == auth
    assert d.complete()["status"] == "PAID"  # still capturable
    assert len(sim_charges(server, d.user)) == 1


def test_webhook_unknown_type_or_object_changes_nothing(api, market):
    d = market.deal()
    auth = d.accept()
    sub = subscribed(api, d.user)
    st = premium_status(api, d.user)
    webhook(api, "charge.refunded", {"id": auth["processorPaymentIntentId"]})
    webhook(api, "invoice.payment_failed", {"id": "in_1", "subscription": sub, "customer": "cus_x"})
    webhook(api, "payment_intent.succeeded", {"id": "pi_does_not_exist"})
    webhook(api, "payment_intent.payment_failed", {"id": "pi_does_not_exist"})
    webhook(api, "customer.subscription.deleted", {"id": "sub_does_not_exist", "customer": "cus_does_not_exist"})
    webhook(api, "customer.subscription.updated",
            {"id": "sub_does_not_exist", "customer": "cus_does_not_exist", "status": "past_due"})
    webhook(api, "payment_intent.succeeded", {"object": "payment_intent"})  # no id to find it by
    assert d.payment() == auth
    assert premium_status(api, d.user) == st


def test_webhook_duplicate_event_id_is_applied_once_whatever_it_says(api, market):
    d = market.deal()
    auth = d.accept()
    evt_id = f"evt_{uuid.uuid4().hex}"
    webhook(api, "payment_intent.amount_capturable_updated", {"id": auth["processorPaymentIntentId"]}, evt_id)
    r = post_webhook(api, event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"]}, evt_id))
    assert r.status_code == 200
    assert r.json() == DUPLICATE
    assert d.payment() == auth


def test_webhook_subscription_deleted_ends_premium(api):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    webhook(api, "customer.subscription.deleted",
            {"id": sub, "object": "subscription", "customer": "cus_anything", "status": "canceled"})
    assert premium_status(api, u) == NOT_PREMIUM
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 400
    assert r.json() == NO_SUBSCRIPTION
    # subscribing again makes a new subscription
    sub2 = subscribed(api, u)
    assert sub2 != sub
    assert premium_status(api, u)["processorSubscriptionId"] == sub2


def test_webhook_subscription_deleted_after_cancel(api):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    ok(api.post("/payments/premium/cancel", token=u["token"]))
    webhook(api, "customer.subscription.deleted", {"id": sub, "customer": "cus_anything"})
    assert premium_status(api, u) == NOT_PREMIUM


def test_webhook_subscription_updated_follows_status(api):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    since = premium_status(api, u)["premiumSince"]
    # premiumSince is the subscription's start: a spell of past_due does not move it
    for status, premium in (("past_due", False), ("active", True)):
        webhook(api, "customer.subscription.updated",
                {"id": sub, "object": "subscription", "customer": "cus_anything", "status": status,
                 "cancel_at_period_end": False})
        st = premium_status(api, u)
        assert (st["isPremium"], st["processorSubscriptionId"], st["premiumSince"]) == (premium, sub, since), status
    assert st["cancelAtPeriodEnd"] is False


@pytest.mark.parametrize("status,premium", [
    ("trialing", True), ("active", True), ("past_due", False), ("unpaid", False), ("incomplete", False),
    ("canceled", False), ("paused", False),
])
def test_webhook_subscription_updated_statuses(api, status, premium):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    webhook(api, "customer.subscription.updated", {"id": sub, "customer": "cus_anything", "status": status})
    assert premium_status(api, u)["isPremium"] is premium


def test_webhook_subscription_updated_carries_cancel_at_period_end(api):
    u = customer_with_card(api)
    sub = subscribed(api, u)
    webhook(api, "customer.subscription.updated",
            {"id": sub, "customer": "cus_anything", "status": "active", "cancel_at_period_end": True})
    st = premium_status(api, u)
    assert st["isPremium"] is True and st["cancelAtPeriodEnd"] is True
    webhook(api, "customer.subscription.updated",
            {"id": sub, "customer": "cus_anything", "status": "active", "cancel_at_period_end": False})
    assert premium_status(api, u)["cancelAtPeriodEnd"] is False


def test_webhook_subscription_events_touch_only_their_customer(api):
    a = customer_with_card(api)
    b = customer_with_card(api)
    sub_a = subscribed(api, a)
    sub_b = subscribed(api, b)
    st_b = premium_status(api, b)
    webhook(api, "customer.subscription.deleted", {"id": sub_a, "customer": "cus_anything"})
    assert premium_status(api, a) == NOT_PREMIUM
    assert premium_status(api, b) == st_b
    assert st_b["processorSubscriptionId"] == sub_b


# ================================================================ the real Stripe client against a fake

@pytest.fixture(scope="module")
def fake_stripe():
    yield from started_fake_stripe()


@pytest.fixture(scope="module")
def stripe_server(make_server, fake_stripe):
    srv = make_server(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake_stripe.url,
                      STRIPE_PREMIUM_PRICE_ID=PRICE, **ADMIN_ENV)
    yield srv
    fake_stripe.reset_controls()
    assert_money_conserved(srv, fake_stripe)  # after the module's tests: each cent charged is accounted for


@pytest.fixture
def fake(fake_stripe):
    fake_stripe.reset_controls()
    yield fake_stripe
    fake_stripe.reset_controls()


@pytest.fixture
def sapi(stripe_server, fake):
    api = Api(stripe_server)
    sync_clock(api, fake)
    return api


def sync_clock(api, fake):
    """The fake's clock reads the service's (which tests move by days)."""
    fake.set_clock(server_now(api).timestamp())


@pytest.fixture(scope="module")
def stripe_market(stripe_server):
    return Market(Api(stripe_server))


@pytest.fixture
def smarket(stripe_market, sapi):
    login(sapi, stripe_market.pro, provider=True)  # a test may have moved the clock past its token
    return stripe_market


def stripe_customer(fake, user):
    found = fake.objects("customer", email=user["email"])
    assert len(found) == 1, found
    return found[0]


def saved_pm(fake, user):
    cus = stripe_customer(fake, user)
    return cus["invoice_settings"]["default_payment_method"]


def intents_of(fake, user, **match):
    return fake.objects("payment_intent", customer=stripe_customer(fake, user)["id"], **match)


def form(call):
    return {k: v[-1] for k, v in call["form"].items()}


def test_stripe_card_flow(sapi, fake):
    u = sapi.register_user(name="Stripe Customer")
    secret = ok(sapi.post("/payments/setup-intent", token=u["token"]))["clientSecret"]
    cus = stripe_customer(fake, u)
    assert cus["name"] == "Stripe Customer"
    created = [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]
    assert len(created) == 1
    assert created[0]["headers"]["idempotency-key"] == f"customer-{u['id']}"
    assert form(created[0]) == {"email": u["email"], "name": "Stripe Customer"}
    setis = fake.objects("setup_intent", customer=cus["id"])
    assert [s["client_secret"] for s in setis] == [secret]
    seti_call = [c for c in fake.calls("POST", "/v1/setup_intents") if form(c).get("customer") == cus["id"]]
    assert form(seti_call[0]) == {"customer": cus["id"], "usage": "off_session", "payment_method_types[]": "card"}

    # a second setup intent reuses the customer
    secret2 = ok(sapi.post("/payments/setup-intent", token=u["token"]))["clientSecret"]
    assert secret2 != secret
    assert stripe_customer(fake, u)["id"] == cus["id"]
    assert len([c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]) == 1
    assert sorted(s["client_secret"] for s in fake.objects("setup_intent", customer=cus["id"])) == sorted([secret, secret2])

    # saving a test card attaches a new PaymentMethod and makes it the invoice default
    assert save_card(sapi, u, "pm_card_visa") == VISA
    pms = fake.objects("payment_method", customer=cus["id"])
    assert len(pms) == 1
    pm = pms[0]
    assert pm["id"] != "pm_card_visa" and pm["id"].startswith("pm_")
    attach = [c for c in fake.calls("POST", "/v1/payment_methods/pm_card_visa/attach") if form(c) == {"customer": cus["id"]}]
    assert len(attach) == 1 and attach[0]["status"] == 200
    default = [c for c in fake.calls("POST", f"/v1/customers/{cus['id']}")]
    assert [form(c) for c in default] == [{"invoice_settings[default_payment_method]": pm["id"]}]
    assert saved_pm(fake, u) == pm["id"]

    # GET /payments/method reads the card back from Stripe
    n = len(fake.calls("GET", f"/v1/payment_methods/{pm['id']}"))
    assert get_method(sapi, u) == VISA
    assert len(fake.calls("GET", f"/v1/payment_methods/{pm['id']}")) == n + 1

    # another card replaces it
    assert save_card(sapi, u, "pm_card_mastercard") == MASTERCARD
    assert get_method(sapi, u) == MASTERCARD
    assert saved_pm(fake, u) != pm["id"]


def test_stripe_unknown_payment_method(sapi, fake):
    u = sapi.register_user()
    r = sapi.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "pm_does_not_exist"})
    assert r.status_code == 400
    assert r.json() == error_body(400, "paymentMethodId: unknown payment method")
    calls = fake.calls("POST", "/v1/payment_methods/pm_does_not_exist/attach")
    assert calls and calls[-1]["status"] == 404
    assert calls[-1]["response"]["error"]["code"] == "resource_missing"
    assert get_method(sapi, u) is None


def test_stripe_payment_method_of_another_customer_is_refused(sapi, fake):
    a = customer_with_card(sapi)
    b = sapi.register_user()
    pm_a = saved_pm(fake, a)
    r = sapi.post("/payments/payment-method", token=b["token"], json={"paymentMethodId": pm_a})
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "paymentMethodId: unknown payment method")
    assert get_method(sapi, b) is None
    assert get_method(sapi, a) == VISA


def test_stripe_subscribe_and_cancel(sapi, fake):
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)
    pm = saved_pm(fake, u)
    sub_id = subscribed(sapi, u)
    subs = fake.objects("subscription", customer=cus["id"])
    assert [s["id"] for s in subs] == [sub_id]
    calls = [c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus["id"]]
    assert len(calls) == 1
    key = calls[0]["headers"]["idempotency-key"]
    assert form(calls[0]) == {"customer": cus["id"], "items[0][price]": PRICE, "default_payment_method": pm,
                              "off_session": "true", "payment_behavior": "error_if_incomplete",
                              "metadata[idempotency_key]": key}
    assert key.startswith("premium-")
    st = premium_status(sapi, u)
    assert st["isPremium"] is True and st["processorSubscriptionId"] == sub_id and st["cancelAtPeriodEnd"] is False

    # already subscribed: no second call to Stripe
    r = subscribe(sapi, u)
    assert r.json() == {"message": ALREADY, "isPremium": True, "subscriptionId": sub_id, "status": "active"}
    assert len([c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus["id"]]) == 1

    body = ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    stored = fake.get(sub_id)
    assert stored["cancel_at_period_end"] is True
    expected_end = datetime.datetime.fromtimestamp(stored["current_period_end"], datetime.timezone.utc)
    assert body == {"message": CANCEL_MESSAGE, "cancelAtPeriodEnd": True,
                    "currentPeriodEnd": expected_end.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
    cancel_calls = fake.calls("POST", f"/v1/subscriptions/{sub_id}")
    assert [form(c) for c in cancel_calls] == [{"cancel_at_period_end": "true"}]
    assert premium_status(sapi, u) == dict(st, cancelAtPeriodEnd=True)


def test_stripe_retries_429(sapi, fake):
    u = sapi.register_user()
    fake.fail_next("POST", "/v1/customers", count=1, status=429)
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    calls = [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]
    assert [c["status"] for c in calls] == [429, 200]
    assert len(fake.objects("customer", email=u["email"])) == 1


def test_stripe_detached_over_the_api_and_deleted_cards(sapi, fake):
    u = customer_with_card(sapi)
    pm = saved_pm(fake, u)
    r = requests.post(f"{fake.url}/v1/payment_methods/{pm}/detach", headers={"Authorization": "Bearer sk_test_fake"},
                      timeout=10)
    assert r.status_code == 200 and r.json()["customer"] is None
    assert get_method(sapi, u) is None

    v = customer_with_card(sapi)
    fake.delete_payment_method(saved_pm(fake, v))
    assert get_method(sapi, v) is None
    r = subscribe(sapi, v)
    assert r.status_code == 400 and r.json() == NEED_CARD


def test_stripe_outage_on_card_lookup_keeps_the_card(sapi, fake):
    u = customer_with_card(sapi)
    pm = saved_pm(fake, u)
    fake.fail_next("GET", f"/v1/payment_methods/{pm}", count=3, status=500)
    r = sapi.get("/payments/method", token=u["token"])
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE
    assert [c["status"] for c in fake.calls("GET", f"/v1/payment_methods/{pm}")][-3:] == [500, 500, 500]
    assert get_method(sapi, u) == VISA


def test_stripe_subscribe_after_lost_answers_makes_one_subscription(sapi, fake):
    u = customer_with_card(sapi)
    fake.fail_next("POST", "/v1/subscriptions", count=3, status=500, after_processing=True)
    r = subscribe(sapi, u)
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE
    assert premium_status(sapi, u) == NOT_PREMIUM
    made = fake.objects("subscription", customer=stripe_customer(fake, u)["id"])
    assert len(made) == 1
    # the retry reuses the key and gets the same subscription back
    assert subscribed(sapi, u) == made[0]["id"]
    assert len(fake.objects("subscription", customer=stripe_customer(fake, u)["id"])) == 1
    keys = {c["headers"]["idempotency-key"] for c in fake.calls("POST", "/v1/subscriptions")
            if form(c).get("customer") == stripe_customer(fake, u)["id"]}
    assert len(keys) == 1


def test_stripe_customer_after_lost_answers_is_made_once(sapi, fake):
    u = sapi.register_user()
    fake.fail_next("POST", "/v1/customers", count=3, status=500, after_processing=True)
    r = sapi.post("/payments/setup-intent", token=u["token"])
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE
    assert len(fake.objects("customer", email=u["email"])) == 1
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    assert save_card(sapi, u) == VISA
    assert len(fake.objects("customer", email=u["email"])) == 1


def test_stripe_subscribe_unknown_price_is_400(server_factory, fake):
    srv = server_factory(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake.url, STRIPE_PREMIUM_PRICE_ID="price_gone")
    api = Api(srv)
    u = customer_with_card(api)
    r = subscribe(api, u)
    assert r.status_code == 400
    assert r.json() == error_body(400, "No such price: 'price_gone'")
    assert premium_status(api, u) == NOT_PREMIUM


def test_stripe_wrong_api_key_is_503_without_retries(server_factory, fake):
    srv = server_factory(STRIPE_SECRET_KEY="sk_test_wrong", STRIPE_API_BASE=fake.url, STRIPE_PREMIUM_PRICE_ID=PRICE)
    api = Api(srv)
    u = api.register_user()
    r = api.post("/payments/setup-intent", token=u["token"])
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE
    refused = [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]
    assert [c["status"] for c in refused] == [401]
    assert refused[0]["headers"]["authorization"] == "Bearer sk_test_wrong"


def test_stripe_unreachable_is_503(server_factory):
    srv = server_factory(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=f"http://127.0.0.1:{free_port()}",
                      STRIPE_PREMIUM_PRICE_ID=PRICE)
    api = Api(srv)
    u = api.register_user()
    r = api.post("/payments/setup-intent", token=u["token"])
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE
    r = api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "pm_card_visa"})
    assert r.status_code == 503
    assert r.json() == UNAVAILABLE


def test_stripe_subscription_event_found_by_customer(sapi, fake):
    """A subscription event for a customer holding none names the subscription they now have."""
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)
    made = fake.put_object({"id": "sub_made_elsewhere", "object": "subscription", "customer": cus["id"],
                            "status": "active", "cancel_at_period_end": False})
    webhook(sapi, "customer.subscription.updated", made)
    st = premium_status(sapi, u)
    assert st["isPremium"] is True and st["processorSubscriptionId"] == "sub_made_elsewhere"
    webhook(sapi, "customer.subscription.deleted", {"id": "sub_made_elsewhere", "customer": cus["id"]})
    assert premium_status(sapi, u) == NOT_PREMIUM


def test_stripe_subscription_event_for_a_subscription_stripe_does_not_know(sapi, fake):
    """An update naming a subscription the processor does not have grants nothing."""
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)
    webhook(sapi, "customer.subscription.updated",
            {"id": "sub_unknown_to_stripe", "object": "subscription", "customer": cus["id"], "status": "active"})
    assert premium_status(sapi, u) == NOT_PREMIUM


def test_stripe_events_for_a_previous_subscription_are_ignored(sapi, fake):
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)["id"]
    old = subscribed(sapi, u)
    webhook(sapi, "customer.subscription.deleted", dict(fake.update_object(old, status="canceled")))
    new = subscribed(sapi, u)
    assert new != old
    st = premium_status(sapi, u)
    webhook(sapi, "customer.subscription.updated", {"id": old, "customer": cus, "status": "past_due"})
    webhook(sapi, "customer.subscription.deleted", {"id": old, "customer": cus, "status": "canceled"})
    assert premium_status(sapi, u) == st
    assert st["processorSubscriptionId"] == new and st["isPremium"] is True


# ---------------------------------------------------------------- regressions of bugs found and fixed


def test_stripe_cancel_again_after_resume_reaches_stripe(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    assert fake.get(sub)["cancel_at_period_end"] is True
    # the customer resumes the subscription (e.g. in Stripe's billing portal); Stripe says so
    resumed = fake.update_object(sub, cancel_at_period_end=False, cancel_at=None, canceled_at=None)
    webhook(sapi, "customer.subscription.updated", resumed)
    assert premium_status(sapi, u)["cancelAtPeriodEnd"] is False
    # and cancels again: Stripe must be told
    body = ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    assert body["cancelAtPeriodEnd"] is True
    assert premium_status(sapi, u)["cancelAtPeriodEnd"] is True
    assert fake.get(sub)["cancel_at_period_end"] is True


def test_stripe_concurrent_first_setup_intents(sapi, fake):
    u = sapi.register_user()
    fake.delay("POST", "/v1/customers", 0.4)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: Api(sapi.server).post("/payments/setup-intent", token=u["token"]))
        eventually(lambda: [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]],
                   5, "the first request at the processor", interval=0.01)
        second = Api(sapi.server).post("/payments/setup-intent", token=u["token"])
        first = first.result()
    assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
    assert len(fake.objects("customer", email=u["email"])) == 1


def test_stripe_concurrent_subscribes_make_one_subscription(sapi, fake):
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)["id"]
    fake.delay("POST", "/v1/subscriptions", 0.5)
    results = []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: subscribe(Api(sapi.server), u))
        eventually(lambda: [c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus],
                   5, "the first subscription at the processor", interval=0.01)
        results.append(subscribe(Api(sapi.server), u))
        results.append(subscribe(Api(sapi.server), u))
        results.append(first.result())
    fake.delay("POST", "/v1/subscriptions", 0)
    subs = fake.objects("subscription", customer=cus)
    assert len(subs) == 1, [s["id"] for s in subs]
    assert premium_status(sapi, u)["processorSubscriptionId"] == subs[0]["id"]
    assert [r.status_code for r in results] == [200, 200, 200], [r.text for r in results]


def test_stripe_subscribe_while_past_due_does_not_grant_premium(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    past_due = fake.update_object(sub, status="past_due")
    webhook(sapi, "customer.subscription.updated", past_due)
    assert premium_status(sapi, u)["isPremium"] is False
    r = subscribe(sapi, u)
    assert not (r.status_code == 200 and r.json().get("isPremium") is True), r.text
    assert premium_status(sapi, u)["isPremium"] is False
    assert [s["id"] for s in fake.objects("subscription", customer=stripe_customer(fake, u)["id"])] == [sub]


def test_stripe_late_subscription_update_after_deletion_does_not_restore_premium(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    stale = fake.get(sub)  # what Stripe said while it was still active
    gone = fake.update_object(sub, status="canceled", canceled_at=int(time.time()))
    webhook(sapi, "customer.subscription.deleted", gone)
    assert premium_status(sapi, u) == NOT_PREMIUM
    late = event("customer.subscription.updated", stale)
    late["created"] -= 60
    r = post_webhook(sapi, late)
    assert r.status_code == 200 and r.json() == RECEIVED
    assert premium_status(sapi, u) == NOT_PREMIUM




# ---------------------------------------------------------------- job payments against the fake Stripe

def stripe_charges(fake, user):
    return fake.charges(stripe_customer(fake, user)["id"])


def intent_calls(fake, key):
    return [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == key]


def payment_key(server, payment_id):
    return db(server, f"SELECT idem_key FROM payments WHERE id = '{payment_id}'")[0][0]


def test_stripe_job_payments(sapi, fake, smarket):
    d = smarket.deal()
    cus = stripe_customer(fake, d.user)
    pm = saved_pm(fake, d.user)
    # acceptance: a manual-capture, off-session, confirmed PaymentIntent for the total, its key in metadata
    auth = d.accept()
    assert_payment(auth, "AUTHORIZED", hold=True)
    pi = fake.get(auth["processorPaymentIntentId"])
    assert (pi["status"], pi["amount"], pi["customer"]) == ("requires_capture", TOTAL_CENTS, cus["id"])
    key = f"authorize-{auth['id']}-1"
    [call] = intent_calls(fake, key)
    quote_id = ok(sapi.get(f"/jobs/{d.job_id}", token=d.user["token"]))["quotes"][0]["id"]
    # a card payment Stripe accepts (payment_method_types[]=card: no return_url is needed), described
    assert form(call) == {"amount": str(TOTAL_CENTS), "currency": "usd", "customer": cus["id"], "payment_method": pm,
                          "payment_method_types[]": "card", "off_session": "true", "confirm": "true",
                          "capture_method": "manual", "description": f"lawncare job {d.job_id}",
                          "transfer_group": d.job_id, "metadata[job_id]": d.job_id, "metadata[quote_id]": quote_id,
                          "metadata[kind]": "job", "metadata[idempotency_key]": key, "expand[]": "latest_charge"}
    # holdExpiresAt is Stripe's capture_before on the charge
    charge = fake.get(pi["latest_charge"])
    assert parse_iso(auth["holdExpiresAt"]).timestamp() == charge["payment_method_details"]["card"]["capture_before"]
    # completion captures it, once
    paid = d.complete()
    assert paid == dict(auth, status="PAID", holdExpiresAt=None)
    assert (fake.get(pi["id"])["status"], fake.get(pi["id"])["amount_received"]) == ("succeeded", TOTAL_CENTS)
    [cap] = fake.calls("POST", f"/v1/payment_intents/{pi['id']}/capture")
    assert cap["headers"]["idempotency-key"] == f"capture-{pi['id']}"
    # a tip: an automatic-capture charge of its own
    assert ok(d.tip(7.5)) == {"success": True, "tipAmount": 7.5}
    row = tip_row(sapi.server, d.job_id)
    tpi = fake.get(row["intent"])
    assert (tpi["status"], tpi["amount"], tpi["capture_method"]) == ("succeeded", 750, "automatic")
    r = d.tip(2)
    assert (r.status_code, r.json()) == (409, TIP_TAKEN)
    assert sorted(c["amount"] for c in stripe_charges(fake, d.user)) == [750, TOTAL_CENTS]
    assert len(intents_of(fake, d.user)) == 2


def stripe_hold_49_hours_old(sapi, fake, smarket):
    """A Stripe deal accepted 49 hours ago (a cancellation after 48 hours voids the hold): (deal, its payment)."""
    d = smarket.deal()
    auth = d.accept()
    sapi.advance_clock(49 * 3600 * 1000)
    sync_clock(sapi, fake)
    return d, auth


def test_stripe_cancellation_voids_the_hold(sapi, fake, smarket):
    d, auth = stripe_hold_49_hours_old(sapi, fake, smarket)
    d.cancel()
    assert d.payment() == dict(auth, status="CANCELED", holdExpiresAt=None)
    pi = auth["processorPaymentIntentId"]
    assert fake.get(pi)["status"] == "canceled"
    [call] = fake.calls("POST", f"/v1/payment_intents/{pi}/cancel")
    assert call["headers"]["idempotency-key"] == f"cancel-{pi}"
    assert stripe_charges(fake, d.user) == []


def test_stripe_declines_then_a_good_card(sapi, fake, smarket):
    d = smarket.deal(card="pm_card_chargeDeclined")
    assert get_method(sapi, d.user) == DECLINED_CARD
    failed = d.accept()
    assert_payment(failed, "FAILED", reason=DECLINED_REASON)
    pi = fake.get(failed["processorPaymentIntentId"])
    assert pi["status"] == "requires_payment_method" and pi["customer"] == stripe_customer(fake, d.user)["id"]
    assert (pi["metadata"]["idempotency_key"], pi["metadata"]["kind"]) == (f"authorize-{failed['id']}-1", "job")
    d.wait_failure_mails(1)
    r = subscribe(sapi, d.user)
    assert (r.status_code, r.json()) == (402, DECLINED)
    assert fake.objects("subscription", customer=stripe_customer(fake, d.user)["id"]) == []
    # a good card: the authorization is tried again under a new key, the subscription too
    save_card(sapi, d.user, "pm_card_visa")
    got = d.wait_payment("the recovery", lambda q: q["status"] == "AUTHORIZED")
    assert payment_key(sapi.server, got["id"]) == f"authorize-{failed['id']}-2"
    assert len(intent_calls(fake, f"authorize-{failed['id']}-2")) == 1
    assert fake.get(got["processorPaymentIntentId"])["status"] == "requires_capture"
    assert d.payment_notes(provider=True) == ["Payment recovered", "Payment failed"]
    sub = subscribed(sapi, d.user)
    assert [s["id"] for s in fake.objects("subscription", customer=stripe_customer(fake, d.user)["id"])] == [sub]
    d.complete()
    assert [c["amount"] for c in stripe_charges(fake, d.user)] == [TOTAL_CENTS]


def test_stripe_declined_tip_is_kept_and_another_card_may_tip(sapi, fake, smarket):
    d = smarket.deal()
    d.accept()
    d.complete()
    save_card(sapi, d.user, "pm_card_chargeDeclinedInsufficientFunds")
    r = d.tip(5)
    assert (r.status_code, r.json()) == (402, error_body(402, "Your card has insufficient funds."))
    assert tip_row(sapi.server, d.job_id)["status"] == "FAILED"
    save_card(sapi, d.user, "pm_card_visa")
    assert ok(d.tip(5)) == {"success": True, "tipAmount": 5.0}
    tips = [c for c in stripe_charges(fake, d.user) if c["capture_method"] == "automatic"]
    assert [t["id"] for t in tips] == [tip_row(sapi.server, d.job_id)["intent"]]


def test_stripe_retries_5xx_with_the_same_idempotency_key(sapi, fake, smarket):
    d = smarket.deal()
    fake.fail_next("POST", "/v1/payment_intents", count=2, status=500)
    auth = d.accept()
    assert_payment(auth, "AUTHORIZED", hold=True)
    calls = intent_calls(fake, f"authorize-{auth['id']}-1")
    assert [c["status"] for c in calls] == [500, 500, 200]
    assert len({c["raw"] for c in calls}) == 1
    assert [i["id"] for i in intents_of(fake, d.user)] == [auth["processorPaymentIntentId"]]


def test_stripe_retry_after_lost_answer_charges_once(sapi, fake, smarket):
    """Stripe did the work but the answer was lost: the retry carries the same key and gets the
    stored result back, so exactly one PaymentIntent exists."""
    d = smarket.deal()
    fake.fail_next("POST", "/v1/payment_intents", count=1, status=502, after_processing=True)
    auth = d.accept()
    assert_payment(auth, "AUTHORIZED", hold=True)
    assert [c["status"] for c in intent_calls(fake, f"authorize-{auth['id']}-1")] == [502, 200]
    assert [i["id"] for i in intents_of(fake, d.user)] == [auth["processorPaymentIntentId"]]
    d.complete()
    # the tip path likewise
    fake.fail_next("POST", "/v1/payment_intents", count=2, status=503, after_processing=True)
    assert ok(d.tip(4)) == {"success": True, "tipAmount": 4.0}
    tips = intents_of(fake, d.user, capture_method="automatic")
    assert [i["id"] for i in tips] == [tip_row(sapi.server, d.job_id)["intent"]]
    assert len(stripe_charges(fake, d.user)) == 2


@pytest.mark.parametrize("lost", [True, False], ids=["answer-lost", "never-made"])
def test_stripe_tip_retried_after_no_answer_and_a_card_change_charges_once(sapi, fake, smarket, lost):
    """Issue 15: the retry of a tip whose first request got no answer is that very request (its
    card, amount and key), even when the customer saved another card meanwhile: the processor is
    asked what the key made, and the request is repeated only if it made nothing."""
    d = smarket.deal()
    d.accept()
    d.complete()
    visa = saved_pm(fake, d.user)
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=lost)
    fake.fail_next("GET", "/v1/payment_intents", count=3, status=500)  # nor can it be asked
    r = d.tip(5)
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    row = tip_row(sapi.server, d.job_id)
    assert (row["status"], row["pending"], row["cents"]) == ("PENDING", "tip", 500)  # kept, its outcome unknown
    tip_id = db(sapi.server, f"SELECT id FROM payments WHERE job_id = '{d.job_id}' AND kind = 'tip'")[0][0]
    key = f"tip-{tip_id}-1"
    assert len([c for c in intent_calls(fake, key) if c["status"] == 500]) == 3
    assert len(intents_of(fake, d.user, capture_method="automatic")) == (1 if lost else 0)
    save_card(sapi, d.user, "pm_card_mastercard")  # the card changes before the retry
    assert ok(d.tip(7)) == {"success": True, "tipAmount": 5.0}  # the first tip's amount
    tips = intents_of(fake, d.user, capture_method="automatic")
    assert len(tips) == 1
    assert (tips[0]["status"], tips[0]["amount"], tips[0]["payment_method"]) == ("succeeded", 500, visa)
    assert tip_row(sapi.server, d.job_id) == {"status": "PAID", "cents": 500, "intent": tips[0]["id"],
                                              "reason": None, "pending": None}
    # the key was never sent with other parameters
    assert {c["raw"] for c in intent_calls(fake, key)} == {intent_calls(fake, key)[0]["raw"]}
    assert all(c["status"] != 400 for c in intent_calls(fake, key))
    assert ok(sapi.get(f"/jobs/{d.job_id}", token=d.user["token"]))["tipAmount"] == 5.0
    r = d.tip(5)
    assert (r.status_code, r.json()) == (409, TIP_TAKEN)
    assert len(stripe_charges(fake, d.user)) == 2  # the job and the one tip


def test_stripe_concurrent_tips_charge_once(sapi, fake, smarket):
    d = smarket.deal()
    d.accept()
    d.complete()
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: Api(sapi.server).post(
            f"/jobs/{d.job_id}/tip", token=d.user["token"], json={"amount": 5}), range(5)))
    assert sorted(r.status_code for r in answers) == [200, 409, 409, 409, 409], [r.text for r in answers]
    for r in answers:
        if r.status_code == 409:
            assert r.json() == TIP_TAKEN
    tips = intents_of(fake, d.user, capture_method="automatic")
    assert len(tips) == 1
    assert tip_row(sapi.server, d.job_id)["intent"] == tips[0]["id"]


def test_stripe_capture_outage_is_retried_in_the_background(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    path = f"/v1/payment_intents/{auth['processorPaymentIntentId']}/capture"
    fake.fail_next("POST", path, count=3, status=500)
    done = d.complete()  # the job completes; the capture is queued
    assert done["status"] in ("AUTHORIZED", "PAID")
    paid = d.wait_payment("the queued capture", lambda q: q["status"] == "PAID")
    assert paid == dict(auth, status="PAID", holdExpiresAt=None)
    calls = fake.calls("POST", path)
    assert [c["status"] for c in calls] == [500, 500, 500, 200]
    assert {c["headers"]["idempotency-key"] for c in calls} == {f"capture-{auth['processorPaymentIntentId']}"}
    assert [c["amount"] for c in stripe_charges(fake, d.user)] == [TOTAL_CENTS]


def test_stripe_capture_whose_answers_were_lost_is_settled_once(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    path = f"/v1/payment_intents/{auth['processorPaymentIntentId']}/capture"
    fake.fail_next("POST", path, count=3, status=502, after_processing=True)
    d.complete()
    paid = d.wait_payment("the settled capture", lambda q: q["status"] == "PAID")
    assert paid["processorPaymentIntentId"] == auth["processorPaymentIntentId"]
    assert [c["amount"] for c in stripe_charges(fake, d.user)] == [TOTAL_CENTS]
    assert len(intents_of(fake, d.user)) == 1


def test_stripe_void_outage_is_retried_in_the_background(sapi, fake, smarket):
    d, auth = stripe_hold_49_hours_old(sapi, fake, smarket)
    path = f"/v1/payment_intents/{auth['processorPaymentIntentId']}/cancel"
    fake.fail_next("POST", path, count=3, status=500)
    assert d.cancel()["status"] == "CANCELLED"
    voided = d.wait_payment("the queued void", lambda q: q["status"] == "CANCELED")
    assert voided == dict(auth, status="CANCELED", holdExpiresAt=None)
    assert [c["status"] for c in fake.calls("POST", path)] == [500, 500, 500, 200]
    assert fake.get(auth["processorPaymentIntentId"])["status"] == "canceled"


def test_stripe_capture_of_a_hold_cancelled_at_stripe_charges_instead(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    fake.update_object(auth["processorPaymentIntentId"], status="canceled")
    paid = d.complete()
    assert_payment(paid, "PAID")
    assert paid["processorPaymentIntentId"] != auth["processorPaymentIntentId"]
    [charge] = stripe_charges(fake, d.user)
    assert (charge["id"], charge["amount"], charge["capture_method"]) == \
        (paid["processorPaymentIntentId"], TOTAL_CENTS, "automatic")
    assert (charge["metadata"]["idempotency_key"], charge["metadata"]["kind"]) == \
        (payment_key(sapi.server, auth["id"]), "job")


def test_stripe_completion_after_the_hold_lapsed_charges_instead(sapi, fake, smarket):
    """Stripe's clock passes capture_before (the service's does not notice): the capture is
    refused with charge_expired_for_capture and the accepted total is charged instead, once."""
    d = smarket.deal()
    auth = d.accept()
    fake.set_clock(server_now(sapi).timestamp() + 8 * 24 * 3600)
    paid = d.complete()
    assert_payment(paid, "PAID")
    hold = fake.get(auth["processorPaymentIntentId"])
    assert (hold["status"], hold["cancellation_reason"]) == ("canceled", "automatic")
    [refused] = fake.calls("POST", f"/v1/payment_intents/{auth['processorPaymentIntentId']}/capture")
    assert (refused["status"], refused["response"]["error"]["code"]) == (400, "charge_expired_for_capture")
    [charge] = stripe_charges(fake, d.user)
    assert (charge["id"], charge["amount"], charge["capture_method"]) == \
        (paid["processorPaymentIntentId"], TOTAL_CENTS, "automatic")


def test_stripe_hold_renewed_before_it_lapses(sapi, fake):
    market = Market(sapi)  # a provider of its own: the clock moves past its token
    d = market.deal()
    auth = d.accept()
    first = auth["processorPaymentIntentId"]
    sapi.advance_clock(int(6.1 * DAY_MS))
    sync_clock(sapi, fake)
    renewed = d.wait_payment("the renewal", lambda q: q["processorPaymentIntentId"] != first)
    assert_payment(renewed, "AUTHORIZED", hold=True)
    new = fake.get(renewed["processorPaymentIntentId"])
    assert parse_iso(renewed["holdExpiresAt"]).timestamp() == \
        fake.get(new["latest_charge"])["payment_method_details"]["card"]["capture_before"]
    assert (new["metadata"]["idempotency_key"], new["metadata"]["kind"]) == (f"renew-{auth['id']}-2", "job")
    eventually(lambda: fake.get(first)["status"], 20, "the old hold cancelled", interval=0.1,
               until=lambda status: status == "canceled")
    [cancel] = fake.calls("POST", f"/v1/payment_intents/{first}/cancel")
    assert cancel["headers"]["idempotency-key"] == f"cancel-{first}"
    sapi.advance_clock(int(3.9 * DAY_MS))
    sync_clock(sapi, fake)
    d.relogin()
    sapi.wait_queue_idle()
    assert d.complete()["processorPaymentIntentId"] == new["id"]
    assert [c["amount"] for c in stripe_charges(fake, d.user)] == [TOTAL_CENTS]
    assert len(intents_of(fake, d.user)) == 2


def stripe_hold_then_a_new_card(sapi, fake, card):
    """A deal accepted on a visa (a provider of its own: the clock moves past its token), then
    the customer saves card: (deal, acceptance payment, the visa's id)."""
    d = Market(sapi).deal()
    auth = d.accept()
    visa = saved_pm(fake, d.user)
    save_card(sapi, d.user, card)
    sapi.wait_queue_idle()
    return d, auth, visa


def test_stripe_renewal_refused_on_a_new_card_keeps_the_hold_then_renews_on_its_card(sapi, fake):
    d, auth, visa = stripe_hold_then_a_new_card(sapi, fake, "pm_card_chargeDeclined")
    sapi.advance_clock(int(6.5 * DAY_MS))
    sync_clock(sapi, fake)
    kept = d.wait_payment("the refused renewal", lambda q: q["failureReason"] is not None)
    assert kept == dict(auth, failureReason=DECLINED_REASON)
    [declined] = intents_of(fake, d.user, status="requires_payment_method")
    assert (declined["metadata"]["idempotency_key"], declined["metadata"]["kind"]) == (f"renew-{auth['id']}-2", "job")
    assert fake.get(auth["processorPaymentIntentId"])["status"] == "requires_capture"
    sapi.advance_clock(3600 * 1000)  # the next run: on the hold's own card
    sync_clock(sapi, fake)
    renewed = d.wait_payment("the renewal", lambda q: q["processorPaymentIntentId"] != auth["processorPaymentIntentId"])
    assert_payment(renewed, "AUTHORIZED", reason=DECLINED_REASON, hold=True)
    new = fake.get(renewed["processorPaymentIntentId"])
    assert (new["status"], new["payment_method"]) == ("requires_capture", visa)
    assert (new["metadata"]["idempotency_key"], new["metadata"]["kind"]) == (f"renew-{auth['id']}-3", "job")
    eventually(lambda: fake.get(auth["processorPaymentIntentId"])["status"], 20, "the old hold cancelled",
               interval=0.1, until=lambda status: status == "canceled")
    d.relogin()
    sapi.wait_queue_idle()
    assert d.failure_mails() == [] and d.payment_notes(provider=True) == []
    assert d.complete()["processorPaymentIntentId"] == new["id"]
    assert [c["id"] for c in stripe_charges(fake, d.user)] == [new["id"]]


def test_stripe_renewal_refused_on_both_cards_keeps_the_old_hold_which_completion_captures(sapi, fake):
    """The hold's own card is refused too: the payment keeps its first hold, with its own
    holdExpiresAt and the refusal shown, and completion (before that hold lapses) captures it."""
    d, auth, visa = stripe_hold_then_a_new_card(sapi, fake, "pm_card_chargeDeclinedInsufficientFunds")
    fake.update_object(visa, _decline="generic_decline")  # the bank now refuses the first card too
    sapi.advance_clock(int(6.5 * DAY_MS))
    sync_clock(sapi, fake)
    kept = d.wait_payment("the refused renewal", lambda q: q["failureReason"] is not None)
    assert kept == dict(auth, failureReason=FUNDS_REASON)
    sapi.advance_clock(3600 * 1000)
    sync_clock(sapi, fake)
    eventually(lambda: intents_of(fake, d.user, status="requires_payment_method"), 20, "both renewals refused",
               interval=0.1, until=lambda refused: len(refused) == 2)
    sapi.wait_queue_idle()
    assert d.payment() == dict(auth, failureReason=DECLINED_REASON)  # its own hold, intent and holdExpiresAt
    assert fake.get(auth["processorPaymentIntentId"])["status"] == "requires_capture"
    d.relogin()
    assert d.failure_mails() == [] and d.payment_notes(provider=True) == []
    done = d.complete()
    assert_payment(done, "PAID", intent=auth["processorPaymentIntentId"])
    assert [c["id"] for c in stripe_charges(fake, d.user)] == [auth["processorPaymentIntentId"]]


def test_stripe_authorization_with_every_answer_lost_is_settled_in_the_background(sapi, fake, smarket):
    """Stripe placed the hold but every answer was lost, and it could not even be asked: the
    Payment reads PENDING (issue 21: not FAILED) with no reason at first; the background
    settlement asks Stripe what the key made, finds the hold and makes the Payment AUTHORIZED,
    without a second request."""
    d = smarket.deal()
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=True)
    fake.fail_next("GET", "/v1/payment_intents", count=3, status=500)
    first = d.accept()
    if first["status"] != "AUTHORIZED":  # (unless the background settled it already)
        assert_payment(first, "PENDING", intent=None)
    key = f"authorize-{first['id']}-1"
    got = d.wait_payment("the settlement", lambda q: q["status"] == "AUTHORIZED")
    assert_payment(got, "AUTHORIZED", hold=True)
    assert got["id"] == first["id"]
    assert [i["id"] for i in intents_of(fake, d.user)] == [got["processorPaymentIntentId"]]
    assert [c["status"] for c in intent_calls(fake, key)] == [500, 500, 500]
    assert d.complete()["status"] == "PAID"
    assert len(stripe_charges(fake, d.user)) == 1


def test_stripe_authorization_never_answered_then_declined_stays_failed(sapi, fake, smarket):
    """Stripe was down (nothing done) and the card is refused once it answers: the settlement
    finds nothing under the key, repeats the very request, and records the decline."""
    d = smarket.deal(card="pm_card_chargeDeclined")
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500)
    fake.fail_next("GET", "/v1/payment_intents", count=3, status=500)
    first = d.accept()
    got = d.wait_payment("the settlement", lambda q: q["failureReason"] is not None)
    assert_payment(got, "FAILED", reason=DECLINED_REASON)
    assert [i["id"] for i in intents_of(fake, d.user)] == [got["processorPaymentIntentId"]]
    calls = intent_calls(fake, f"authorize-{first['id']}-1")
    assert [c["status"] for c in calls] == [500, 500, 500, 402]
    assert len({c["raw"] for c in calls}) == 1
    d.wait_failure_mails(1)


def test_stripe_void_refused_because_captured_elsewhere_records_paid(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    captured = fake.update_object(auth["processorPaymentIntentId"], status="succeeded")
    sapi.advance_clock(49 * 3600 * 1000)
    sync_clock(sapi, fake)
    d.cancel()
    assert d.payment() == dict(auth, status="PAID", holdExpiresAt=None)
    assert fake.calls("POST", f"/v1/payment_intents/{auth['processorPaymentIntentId']}/cancel")[-1]["status"] == 400
    webhook(sapi, "payment_intent.succeeded", captured)
    assert d.payment()["status"] == "PAID"


def test_stripe_webhooks_move_real_intents(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    webhook(sapi, "payment_intent.succeeded", fake.get(auth["processorPaymentIntentId"]))
    assert d.payment()["status"] == "PAID"


def test_stripe_second_acceptance_holds_nothing_more(sapi, fake, smarket):
    d = smarket.deal()
    auth = d.accept()
    r = sapi.post(f"/quotes/{d.quote_id}/accept", token=d.user["token"])
    assert r.status_code == 409
    assert [i["id"] for i in intents_of(fake, d.user)] == [auth["processorPaymentIntentId"]]
    assert d.payment() == auth


def test_stripe_detached_card_and_a_new_one(sapi, fake, smarket):
    first = smarket.deal()
    auth = first.accept()
    pm = saved_pm(fake, first.user)
    fake.detach_payment_method(pm)
    assert get_method(sapi, first.user) is None  # forgotten
    n = len(fake.calls("GET", f"/v1/payment_methods/{pm}"))
    assert get_method(sapi, first.user) is None
    assert len(fake.calls("GET", f"/v1/payment_methods/{pm}")) == n
    r = subscribe(sapi, first.user)
    assert (r.status_code, r.json()) == (400, NEED_CARD)
    assert first.complete() == dict(auth, status="PAID", holdExpiresAt=None)  # the hold was still good
    r = first.tip(5)
    assert (r.status_code, r.json()) == (400, NEED_CARD)
    second = smarket.deal(card=None, user=first.user)
    assert_payment(second.accept(), "FAILED", intent=None, reason=NO_CARD_REASON)
    assert save_card(sapi, first.user, "pm_card_amex")["last4"] == "8431"
    assert second.wait_payment("the recovery", lambda q: q["status"] == "AUTHORIZED")


def test_stripe_every_request_carries_key_version_and_idempotency(sapi, fake, smarket):
    fake.clear_log()
    d = smarket.deal()
    u = d.user
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    get_method(sapi, u)
    subscribed(sapi, u)
    ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    d.accept()
    d.complete()
    ok(d.tip(3))
    other = smarket.deal(user=u, card=None)
    other.accept()
    sapi.advance_clock(49 * 3600 * 1000)
    sync_clock(sapi, fake)
    other.cancel()
    calls = [c for c in fake.calls() if c["headers"].get("authorization") == "Bearer sk_test_fake"]
    assert {c["method"] for c in calls} == {"GET", "POST"}
    assert len(calls) >= 12
    keys = []
    for c in calls:
        assert c["headers"].get("stripe-version") == "2024-06-20", c
        assert c["status"] == 200, c
        if c["method"] == "POST":
            assert c["headers"].get("idempotency-key"), c
            assert c["headers"].get("content-type") == "application/x-www-form-urlencoded", c
            keys.append(c["headers"]["idempotency-key"])
        else:
            assert "idempotency-key" not in c["headers"], c
    # every distinct operation has its own key
    assert len(keys) == len(set(keys)), keys


# ---------------------------------------------------------------- subscriptions that can be tried again

def test_stripe_subscription_retried_after_an_invalid_answer(sapi, fake):
    """Issue 15: a subscribe attempt refused as invalid leaves no key behind, so the attempt with
    a new card is a new request (not an idempotency error for 24 hours)."""
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)["id"]
    fake.detach_payment_method(saved_pm(fake, u))  # Stripe refuses the card now (400)
    r = subscribe(sapi, u)
    assert r.status_code == 400, r.text
    save_card(sapi, u, "pm_card_mastercard")
    sub = subscribed(sapi, u)
    calls = [c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus]
    assert [c["status"] for c in calls] == [400, 200]
    assert len({c["headers"]["idempotency-key"] for c in calls}) == 2
    assert [s["id"] for s in fake.objects("subscription", customer=cus)] == [sub]


def test_stripe_subscription_unanswered_then_a_new_card_gets_a_new_key(sapi, fake):
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)["id"]
    fake.fail_next("POST", "/v1/subscriptions", count=3, status=500)  # nothing made
    r = subscribe(sapi, u)
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    save_card(sapi, u, "pm_card_amex")
    sub = subscribed(sapi, u)
    calls = [c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus]
    assert [c["status"] for c in calls] == [500, 500, 500, 200]
    assert len({c["headers"]["idempotency-key"] for c in calls}) == 2
    assert len(fake.calls("GET", "/v1/subscriptions")) >= 1  # Stripe was asked first
    assert [s["id"] for s in fake.objects("subscription", customer=cus)] == [sub]


# ---------------------------------------------------------------- reconciliation against the fake Stripe

def lost_tip(sapi, fake, smarket):
    """A completed deal whose tip got no answer at all (Stripe did charge it)."""
    d = smarket.deal()
    d.accept()
    d.complete()
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=True)
    fake.fail_next("GET", "/v1/payment_intents", count=3, status=500)
    r = d.tip(5)
    assert r.status_code == 503
    assert tip_row(sapi.server, d.job_id)["pending"] == "tip"
    return d


def test_stripe_reconcile_command_settles_a_tip_whose_answer_was_lost(sapi, fake, smarket):
    d = lost_tip(sapi, fake, smarket)
    checked, corrected, logged = reconcile_cli(sapi.server)
    assert checked >= 1 and corrected >= 1
    [charge] = intents_of(fake, d.user, capture_method="automatic")
    assert tip_row(sapi.server, d.job_id) == {"status": "PAID", "cents": 500, "intent": charge["id"], "reason": None,
                                              "pending": None}
    assert ok(sapi.get(f"/jobs/{d.job_id}", token=d.user["token"]))["tipAmount"] == 5.0
    assert any(line.get("msg") == "payment reconciled" and line.get("to") == "PAID" for line in logged), logged
    r = d.tip(5)
    assert (r.status_code, r.json()) == (409, TIP_TAKEN)
    assert len(stripe_charges(fake, d.user)) == 2


def test_stripe_periodic_reconciliation_settles_a_tip_whose_answer_was_lost(sapi, fake, smarket):
    d = lost_tip(sapi, fake, smarket)
    sapi.advance_clock(16 * 60 * 1000)  # the next 15-minute slot; the request is older than its lease
    eventually(lambda: tip_row(sapi.server, d.job_id), 20, "the reconciliation", interval=0.1,
               until=lambda tip: tip["status"] == "PAID")
    assert len(intents_of(fake, d.user, capture_method="automatic")) == 1


def test_webhook_waiting_on_the_processor_does_not_hold_the_database_lane(server_factory, fake):
    """An update of a subscription no user holds is checked with the processor: the webhook
    runs on the slow lane, so with one database-lane worker other requests still answer."""
    srv = server_factory(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake.url, STRIPE_PREMIUM_PRICE_ID=PRICE,
                         HTTP_WORKERS="1")
    api = Api(srv)
    u = api.register_user()
    sub = "sub_" + uuid.uuid4().hex[:14]
    fake.delay("GET", f"/v1/subscriptions/{sub}", 2.0)
    seen = len(fake.calls("GET"))
    done = []
    t = threading.Thread(target=lambda: done.append(
        post_webhook(api, event("customer.subscription.updated", {"id": sub, "customer": "cus_x", "status": "active"}))))
    t.start()
    eventually(lambda: len(fake.calls("GET")) > seen, 10, "the webhook's check at the processor", interval=0.01)
    t0 = time.perf_counter()
    assert api.get("/users/me", token=u["token"]).status_code == 200
    elapsed = time.perf_counter() - t0
    t.join(30)
    assert done and done[0].status_code == 200, done
    assert elapsed < 1.0, elapsed


# ================================================================ issue 21: every charge right

REFUNDED_MAIL = "Your payment was refunded"
NOTHING_LEFT = error_body(409, "Nothing left to refund")
NO_CAPTURE = error_body(404, "This job has no captured payment")


def none(cell):
    return cell in ("None", "")  # how SQLite and psql print NULL


def refund(api, staff, job_id, headers=None, **body):
    return api.post(f"/staff/payments/{job_id}/refund", token=staff["token"], json=body, headers=headers)


def refunded_mails(d):
    return [m for m in d.api.server.mails(d.user["email"]) if m["subject"] == REFUNDED_MAIL]


def history(server, job_id):
    """Every payment the job had, oldest first: (kind, status, amount cents, refunded cents, released)."""
    rows = db(server, "SELECT kind, status, amount_cents, refunded_cents, released_at FROM payments "
                      f"WHERE job_id = '{job_id}' ORDER BY created_at, id")
    return [(k, st, int(a), int(rf), not none(rel)) for k, st, a, rf, rel in rows]


def refund_audits(server, payment_id):
    return db(server, "SELECT actor_id, actor_role, target_role FROM audit_log WHERE action = 'payment.refund' "
                      f"AND target_id = '{payment_id}' ORDER BY seq")


def income(api, pro):
    return ok(api.get("/providers/me/insights", token=pro["token"]))["incomeByService"].get("lawncare", 0)


def ledger_earned(api, staff, pro):
    """What the staff ledger says the provider earned: paid out, or captured and not yet
    transferred (the report window runs)."""
    ledger = ok(api.get(f"/staff/providers/{pro['id']}", token=staff["token"]))["ledger"]
    return sum(m["paidOut"] + m["inHold"] for m in ledger)


@pytest.fixture(scope="module")
def support(server):
    """customer_support and professional_support staff of the shared server."""
    api = Api(server)
    admin = admin_login(api)
    return {role: make_staff(api, role, admin=admin) for role in ("customer_support", "professional_support")}


def paid_deal(market, card="pm_card_visa", amount=100):
    d = market.deal(card=card, amount=amount)
    d.accept()
    assert d.complete()["status"] == "PAID"
    return d


def race_completion_and_card_save(api, d, card="pm_card_visa"):
    """PATCH COMPLETED by the provider and POST /payments/payment-method by the customer, sent
    together (each on its own connection)."""
    pro_api, user_api = Api(api.server), Api(api.server)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        done = pool.submit(pro_api.patch, f"/jobs/{d.job_id}/status", token=d.pro["token"],
                           json={"status": "COMPLETED"})
        saved = pool.submit(user_api.post, "/payments/payment-method", token=d.user["token"],
                            json={"paymentMethodId": card})
        assert done.result().status_code == 200, done.result().text
        assert saved.result().status_code == 200, saved.result().text


def retry_comes_due(api):
    """Once the background work settled (a recovery that found the completion's charge still
    running waits 1 s, 2 s ... of the service clock before it runs again), moves the clock past
    that wait instead of sleeping through it."""
    api.wait_queue_idle()
    api.advance_clock(10 * 1000)


def saved_card_id(server, user):
    return db(server, f"SELECT processor_payment_method_id FROM users WHERE id = '{user['id']}'")[0][0]


def test_a_card_saved_while_the_completion_charge_runs_is_used_20_times(api, server, market):
    """Deliverable 1: declined at acceptance, the job runs; the completion (a charge on the old
    card) and the saving of a good card are sent together. Whichever comes first, the job ends
    PAID on the new card with exactly one charge (the recovery waits for a request still running
    instead of skipping the payment)."""
    for _ in range(20):
        d = market.deal(card="pm_card_chargeDeclined")
        assert d.accept()["status"] == "FAILED"
        d.step("ON_THE_WAY")
        d.step("IN_PROGRESS")
        race_completion_and_card_save(api, d)
        retry_comes_due(api)
        paid = d.wait_payment("PAID on the new card", lambda q: q["status"] == "PAID", timeout=30)
        assert_payment(paid, "PAID")
        [charge] = sim_charges(server, d.user)
        assert (charge["id"], charge["amount"], charge["payment_method"]) == \
            (paid["processorPaymentIntentId"], TOTAL_CENTS, saved_card_id(server, d.user))


def test_reconcile_command_charges_a_failure_older_than_the_newest_card(api, server, market):
    """Deliverable 1: a payment that failed on a card older than the customer's saved one (its
    recovery lost) is settled by the reconciliation, which no longer leaves FAILED alone."""
    d = market.deal()
    good = saved_card_id(server, d.user)
    save_card(api, d.user, "pm_card_chargeDeclined")
    assert d.accept()["status"] == "FAILED"
    assert d.complete()["status"] == "FAILED"  # the completion's charge on the declined card
    api.wait_queue_idle()
    # the customer's newest card is the good one, but its recovery never ran
    db(server, f"UPDATE users SET processor_payment_method_id = '{good}' WHERE id = '{d.user['id']}'")
    checked, corrected, logged = reconcile_cli(server)
    assert checked >= 1 and corrected >= 1
    paid = d.payment()
    assert_payment(paid, "PAID")
    [charge] = sim_charges(server, d.user)
    assert (charge["id"], charge["payment_method"]) == (paid["processorPaymentIntentId"], good)
    assert any(line.get("msg") == "payment reconciled" and line.get("paymentId") == paid["id"] and
               line.get("what") == "recover" and line.get("to") == "PAID" for line in logged), logged


# a captured payment the reconciliation must give back, left so by hand: the current payment of
# a job set back to PENDING (found from the open jobs), or a payment moved to its job's history
# whose refund was never made (found among the released ones)
LEFT_CAPTURED = {
    "reopen": "UPDATE jobs SET status = 'PENDING', provider_id = NULL, accepted_at = NULL, completed_at = NULL "
              "WHERE id = '{job}'",
    "release": "UPDATE payments SET released_at = 1 WHERE id = '{payment}'",
}


@pytest.mark.parametrize("what", sorted(LEFT_CAPTURED))
def test_reconcile_command_refunds_a_captured_payment_it_finds_left(api, server, market, what):
    d = paid_deal(market)
    paid = d.payment()
    db(server, LEFT_CAPTURED[what].format(job=d.job_id, payment=paid["id"]))
    checked, corrected, logged = reconcile_cli(server)
    assert checked >= 1 and corrected >= 1
    assert any(line.get("msg") == "payment reconciled" and line.get("paymentId") == paid["id"] and
               line.get("what") == what for line in logged), logged
    eventually(lambda: history(server, d.job_id), 20, "the payment refunded", interval=0.1,
               until=lambda h: h == [("job", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True)])


def test_an_authorization_whose_outcome_is_unknown_reads_pending(api, server, market):
    """Deliverable 1: a request whose answer was lost (a crash follow-up asking the processor)
    reads PENDING, not FAILED, until it is settled."""
    d = market.deal()
    p = d.accept()
    db(server, "UPDATE payments SET status = 'PENDING', processor_payment_intent_id = NULL, hold_expires_at = NULL, "
               f"pending_op = 'authorize', op_started_at = 1 WHERE id = '{p['id']}'")
    assert_payment(d.payment(), "PENDING", intent=None)
    reconcile_cli(server)
    assert d.payment() == p


def other_provider_takes(api, d, zip_code, amount):
    """A second verified provider quotes the job again, the customer accepts; returns it."""
    pro = verified_provider(api, [zip_code])
    q = ok(api.post("/quotes", token=pro["token"], json={"jobId": d.job_id, "amount": amount}), 201)
    ok(api.post(f"/quotes/{q['id']}/accept", token=d.user["token"]))
    return pro


def finish(api, pro, job_id):
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        ok(api.patch(f"/jobs/{job_id}/status", token=pro["token"], json={"status": status}))


def test_a_provider_deleted_after_a_paid_job_gives_the_money_back_and_the_job_is_paid_afresh(api, server, support):
    """Deliverable 3: GODMODE deletes the provider of a PAID (and tipped) job and of an
    AUTHORIZED one. Both jobs are PENDING, their payments in the jobs' history: the captured
    amount and the tip refunded, the hold voided. The next acceptance authorizes afresh and
    completion captures the new amount, which alone is the new provider's income."""
    market = Market(api)
    d = paid_deal(market)
    paid = d.payment()
    assert ok(d.tip(5)) == {"success": True, "tipAmount": 5.0}
    held = market.deal(card=None, user=d.user)
    hold = held.accept()
    r = api.delete(f"/admin/accounts/{market.pro['id']}?role=provider", token=admin_login(api))
    assert (r.status_code, r.json()) == (200, {"ok": True})
    job = ok(api.get(f"/jobs/{d.job_id}", token=d.user["token"]))
    assert (job["status"], job["providerId"], job["payment"], job["tipAmount"]) == ("PENDING", None, None, None)
    assert ok(api.get(f"/jobs/{held.job_id}", token=d.user["token"]))["payment"] is None
    eventually(lambda: (history(server, d.job_id), history(server, held.job_id)), 20, "the money given back",
               interval=0.1, until=lambda h: h == ([("job", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True),
                                                    ("tip", "REFUNDED", 500, 500, True)],
                                                   [("job", "CANCELED", TOTAL_CENTS, 0, True)]))
    intents = {pi["id"]: pi for pi in sim_intents(server, d.user)}
    assert intents[paid["processorPaymentIntentId"]]["latest_charge"]["amount_refunded"] == TOTAL_CENTS
    assert intents[hold["processorPaymentIntentId"]]["status"] == "canceled"
    tip = [pi for pi in intents.values() if pi["amount"] == 500]
    assert [pi["latest_charge"]["amount_refunded"] for pi in tip] == [500]
    mails = eventually(lambda: refunded_mails(d), 20, "two refund emails", interval=0.1, until=lambda m: len(m) == 2)
    assert sorted(("$118.00" in m["body"], "$5.00" in m["body"]) for m in mails) == [(False, True), (True, False)]
    # the staff see the history
    pays = ok(api.get(f"/staff/customers/{d.user['id']}", token=support["customer_support"]["token"]))["payments"]
    released = {p["id"]: p for p in pays if p["releasedAt"]}
    assert released[paid["id"]]["status"] == "REFUNDED" and released[paid["id"]]["refundedAmount"] == TOTAL
    # the job is accepted and paid afresh
    other = other_provider_takes(api, d, market.zip, 80)
    fresh = d.payment()
    assert_payment(fresh, "AUTHORIZED", amount=94.4, hold=True)
    assert fresh["id"] != paid["id"]
    finish(api, other, d.job_id)
    assert_payment(d.payment(), "PAID", amount=94.4, intent=fresh["processorPaymentIntentId"])
    assert sorted(c["amount"] for c in sim_charges(server, d.user)) == [500, 9440, TOTAL_CENTS]
    assert income(api, other) == 80.0


def test_a_job_reopened_by_another_path_is_authorized_afresh(api, server):
    """Deliverable 3, any other path: a job back to PENDING whose payment stayed (here set by
    hand) is authorized afresh on its next acceptance, and its old payment given back."""
    market = Market(api)
    d = paid_deal(market)
    paid = d.payment()
    db(server, "UPDATE jobs SET status = 'PENDING', provider_id = NULL, accepted_at = NULL, completed_at = NULL "
               f"WHERE id = '{d.job_id}'")
    other = other_provider_takes(api, d, market.zip, 50)
    fresh = d.payment()
    assert_payment(fresh, "AUTHORIZED", amount=59.0, hold=True)
    eventually(lambda: history(server, d.job_id)[0], 20, "the old payment refunded", interval=0.1,
               until=lambda first: first == ("job", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True))
    finish(api, other, d.job_id)
    assert d.payment()["status"] == "PAID"
    assert paid["id"] != fresh["id"]


def test_refunds_partial_full_and_excess(api, server, support):
    """Deliverable 4: customer support refunds part of a captured payment, then the rest; an
    amount beyond what is left, and anything once all is refunded, is refused. Each refund goes
    through the processor, is on the payment, emailed, audited, and taken off the provider's
    insights and the staff ledger."""
    market = Market(api)
    d = paid_deal(market)
    paid = d.payment()
    cs, ps = support["customer_support"], support["professional_support"]
    assert income(api, d.pro) == 100.0 and ledger_earned(api, ps, d.pro) == 100.0
    r = refund(api, cs, d.job_id, amount=18, reason="Arrived two hours late")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"refund", "refunds", "payment", "tip"}
    assert ID_RE.match(body["refund"]["id"]) and ISO_RE.match(body["refund"]["createdAt"])
    assert {k: body["refund"][k] for k in ("amount", "reason", "status", "target", "providerShare")} == \
        {"amount": 18.0, "reason": "Arrived two hours late", "status": "SUCCEEDED", "target": "job",
         "providerShare": "prorata"}
    assert body["refunds"] == [body["refund"]] and body["tip"] is None
    assert body["payment"] == dict(paid, refundedAmount=18.0) == d.payment()
    # more than is left: 400, nothing done
    r = refund(api, cs, d.job_id, amount=100.01, reason="Too much")
    assert (r.status_code, r.json()) == (400, error_body(400, "amount: must be between 0.01 and 100.00"))
    # the share of the provider's earnings refunded: 100 x 18 / 118
    assert income(api, d.pro) == 84.75 and ledger_earned(api, ps, d.pro) == 84.75
    # all that is left (no amount)
    body = ok(refund(api, cs, d.job_id, reason="Job not done properly"))
    assert body["refund"]["amount"] == 100.0
    assert body["payment"] == dict(paid, status="REFUNDED", refundedAmount=TOTAL) == d.payment()
    r = refund(api, cs, d.job_id, amount=1, reason="Once more")
    assert (r.status_code, r.json()) == (409, NOTHING_LEFT)
    r = refund(api, cs, d.job_id, reason="Once more")
    assert (r.status_code, r.json()) == (409, NOTHING_LEFT)
    assert income(api, d.pro) == 0 and ledger_earned(api, ps, d.pro) == 0
    # at the processor: two refunds, the charge all refunded
    [pi] = sim_intents(server, d.user)
    assert pi["latest_charge"]["amount_refunded"] == TOTAL_CENTS and pi["latest_charge"]["refunded"] is True
    refunds = db(server, "SELECT data FROM processor_sim_objects WHERE kind = 'refund' "
                         f"AND data LIKE '%\"payment_intent\":\"{pi['id']}\"%'")
    assert sorted(json.loads(r[0])["amount"] for r in refunds) == [1800, 10000]
    mails = eventually(lambda: refunded_mails(d), 20, "two refund emails", interval=0.1, until=lambda m: len(m) == 2)
    assert any("$18.00" in m["body"] and "Arrived two hours late" in m["body"] for m in mails)
    assert refund_audits(server, paid["id"]) == [(cs["id"], "customer_support", "payment")] * 2


def test_a_refund_replayed_with_its_idempotency_key_refunds_once(api, server, support):
    market = Market(api)
    d = paid_deal(market)
    cs = support["customer_support"]
    key = {"Idempotency-Key": f"refund-{uuid.uuid4()}"}
    first = refund(api, cs, d.job_id, headers=key, amount=10, reason="Goodwill")
    again = refund(api, cs, d.job_id, headers=key, amount=10, reason="Goodwill")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() and again.headers.get("Idempotent-Replayed") == "true"
    assert d.payment()["refundedAmount"] == 10.0
    [pi] = sim_intents(server, d.user)
    assert pi["latest_charge"]["amount_refunded"] == 1000
    # without the key, the same body is a second refund
    ok(refund(api, cs, d.job_id, amount=10, reason="Goodwill"))
    assert d.payment()["refundedAmount"] == 20.0


def test_refund_needs_a_captured_payment(api, server, support, market):
    cs = support["customer_support"]
    r = refund(api, cs, "cnosuchjob000000000000000", reason="x")
    assert (r.status_code, r.json()) == (404, error_body(404, "Job not found"))
    d = market.deal()
    r = refund(api, cs, d.job_id, reason="Not accepted yet")  # no payment at all
    assert (r.status_code, r.json()) == (404, NO_CAPTURE)
    d.accept()
    r = refund(api, cs, d.job_id, reason="Only authorized")
    assert (r.status_code, r.json()) == (404, NO_CAPTURE)
    declined = market.deal(card="pm_card_chargeDeclined")
    declined.accept()
    declined.complete()
    r = refund(api, cs, declined.job_id, reason="It failed")
    assert (r.status_code, r.json()) == (404, NO_CAPTURE)
    assert d.payment()["refundedAmount"] == 0


@pytest.mark.parametrize("body,error", [
    ({}, "reason: is required"),
    ({"reason": ""}, "reason: must not be empty"),
    ({"reason": "   "}, "reason: must not be empty"),
    ({"reason": 5}, "reason: must be a string"),
    ({"reason": "r" * 501}, "reason: must be at most 500 characters"),
    ({"reason": "ok", "amount": 0}, "amount: must be between 0.01 and 118000"),
    ({"reason": "ok", "amount": 0.001}, "amount: must be between 0.01 and 118000"),
    ({"reason": "ok", "amount": -5}, "amount: must be between 0.01 and 118000"),
    ({"reason": "ok", "amount": 118000.01}, "amount: must be between 0.01 and 118000"),
    ({"reason": "ok", "amount": "5"}, "amount: must be a number"),
])
def test_refund_validation(api, server, support, market, body, error):
    d = paid_deal(market)
    r = api.post(f"/staff/payments/{d.job_id}/refund", token=support["customer_support"]["token"], json=body)
    assert (r.status_code, r.json()) == (400, error_body(400, error))
    assert d.payment()["refundedAmount"] == 0


def test_refund_reasons_of_500_characters_pass(api, support, market):
    d = paid_deal(market)
    body = ok(refund(api, support["customer_support"], d.job_id, amount=0.01, reason="r" * 500))
    assert (body["refund"]["amount"], body["payment"]["refundedAmount"]) == (0.01, 0.01)


def test_refund_is_for_customer_support_only(api, server, support, market):
    d = paid_deal(market)
    path = f"/staff/payments/{d.job_id}/refund"
    body = {"reason": "Not mine to give"}
    assert (api.post(path, json=body).status_code, api.post(path, json=body).json()) == (401, UNAUTHORIZED)
    admin = admin_login(api)
    for role in STAFF_ROLES:
        if role == "customer_support":
            continue
        r = api.post(path, json=body, token=make_staff(api, role, admin=admin)["token"])
        assert (r.status_code, r.json()) == (403, FORBIDDEN), role
    for token in (d.user["token"], d.pro["token"], admin):
        r = api.post(path, json=body, token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN)
    assert d.payment()["refundedAmount"] == 0


def charge_refunded(intent, charge_id, amount, refunded, refunds=None):
    obj = {"id": charge_id, "object": "charge", "amount": amount, "amount_refunded": refunded,
           "refunded": refunded == amount, "payment_intent": intent}
    if refunds is not None:
        obj["refunds"] = {"object": "list", "has_more": False, "data": refunds}
    return obj


def test_a_refund_made_at_the_processor_is_recorded_from_its_webhook(api, server, market):
    """Deliverable 4: charge.refunded records a refund made at the processor directly, the way
    the service's own are: on the payment, emailed, audited, once whatever is replayed."""
    d = paid_deal(market)
    paid = d.payment()
    [pi] = sim_intents(server, d.user)
    charge = pi["latest_charge"]["id"]
    made = {"id": f"re_dash_{uuid.uuid4().hex[:12]}", "object": "refund", "amount": 2000, "status": "succeeded",
            "payment_intent": pi["id"], "charge": charge, "metadata": {}}
    evt = event("charge.refunded", charge_refunded(pi["id"], charge, TOTAL_CENTS, 2000, [made]))
    assert post_webhook(api, evt).json() == RECEIVED
    assert d.payment() == dict(paid, refundedAmount=20.0)
    assert post_webhook(api, evt).json() == DUPLICATE
    # the same refund in a later event (another id) is not counted twice; a failed one not at all
    failed = dict(made, id=f"re_dash_{uuid.uuid4().hex[:12]}", status="failed", amount=500)
    webhook(api, "charge.refunded", charge_refunded(pi["id"], charge, TOTAL_CENTS, 2000, [failed, made]))
    assert d.payment() == dict(paid, refundedAmount=20.0)
    [mail] = eventually(lambda: refunded_mails(d), 20, "the refund email", interval=0.1)
    assert "$20.00" in mail["body"] and "Refunded at the payment processor" in mail["body"]
    assert refund_audits(server, paid["id"]) == [("None" if server.env["DATABASE_URL"].startswith("sqlite") else "",
                                                  "processor", "payment")]
    # all of it, at the processor
    rest = dict(made, id=f"re_dash_{uuid.uuid4().hex[:12]}", amount=TOTAL_CENTS - 2000)
    webhook(api, "charge.refunded", charge_refunded(pi["id"], charge, TOTAL_CENTS, TOTAL_CENTS, [rest, made]))
    assert d.payment() == dict(paid, status="REFUNDED", refundedAmount=TOTAL)


def test_a_charge_made_twice_is_refunded_by_the_reconciliation(server_factory):
    """Deliverable 4: a processor event made the payment PAID while a charge of the service's own
    was left unanswered; the reconciliation settles that charge, finds it made a second charge,
    records it in the job's history and refunds it in full. A server of its own: the command
    writes the duplicate's row by the real clock, and the shared server's clock may have been
    moved past it by other tests (the history lists payments oldest first)."""
    server = server_factory()
    d = Market(Api(server)).deal()
    d.accept()
    paid = d.complete()
    pm = saved_card_id(server, d.user)
    key = f"charge-{paid['id']}-9"
    db(server, f"UPDATE payments SET pending_op = 'charge', idem_key = '{key}', payment_method_id = '{pm}', "
               f"op_started_at = 1 WHERE id = '{paid['id']}'")
    checked, corrected, logged = reconcile_cli(server)
    assert d.payment() == paid
    charges = sim_charges(server, d.user)
    assert len(charges) == 2
    [second] = [c for c in charges if c["id"] != paid["processorPaymentIntentId"]]
    assert (second["amount"], second["latest_charge"]["amount_refunded"]) == (TOTAL_CENTS, TOTAL_CENTS)
    assert second["metadata"]["idempotency_key"] == key
    assert history(server, d.job_id) == [("job", "PAID", TOTAL_CENTS, 0, False),
                                         ("duplicate", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True)]
    assert any(line.get("msg") == "payment made twice: refunding the second charge" for line in logged), logged


def test_an_older_subscription_event_after_a_newer_one_changes_nothing(api):
    """Deliverable 6: after past_due is applied, a delayed older `active` event changes nothing;
    a newer one applies."""
    u = customer_with_card(api)
    sub = subscribed(api, u)
    now = int(server_now(api).timestamp())

    def updated(status, created):
        evt = event("customer.subscription.updated", {"id": sub, "object": "subscription", "customer": "cus_x",
                                                      "status": status})
        evt["created"] = created
        assert post_webhook(api, evt).json() == RECEIVED

    updated("past_due", now)
    assert premium_status(api, u)["isPremium"] is False
    updated("active", now - 60)
    assert premium_status(api, u)["isPremium"] is False
    updated("active", now + 1)
    assert premium_status(api, u)["isPremium"] is True


# ---------------------------------------------------------------- issue 21 against the fake Stripe

@pytest.fixture(scope="module")
def stripe_support(stripe_server):
    return make_staff(Api(stripe_server), "customer_support", admin=admin_login(Api(stripe_server)))


def stripe_refunds(fake, intent):
    return fake.objects("refund", payment_intent=intent)


def test_stripe_a_card_saved_while_the_completion_charge_runs_is_used_20_times(sapi, fake, smarket):
    """Deliverable 1 with Stripe's latency: every PaymentIntent call is held 0.3 s, so the
    completion's charge on the declined card is still in flight when the new card is saved."""
    for _ in range(20):
        d = smarket.deal(card="pm_card_chargeDeclined")
        assert d.accept()["status"] == "FAILED"
        d.step("ON_THE_WAY")
        d.step("IN_PROGRESS")
        fake.delay("POST", "/v1/payment_intents", 0.3)
        try:
            race_completion_and_card_save(sapi, d)
            retry_comes_due(sapi)
            paid = d.wait_payment("PAID on the new card", lambda q: q["status"] == "PAID", timeout=30)
        finally:
            fake.delay("POST", "/v1/payment_intents", 0)
        [charge] = stripe_charges(fake, d.user)
        assert (charge["id"], charge["amount"], charge["payment_method"]) == \
            (paid["processorPaymentIntentId"], TOTAL_CENTS, saved_pm(fake, d.user))


def test_stripe_a_provider_deleted_after_a_paid_job_gives_the_money_back(sapi, fake):
    market = Market(sapi)
    d = market.deal()
    d.accept()
    paid = d.complete()
    assert ok(d.tip(5))["tipAmount"] == 5.0
    held = market.deal(card=None, user=d.user)
    hold = held.accept()
    r = sapi.delete(f"/admin/accounts/{market.pro['id']}?role=provider", token=admin_login(sapi))
    assert r.status_code == 200, r.text
    assert ok(sapi.get(f"/jobs/{d.job_id}", token=d.user["token"]))["payment"] is None
    eventually(lambda: (history(sapi.server, d.job_id), history(sapi.server, held.job_id)), 20, "the money given back",
               interval=0.1, until=lambda h: h == ([("job", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True),
                                                    ("tip", "REFUNDED", 500, 500, True)],
                                                   [("job", "CANCELED", TOTAL_CENTS, 0, True)]))
    [re] = stripe_refunds(fake, paid["processorPaymentIntentId"])
    assert (re["amount"], re["reason"], re["status"]) == (TOTAL_CENTS, "requested_by_customer", "succeeded")
    assert re["metadata"]["idempotency_key"].startswith("refund-")
    [call] = [c for c in fake.calls("POST", "/v1/refunds")
              if form(c).get("payment_intent") == paid["processorPaymentIntentId"]]
    assert call["headers"]["idempotency-key"] == re["metadata"]["idempotency_key"]
    tip = tip_row(sapi.server, d.job_id)
    assert [x["amount"] for x in stripe_refunds(fake, tip["intent"])] == [500]
    assert fake.get(hold["processorPaymentIntentId"])["status"] == "canceled"
    other = other_provider_takes(sapi, d, market.zip, 80)
    fresh = d.payment()
    assert_payment(fresh, "AUTHORIZED", amount=94.4, hold=True)
    finish(sapi, other, d.job_id)
    assert_payment(d.payment(), "PAID", amount=94.4, intent=fresh["processorPaymentIntentId"])
    assert fake.get(fresh["processorPaymentIntentId"])["amount_received"] == 9440


def test_stripe_refunds_partial_full_excess_and_the_webhook(sapi, fake, smarket, stripe_support):
    """Deliverable 4 at Stripe: a refund made in Stripe's dashboard arrives as charge.refunded
    (whose charge no longer lists its refunds: the service asks Stripe); then support refunds
    part and the rest; an excess and a fourth are refused; a late charge.refunded listing all of
    them counts nothing twice."""
    d = smarket.deal()
    d.accept()
    paid = d.complete()
    pi = paid["processorPaymentIntentId"]
    auth = {"Authorization": "Bearer sk_test_fake"}
    dashboard = requests.post(f"{fake.url}/v1/refunds", data={"payment_intent": pi, "amount": 800},
                              headers=auth, timeout=10).json()
    webhook(sapi, "charge.refunded", fake.charge_of(pi))
    assert d.payment()["refundedAmount"] == 8.0
    body = ok(refund(sapi, stripe_support, d.job_id, amount=10, reason="Late"))
    assert body["payment"]["refundedAmount"] == 18.0 and body["payment"]["status"] == "PAID"
    r = refund(sapi, stripe_support, d.job_id, amount=100.01, reason="Too much")
    assert (r.status_code, r.json()) == (400, error_body(400, "amount: must be between 0.01 and 100.00"))
    body = ok(refund(sapi, stripe_support, d.job_id, reason="All of it"))
    assert (body["refund"]["amount"], body["payment"]["status"], body["payment"]["refundedAmount"]) == \
        (100.0, "REFUNDED", TOTAL)
    r = refund(sapi, stripe_support, d.job_id, reason="Again")
    assert (r.status_code, r.json()) == (409, NOTHING_LEFT)
    ours = [x for x in stripe_refunds(fake, pi) if x["id"] != dashboard["id"]]
    assert sorted(x["amount"] for x in ours) == [1000, 10000]
    assert all(x["metadata"]["idempotency_key"].startswith("refund-") for x in ours)
    assert fake.charge_of(pi)["amount_refunded"] == TOTAL_CENTS
    webhook(sapi, "charge.refunded", fake.charge_of(pi))
    assert d.payment() == dict(paid, status="REFUNDED", refundedAmount=TOTAL)
    mails = eventually(lambda: refunded_mails(d), 20, "three refund emails", interval=0.1, until=lambda m: len(m) == 3)
    assert len(mails) == 3
    assert len(refund_audits(sapi.server, paid["id"])) == 3  # the dashboard's, then support's two


def test_stripe_a_refund_retried_after_no_answer_with_its_key_is_the_same_refund(sapi, fake, smarket, stripe_support):
    """Stripe made the refund but every answer was lost: 503. The retry with the same
    Idempotency-Key finds it under its key and answers it; nothing is refunded twice."""
    d = smarket.deal()
    d.accept()
    paid = d.complete()
    key = {"Idempotency-Key": f"refund-{uuid.uuid4()}"}
    pi = {"payment_intent": paid["processorPaymentIntentId"]}  # not an earlier test's settling
    fake.fail_next("POST", "/v1/refunds", count=3, status=500, after_processing=True, where=pi)
    fake.fail_next("GET", "/v1/refunds", count=3, status=500, where=pi)
    r = refund(sapi, stripe_support, d.job_id, headers=key, amount=25, reason="Broken gate")
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    # payment_settle, queued by the 503, may already have found the refund under its key
    assert d.payment()["refundedAmount"] in (0, 25.0)
    body = ok(refund(sapi, stripe_support, d.job_id, headers=key, amount=25, reason="Broken gate"))
    assert (body["refund"]["amount"], body["payment"]["refundedAmount"]) == (25.0, 25.0)
    [made] = stripe_refunds(fake, paid["processorPaymentIntentId"])
    assert made["amount"] == 2500
    again = refund(sapi, stripe_support, d.job_id, headers=key, amount=25, reason="Broken gate")
    assert again.json() == body and again.headers.get("Idempotent-Replayed") == "true"
    assert len(stripe_refunds(fake, paid["processorPaymentIntentId"])) == 1


def test_stripe_subscribing_again_after_cancel_resumes_at_stripe(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    assert fake.get(sub)["cancel_at_period_end"] is True
    r = subscribe(sapi, u)
    assert (r.status_code, r.json()) == \
        (200, {"isPremium": True, "subscriptionId": sub, "status": "active", "cancelAtPeriodEnd": False})
    assert fake.get(sub)["cancel_at_period_end"] is False
    assert premium_status(sapi, u)["cancelAtPeriodEnd"] is False
    [update] = [c for c in fake.calls("POST", f"/v1/subscriptions/{sub}") if form(c) == {"cancel_at_period_end": "false"}]
    assert update["status"] == 200
    assert len(fake.objects("subscription", customer=stripe_customer(fake, u)["id"])) == 1


def test_stripe_resubscribing_after_the_subscription_ended_at_stripe_makes_a_new_one(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    fake.update_object(sub, status="canceled")  # ended at Stripe, its event not arrived yet
    r = subscribe(sapi, u)
    assert r.status_code == 200, r.text
    assert r.json()["subscriptionId"] != sub and r.json()["status"] == "active"
    assert premium_status(sapi, u)["processorSubscriptionId"] == r.json()["subscriptionId"]


def test_stripe_an_older_subscription_event_changes_nothing(sapi, fake):
    u = customer_with_card(sapi)
    sub = subscribed(sapi, u)
    now = int(server_now(sapi).timestamp())
    late = event("customer.subscription.updated", fake.update_object(sub, status="past_due"))
    late["created"] = now
    assert post_webhook(sapi, late).json() == RECEIVED
    old = event("customer.subscription.updated", dict(fake.get(sub), status="active"))
    old["created"] = now - 30
    assert post_webhook(sapi, old).json() == RECEIVED
    assert premium_status(sapi, u)["isPremium"] is False


def test_stripe_the_smallest_quote_is_charged(sapi, fake, smarket):
    d = smarket.deal(amount=0.43)
    assert_payment(d.accept(), "AUTHORIZED", amount=0.51, hold=True)
    assert d.complete()["status"] == "PAID"
    assert [c["amount"] for c in stripe_charges(fake, d.user)] == [51]


# ---------------------------------------------------------------- issue 21: migration 0015 on existing rows

MIGRATIONS = os.path.join(os.path.dirname(__file__), "..", "..", "migrations")
LEGACY_ROWS = [
    # id, job, kind, status, cents, intent, created, updated, card, pending op
    ("p_hold", "j1", "job", "AUTHORIZED", 11800, "pi_hold", 1000, 5000, "pm_a", None),
    ("p_tip", "j2", "tip", "FAILED", 500, None, 2000, 2000, "pm_a", "tip"),
    ("p_paid", "j3", "job", "PAID", 5900, "pi_paid", 3000, 7000, "pm_a", None),
    ("p_failed", "j4", "job", "FAILED", 5900, "pi_failed", 4000, 4000, "pm_b", None),
]


class LegacyDatabase:
    """A database made by the migrations before 0015 (whatever other numbers exist), with
    payments as they were, then 0015 applied: the upgrade a running service gets."""

    def __init__(self, engine, pg_cluster, tmp_path):
        self.engine = engine
        files = sorted(glob.glob(os.path.join(MIGRATIONS, engine, "*.sql")))
        self.before = [f for f in files if int(os.path.basename(f)[:4]) < 15]
        [self.m15] = [f for f in files if os.path.basename(f).startswith("0015_")]
        if engine == "sqlite":
            self.conn = sqlite3.connect(str(tmp_path / "legacy.db"), isolation_level=None)
            self.conn.execute("PRAGMA foreign_keys=ON")
        else:
            self.url = pg_cluster.new_database()

    def script(self, path):
        if self.engine == "sqlite":
            with open(path) as f:
                self.conn.executescript("BEGIN;" + f.read() + ";COMMIT;")
        else:
            subprocess.run(["psql", self.url, "-X", "-q", "-1", "-v", "ON_ERROR_STOP=1", "-f", path], check=True,
                           capture_output=True, timeout=60)

    def sql(self, text):
        if self.engine == "sqlite":
            return [tuple("None" if v is None else str(v) for v in row) for row in self.conn.execute(text).fetchall()]
        out = subprocess.run(["psql", self.url, "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", text],
                             check=True, capture_output=True, text=True, timeout=30).stdout
        return [tuple(line.split("\t")) for line in out.splitlines() if line]


def test_migration_0015_upgrades_existing_payments(engine, pg_cluster, tmp_path):
    legacy = LegacyDatabase(engine, pg_cluster, tmp_path)
    for path in legacy.before:
        legacy.script(path)
    for row in LEGACY_ROWS:
        pid, job, kind, status, cents, intent, created, updated, card, op = row
        legacy.sql("INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, processor_payment_intent_id, "
                   "created_at, updated_at, payment_method_id, pending_op, attempts) VALUES "
                   f"('{pid}', '{job}', 'u1', '{kind}', '{status}', {cents}, "
                   f"{'NULL' if intent is None else repr(intent)}, {created}, {updated}, '{card}', "
                   f"{'NULL' if op is None else repr(op)}, 1)")
    legacy.script(legacy.m15)
    got = {r[0]: r[1:] for r in legacy.sql(
        "SELECT id, status, hold_expires_at, hold_method_id, paid_at, refunded_cents, released_at FROM payments")}
    null = "None" if engine == "sqlite" else ""
    # an older hold lapses 7 days after it was made; its card is the hold's; unknown outcomes read PENDING
    assert got == {
        "p_hold": ("AUTHORIZED", str(1000 + 7 * DAY_MS), "pm_a", null, "0", null),
        "p_tip": ("PENDING", null, null, null, "0", null),
        "p_paid": ("PAID", null, null, "7000", "0", null),
        "p_failed": ("FAILED", null, null, null, "0", null),
    }
    # one current payment per (job, kind); the history may hold any number
    legacy.sql("UPDATE payments SET released_at = 9000 WHERE id = 'p_paid'")
    legacy.sql("INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, created_at, updated_at) "
               "VALUES ('p_again', 'j3', 'u1', 'job', 'AUTHORIZED', 4720, 9001, 9001)")
    with pytest.raises((sqlite3.IntegrityError, subprocess.CalledProcessError)):
        legacy.sql("INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, created_at, updated_at) "
                   "VALUES ('p_twice', 'j3', 'u1', 'job', 'FAILED', 4720, 9002, 9002)")
    assert legacy.sql("SELECT COUNT(*) FROM payments WHERE job_id = 'j3'") == [("2",)]


def test_stripe_a_refund_stripe_refuses_is_409_and_recorded_nowhere(sapi, fake, smarket, stripe_support):
    """Refunded in full in Stripe's dashboard, its event not arrived yet: Stripe refuses the
    staff's refund (charge_already_refunded); the answer says so and nothing is recorded."""
    d = smarket.deal()
    d.accept()
    paid = d.complete()
    auth = {"Authorization": "Bearer sk_test_fake"}
    requests.post(f"{fake.url}/v1/refunds", data={"payment_intent": paid["processorPaymentIntentId"]}, headers=auth,
                  timeout=10)
    r = refund(sapi, stripe_support, d.job_id, amount=5, reason="Late")
    assert r.status_code == 409, r.text
    assert r.json()["error"].startswith("The payment processor refused the refund (charge_already_refunded: ")
    assert d.payment() == paid
    # the event then records the dashboard's refund
    webhook(sapi, "charge.refunded", fake.charge_of(paid["processorPaymentIntentId"]))
    assert d.payment() == dict(paid, status="REFUNDED", refundedAmount=TOTAL)


def test_stripe_two_refunds_at_once_make_one(sapi, fake, smarket, stripe_support):
    """One request at a time on a payment: of two refunds sent together (Stripe slow), one is
    made and the other answers 409; nothing is refunded twice."""
    d = smarket.deal()
    d.accept()
    paid = d.complete()
    fake.delay("POST", "/v1/refunds", 0.5)
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda api: refund(api, stripe_support, d.job_id, amount=60, reason="Half"),
                                    [Api(sapi.server), Api(sapi.server)]))
    finally:
        fake.delay("POST", "/v1/refunds", 0)
    assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]
    assert [x["amount"] for x in stripe_refunds(fake, paid["processorPaymentIntentId"])] == [6000]
    assert d.payment()["refundedAmount"] == 60.0


def test_stripe_a_hold_captured_at_stripe_when_its_job_reopens_is_refunded(sapi, fake):
    """The job goes back to PENDING while its hold was captured in Stripe's dashboard (no event
    yet): the void is refused, the payment found PAID, and refunded in full all the same."""
    market = Market(sapi)
    d = market.deal()
    hold = d.accept()
    pi = hold["processorPaymentIntentId"]
    requests.post(f"{fake.url}/v1/payment_intents/{pi}/capture", headers={"Authorization": "Bearer sk_test_fake"},
                  timeout=10)
    r = sapi.delete(f"/admin/accounts/{market.pro['id']}?role=provider", token=admin_login(sapi))
    assert r.status_code == 200, r.text
    eventually(lambda: history(sapi.server, d.job_id), 20, "the captured hold refunded", interval=0.1,
               until=lambda h: h == [("job", "REFUNDED", TOTAL_CENTS, TOTAL_CENTS, True)])
    assert [x["amount"] for x in stripe_refunds(fake, pi)] == [TOTAL_CENTS]
