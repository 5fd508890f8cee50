"""Self-test of tests/api/fake_stripe.py, the Stripe stand-in behind the service's Stripe
client in tests/api/test_payments.py: if the fake were wrong, those tests would prove little.
It needs neither the binary nor a build, and is not product coverage (`make fakes`)."""
import threading
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


def test_fake_stripe_hold_keeps_requests_until_released(fake):
    auth = {"Authorization": "Bearer sk_test_fake"}
    release = fake.hold("GET", "/v1/subscriptions/sub_held")
    answers = []
    try:
        t = threading.Thread(target=lambda: answers.append(requests.get(
            f"{fake.url}/v1/subscriptions/sub_held", headers=auth, timeout=10).status_code))
        t.start()
        t.join(0.3)
        assert answers == [] and t.is_alive()
        release.set()
        t.join(5)
        assert answers == [404]
    finally:
        fake.delay("GET", "/v1/subscriptions/sub_held", 0)


def test_fake_stripe_refunds_as_stripe_does(fake):
    """Refunds of a captured PaymentIntent: partial, the rest by default, refused past what is
    left (amount_too_large, then charge_already_refunded) and before capture; the charge's
    amount_refunded follows; listed newest first per PaymentIntent; replayed under their key."""
    url, auth = fake.url, {"Authorization": "Bearer sk_test_fake"}
    cus = requests.post(f"{url}/v1/customers", data={"email": "re@example.com"}, headers=auth, timeout=10).json()["id"]
    pm = requests.post(f"{url}/v1/payment_methods/pm_card_visa/attach", data={"customer": cus}, headers=auth,
                       timeout=10).json()["id"]
    form = {"amount": 1000, "currency": "usd", "customer": cus, "payment_method": pm, "confirm": "true",
            "off_session": "true", "capture_method": "manual"}
    pi = requests.post(f"{url}/v1/payment_intents", data=form, headers=auth, timeout=10).json()
    r = requests.post(f"{url}/v1/refunds", data={"payment_intent": pi["id"]}, headers=auth, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"] == {"type": "invalid_request_error", "param": "payment_intent",
                                 "message": f"This PaymentIntent ({pi['id']}) does not have a successful charge "
                                            "to refund."}
    requests.post(f"{url}/v1/payment_intents/{pi['id']}/capture", headers=auth, timeout=10)
    key = {"Idempotency-Key": f"refund-{uuid.uuid4()}", **auth}
    data = {"payment_intent": pi["id"], "amount": 300, "reason": "requested_by_customer",
            "metadata[idempotency_key]": key["Idempotency-Key"]}
    first = requests.post(f"{url}/v1/refunds", data=data, headers=key, timeout=10)
    again = requests.post(f"{url}/v1/refunds", data=data, headers=key, timeout=10)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    re1 = first.json()
    assert (re1["object"], re1["amount"], re1["status"], re1["payment_intent"], re1["charge"], re1["metadata"]) == \
        ("refund", 300, "succeeded", pi["id"], pi["latest_charge"], {"idempotency_key": key["Idempotency-Key"]})
    r = requests.post(f"{url}/v1/refunds", data={"payment_intent": pi["id"], "amount": 800}, headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "amount_too_large")
    assert r.json()["error"]["message"] == "Refund amount ($8.00) is greater than unrefunded amount on charge ($7.00)"
    rest = requests.post(f"{url}/v1/refunds", data={"payment_intent": pi["id"]}, headers=auth, timeout=10).json()
    assert rest["amount"] == 700
    charge = requests.get(f"{url}/v1/charges/{pi['latest_charge']}", headers=auth, timeout=10).json()
    assert (charge["amount_refunded"], charge["refunded"], "refunds" in charge) == (1000, True, False)
    expanded = requests.get(f"{url}/v1/charges/{pi['latest_charge']}?expand[]=refunds", headers=auth, timeout=10)
    assert [x["id"] for x in expanded.json()["refunds"]["data"]] == [rest["id"], re1["id"]]
    r = requests.post(f"{url}/v1/refunds", data={"payment_intent": pi["id"]}, headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "charge_already_refunded")
    listed = requests.get(f"{url}/v1/refunds?payment_intent={pi['id']}&limit=1", headers=auth, timeout=10).json()
    assert (listed["has_more"], [x["id"] for x in listed["data"]]) == (True, [rest["id"]])
    page = requests.get(f"{url}/v1/refunds?payment_intent={pi['id']}&starting_after={rest['id']}", headers=auth,
                        timeout=10).json()
    assert [x["id"] for x in page["data"]] == [re1["id"]]
    assert requests.get(f"{url}/v1/refunds/{re1['id']}", headers=auth, timeout=10).json() == re1
    assert fake.charge_of(pi["id"])["amount_refunded"] == 1000
