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


def test_fake_stripe_connect_accounts_links_and_onboarding(fake):
    """An Express account waits for its onboarding; its Account Link is the fake's hosted page,
    which finishes the onboarding once, within its 5 minutes; a second visit is refused as an
    expired link is; account.updated carries the account as it now stands."""
    url, auth = fake.url, {"Authorization": "Bearer sk_test_fake"}
    r = requests.post(f"{url}/v1/accounts", data={"type": "flat"}, headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["param"]) == (400, "type")
    acct = requests.post(f"{url}/v1/accounts", headers=auth, timeout=10, data={
        "type": "express", "country": "US", "email": "pro@example.com", "capabilities[transfers][requested]": "true",
        "metadata[provider_id]": "cprovider"}).json()
    assert acct["id"].startswith("acct_") and acct["object"] == "account" and acct["type"] == "express"
    assert (acct["capabilities"], acct["payouts_enabled"], acct["details_submitted"]) == \
        ({"transfers": "inactive"}, False, False)
    assert acct["requirements"]["currently_due"] and acct["requirements"]["disabled_reason"] == "requirements.past_due"
    assert acct["metadata"] == {"provider_id": "cprovider"}
    assert requests.get(f"{url}/v1/accounts/{acct['id']}", headers=auth, timeout=10).json() == acct
    assert requests.get(f"{url}/v1/accounts/acct_nope", headers=auth, timeout=10).status_code == 404
    r = requests.post(f"{url}/v1/account_links", headers=auth, timeout=10,
                      data={"account": acct["id"], "type": "account_update", "refresh_url": "http://a/r",
                            "return_url": "http://a/b"})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "type")
    r = requests.post(f"{url}/v1/account_links", headers=auth, timeout=10,
                      data={"account": acct["id"], "type": "account_onboarding", "return_url": "http://a/b"})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "refresh_url")
    link = requests.post(f"{url}/v1/account_links", headers=auth, timeout=10, data={
        "account": acct["id"], "type": "account_onboarding", "refresh_url": "http://app/refresh",
        "return_url": "http://app/return"}).json()
    assert link["object"] == "account_link" and link["expires_at"] == link["created"] + 300
    assert link["url"].startswith(f"{url}/setup/s/{acct['id']}/")
    page = requests.get(link["url"], timeout=10)
    assert page.status_code == 200 and "http://app/return" in page.text
    done = requests.get(f"{url}/v1/accounts/{acct['id']}", headers=auth, timeout=10).json()
    assert (done["capabilities"], done["payouts_enabled"], done["details_submitted"]) == \
        ({"transfers": "active"}, True, True)
    assert done["requirements"]["currently_due"] == [] and done["requirements"]["disabled_reason"] is None
    again = requests.get(link["url"], timeout=10)
    assert again.status_code == 410 and "http://app/refresh" in again.text
    event = fake.account_event(acct["id"])
    assert (event["type"], event["account"], event["data"]["object"]) == ("account.updated", acct["id"], done)
    restricted = fake.restrict_account(acct["id"], due=["individual.id_number"])
    assert restricted["capabilities"]["transfers"] == "inactive" and restricted["payouts_enabled"] is False
    assert restricted["requirements"]["past_due"] == ["individual.id_number"]


def test_fake_stripe_transfers_and_reversals(fake):
    """Transfers need the destination's transfers capability; a source_transaction must be a
    captured charge that covers them; they are listed by destination and replayed under their
    key; reversals move amount_reversed, never past the transfer."""
    url, auth = fake.url, {"Authorization": "Bearer sk_test_fake"}
    acct = requests.post(f"{url}/v1/accounts", headers=auth, timeout=10, data={
        "type": "express", "capabilities[transfers][requested]": "true"}).json()["id"]
    form = {"amount": 6100, "currency": "usd", "destination": acct, "metadata[idempotency_key]": "transfer-x-1"}
    r = requests.post(f"{url}/v1/transfers", data=form, headers=auth, timeout=10)
    assert r.status_code == 400
    assert (r.json()["error"]["code"], r.json()["error"]["type"]) == \
        ("insufficient_capabilities_for_transfer", "invalid_request_error")
    r = requests.post(f"{url}/v1/transfers", data=dict(form, destination="acct_nope"), headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "resource_missing")
    fake.complete_onboarding(acct)
    cus = requests.post(f"{url}/v1/customers", data={"email": "tr@example.com"}, headers=auth, timeout=10).json()["id"]
    pm = requests.post(f"{url}/v1/payment_methods/pm_card_visa/attach", data={"customer": cus}, headers=auth,
                       timeout=10).json()["id"]
    pi = requests.post(f"{url}/v1/payment_intents", headers=auth, timeout=10, data={
        "amount": 11800, "currency": "usd", "customer": cus, "payment_method": pm, "confirm": "true",
        "off_session": "true", "capture_method": "manual"}).json()
    r = requests.post(f"{url}/v1/transfers", data=dict(form, source_transaction=pi["latest_charge"]), headers=auth,
                      timeout=10)
    assert (r.status_code, r.json()["error"]["param"]) == (400, "source_transaction")  # not captured yet
    requests.post(f"{url}/v1/payment_intents/{pi['id']}/capture", headers=auth, timeout=10)
    r = requests.post(f"{url}/v1/transfers", data=dict(form, amount=20000, source_transaction=pi["latest_charge"]),
                      headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["param"]) == (400, "amount")
    key = {"Idempotency-Key": "transfer-x-1", **auth}
    funded = dict(form, source_transaction=pi["latest_charge"])
    tr = requests.post(f"{url}/v1/transfers", data=funded, headers=key, timeout=10)
    replay = requests.post(f"{url}/v1/transfers", data=funded, headers=key, timeout=10)
    assert tr.status_code == replay.status_code == 200 and tr.json() == replay.json()
    assert replay.headers.get("Idempotent-Replayed") == "true"
    tr = tr.json()
    assert (tr["object"], tr["amount"], tr["amount_reversed"], tr["destination"], tr["source_transaction"],
            tr["metadata"]) == ("transfer", 6100, 0, acct, pi["latest_charge"], {"idempotency_key": "transfer-x-1"})
    listed = requests.get(f"{url}/v1/transfers?destination={acct}&limit=100", headers=auth, timeout=10).json()
    assert [t["id"] for t in listed["data"]] == [tr["id"]] and fake.transfers(acct)[0]["id"] == tr["id"]
    assert requests.get(f"{url}/v1/transfers?destination=acct_other", headers=auth, timeout=10).json()["data"] == []
    rev = requests.post(f"{url}/v1/transfers/{tr['id']}/reversals", headers=auth, timeout=10,
                        data={"amount": 2500, "metadata[idempotency_key]": "reversal-x-1"}).json()
    assert (rev["object"], rev["amount"], rev["transfer"], rev["metadata"]) == \
        ("transfer_reversal", 2500, tr["id"], {"idempotency_key": "reversal-x-1"})
    r = requests.post(f"{url}/v1/transfers/{tr['id']}/reversals", data={"amount": 3601}, headers=auth, timeout=10)
    assert (r.status_code, r.json()["error"]["param"]) == (400, "amount")
    rest = requests.post(f"{url}/v1/transfers/{tr['id']}/reversals", headers=auth, timeout=10).json()
    assert rest["amount"] == 3600
    now = requests.get(f"{url}/v1/transfers/{tr['id']}", headers=auth, timeout=10).json()
    assert (now["amount_reversed"], now["reversed"], now["reversals"]["total_count"]) == (6100, True, 2)
    revs = requests.get(f"{url}/v1/transfers/{tr['id']}/reversals?limit=1", headers=auth, timeout=10).json()
    assert (revs["has_more"], [x["id"] for x in revs["data"]]) == (True, [rest["id"]])
    page = requests.get(f"{url}/v1/transfers/{tr['id']}/reversals?starting_after={rest['id']}", headers=auth,
                        timeout=10).json()
    assert [x["id"] for x in page["data"]] == [rev["id"]]
