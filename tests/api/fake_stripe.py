"""A local fake of the Stripe API, for the service's real Stripe client (src/ext/stripe.c).

It speaks Stripe's wire format for exactly the calls the client makes:

    POST /v1/customers                          create a customer
    POST /v1/customers/<id>                     update (invoice_settings[default_payment_method])
    POST /v1/setup_intents                      create a SetupIntent (client_secret)
    POST /v1/payment_methods/<id>/attach        attach; a test token (pm_card_visa ...) makes a new pm_
    GET  /v1/payment_methods/<id>               retrieve (customer is null once detached)
    POST /v1/payment_intents                    create + confirm, off-session, manual or automatic capture
    GET  /v1/payment_intents/<id>               retrieve
    GET  /v1/payment_intents                    list (customer, limit, starting_after), newest first
    POST /v1/payment_intents/<id>/capture       requires_capture -> succeeded; past capture_before: 400
                                                charge_expired_for_capture (the intent is then canceled)
    POST /v1/payment_intents/<id>/cancel        -> canceled
    POST /v1/subscriptions                      create (items[0][price], default_payment_method)
    POST /v1/subscriptions/<id>                 update (cancel_at_period_end)
    GET  /v1/subscriptions/<id>                 retrieve
    GET  /v1/subscriptions                      list (customer, status=all, limit, starting_after)
    POST /v1/refunds                            refund a captured PaymentIntent (payment_intent or charge;
                                                amount, default what is left; reason; metadata): the
                                                charge's amount_refunded and refunded follow; refused as
                                                Stripe refuses (not captured, charge_already_refunded,
                                                amount_too_large)
    GET  /v1/refunds/<id>, GET /v1/refunds      retrieve; list (payment_intent, charge, limit,
                                                starting_after), newest first
    GET  /v1/charges/<id>                       retrieve (expand[]=refunds lists its refunds, which
                                                Stripe no longer includes by default)
    POST /v1/accounts                           create a connected account (type express, standard or
                                                custom; capabilities[transfers][requested]; email;
                                                metadata): it waits for its onboarding (transfers
                                                capability inactive, requirements currently_due)
    GET  /v1/accounts/<id>                      retrieve
    POST /v1/account_links                      an Account Link (account, refresh_url, return_url, type
                                                account_onboarding): `url` is the fake's own hosted page,
                                                GET /setup/s/<account>/<token> (no key), which finishes the
                                                onboarding when opened once within 5 minutes, as a person
                                                would on Stripe's page
    POST /v1/transfers                          a transfer to a connected account (amount, currency,
                                                destination, source_transaction: a captured charge that
                                                funds it, metadata): refused 400
                                                insufficient_capabilities_for_transfer while the
                                                destination's transfers capability is not active
    GET  /v1/transfers, GET /v1/transfers/<id>  list (destination, limit, starting_after), newest first;
                                                retrieve
    POST /v1/transfers/<id>/reversals           reverse (amount, default what is left; metadata): the
                                                transfer's amount_reversed, reversed and reversals follow;
                                                more than is left is refused
    GET  /v1/transfers/<id>/reversals           list (limit, starting_after), newest first

plus POST /v1/payment_methods/<id>/detach (real Stripe API; the client never calls it, the
tests use it, or `detach_payment_method()`, to make a saved card disappear).

Wire format, as Stripe's:
- request bodies are application/x-www-form-urlencoded (bracketed keys such as
  `items[0][price]` are kept as flat keys); answers are JSON objects with `id` and `object`;
- `Authorization: Bearer <key>` is required: missing or wrong -> 401 invalid_request_error;
- errors are `{"error": {"type", "code", "message", ...}}`: an unknown id in the URL is 404
  resource_missing, an unknown id in a parameter 400 resource_missing (with `param`), a card
  decline 402 card_error (code card_declined, decline_code, and for PaymentIntents the
  `payment_intent` it left in requires_payment_method);
- `Idempotency-Key` on a POST: the first request's status and body are stored and replayed
  (header `Idempotent-Replayed: true`) for any later request with the key; the same key with
  other parameters is 400 idempotency_error; the same key while its first request is still in
  flight is 409 idempotency_error.
- `metadata[k]=v` parameters become the object's `metadata`; `expand[]=latest_charge` (and
  `data.latest_charge` on lists) expands a PaymentIntent's charge, whose
  `payment_method_details.card.capture_before` is 7 days after an uncaptured authorization.
  Past it the authorization lapses as at Stripe: the intent becomes canceled
  (cancellation_reason automatic) and a capture is refused with charge_expired_for_capture.
- The fake's clock (`now()`) is the real one unless `set_clock(epoch seconds)` set it, so a test
  can keep it with the service's test clock.

Test controls (all thread-safe):
- `fail_next(method, path, count=1, status=500, after_processing=False)`: the next `count`
  requests to that exact path answer `status` with a Stripe api_error. With
  `after_processing=True` the request is carried out first (object created, idempotent result
  stored) and only the answer is lost, as when a network hop fails after Stripe did the work.
- `delay(method, path, seconds)`: requests to that path are held for `seconds` before they
  are carried out (with an idempotency key: while the key is in flight, to provoke
  concurrent-request behaviour; without one, e.g. a GET, simply held).
- `hold(method, path)`: the same, until the returned threading.Event is set (at most 30 s),
  for a test that lets them through once something else happened; `delay(method, path, 0)`
  removes the hold.
- `detach_payment_method(id)`, `delete_payment_method(id)`, `update_object(id, **fields)`.
- `requests` / `calls(method, path=None, prefix=None)`: the request log, each entry a dict
  {method, path, headers (lower-case names), form (parse_qs: name -> [values]), raw, status}.
- `objects(kind, **match)`: stored objects of one kind ("customer", "payment_method",
  "payment_intent", "setup_intent", "subscription", "charge", "refund") whose fields equal the
  given values.
- `charge_of(intent)`: a PaymentIntent's charge as Stripe sends it in a charge.* event.
- `complete_onboarding(account)` / `restrict_account(account, due)`: the account's state as
  Stripe changes it when its person finished the onboarding, or when Stripe needs more (the
  transfers capability inactive, `due` in requirements.currently_due and past_due);
  `account_event(account)`: the `account.updated` event Stripe then sends to a Connect endpoint.
- `transfers(destination)`: the transfers made to a connected account (oldest first).
- `charges(customer)` / `holds(customer)`: the customer's PaymentIntents that moved money
  (succeeded) / that hold it (requires_capture), for counting.
"""
import copy
import http.server
import json
import re
import secrets
import string
import threading
import time
import urllib.parse

TEST_CARDS = {
    # token: (brand, last4, decline_code or None)
    "pm_card_visa": ("visa", "4242", None),
    "pm_card_mastercard": ("mastercard", "4444", None),
    "pm_card_amex": ("amex", "8431", None),
    "pm_card_chargeDeclined": ("visa", "0002", "generic_decline"),
    "pm_card_chargeDeclinedInsufficientFunds": ("visa", "9995", "insufficient_funds"),
}

DECLINE_MESSAGES = {
    "generic_decline": "Your card was declined.",
    "insufficient_funds": "Your card has insufficient funds.",
}

PERIOD_S = 30 * 24 * 3600
HOLD_S = 7 * 24 * 3600
_ALNUM = string.ascii_letters + string.digits


def new_id(prefix):
    return prefix + "_" + "".join(secrets.choice(_ALNUM) for _ in range(24))


class StripeError(Exception):
    def __init__(self, status, type_, message, code=None, param=None, **extra):
        super().__init__(message)
        self.status = status
        self.body = {"type": type_, "message": message}
        if code:
            self.body["code"] = code
        if param:
            self.body["param"] = param
        self.body.update(extra)


def missing(kind, ident, status=404, param=None):
    return StripeError(status, "invalid_request_error", f"No such {kind}: '{ident}'", code="resource_missing",
                       param=param)


def invalid(message, param=None, code=None):
    return StripeError(400, "invalid_request_error", message, code=code, param=param)


class FakeStripe:
    def __init__(self, api_key="sk_test_fake", prices=None):
        self.api_key = api_key
        self.prices = dict(prices or {"price_premium": 999})
        self.lock = threading.RLock()
        self.store = {}          # id -> Stripe object (dict)
        self.idem = {}           # (api key, idempotency key) -> {"fingerprint", "status", "body"}
        self.inflight = set()    # idempotency keys whose first request is still being carried out
        self.requests = []
        self.failures = []       # {"method", "path", "remaining", "status", "after"}
        self.delays = {}         # (method, path) -> seconds, or a threading.Event to wait for
        self.clock_offset = 0    # seconds added to the real clock (set_clock)
        self.links = {}          # hosted onboarding path -> {"account", "return_url", "refresh_url", ...}
        self.httpd = None
        self.thread = None

    # ------------------------------------------------------------ lifecycle

    def start(self):
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-stripe", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------ test controls

    def now(self):
        return int(time.time()) + self.clock_offset

    def set_clock(self, epoch_seconds):
        """Makes now() read epoch_seconds (it runs on from there)."""
        with self.lock:
            self.clock_offset = int(epoch_seconds) - int(time.time())

    def charges(self, customer):
        return self.objects("payment_intent", customer=customer, status="succeeded")

    def holds(self, customer):
        return self.objects("payment_intent", customer=customer, status="requires_capture")

    def charge_of(self, intent):
        with self.lock:
            return copy.deepcopy(self.store[self.store[intent]["latest_charge"]])

    def complete_onboarding(self, account):
        with self.lock:
            acct = self.store[account]
            acct.update(details_submitted=True, charges_enabled=False, payouts_enabled=True)
            acct["capabilities"]["transfers"] = "active"
            acct["requirements"] = _requirements([], None)
            return copy.deepcopy(acct)

    def restrict_account(self, account, due=("individual.verification.document",)):
        with self.lock:
            acct = self.store[account]
            acct.update(details_submitted=True, payouts_enabled=False)
            acct["capabilities"]["transfers"] = "inactive"
            acct["requirements"] = _requirements(list(due), "requirements.past_due", past_due=list(due))
            return copy.deepcopy(acct)

    def account_event(self, account):
        """The account.updated event of a connected account as Stripe sends it to a Connect endpoint."""
        with self.lock:
            return {"id": "evt_" + secrets.token_hex(12), "object": "event", "type": "account.updated",
                    "account": account, "api_version": "2024-06-20", "created": self.now(), "livemode": False,
                    "data": {"object": copy.deepcopy(self.store[account])}}

    def transfers(self, destination):
        with self.lock:
            return [copy.deepcopy(o) for o in self.store.values()
                    if o.get("object") == "transfer" and o["destination"] == destination]

    def open_link(self, path):
        """GET /setup/s/<account>/<token>: Stripe's hosted onboarding, done by a person in one go."""
        with self.lock:
            link = self.links.get(path)
            if not link:
                return 404, "<h1>Not found</h1>"
            fresh = not link["used"] and self.now() < link["expires_at"]
            link["used"] = True
            if not fresh:  # Stripe sends the person to the refresh address instead
                return 410, f'<h1>This link has expired</h1><a href="{link["refresh_url"]}">Start again</a>'
        self.complete_onboarding(link["account"])
        return 200, f'<h1>You are all set</h1><a href="{link["return_url"]}">Return</a>'

    def fail_next(self, method, path, count=1, status=500, after_processing=False):
        with self.lock:
            self.failures.append({"method": method.upper(), "path": path, "remaining": count, "status": status,
                                  "after": after_processing})

    def delay(self, method, path, seconds):
        with self.lock:
            if seconds:
                self.delays[(method.upper(), path)] = seconds
            else:
                self.delays.pop((method.upper(), path), None)

    def hold(self, method, path):
        release = threading.Event()
        with self.lock:
            self.delays[(method.upper(), path)] = release
        return release

    def _wait(self, method, path):
        wait = self.delays.get((method, path))
        if isinstance(wait, threading.Event):
            wait.wait(30)
        elif wait:
            time.sleep(wait)

    def reset_controls(self):
        with self.lock:
            self.failures.clear()
            self.delays.clear()

    def clear_log(self):
        with self.lock:
            self.requests.clear()

    def calls(self, method=None, path=None, prefix=None):
        with self.lock:
            return [r for r in self.requests
                    if (method is None or r["method"] == method.upper())
                    and (path is None or r["path"] == path)
                    and (prefix is None or r["path"].startswith(prefix))]

    def get(self, ident):
        with self.lock:
            o = self.store.get(ident)
            if o:
                self._lapse(o)
            return copy.deepcopy(o) if o else None

    def objects(self, kind, **match):
        with self.lock:
            for o in self.store.values():
                self._lapse(o)
            return [copy.deepcopy(o) for o in self.store.values()
                    if o.get("object") == kind and all(o.get(k) == v for k, v in match.items())]

    def update_object(self, ident, **fields):
        with self.lock:
            self.store[ident].update(fields)
            return copy.deepcopy(self.store[ident])

    def put_object(self, obj):
        """Stores a Stripe object made outside the service (e.g. a subscription from the dashboard)."""
        with self.lock:
            self.store[obj["id"]] = copy.deepcopy(obj)
            return copy.deepcopy(obj)

    def detach_payment_method(self, ident):
        with self.lock:
            self.store[ident]["customer"] = None

    def delete_payment_method(self, ident):
        with self.lock:
            del self.store[ident]

    # ------------------------------------------------------------ request handling

    def _take_failure(self, method, path):
        with self.lock:
            for f in self.failures:
                if f["method"] == method and f["path"] == path and f["remaining"] > 0:
                    f["remaining"] -= 1
                    return dict(f)
        return None

    def handle(self, method, path, headers, raw, query=""):
        """Returns (status, body dict, extra headers). A GET's parameters are its query string."""
        params = raw.decode("utf-8", "replace") if method == "POST" else query
        form = urllib.parse.parse_qs(params, keep_blank_values=True)
        entry = {"method": method, "path": path, "headers": headers, "form": form, "raw": raw, "status": None,
                 "time": time.time()}
        with self.lock:
            self.requests.append(entry)
        status, body, extra = self._handle(method, path, headers, form)
        entry["status"] = status
        entry["response"] = body
        return status, body, extra

    def _handle(self, method, path, headers, form):
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return 401, {"error": {"type": "invalid_request_error", "message":
                                   "You did not provide an API key. You need to provide your API key in the "
                                   "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}}, {}
        key = auth[len("Bearer "):]
        if key != self.api_key:
            shown = key[:8] + "*" * max(0, len(key) - 12) + key[-4:] if len(key) > 12 else key
            return 401, {"error": {"type": "invalid_request_error",
                                   "message": f"Invalid API Key provided: {shown}"}}, {}
        failure = self._take_failure(method, path)
        if failure and not failure["after"]:
            return failure["status"], _api_error(), {}
        idem_key = headers.get("idempotency-key") if method == "POST" else None
        if idem_key:
            status, body, extra = self._idempotent(key, idem_key, method, path, form)
        else:
            self._wait(method, path)
            status, body, extra = self._execute(method, path, form)
        if failure:
            return failure["status"], _api_error(), {}
        return status, body, extra

    def _idempotent(self, api_key, idem_key, method, path, form):
        slot = (api_key, idem_key)
        fingerprint = (method, path, sorted((k, tuple(v)) for k, v in form.items()))
        with self.lock:
            if slot in self.inflight:
                return 409, {"error": {"type": "idempotency_error", "message":
                                       "There is currently another in-progress request using this Idempotency Key "
                                       "(that probably means you submitted twice, and the other request is still "
                                       f"going through): {idem_key}. Please try again later."}}, {}
            saved = self.idem.get(slot)
            if saved:
                if saved["fingerprint"] != fingerprint:
                    return 400, {"error": {"type": "idempotency_error", "message":
                                           "Keys for idempotent requests can only be used with the same parameters "
                                           "they were first used with. Try using a key other than "
                                           f"'{idem_key}' if you meant to execute a different request."}}, {}
                return saved["status"], copy.deepcopy(saved["body"]), {"Idempotent-Replayed": "true",
                                                                        "Original-Request": saved["request_id"]}
            self.inflight.add(slot)
        try:
            self._wait(method, path)
            status, body, extra = self._execute(method, path, form)
            with self.lock:
                self.idem[slot] = {"fingerprint": fingerprint, "status": status, "body": copy.deepcopy(body),
                                   "request_id": new_id("req")}
            return status, body, extra
        finally:
            with self.lock:
                self.inflight.discard(slot)

    ROUTES = [
        ("POST", r"/v1/customers", "create_customer"),
        ("POST", r"/v1/customers/([^/]+)", "update_customer"),
        ("POST", r"/v1/setup_intents", "create_setup_intent"),
        ("POST", r"/v1/payment_methods/([^/]+)/attach", "attach_method"),
        ("POST", r"/v1/payment_methods/([^/]+)/detach", "detach_method"),
        ("GET", r"/v1/payment_methods/([^/]+)", "retrieve_method"),
        ("POST", r"/v1/payment_intents", "create_intent"),
        ("GET", r"/v1/payment_intents", "list_intents"),
        ("GET", r"/v1/payment_intents/([^/]+)", "retrieve_intent"),
        ("POST", r"/v1/payment_intents/([^/]+)/capture", "capture_intent"),
        ("POST", r"/v1/payment_intents/([^/]+)/cancel", "cancel_intent"),
        ("POST", r"/v1/subscriptions", "create_subscription"),
        ("POST", r"/v1/subscriptions/([^/]+)", "update_subscription"),
        ("GET", r"/v1/subscriptions", "list_subscriptions"),
        ("GET", r"/v1/subscriptions/([^/]+)", "retrieve_subscription"),
        ("POST", r"/v1/refunds", "create_refund"),
        ("GET", r"/v1/refunds", "list_refunds"),
        ("GET", r"/v1/refunds/([^/]+)", "retrieve_refund"),
        ("GET", r"/v1/charges/([^/]+)", "retrieve_charge"),
        ("POST", r"/v1/accounts", "create_account"),
        ("GET", r"/v1/accounts/([^/]+)", "retrieve_account"),
        ("POST", r"/v1/account_links", "create_account_link"),
        ("POST", r"/v1/transfers", "create_transfer"),
        ("GET", r"/v1/transfers", "list_transfers"),
        ("GET", r"/v1/transfers/([^/]+)", "retrieve_transfer"),
        ("POST", r"/v1/transfers/([^/]+)/reversals", "create_reversal"),
        ("GET", r"/v1/transfers/([^/]+)/reversals", "list_reversals"),
    ]

    def _execute(self, method, path, form):
        for m, pattern, name in self.ROUTES:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                args = [urllib.parse.unquote(g) for g in match.groups()]
                f = {k: v[-1] for k, v in form.items()}
                f["_expand"] = form.get("expand[]", [])
                try:
                    with self.lock:
                        return 200, getattr(self, "_" + name)(f, *args), {}
                except StripeError as e:
                    return e.status, {"error": e.body}, {}
        return 404, {"error": {"type": "invalid_request_error",
                               "message": f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs "
                                          "or we can help at https://support.stripe.com/."}}, {}

    # ------------------------------------------------------------ objects (called with the lock held)

    def _obj(self, kind, ident, status=404, param=None):
        o = self.store.get(ident)
        if not o or o.get("object") != kind:
            label = {"payment_method": "PaymentMethod", "payment_intent": "payment_intent"}.get(kind, kind)
            raise missing(label, ident, status, param)
        return o

    def _create_customer(self, f):
        c = {"id": new_id("cus"), "object": "customer", "created": self.now(), "email": f.get("email"),
             "name": f.get("name"), "livemode": False, "metadata": {},
             "invoice_settings": {"default_payment_method": None}}
        self.store[c["id"]] = c
        return copy.deepcopy(c)

    def _update_customer(self, f, ident):
        c = self._obj("customer", ident)
        if "invoice_settings[default_payment_method]" in f:
            pm_id = f["invoice_settings[default_payment_method]"]
            pm = self._obj("payment_method", pm_id, 400, "invoice_settings[default_payment_method]")
            if pm.get("customer") != ident:
                raise invalid(f"The customer does not have a payment method with the ID {pm_id}. The payment method "
                              "must be attached to the customer.", param="invoice_settings[default_payment_method]",
                              code="resource_missing")
            c["invoice_settings"]["default_payment_method"] = pm_id
        for k in ("email", "name"):
            if k in f:
                c[k] = f[k]
        return copy.deepcopy(c)

    def _create_setup_intent(self, f):
        customer = f.get("customer")
        if customer:
            self._obj("customer", customer, 400, "customer")
        sid = new_id("seti")
        s = {"id": sid, "object": "setup_intent", "client_secret": f"{sid}_secret_{secrets.token_hex(12)}",
             "customer": customer, "status": "requires_payment_method", "usage": f.get("usage", "off_session"),
             "payment_method_types": form_list(f, "payment_method_types") or ["card"], "created": self.now(),
             "livemode": False}
        self.store[sid] = s
        return copy.deepcopy(s)

    def _attach_method(self, f, ident):
        customer = f.get("customer")
        if not customer:
            raise invalid("Missing required param: customer.", param="customer", code="parameter_missing")
        self._obj("customer", customer, 400, "customer")
        if ident in TEST_CARDS:  # a test token makes a new PaymentMethod, as on Stripe
            brand, last4, decline = TEST_CARDS[ident]
            pm = {"id": new_id("pm"), "object": "payment_method", "type": "card", "created": self.now(),
                  "customer": None, "livemode": False, "billing_details": {}, "metadata": {},
                  "card": {"brand": brand, "last4": last4, "exp_month": 12, "exp_year": 2034, "funding": "credit",
                           "country": "US"},
                  "_decline": decline, "_detached": False}
            self.store[pm["id"]] = pm
        else:
            pm = self._obj("payment_method", ident)
            if pm["_detached"]:
                raise invalid("This PaymentMethod was previously used without being attached to a Customer or was "
                              "detached from a Customer, and may not be used again.")
            if pm["customer"] and pm["customer"] != customer:
                raise invalid("The payment method you provided has already been attached to a customer.")
        pm["customer"] = customer
        return public(pm)

    def _detach_method(self, f, ident):
        pm = self._obj("payment_method", ident)
        if not pm["customer"]:
            raise invalid("The payment method you provided is not attached to a customer so detachment is impossible.")
        pm["customer"] = None
        pm["_detached"] = True
        return public(pm)

    def _retrieve_method(self, f, ident):
        return public(self._obj("payment_method", ident))

    def _usable_method(self, f, customer):
        pm_id = f.get("payment_method") or f.get("default_payment_method")
        param = "payment_method" if "payment_method" in f else "default_payment_method"
        pm = self._obj("payment_method", pm_id, 400, param)
        if pm.get("customer") != customer:
            raise invalid(f"The provided PaymentMethod {pm_id} was previously used with a PaymentIntent without "
                          "Customer attachment, shared with a connected account without Customer attachment, or "
                          "was detached from a Customer. It may not be used again.", param=param)
        return pm

    def _create_intent(self, f):
        try:
            amount = int(f.get("amount", ""))
        except ValueError:
            raise invalid("Invalid integer: " + f.get("amount", ""), param="amount")
        if amount < 50:
            raise invalid("Amount must be at least $0.50 usd", param="amount", code="amount_too_small")
        if f.get("currency") != "usd":
            raise invalid("Invalid currency: " + str(f.get("currency")), param="currency")
        customer = f.get("customer")
        if customer:
            self._obj("customer", customer, 400, "customer")
        capture_method = f.get("capture_method", "automatic")
        if capture_method not in ("automatic", "automatic_async", "manual"):
            raise invalid("Invalid capture_method", param="capture_method")
        pi = {"id": new_id("pi"), "object": "payment_intent", "amount": amount, "amount_capturable": 0,
              "amount_received": 0, "currency": "usd", "customer": customer, "payment_method": f.get("payment_method"),
              "capture_method": capture_method, "confirmation_method": "automatic", "created": self.now(),
              "livemode": False, "metadata": metadata_of(f), "status": "requires_payment_method",
              "last_payment_error": None,
              "latest_charge": None, "cancellation_reason": None}
        pi["client_secret"] = f"{pi['id']}_secret_{secrets.token_hex(12)}"
        if f.get("confirm") != "true":
            if pi["payment_method"]:
                pi["status"] = "requires_confirmation"
            self.store[pi["id"]] = pi
            return copy.deepcopy(pi)
        pm = self._usable_method(f, customer)
        decline = pm.get("_decline")
        if decline:
            error = {"type": "card_error", "code": "card_declined", "decline_code": decline,
                     "message": DECLINE_MESSAGES[decline], "charge": new_id("ch"), "payment_method": public(pm)}
            pi["last_payment_error"] = dict(error)
            pi["payment_method"] = None
            self.store[pi["id"]] = pi
            raise StripeError(402, **_error_args(error), payment_intent=copy.deepcopy(pi))
        charge = {"id": new_id("ch"), "object": "charge", "amount": amount, "created": self.now(), "customer": customer,
                  "payment_intent": pi["id"], "captured": capture_method != "manual", "amount_refunded": 0,
                  "refunded": False, "status": "succeeded", "currency": "usd",
                  "payment_method_details": {"type": "card", "card": {
                      "brand": pm["card"]["brand"], "last4": pm["card"]["last4"],
                      # an uncaptured card authorization lapses after 7 days
                      "capture_before": self.now() + HOLD_S if capture_method == "manual" else None}}}
        self.store[charge["id"]] = charge
        pi["latest_charge"] = charge["id"]
        if capture_method == "manual":
            pi["status"] = "requires_capture"
            pi["amount_capturable"] = amount
        else:
            pi["status"] = "succeeded"
            pi["amount_received"] = amount
        self.store[pi["id"]] = pi
        return self._intent_view(pi, f)

    def _lapse(self, pi):
        """An uncaptured authorization past capture_before is canceled, as Stripe does."""
        if pi.get("object") != "payment_intent" or pi.get("status") != "requires_capture":
            return
        charge = self.store.get(pi.get("latest_charge") or "")
        before = charge and charge["payment_method_details"]["card"].get("capture_before")
        if before and self.now() >= before:
            pi["status"] = "canceled"
            pi["cancellation_reason"] = "automatic"
            pi["amount_capturable"] = 0

    def _intent_view(self, pi, f, prefix=""):
        out = copy.deepcopy(pi)
        if prefix + "latest_charge" in f.get("_expand", []) and out.get("latest_charge"):
            out["latest_charge"] = copy.deepcopy(self.store[out["latest_charge"]])
        return out

    def _retrieve_intent(self, f, ident):
        pi = self._obj("payment_intent", ident)
        self._lapse(pi)
        return self._intent_view(pi, f)

    def _list(self, kind, f, view=None):
        items = [o for o in reversed(list(self.store.values())) if o.get("object") == kind
                 and (not f.get("customer") or o.get("customer") == f["customer"])]
        if kind == "subscription" and f.get("status", "active") != "all":
            items = [o for o in items if o["status"] == f.get("status", "active")] if f.get("status") else \
                [o for o in items if o["status"] not in ("canceled", "incomplete_expired")]
        return self._page(items, f, f"/v1/{kind}s", view)

    def _page(self, items, f, url, view=None):
        """One page of a list (items newest first), as Stripe reads starting_after and limit."""
        if f.get("starting_after"):
            ids = [o["id"] for o in items]
            items = items[ids.index(f["starting_after"]) + 1:] if f["starting_after"] in ids else []
        limit = int(f.get("limit") or 10)
        return {"object": "list", "url": url, "has_more": len(items) > limit,
                "data": [view(o) if view else copy.deepcopy(o) for o in items[:limit]]}

    def _list_intents(self, f):
        for o in self.store.values():
            self._lapse(o)
        return self._list("payment_intent", f, lambda pi: self._intent_view(pi, f, "data."))

    def _list_subscriptions(self, f):
        return self._list("subscription", f)

    def _capture_intent(self, f, ident):
        pi = self._obj("payment_intent", ident)
        lapsing = pi["status"] == "requires_capture"
        self._lapse(pi)
        if lapsing and pi["status"] == "canceled":
            raise invalid("The charge has expired and can no longer be captured; uncaptured charges must be captured "
                          "within 7 days.", code="charge_expired_for_capture")
        if pi["status"] != "requires_capture":
            raise invalid(f"This PaymentIntent could not be captured because it has a status of {pi['status']}. "
                          "Only a PaymentIntent with one of the following statuses may be captured: requires_capture.",
                          code="payment_intent_unexpected_state")
        amount = int(f["amount_to_capture"]) if f.get("amount_to_capture") else pi["amount"]
        pi["status"] = "succeeded"
        pi["amount_received"] = amount
        pi["amount_capturable"] = 0
        self.store[pi["latest_charge"]]["captured"] = True
        return self._intent_view(pi, f)

    def _cancel_intent(self, f, ident):
        pi = self._obj("payment_intent", ident)
        self._lapse(pi)
        if pi["status"] not in ("requires_payment_method", "requires_capture", "requires_confirmation",
                                "requires_action", "processing"):
            raise invalid(f"You cannot cancel this PaymentIntent because it has a status of {pi['status']}. Only a "
                          "PaymentIntent with one of the following statuses may be canceled: requires_payment_method, "
                          "requires_capture, requires_confirmation, requires_action, processing.",
                          code="payment_intent_unexpected_state")
        pi["status"] = "canceled"
        pi["amount_capturable"] = 0
        pi["cancellation_reason"] = f.get("cancellation_reason") or "requested_by_customer"
        return copy.deepcopy(pi)

    REFUND_REASONS = ("duplicate", "fraudulent", "requested_by_customer")

    def _create_refund(self, f):
        if f.get("payment_intent"):
            pi = self._obj("payment_intent", f["payment_intent"], 400, "payment_intent")
            charge = self.store.get(pi.get("latest_charge") or "")
            if pi["status"] != "succeeded" or not charge:
                raise invalid(f"This PaymentIntent ({pi['id']}) does not have a successful charge to refund.",
                              param="payment_intent")
        elif f.get("charge"):
            charge = self._obj("charge", f["charge"], 400, "charge")
        else:
            raise invalid("One of the following params should be provided for this request: payment_intent or "
                          "charge.", code="parameter_missing")
        if not charge["captured"]:
            raise invalid(f"Charge {charge['id']} has not been captured: cancel the PaymentIntent instead.",
                          param="charge")
        left = charge["amount"] - charge["amount_refunded"]
        if left <= 0:
            raise invalid(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded")
        amount = _amount_of(f, left)
        if amount > left:
            raise invalid(f"Refund amount (${amount / 100:.2f}) is greater than unrefunded amount on charge "
                          f"(${left / 100:.2f})", param="amount", code="amount_too_large")
        reason = f.get("reason")
        if reason is not None and reason not in self.REFUND_REASONS:
            raise invalid("Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer",
                          param="reason")
        refund = {"id": new_id("re"), "object": "refund", "amount": amount, "balance_transaction": new_id("txn"),
                  "charge": charge["id"], "created": self.now(), "currency": "usd",
                  "destination_details": {"type": "card", "card": {"type": "refund"}}, "metadata": metadata_of(f),
                  "payment_intent": charge["payment_intent"], "reason": reason, "receipt_number": None,
                  "source_transfer_reversal": None, "status": "succeeded", "transfer_reversal": None}
        self.store[refund["id"]] = refund
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] == charge["amount"]
        return copy.deepcopy(refund)

    def _list_refunds(self, f):
        items = [o for o in reversed(list(self.store.values())) if o.get("object") == "refund"
                 and (not f.get("payment_intent") or o.get("payment_intent") == f["payment_intent"])
                 and (not f.get("charge") or o.get("charge") == f["charge"])]
        return self._page(items, f, "/v1/refunds")

    def _retrieve_refund(self, f, ident):
        return copy.deepcopy(self._obj("refund", ident))

    def _retrieve_charge(self, f, ident):
        charge = copy.deepcopy(self._obj("charge", ident))
        if "refunds" in f.get("_expand", []):
            refunds = self._list_refunds({"charge": ident, "limit": 100})
            charge["refunds"] = dict(refunds, url=f"/v1/charges/{ident}/refunds")
        return charge

    def _create_subscription(self, f):
        customer = f.get("customer")
        if not customer:
            raise invalid("Missing required param: customer.", param="customer", code="parameter_missing")
        c = self._obj("customer", customer, 400, "customer")
        price_id = f.get("items[0][price]")
        if not price_id:
            raise invalid("Missing required param: items.", param="items", code="parameter_missing")
        if price_id not in self.prices:
            raise missing("price", price_id, 400, "items[0][price]")
        pm_id = f.get("default_payment_method") or c["invoice_settings"]["default_payment_method"]
        if not pm_id:
            raise invalid("This customer has no attached payment source or default payment method. Please consider "
                          "adding a default payment method.", code="resource_missing")
        pm = self._usable_method({"default_payment_method": pm_id}, customer)
        now = self.now()
        sub = {"id": new_id("sub"), "object": "subscription", "customer": customer, "status": "active",
               "cancel_at_period_end": False, "cancel_at": None, "canceled_at": None, "created": now,
               "current_period_start": now, "current_period_end": now + PERIOD_S, "default_payment_method": pm_id,
               "livemode": False, "metadata": metadata_of(f), "latest_invoice": new_id("in")}
        sub["items"] = {"object": "list", "has_more": False, "data": [{
            "id": new_id("si"), "object": "subscription_item", "subscription": sub["id"], "quantity": 1,
            "current_period_start": now, "current_period_end": now + PERIOD_S,
            "price": {"id": price_id, "object": "price", "currency": "usd", "unit_amount": self.prices[price_id],
                      "recurring": {"interval": "month", "interval_count": 1}}}]}
        if pm.get("_decline"):
            behavior = f.get("payment_behavior", "allow_incomplete")
            if behavior == "error_if_incomplete":
                raise StripeError(402, "card_error", DECLINE_MESSAGES[pm["_decline"]], code="card_declined",
                                  decline_code=pm["_decline"])
            sub["status"] = "incomplete"
        self.store[sub["id"]] = sub
        return copy.deepcopy(sub)

    def _update_subscription(self, f, ident):
        sub = self._obj("subscription", ident)
        if sub["status"] in ("canceled", "incomplete_expired"):
            raise invalid("A canceled subscription can only update its cancellation_details and metadata.")
        if "cancel_at_period_end" in f:
            flag = f["cancel_at_period_end"]
            if flag not in ("true", "false"):
                raise invalid("Invalid boolean: " + flag, param="cancel_at_period_end")
            sub["cancel_at_period_end"] = flag == "true"
            sub["cancel_at"] = sub["current_period_end"] if flag == "true" else None
            sub["canceled_at"] = self.now() if flag == "true" else None
        return copy.deepcopy(sub)

    def _retrieve_subscription(self, f, ident):
        return copy.deepcopy(self._obj("subscription", ident))

    # -- Connect

    ONBOARDING_DUE = ["business_profile.mcc", "business_profile.url", "external_account", "individual.dob.day",
                      "individual.email", "individual.first_name", "individual.last_name", "tos_acceptance.date",
                      "tos_acceptance.ip"]

    def _create_account(self, f):
        kind = f.get("type")
        if kind not in ("custom", "express", "standard"):
            raise invalid("Invalid type: must be one of custom, express, or standard", param="type")
        country = f.get("country") or "US"
        if not re.fullmatch(r"[A-Z]{2}", country):
            raise invalid("Country '" + country + "' is unknown. Try using a 2-character alphanumeric country code "
                          "instead, such as 'US', 'EG', or 'GB'.", param="country")
        caps = {}
        for k, v in f.items():
            m = re.fullmatch(r"capabilities\[(\w+)\]\[requested\]", k)
            if m:
                if v not in ("true", "false"):
                    raise invalid("Invalid boolean: " + v, param=k)
                if v == "true":
                    caps[m.group(1)] = "inactive"
        acct = {"id": new_id("acct"), "object": "account", "type": kind, "country": country,
                "email": f.get("email"), "business_type": f.get("business_type"), "capabilities": caps,
                "charges_enabled": False, "payouts_enabled": False, "details_submitted": False,
                "controller": {"type": "application", "is_controller": True}, "created": self.now(),
                "default_currency": "usd", "metadata": metadata_of(f),
                "requirements": _requirements(list(self.ONBOARDING_DUE), "requirements.past_due"),
                "future_requirements": _requirements([], None),
                "external_accounts": {"object": "list", "data": [], "has_more": False, "url": ""},
                "settings": {"payouts": {"schedule": {"interval": "daily", "delay_days": 2}}}}
        acct["external_accounts"]["url"] = f"/v1/accounts/{acct['id']}/external_accounts"
        self.store[acct["id"]] = acct
        return copy.deepcopy(acct)

    def _retrieve_account(self, f, ident):
        return copy.deepcopy(self._obj("account", ident))

    def _create_account_link(self, f):
        if not f.get("account"):
            raise invalid("Missing required param: account.", param="account", code="parameter_missing")
        acct = self._obj("account", f["account"], 400, "account")
        if f.get("type") not in ("account_onboarding", "account_update"):
            raise invalid("Invalid type: must be one of account_onboarding or account_update", param="type")
        if f["type"] == "account_update" and acct["type"] != "custom":
            raise invalid("You cannot create `account_update` type Account Links for Express or Standard accounts.",
                          param="type")
        for name in ("refresh_url", "return_url"):
            if not re.match(r"https?://", f.get(name) or ""):
                raise invalid(f"Not a valid URL", param=name)
        path = f"/setup/s/{acct['id']}/{secrets.token_urlsafe(12)}"
        created = self.now()
        self.links[path] = {"account": acct["id"], "return_url": f["return_url"], "refresh_url": f["refresh_url"],
                            "expires_at": created + 300, "used": False}
        return {"object": "account_link", "created": created, "expires_at": created + 300, "url": self.url + path}

    def _create_transfer(self, f):
        try:
            amount = int(f.get("amount", ""))
        except ValueError:
            raise invalid("Invalid integer: " + f.get("amount", ""), param="amount")
        if amount <= 0:
            raise invalid("Invalid positive integer", param="amount")
        if f.get("currency") != "usd":
            raise invalid("Invalid currency: " + str(f.get("currency")), param="currency")
        if not f.get("destination"):
            raise invalid("Missing required param: destination.", param="destination", code="parameter_missing")
        acct = self.store.get(f["destination"])
        if not acct or acct.get("object") != "account":
            raise invalid(f"No such destination: '{f['destination']}'", param="destination", code="resource_missing")
        if acct["capabilities"].get("transfers") != "active":
            raise invalid("Your destination account needs to have at least one of the following capabilities "
                          "enabled: transfers, crypto_transfers, legacy_payments", param="destination",
                          code="insufficient_capabilities_for_transfer")
        source = f.get("source_transaction")
        if source:
            charge = self._obj("charge", source, 400, "source_transaction")
            if not charge["captured"] or charge["status"] != "succeeded":
                raise invalid("The source_transaction has not been captured.", param="source_transaction")
            if amount > charge["amount"]:
                raise invalid(f"Transfer amount (${amount / 100:.2f}) is greater than the amount of the "
                              f"source_transaction (${charge['amount'] / 100:.2f}).", param="amount")
        tr = {"id": new_id("tr"), "object": "transfer", "amount": amount, "amount_reversed": 0,
              "balance_transaction": new_id("txn"), "created": self.now(), "currency": "usd",
              "description": f.get("description"), "destination": acct["id"], "destination_payment": new_id("py"),
              "livemode": False, "metadata": metadata_of(f), "reversed": False, "source_transaction": source,
              "source_type": "card", "transfer_group": f.get("transfer_group")}
        tr["reversals"] = {"object": "list", "data": [], "has_more": False, "total_count": 0,
                           "url": f"/v1/transfers/{tr['id']}/reversals"}
        self.store[tr["id"]] = tr
        return copy.deepcopy(tr)

    def _list_of(self, kind, f, keep, url):
        return self._page([o for o in reversed(list(self.store.values())) if o.get("object") == kind and keep(o)],
                          f, url)

    def _list_transfers(self, f):
        return self._list_of("transfer", f, lambda o: not f.get("destination") or o["destination"] == f["destination"],
                             "/v1/transfers")

    def _retrieve_transfer(self, f, ident):
        return copy.deepcopy(self._obj("transfer", ident))

    def _create_reversal(self, f, ident):
        tr = self._obj("transfer", ident)
        left = tr["amount"] - tr["amount_reversed"]
        amount = _amount_of(f, left)
        if amount > left:
            raise invalid(f"Amount (${amount / 100:.2f}) is greater than the amount of the transfer that can be "
                          f"reversed (${left / 100:.2f}).", param="amount")
        rev = {"id": new_id("trr"), "object": "transfer_reversal", "amount": amount, "balance_transaction": new_id("txn"),
               "created": self.now(), "currency": "usd", "destination_payment_refund": new_id("pyr"),
               "metadata": metadata_of(f), "source_refund": None, "transfer": tr["id"]}
        self.store[rev["id"]] = rev
        tr["amount_reversed"] += amount
        tr["reversed"] = tr["amount_reversed"] == tr["amount"]
        tr["reversals"]["data"].insert(0, copy.deepcopy(rev))
        tr["reversals"]["total_count"] += 1
        return copy.deepcopy(rev)

    def _list_reversals(self, f, ident):
        self._obj("transfer", ident)
        return self._list_of("transfer_reversal", f, lambda o: o["transfer"] == ident,
                             f"/v1/transfers/{ident}/reversals")


def _amount_of(f, left):
    """The positive integer `amount` of a refund or reversal; what is left when absent."""
    try:
        amount = int(f["amount"]) if "amount" in f else left
    except ValueError:
        raise invalid("Invalid integer: " + f["amount"], param="amount")
    if amount <= 0:
        raise invalid("Invalid positive integer", param="amount")
    return amount


def _requirements(due, disabled_reason, past_due=()):
    return {"alternatives": [], "current_deadline": None, "currently_due": list(due), "disabled_reason": disabled_reason,
            "errors": [], "eventually_due": list(due), "past_due": list(past_due), "pending_verification": []}


def metadata_of(f):
    return {k[len("metadata["):-1]: v for k, v in f.items() if k.startswith("metadata[") and k.endswith("]")}


def form_list(f, name):
    v = f.get(name + "[]")
    return [v] if v else []


def public(o):
    return {k: copy.deepcopy(v) for k, v in o.items() if not k.startswith("_")}


def _error_args(error):
    """StripeError keyword arguments from a Stripe error object."""
    rest = {k: v for k, v in error.items() if k not in ("type", "message", "code")}
    return {"type_": error["type"], "message": error["message"], "code": error["code"], **rest}


def _api_error():
    return {"error": {"type": "api_error", "message": "An unknown error occurred"}}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake = None

    def log_message(self, *args):
        pass

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parsed = urllib.parse.urlsplit(self.path)
        if self.command == "GET" and parsed.path.startswith("/setup/"):  # the hosted onboarding page
            status, page = self.fake.open_link(parsed.path)
            data = page.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, body, extra = self.fake.handle(self.command, parsed.path, headers, raw, parsed.query)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", new_id("req"))
        for k, v in extra.items():
            self.send_header(k, v)
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client died waiting (a crash test): as at Stripe,
            self.close_connection = True                 # the work is done and the answer lost

    do_GET = _serve
    do_POST = _serve
    do_DELETE = _serve
