"""Self-test of tests/api/fake_stripe.py, the Stripe stand-in behind the service's Stripe
client in tests/api/test_payments.py: if the fake were wrong, those tests would prove little.
It needs neither the binary nor a build, and is not product coverage (`make fakes`)."""
import time
import uuid

import pytest
import requests

from fake_stripe import FakeStripe


@pytest.fixture(scope="module")
def fake():
    f = FakeStripe(api_key="sk_test_fake", prices={"price_premium": 999}).start()
    yield f
    f.stop()


def test_fake_stripe_speaks_stripe(fake):
    """The fake itself: auth, errors, test tokens, idempotency (so the tests above mean something)."""
    url, auth = fake.url, {"Authorization": "Bearer sk_test_fake"}
    r = requests.post(f"{url}/v1/customers", data={"email": "x@example.com"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_request_error"
    r = requests.post(f"{url}/v1/customers", data={"email": "x@example.com"}, timeout=10,
                      headers={"Authorization": "Bearer sk_test_other"})
    assert r.status_code == 401
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}", **auth}
    c1 = requests.post(f"{url}/v1/customers", data={"email": "fake@example.com"}, headers=key, timeout=10)
    c2 = requests.post(f"{url}/v1/customers", data={"email": "fake@example.com"}, headers=key, timeout=10)
    assert c1.status_code == c2.status_code == 200
    assert c1.json() == c2.json() and c1.json()["object"] == "customer"
    assert c2.headers.get("Idempotent-Replayed") == "true"
    r = requests.post(f"{url}/v1/customers", data={"email": "other@example.com"}, headers=key, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["type"] == "idempotency_error"
    cus = c1.json()["id"]
    r = requests.get(f"{url}/v1/payment_methods/pm_nope", headers=auth, timeout=10)
    assert r.status_code == 404
    assert r.json() == {"error": {"type": "invalid_request_error", "code": "resource_missing",
                                  "message": "No such PaymentMethod: 'pm_nope'"}}
    pm = requests.post(f"{url}/v1/payment_methods/pm_card_chargeDeclined/attach", data={"customer": cus},
                       headers=auth, timeout=10).json()
    assert pm["id"].startswith("pm_") and pm["id"] != "pm_card_chargeDeclined" and pm["customer"] == cus
    assert pm["card"] == {"brand": "visa", "last4": "0002", "exp_month": 12, "exp_year": 2034, "funding": "credit",
                          "country": "US"}
    r = requests.post(f"{url}/v1/payment_intents", headers=auth, timeout=10,
                      data={"amount": 500, "currency": "usd", "customer": cus, "payment_method": pm["id"],
                            "confirm": "true", "off_session": "true", "capture_method": "manual"})
    assert r.status_code == 402
    err = r.json()["error"]
    assert (err["type"], err["code"], err["decline_code"], err["message"]) == \
        ("card_error", "card_declined", "generic_decline", "Your card was declined.")
    assert err["payment_intent"]["id"].startswith("pi_")
    assert err["payment_intent"]["status"] == "requires_payment_method"
    r = requests.get(f"{url}/v1/nothing", headers=auth, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["message"].startswith("Unrecognized request URL")


def test_fake_stripe_delay_holds_requests_without_an_idempotency_key(fake):
    auth = {"Authorization": "Bearer sk_test_fake"}
    fake.delay("GET", "/v1/subscriptions/sub_slow", 0.5)
    try:
        t0 = time.time()
        r = requests.get(f"{fake.url}/v1/subscriptions/sub_slow", headers=auth, timeout=10)
        assert r.status_code == 404 and time.time() - t0 >= 0.5
    finally:
        fake.delay("GET", "/v1/subscriptions/sub_slow", 0)
