"""Payments: the saved card and the premium subscription (/payments/...), the job payment
operations (driven through the APP_ENV=test routes /__test/payments/...), the processor
webhooks (POST /webhooks), and the real Stripe client against a local fake Stripe
(tests/api/fake_stripe.py).

Spec: marketplace-api.md sections 2-6 (Payments, Payment status, Premium flags, Payment
authorization, inbound webhooks); decisions.md sections 2, 4 and 5.

Webhook timestamps are taken from the service's clock (POST /__test/clock with 0), since other
suites move the shared server's clock forward and the 300 s tolerance is checked against it.
"""
import concurrent.futures
import datetime
import json
import re
import threading
import time
import uuid

import pytest
import requests

from conftest import Api, WEBHOOK_SECRET, free_port, sign_webhook
from fake_stripe import FakeStripe

UNAUTHORIZED = {"error": "Unauthorized"}
FORBIDDEN = {"error": "Forbidden"}
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
NEED_CARD = {"error": "A saved payment method is required"}
NO_SUBSCRIPTION = {"error": "No active subscription"}
DECLINED = {"error": "Your card was declined."}
CANCEL_MESSAGE = "Premium is cancelled and stays active until the end of the current billing period"
ALREADY = "Already subscribed to premium"
TIP_TAKEN = {"error": "A tip was already submitted for this job"}
UNAVAILABLE = {"error": "Payment processor unavailable"}
RECEIVED = {"received": True, "duplicate": False}
DUPLICATE = {"received": True, "duplicate": True}

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


def new_job():
    return f"job-{uuid.uuid4()}"


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


def authorize(api, job, user, amount=120.55):
    return api.post("/__test/payments/authorize", json={"jobId": job, "userId": user["id"], "amount": amount})


def capture(api, job):
    return api.post("/__test/payments/capture", json={"jobId": job})


def void(api, job):
    return api.post("/__test/payments/void", json={"jobId": job})


def tip(api, job, user, amount=5):
    return api.post("/__test/payments/tip", json={"jobId": job, "userId": user["id"], "amount": amount})


def payments_of(api, job):
    r = api.get(f"/__test/payments/{job}")
    assert r.status_code == 200, r.text
    return r.json()


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()


def assert_payment(p, status, amount, intent=...):
    """p is {id, status, amount, processorPaymentIntentId}; intent=... means 'any pi_ id'."""
    assert p is not None
    assert set(p) == {"id", "status", "amount", "processorPaymentIntentId"}, p
    assert ID_RE.match(p["id"]), p
    assert p["status"] == status, p
    assert p["amount"] == amount, p
    if intent is ...:
        assert isinstance(p["processorPaymentIntentId"], str) and p["processorPaymentIntentId"].startswith("pi_"), p
    else:
        assert p["processorPaymentIntentId"] == intent, p


def authorized_job(api, user, amount=120.55):
    job = new_job()
    body = ok(authorize(api, job, user, amount))
    assert_payment(body["job"], "AUTHORIZED", amount)
    assert body["tip"] is None
    return job, body["job"]


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
    assert r.json() == {"error": "paymentMethodId: unknown payment method"}
    assert get_method(api, u) is None
    save_card(api, u)
    r = api.post("/payments/payment-method", token=u["token"], json={"paymentMethodId": "tok_visa"})
    assert r.status_code == 400
    assert r.json() == {"error": "paymentMethodId: unknown payment method"}
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
    assert list(r.json()) == ["error"]
    assert r.json()["error"].startswith("paymentMethodId: "), r.json()
    assert get_method(api, u) is None


def test_payment_method_malformed_json(api):
    u = api.register_user()
    r = api.post("/payments/payment-method", token=u["token"], data="{nope",
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"error": "body: malformed JSON"}


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
    assert list(r.json()) == ["error"]
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
    # cancelling again is harmless; subscribing while still active says so
    r = api.post("/payments/premium/cancel", token=u["token"])
    assert r.status_code == 200, r.text
    assert r.json()["cancelAtPeriodEnd"] is True
    r = subscribe(api, u)
    assert r.status_code == 200
    assert r.json() == {"message": ALREADY, "isPremium": True, "subscriptionId": sub, "status": "active"}
    assert premium_status(api, u) == st


# ================================================================ job payments (test routes)

def test_authorize_then_capture(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u, 120.55)
    assert payments_of(api, job) == {"job": auth, "tip": None}
    body = ok(capture(api, job))
    assert body == {"job": dict(auth, status="PAID"), "tip": None}
    assert payments_of(api, job) == body
    # capturing again changes nothing
    assert ok(capture(api, job)) == body
    assert payments_of(api, job) == body


def test_void_an_authorization(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u, 80)
    body = ok(void(api, job))
    assert body == {"job": dict(auth, status="CANCELED"), "tip": None}
    assert payments_of(api, job) == body
    # voiding again and capturing afterwards change nothing
    assert ok(void(api, job)) == body
    assert ok(capture(api, job)) == body
    assert payments_of(api, job) == body


def test_void_after_capture_stays_paid(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u, 42)
    paid = ok(capture(api, job))
    assert paid["job"]["status"] == "PAID"
    assert ok(void(api, job)) == paid
    assert payments_of(api, job) == paid


def test_authorize_without_a_saved_card_fails(api):
    u = api.register_user()
    job = new_job()
    body = ok(authorize(api, job, u, 99.99))
    assert body["tip"] is None
    assert_payment(body["job"], "FAILED", 99.99, intent=None)
    assert payments_of(api, job) == body
    # nothing to capture or void
    assert ok(capture(api, job)) == body
    assert ok(void(api, job)) == body


@pytest.mark.parametrize("pm", ["pm_card_chargeDeclined", "pm_card_chargeDeclinedInsufficientFunds"])
def test_authorize_with_a_declined_card_fails_with_an_intent(api, pm):
    u = customer_with_card(api, pm)
    job = new_job()
    body = ok(authorize(api, job, u, 120.55))
    assert_payment(body["job"], "FAILED", 120.55)
    assert body["tip"] is None
    assert payments_of(api, job) == body
    assert ok(capture(api, job)) == body


def test_authorize_the_same_job_twice_is_409(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    r = authorize(api, job, u, 10)
    assert r.status_code == 409, r.text
    assert r.json() == {"error": "Conflict"}
    assert payments_of(api, job) == {"job": auth, "tip": None}
    # a failed one is final as well
    v = api.register_user()
    job2 = new_job()
    failed = ok(authorize(api, job2, v))
    save_card(api, v)
    r = authorize(api, job2, v)
    assert r.status_code == 409, r.text
    assert payments_of(api, job2) == failed


def test_authorize_amount_is_kept_in_cents(api):
    u = customer_with_card(api)
    for amount in (0.5, 1, 19.99, 100000):
        job, auth = authorized_job(api, u, amount)
        assert auth["amount"] == amount


def test_unknown_job_has_no_payments(api):
    job = new_job()
    assert payments_of(api, job) == {"job": None, "tip": None}
    assert ok(capture(api, job)) == {"job": None, "tip": None}
    assert ok(void(api, job)) == {"job": None, "tip": None}


def test_test_routes_validate(api):
    r = api.post("/__test/payments/authorize", json={"userId": "x", "amount": 1})
    assert r.status_code == 400
    assert r.json()["error"].startswith("jobId: ")
    r = api.post("/__test/payments/capture", json={"jobId": 5})
    assert r.status_code == 400
    assert r.json()["error"].startswith("jobId: ")
    r = api.post("/__test/payments/authorize", json={"jobId": new_job(), "userId": "nobody-here", "amount": 1})
    assert r.status_code == 404
    assert r.json() == {"error": "Not found"}


def test_tip(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u, 60)
    ok(capture(api, job))
    body = ok(tip(api, job, u, 7.5))
    assert body["job"] == dict(auth, status="PAID")
    assert_payment(body["tip"], "PAID", 7.5)
    assert body["tip"]["processorPaymentIntentId"] != auth["processorPaymentIntentId"]
    assert payments_of(api, job) == body
    # a second tip is refused and changes nothing
    r = tip(api, job, u, 3)
    assert r.status_code == 409
    assert r.json() == TIP_TAKEN
    assert payments_of(api, job) == body


def test_tip_without_a_card_is_400(api):
    u = api.register_user()
    job = new_job()
    r = tip(api, job, u)
    assert r.status_code == 400
    assert r.json() == NEED_CARD
    assert payments_of(api, job) == {"job": None, "tip": None}


@pytest.mark.parametrize("pm", ["pm_card_chargeDeclined", "pm_card_chargeDeclinedInsufficientFunds"])
def test_declined_tip_is_402_and_can_be_retried(api, pm):
    u = customer_with_card(api, pm)
    job = new_job()
    r = tip(api, job, u, 5)
    assert r.status_code == 402
    assert list(r.json()) == ["error"]
    if pm == "pm_card_chargeDeclined":
        assert r.json() == DECLINED
    assert payments_of(api, job) == {"job": None, "tip": None}
    # the same declined card is declined again; a good card then succeeds
    r = tip(api, job, u, 5)
    assert r.status_code == 402
    save_card(api, u)
    body = ok(tip(api, job, u, 5))
    assert body["job"] is None
    assert_payment(body["tip"], "PAID", 5)
    assert payments_of(api, job) == body


def test_insufficient_funds_tip_says_so(api):
    u = customer_with_card(api, "pm_card_chargeDeclinedInsufficientFunds")
    r = tip(api, new_job(), u, 5)
    assert r.status_code == 402
    assert r.json() == {"error": "Your card has insufficient funds."}


# ================================================================ webhooks: signature

@pytest.mark.parametrize("header", ["", "garbage", "t=123", "v1=abc", "t=abc,v1=00", "t=,v1=00", "t=12x,v1=00",
                                    "v0=00,t=1700000000", "T=1700000000,V1=00"])
def test_webhook_malformed_signature_header(api, header):
    body = json.dumps(event("payment_intent.succeeded", {"id": "pi_x"}))
    r = post_webhook(api, body, header=header)
    assert r.status_code == 400, r.text
    assert r.json() == ({"error": "Missing Stripe-Signature header"} if header == ""
                        else {"error": "Malformed Stripe-Signature header"})


def test_webhook_missing_signature_header(api):
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), header=None)
    assert r.status_code == 400
    assert r.json() == {"error": "Missing Stripe-Signature header"}


def test_webhook_wrong_secret(api):
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), secret="whsec_other")
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid webhook signature"}


def test_webhook_signature_over_another_body(api):
    now = server_now(api).timestamp()
    signed = json.dumps(event("payment_intent.amount_capturable_updated", {"id": "pi_x"}))
    header = sign_webhook(signed, timestamp=now)
    r = post_webhook(api, json.dumps(event("payment_intent.succeeded", {"id": "pi_x"})), header=header)
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid webhook signature"}
    # whitespace matters: the raw body is what is signed
    r = post_webhook(api, signed + " ", header=header)
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid webhook signature"}


@pytest.mark.parametrize("offset", [-301, 301, -3600])
def test_webhook_timestamp_outside_tolerance(api, offset):
    ts = server_now(api).timestamp() + offset
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), timestamp=ts)
    assert r.status_code == 400
    assert r.json() == {"error": "Webhook timestamp outside the tolerance"}


def test_webhook_timestamp_inside_tolerance(api):
    ts = server_now(api).timestamp() - 280
    r = post_webhook(api, event("payment_intent.amount_capturable_updated", {"id": "pi_x"}), timestamp=ts)
    assert r.status_code == 200, r.text
    assert r.json() == RECEIVED


def test_webhook_stale_real_clock_signature(api):
    """As the brief words it: a signature made 301 s ago by the real clock is refused."""
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), timestamp=time.time() - 301)
    assert r.status_code == 400
    assert r.json() == {"error": "Webhook timestamp outside the tolerance"}


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
    assert r.json() == {"error": "Request body too large"}


def test_webhook_refused_signature_does_not_consume_the_event_id(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    evt = event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"]})
    r = post_webhook(api, evt, secret="whsec_wrong")
    assert r.status_code == 400
    assert payments_of(api, job)["job"]["status"] == "AUTHORIZED"
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == RECEIVED
    assert payments_of(api, job)["job"]["status"] == "PAID"


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
    assert r.json() == {"error": error}


def test_webhook_without_configured_secret_is_refused(server_factory):
    srv = server_factory(STRIPE_WEBHOOK_SECRET=None)
    api = Api(srv)
    for secret in (WEBHOOK_SECRET, ""):
        r = post_webhook(api, event("payment_intent.amount_capturable_updated", {"id": "pi_x"}), secret=secret)
        assert r.status_code == 400, r.text
        assert r.json() == {"error": "Webhooks are not configured"}
    r = post_webhook(api, event("payment_intent.succeeded", {"id": "pi_x"}), header=None)
    assert r.status_code == 400
    assert r.json() == {"error": "Webhooks are not configured"}


# ================================================================ webhooks: events

def test_webhook_payment_succeeded_marks_paid(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    evt = event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"], "object": "payment_intent",
                                             "status": "succeeded"})
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == RECEIVED
    assert payments_of(api, job) == {"job": dict(auth, status="PAID"), "tip": None}
    # the same event id again: received, duplicate, nothing changes
    r = post_webhook(api, evt)
    assert r.status_code == 200
    assert r.json() == DUPLICATE
    assert payments_of(api, job) == {"job": dict(auth, status="PAID"), "tip": None}
    # capture afterwards is a no-op
    assert ok(capture(api, job))["job"]["status"] == "PAID"


@pytest.mark.parametrize("type_", ["payment_intent.payment_failed", "payment_intent.canceled"])
def test_webhook_failure_events_mark_failed(api, type_):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    webhook(api, type_, {"id": auth["processorPaymentIntentId"], "object": "payment_intent"})
    assert payments_of(api, job) == {"job": dict(auth, status="FAILED"), "tip": None}
    # a FAILED payment is not captured
    assert ok(capture(api, job))["job"]["status"] == "FAILED"


def test_webhook_failure_after_paid_is_ignored(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    paid = ok(capture(api, job))
    webhook(api, "payment_intent.payment_failed", {"id": auth["processorPaymentIntentId"]})
    webhook(api, "payment_intent.canceled", {"id": auth["processorPaymentIntentId"]})
    assert payments_of(api, job) == paid


def test_webhook_canceled_after_void_stays_canceled(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    voided = ok(void(api, job))
    webhook(api, "payment_intent.canceled", {"id": auth["processorPaymentIntentId"]})
    webhook(api, "payment_intent.succeeded", {"id": auth["processorPaymentIntentId"]})
    assert payments_of(api, job) == voided


def test_webhook_succeeded_after_declined_authorization_marks_paid(api):
    u = customer_with_card(api, "pm_card_chargeDeclined")
    job = new_job()
    failed = ok(authorize(api, job, u))["job"]
    assert failed["status"] == "FAILED" and failed["processorPaymentIntentId"]
    webhook(api, "payment_intent.succeeded", {"id": failed["processorPaymentIntentId"]})
    assert payments_of(api, job)["job"] == dict(failed, status="PAID")


def test_webhook_amount_capturable_updated_changes_nothing(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    webhook(api, "payment_intent.amount_capturable_updated",
            {"id": auth["processorPaymentIntentId"], "amount_capturable": 12055})
    assert payments_of(api, job) == {"job": auth, "tip": None}
    # still capturable
    assert ok(capture(api, job))["job"]["status"] == "PAID"


def test_webhook_unknown_type_or_object_changes_nothing(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    sub = subscribed(api, u)
    st = premium_status(api, u)
    webhook(api, "charge.refunded", {"id": auth["processorPaymentIntentId"]})
    webhook(api, "invoice.payment_failed", {"id": "in_1", "subscription": sub, "customer": "cus_x"})
    webhook(api, "payment_intent.succeeded", {"id": "pi_does_not_exist"})
    webhook(api, "payment_intent.payment_failed", {"id": "pi_does_not_exist"})
    webhook(api, "customer.subscription.deleted", {"id": "sub_does_not_exist", "customer": "cus_does_not_exist"})
    webhook(api, "customer.subscription.updated",
            {"id": "sub_does_not_exist", "customer": "cus_does_not_exist", "status": "past_due"})
    webhook(api, "payment_intent.succeeded", {"object": "payment_intent"})  # no id to find it by
    assert payments_of(api, job) == {"job": auth, "tip": None}
    assert premium_status(api, u) == st


def test_webhook_duplicate_event_id_is_applied_once_whatever_it_says(api):
    u = customer_with_card(api)
    job, auth = authorized_job(api, u)
    evt_id = f"evt_{uuid.uuid4().hex}"
    webhook(api, "payment_intent.amount_capturable_updated", {"id": auth["processorPaymentIntentId"]}, evt_id)
    r = post_webhook(api, event("payment_intent.succeeded", {"id": auth["processorPaymentIntentId"]}, evt_id))
    assert r.status_code == 200
    assert r.json() == DUPLICATE
    assert payments_of(api, job) == {"job": auth, "tip": None}


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
    webhook(api, "customer.subscription.updated",
            {"id": sub, "object": "subscription", "customer": "cus_anything", "status": "past_due",
             "cancel_at_period_end": False})
    st = premium_status(api, u)
    assert st["isPremium"] is False
    assert st["processorSubscriptionId"] == sub
    assert st["premiumSince"] == since  # the subscription's start: a spell of past_due does not move it
    webhook(api, "customer.subscription.updated",
            {"id": sub, "object": "subscription", "customer": "cus_anything", "status": "active",
             "cancel_at_period_end": False})
    st = premium_status(api, u)
    assert st["isPremium"] is True
    assert st["processorSubscriptionId"] == sub
    assert st["cancelAtPeriodEnd"] is False
    assert st["premiumSince"] == since


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

PRICE = "price_premium"


@pytest.fixture(scope="module")
def fake_stripe():
    fake = FakeStripe(api_key="sk_test_fake", prices={PRICE: 999}).start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def stripe_server(make_server, fake_stripe):
    return make_server(STRIPE_SECRET_KEY="sk_test_fake", STRIPE_API_BASE=fake_stripe.url,
                       STRIPE_PREMIUM_PRICE_ID=PRICE)


@pytest.fixture
def fake(fake_stripe):
    fake_stripe.reset_controls()
    yield fake_stripe
    fake_stripe.reset_controls()


@pytest.fixture
def sapi(stripe_server, fake):
    return Api(stripe_server)


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
    assert r.json() == {"error": "paymentMethodId: unknown payment method"}
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
    assert r.json() == {"error": "paymentMethodId: unknown payment method"}
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
    assert form(calls[0]) == {"customer": cus["id"], "items[0][price]": PRICE, "default_payment_method": pm,
                              "off_session": "true", "payment_behavior": "error_if_incomplete"}
    assert calls[0]["headers"]["idempotency-key"].startswith("premium-")
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


def test_stripe_job_payments(sapi, fake):
    u = customer_with_card(sapi)
    cus = stripe_customer(fake, u)
    pm = saved_pm(fake, u)
    # authorize: a manual-capture, off-session, confirmed PaymentIntent for the amount in cents
    job, auth = authorized_job(sapi, u, 120.55)
    pi = fake.get(auth["processorPaymentIntentId"])
    assert pi["status"] == "requires_capture" and pi["amount"] == 12055 and pi["customer"] == cus["id"]
    call = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"authorize-{job}"]
    assert len(call) == 1
    assert form(call[0]) == {"amount": "12055", "currency": "usd", "customer": cus["id"], "payment_method": pm,
                             "off_session": "true", "confirm": "true", "capture_method": "manual"}
    # capture
    paid = ok(capture(sapi, job))
    assert paid == {"job": dict(auth, status="PAID"), "tip": None}
    assert fake.get(pi["id"])["status"] == "succeeded"
    assert fake.get(pi["id"])["amount_received"] == 12055
    cap = fake.calls("POST", f"/v1/payment_intents/{pi['id']}/capture")
    assert len(cap) == 1 and cap[0]["headers"]["idempotency-key"] == f"capture-{auth['id']}"
    assert ok(capture(sapi, job)) == paid
    assert ok(void(sapi, job)) == paid
    assert len(fake.calls(prefix=f"/v1/payment_intents/{pi['id']}/")) == 1

    # void another authorization
    job2, auth2 = authorized_job(sapi, u, 30)
    voided = ok(void(sapi, job2))
    assert voided == {"job": dict(auth2, status="CANCELED"), "tip": None}
    assert fake.get(auth2["processorPaymentIntentId"])["status"] == "canceled"
    cancel = fake.calls("POST", f"/v1/payment_intents/{auth2['processorPaymentIntentId']}/cancel")
    assert len(cancel) == 1 and cancel[0]["headers"]["idempotency-key"] == f"void-{auth2['id']}"

    # tip: an automatic-capture charge
    body = ok(tip(sapi, job, u, 7.5))
    assert_payment(body["tip"], "PAID", 7.5)
    tpi = fake.get(body["tip"]["processorPaymentIntentId"])
    assert tpi["status"] == "succeeded" and tpi["amount"] == 750 and tpi["capture_method"] == "automatic"
    tcall = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"tip-{body['tip']['id']}"]
    assert len(tcall) == 1 and form(tcall[0])["capture_method"] == "automatic"
    r = tip(sapi, job, u, 2)
    assert r.status_code == 409 and r.json() == TIP_TAKEN
    assert len(intents_of(fake, u)) == 3


def test_stripe_declines(sapi, fake):
    u = customer_with_card(sapi, "pm_card_chargeDeclined")
    assert get_method(sapi, u) == DECLINED_CARD
    # authorize -> FAILED, with the intent Stripe left in requires_payment_method
    job = new_job()
    body = ok(authorize(sapi, job, u, 50))
    assert_payment(body["job"], "FAILED", 50)
    pi = fake.get(body["job"]["processorPaymentIntentId"])
    assert pi["status"] == "requires_payment_method" and pi["customer"] == stripe_customer(fake, u)["id"]
    # tip -> 402, nothing recorded
    job2 = new_job()
    r = tip(sapi, job2, u, 5)
    assert r.status_code == 402
    assert r.json() == DECLINED
    assert payments_of(sapi, job2) == {"job": None, "tip": None}
    # subscribe -> 402, not premium, no subscription at Stripe
    r = subscribe(sapi, u)
    assert r.status_code == 402
    assert r.json() == DECLINED
    assert premium_status(sapi, u) == NOT_PREMIUM
    assert fake.objects("subscription", customer=stripe_customer(fake, u)["id"]) == []
    # with a good card every one of them works
    save_card(sapi, u, "pm_card_visa")
    assert_payment(ok(tip(sapi, job2, u, 5))["tip"], "PAID", 5)
    sub = subscribed(sapi, u)
    assert [s["id"] for s in fake.objects("subscription", customer=stripe_customer(fake, u)["id"])] == [sub]


def test_stripe_insufficient_funds_tip_message(sapi, fake):
    u = customer_with_card(sapi, "pm_card_chargeDeclinedInsufficientFunds")
    r = tip(sapi, new_job(), u, 5)
    assert r.status_code == 402
    assert r.json() == {"error": "Your card has insufficient funds."}


def test_stripe_retries_5xx_with_the_same_idempotency_key(sapi, fake):
    u = customer_with_card(sapi)
    fake.fail_next("POST", "/v1/payment_intents", count=2, status=500)
    job = new_job()
    body = ok(authorize(sapi, job, u, 25))
    assert_payment(body["job"], "AUTHORIZED", 25)
    calls = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"authorize-{job}"]
    assert [c["status"] for c in calls] == [500, 500, 200]
    assert len({c["raw"] for c in calls}) == 1
    intents = intents_of(fake, u)
    assert [i["id"] for i in intents] == [body["job"]["processorPaymentIntentId"]]


def test_stripe_retry_after_lost_answer_charges_once(sapi, fake):
    """Stripe did the work but the answer was lost: the retry carries the same key and gets the
    stored result back, so exactly one PaymentIntent exists."""
    u = customer_with_card(sapi)
    fake.fail_next("POST", "/v1/payment_intents", count=1, status=502, after_processing=True)
    job = new_job()
    body = ok(authorize(sapi, job, u, 25))
    assert_payment(body["job"], "AUTHORIZED", 25)
    calls = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"authorize-{job}"]
    assert [c["status"] for c in calls] == [502, 200]
    intents = intents_of(fake, u)
    assert [i["id"] for i in intents] == [body["job"]["processorPaymentIntentId"]]
    # the tip path likewise
    fake.fail_next("POST", "/v1/payment_intents", count=2, status=503, after_processing=True)
    t = ok(tip(sapi, job, u, 4))["tip"]
    assert_payment(t, "PAID", 4)
    charges = intents_of(fake, u, capture_method="automatic")
    assert [i["id"] for i in charges] == [t["processorPaymentIntentId"]]


def test_stripe_retries_429(sapi, fake):
    u = sapi.register_user()
    fake.fail_next("POST", "/v1/customers", count=1, status=429)
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    calls = [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]
    assert [c["status"] for c in calls] == [429, 200]
    assert len(fake.objects("customer", email=u["email"])) == 1


def test_stripe_every_request_carries_key_version_and_idempotency(sapi, fake):
    fake.clear_log()
    u = customer_with_card(sapi)
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    ok(sapi.post("/payments/setup-intent", token=u["token"]))
    get_method(sapi, u)
    subscribed(sapi, u)
    ok(sapi.post("/payments/premium/cancel", token=u["token"]))
    job, _ = authorized_job(sapi, u)
    ok(capture(sapi, job))
    ok(tip(sapi, job, u, 3))
    job2, _ = authorized_job(sapi, u)
    ok(void(sapi, job2))
    calls = fake.calls()
    assert {c["method"] for c in calls} == {"GET", "POST"}
    assert len(calls) >= 12
    keys = []
    for c in calls:
        assert c["headers"].get("authorization") == "Bearer sk_test_fake", c
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


def test_stripe_detached_card_reads_as_null(sapi, fake):
    u = customer_with_card(sapi)
    pm = saved_pm(fake, u)
    fake.detach_payment_method(pm)
    assert get_method(sapi, u) is None
    # the card was forgotten: no further lookups, and payments need a new card
    n = len(fake.calls("GET", f"/v1/payment_methods/{pm}"))
    assert get_method(sapi, u) is None
    assert len(fake.calls("GET", f"/v1/payment_methods/{pm}")) == n
    r = subscribe(sapi, u)
    assert r.status_code == 400 and r.json() == NEED_CARD
    r = tip(sapi, new_job(), u)
    assert r.status_code == 400 and r.json() == NEED_CARD
    assert_payment(ok(authorize(sapi, new_job(), u, 10))["job"], "FAILED", 10, intent=None)
    assert save_card(sapi, u, "pm_card_amex")["last4"] == "8431"
    assert get_method(sapi, u)["brand"] == "amex"


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


def test_stripe_capture_outage_is_retried_in_the_background(sapi, fake):
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u, 33)
    path = f"/v1/payment_intents/{auth['processorPaymentIntentId']}/capture"
    fake.fail_next("POST", path, count=3, status=500)
    body = ok(capture(sapi, job))
    assert body["job"]["status"] in ("AUTHORIZED", "PAID")
    deadline = time.time() + 15
    while payments_of(sapi, job)["job"]["status"] != "PAID" and time.time() < deadline:
        time.sleep(0.1)
    assert payments_of(sapi, job) == {"job": dict(auth, status="PAID"), "tip": None}
    calls = fake.calls("POST", path)
    assert [c["status"] for c in calls] == [500, 500, 500, 200]
    assert {c["headers"]["idempotency-key"] for c in calls} == {f"capture-{auth['id']}"}
    assert fake.get(auth["processorPaymentIntentId"])["status"] == "succeeded"


def test_stripe_void_outage_is_503_and_can_be_repeated(sapi, fake):
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u, 33)
    path = f"/v1/payment_intents/{auth['processorPaymentIntentId']}/cancel"
    fake.fail_next("POST", path, count=3, status=500)
    r = void(sapi, job)
    assert r.status_code == 503
    assert payments_of(sapi, job) == {"job": auth, "tip": None}
    assert ok(void(sapi, job)) == {"job": dict(auth, status="CANCELED"), "tip": None}
    assert {c["headers"]["idempotency-key"] for c in fake.calls("POST", path)} == {f"void-{auth['id']}"}


def test_stripe_tip_outage_is_503_and_a_retry_charges_once(sapi, fake):
    u = customer_with_card(sapi)
    job = new_job()
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500)
    r = tip(sapi, job, u, 5)
    assert r.status_code == 503
    assert r.json() == {"error": "Payment processor unavailable"}
    assert intents_of(fake, u) == []
    r = tip(sapi, job, u, 5)
    assert r.status_code == 200, r.text
    assert r.json()["tip"]["status"] == "PAID"
    assert len(intents_of(fake, u)) == 1


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
    assert r.json() == {"error": "No such price: 'price_gone'"}
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


def test_stripe_webhooks_move_real_intents(sapi, fake):
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u)
    webhook(sapi, "payment_intent.succeeded", fake.get(auth["processorPaymentIntentId"]))
    assert payments_of(sapi, job)["job"]["status"] == "PAID"


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


def test_stripe_authorize_same_job_twice_holds_once(sapi, fake):
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u, 20)
    r = authorize(sapi, job, u, 20)
    assert r.status_code == 409
    assert r.json() == {"error": "Conflict"}
    assert [i["id"] for i in intents_of(fake, u)] == [auth["processorPaymentIntentId"]]
    assert payments_of(sapi, job) == {"job": auth, "tip": None}


def test_stripe_capture_refused_marks_failed(sapi, fake):
    """The authorization is gone at Stripe (expired or cancelled there): the capture is refused."""
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u, 20)
    fake.update_object(auth["processorPaymentIntentId"], status="canceled")
    body = ok(capture(sapi, job))
    assert body == {"job": dict(auth, status="FAILED"), "tip": None}
    assert payments_of(sapi, job) == body


def test_stripe_void_refused_leaves_it_to_the_webhook(sapi, fake):
    """Already captured at Stripe (e.g. from the dashboard): the void is refused, nothing changes
    here, and the payment_intent.succeeded event then marks it PAID."""
    u = customer_with_card(sapi)
    job, auth = authorized_job(sapi, u, 20)
    captured = fake.update_object(auth["processorPaymentIntentId"], status="succeeded")
    assert ok(void(sapi, job)) == {"job": auth, "tip": None}
    assert fake.calls("POST", f"/v1/payment_intents/{auth['processorPaymentIntentId']}/cancel")[-1]["status"] == 400
    webhook(sapi, "payment_intent.succeeded", captured)
    assert payments_of(sapi, job) == {"job": dict(auth, status="PAID"), "tip": None}


def test_stripe_concurrent_tips_charge_once(sapi, fake):
    u = customer_with_card(sapi)
    job = new_job()
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: tip(Api(sapi.server), job, u, 5), range(5)))
    assert sorted(r.status_code for r in answers) == [200, 409, 409, 409, 409], [r.text for r in answers]
    for r in answers:
        if r.status_code == 409:
            assert r.json() == TIP_TAKEN
    charges = intents_of(fake, u, status="succeeded")
    assert len(charges) == 1
    assert payments_of(sapi, job)["tip"]["processorPaymentIntentId"] == charges[0]["id"]


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


def test_stripe_tip_retry_after_lost_answer_charges_once(sapi, fake):
    u = customer_with_card(sapi)
    job = new_job()
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=True)
    r = tip(sapi, job, u, 5)
    assert r.status_code == 503
    charged = intents_of(fake, u, status="succeeded")
    assert len(charged) == 1  # Stripe did charge the card
    r = tip(sapi, job, u, 5)
    assert r.status_code == 200, r.text
    assert intents_of(fake, u, status="succeeded") == charged
    assert payments_of(sapi, job)["tip"]["processorPaymentIntentId"] == charged[0]["id"]


def test_stripe_concurrent_first_setup_intents(sapi, fake):
    u = sapi.register_user()
    fake.delay("POST", "/v1/customers", 0.4)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: Api(sapi.server).post("/payments/setup-intent", token=u["token"]))
        deadline = time.time() + 5
        while not [c for c in fake.calls("POST", "/v1/customers") if form(c).get("email") == u["email"]]:
            assert time.time() < deadline
            time.sleep(0.01)
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
        deadline = time.time() + 5
        while not [c for c in fake.calls("POST", "/v1/subscriptions") if form(c).get("customer") == cus]:
            assert time.time() < deadline
            time.sleep(0.01)
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


def test_stripe_authorization_with_every_answer_lost_is_confirmed_in_the_background(sapi, fake):
    """Stripe placed the hold but every answer was lost: the Payment reads FAILED at first, then
    the background confirmation repeats the same request under the same key, gets the stored
    PaymentIntent back and makes the Payment AUTHORIZED; Stripe holds one intent."""
    u = customer_with_card(sapi)
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500, after_processing=True)
    job = new_job()
    body = ok(authorize(sapi, job, u, 25))
    assert_payment(body["job"], "FAILED", 25, intent=None)
    deadline = time.time() + 15
    while payments_of(sapi, job)["job"]["status"] != "AUTHORIZED" and time.time() < deadline:
        time.sleep(0.1)
    got = payments_of(sapi, job)["job"]
    assert_payment(got, "AUTHORIZED", 25)
    assert got["id"] == body["job"]["id"]
    assert [i["id"] for i in intents_of(fake, u)] == [got["processorPaymentIntentId"]]
    assert fake.get(got["processorPaymentIntentId"])["status"] == "requires_capture"
    calls = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"authorize-{job}"]
    assert [c["status"] for c in calls] == [500, 500, 500, 200]
    assert len({c["raw"] for c in calls}) == 1  # the very same request each time
    # and it is an ordinary authorization from then on
    assert ok(capture(sapi, job)) == {"job": dict(got, status="PAID"), "tip": None}


def test_stripe_authorization_never_answered_then_declined_stays_failed(sapi, fake):
    """Stripe was down (nothing done) and the card is refused once it answers: the confirmation
    finds the decline, and the Payment stays FAILED, now with the declined intent."""
    u = customer_with_card(sapi, "pm_card_chargeDeclined")
    fake.fail_next("POST", "/v1/payment_intents", count=3, status=500)
    job = new_job()
    body = ok(authorize(sapi, job, u, 25))
    assert_payment(body["job"], "FAILED", 25, intent=None)
    deadline = time.time() + 15
    while payments_of(sapi, job)["job"]["processorPaymentIntentId"] is None and time.time() < deadline:
        time.sleep(0.1)
    got = payments_of(sapi, job)["job"]
    assert_payment(got, "FAILED", 25)
    assert [i["id"] for i in intents_of(fake, u)] == [got["processorPaymentIntentId"]]
    calls = [c for c in fake.calls("POST", "/v1/payment_intents") if c["headers"].get("idempotency-key") == f"authorize-{job}"]
    assert [c["status"] for c in calls] == [500, 500, 500, 402]


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
    deadline = time.time() + 10
    while len(fake.calls("GET")) == seen and time.time() < deadline:
        time.sleep(0.01)
    t0 = time.perf_counter()
    assert api.get("/users/me", token=u["token"]).status_code == 200
    elapsed = time.perf_counter() - t0
    t.join(30)
    assert done and done[0].status_code == 200, done
    assert elapsed < 1.0, elapsed
