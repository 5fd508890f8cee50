"""Errors a program can read (issue 24, item 3), on both engines.

Every error body is `{error, code}` (plus `field` on a validation error): the suite's contract
check (conftest.py) validates `code` against the enum of the OpenAPI document on every error
any test meets, and every file compares whole bodies (helpers.error_body). This file checks
what no other test does: the RFC 6750 challenge of a 401 to a missing, bad, expired or ended
token, the 415 of a multipart body sent to a JSON route, the field of query and body
validation errors, and that the document lists the codes.
"""
import requests

from helpers import assert_error, error_body, png_bytes

CHALLENGE = "Bearer"
INVALID_TOKEN = 'Bearer error="invalid_token"'
UNSUPPORTED = "This route takes a JSON body (Content-Type: application/json)"


def challenge(r):
    assert_error(r, 401, "Unauthorized")
    return r.headers.get("WWW-Authenticate")


def test_a_missing_token_gets_a_bare_bearer_challenge(api):
    assert challenge(api.get("/users/me")) == CHALLENGE
    assert challenge(api.get("/users/me", headers={"Authorization": "Basic dXNlcjpwYXNz"})) == CHALLENGE
    assert challenge(api.get("/users/me", headers={"Authorization": "Bearer "})) == CHALLENGE
    # an upload route refuses the token before the body, with the same challenge
    r = api.post("/providers/me/logo", files={"logo": ("a.png", png_bytes(1), "image/png")})
    assert challenge(r) == CHALLENGE


def test_a_bad_token_is_an_invalid_token(api):
    u = api.register_user()
    tampered = u["token"][:-3] + ("aaa" if not u["token"].endswith("aaa") else "bbb")
    for token in ("not-a-jwt", "a.b.c", tampered):
        assert challenge(api.get("/users/me", token=token)) == INVALID_TOKEN, token
    assert challenge(api.post("/providers/me/logo", token="not-a-jwt",
                              files={"logo": ("a.png", png_bytes(1), "image/png")})) == INVALID_TOKEN


def test_an_expired_token_is_an_invalid_token(api):
    u = api.register_user()
    assert api.get("/users/me", token=u["token"]).status_code == 200
    api.advance_clock(7 * 24 * 3600 * 1000 + 1000)  # a customer token lives 7 days
    assert challenge(api.get("/users/me", token=u["token"])) == INVALID_TOKEN


def test_a_token_whose_account_is_gone_is_an_invalid_token(api, admin_token):
    u = api.register_user()
    r = api.delete(f"/admin/accounts/{u['id']}", params={"role": "user"}, token=admin_token)
    assert r.status_code == 200, r.text
    assert challenge(api.get("/users/me", token=u["token"])) == INVALID_TOKEN


def test_other_errors_carry_no_challenge(api):
    u = api.register_user()
    r = api.get("/providers/me", token=u["token"])
    assert_error(r, 403, "Forbidden")
    assert "WWW-Authenticate" not in r.headers
    r = api.post("/auth/login", json={"email": u["email"], "password": "wrong-password"})
    assert_error(r, 401, "Invalid credentials", "invalid_credentials")


def test_a_multipart_body_to_a_json_route_is_415(api):
    u = api.register_user()
    form = {"service": (None, "lawncare"), "isAsap": (None, "true")}
    r = api.post("/jobs", token=u["token"], files=form)
    assert_error(r, 415, UNSUPPORTED)
    r = api.patch("/users/me", token=u["token"], files={"lat": (None, "40")})
    assert_error(r, 415, UNSUPPORTED)
    r = api.post("/auth/login", files={"email": (None, u["email"]), "password": (None, u["password"])})
    assert_error(r, 415, UNSUPPORTED)
    # nothing was made, and the same request as JSON works
    assert api.get("/jobs", token=u["token"]).json() == {"jobs": []}
    r = api.post("/jobs", token=u["token"], json={"service": "lawncare", "isAsap": True})
    assert r.status_code == 201, r.text
    # a form-encoded body is not a form this route reads: it is parsed as JSON, as before
    r = api.post("/jobs", token=u["token"], data="service=lawncare",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(r, 400, "body: malformed JSON")


def test_validation_errors_name_their_field(api):
    u = api.register_user()
    r = api.post("/auth/register", json={"email": "x@example.com"})
    assert r.json() == {"error": "password: is required", "code": "validation_failed", "field": "password"}
    r = api.get("/weather", params={"zip": "1"}, token=u["token"])
    assert r.json() == {"error": "zip: must be exactly 5 digits", "code": "validation_failed", "field": "zip"}
    r = api.post("/jobs", token=u["token"], json={"service": "lawncare", "isAsap": True},
                 headers={"Idempotency-Key": "\u00e9"})
    assert r.json() == error_body(400, "Idempotency-Key: must be 1 to 255 printable ASCII characters")
    assert r.json()["field"] == "Idempotency-Key"


def test_the_document_lists_every_code(api):
    doc = requests.get(api.url + "/openapi.json", timeout=30).json()
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "code"]
    codes = error["properties"]["code"]["enum"]
    for code in ("validation_failed", "unauthorized", "forbidden", "not_found", "conflict", "invalid_state",
                 "rate_limited", "payload_too_large", "unsupported_media_type", "service_unavailable",
                 "WITHIN_CANCELLATION_WINDOW", "verification_required", "premium_required", "already_member"):
        assert code in codes, code
    assert len(codes) == len(set(codes))
    assert "field" in error["properties"]
    unauthorized = doc["components"]["responses"]["401"]
    assert "WWW-Authenticate" in unauthorized["headers"]
    assert "Retry-After" in doc["components"]["responses"]["503"]["headers"]
    assert "Retry-After" in doc["components"]["responses"]["409"]["headers"]
    assert "415" in doc["paths"]["/jobs"]["post"]["responses"]
    assert "415" not in doc["paths"]["/jobs/{id}/images"]["post"]["responses"]  # an upload route
