"""GET /users/me and PATCH /users/me (the customer's profile and coordinates)."""
import re

import pytest

from conftest import unique_email
from helpers import assert_error, error_body, send_raw_json

ID_RE = re.compile(r"^c[0-9a-z]{24}$")
PROFILE_KEYS = {"id", "email", "name", "address", "zip", "lat", "lng"}
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")


def me(api, token):
    r = api.get("/users/me", token=token)
    assert r.status_code == 200, r.text
    return r.json()


def assert_field_error(r, field):
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(f"{field}: "), r.json()
    assert r.json() == error_body(400, r.json()["error"], field=field)


# ---------------------------------------------------------------- GET /users/me

def test_get_me_returns_profile(api):
    email = unique_email("me")
    u = api.register_user(email=email, name="Pat Profile", address="12 Elm St, Springfield", zip="02134")
    body = me(api, u["token"])
    assert PROFILE_KEYS <= set(body), body
    assert body["id"] == u["id"]
    assert ID_RE.match(body["id"])
    assert body["email"] == email
    assert body["name"] == "Pat Profile"
    assert body["address"] == "12 Elm St, Springfield"
    assert body["zip"] == "02134"
    assert body["lat"] is None and body["lng"] is None
    assert not any("password" in k.lower() for k in body), body
    assert "password123" not in str(body)


def test_get_me_is_per_caller(api):
    a = api.register_user(name="Alice")
    b = api.register_user(name="Bob")
    assert me(api, a["token"])["name"] == "Alice"
    assert me(api, b["token"])["name"] == "Bob"


def test_get_me_without_token_is_401(api):
    r = api.get("/users/me")
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED
    r = api.get("/users/me", token="not-a-jwt")
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED


def test_provider_token_is_403(api):
    p = api.register_provider()
    r = api.get("/users/me", token=p["token"])
    assert r.status_code == 403
    assert r.json() == FORBIDDEN


# ---------------------------------------------------------------- PATCH /users/me

def test_patch_sets_coordinates(api):
    u = api.register_user()
    r = api.patch("/users/me", token=u["token"], json={"lat": 40.7128, "lng": -74.006})
    assert r.status_code == 200, r.text
    body = r.json()
    assert PROFILE_KEYS <= set(body)
    assert body["id"] == u["id"]
    assert body["lat"] == 40.7128 and body["lng"] == -74.006
    got = me(api, u["token"])
    assert got["lat"] == 40.7128 and got["lng"] == -74.006
    # the rest of the profile is untouched
    assert got["name"] == "Test User" and got["address"] == "1 Main St" and got["zip"] == "10001"


@pytest.mark.parametrize("lat,lng", [(-90, -180), (90, 180), (-90.0, 180.0), (90.0, -180.0), (0, 0),
                                     (-0.000001, 179.999999)])
def test_patch_accepts_boundaries(api, lat, lng):
    u = api.register_user()
    r = api.patch("/users/me", token=u["token"], json={"lat": lat, "lng": lng})
    assert r.status_code == 200, r.text
    assert r.json()["lat"] == lat and r.json()["lng"] == lng
    got = me(api, u["token"])
    assert got["lat"] == lat and got["lng"] == lng
    assert isinstance(got["lat"], (int, float)) and not isinstance(got["lat"], bool)


PATCH_BAD = [
    ("lat", {"lat": 90.0001}),
    ("lat", {"lat": -90.0001}),
    ("lat", {"lat": 91}),
    ("lat", {"lat": "40"}),
    ("lat", {"lat": True}),
    ("lat", {"lat": [40]}),
    ("lat", {"lat": {"v": 40}}),
    ("lng", {"lng": 180.5}),
    ("lng", {"lng": -180.5}),
    ("lng", {"lng": "-74"}),
    ("lng", {"lat": 10, "lng": 181}),
    ("lat", {"lat": 1e308, "lng": 0}),
    ("lng", {"lat": 1, "lng": "x"}),
]


@pytest.mark.parametrize("field,body", PATCH_BAD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(PATCH_BAD)])
def test_patch_rejects_bad_values_and_changes_nothing(api, field, body):
    u = api.register_user()
    assert api.patch("/users/me", token=u["token"], json={"lat": 12.5, "lng": 34.25}).status_code == 200
    assert_field_error(api.patch("/users/me", token=u["token"], json=body), field)
    got = me(api, u["token"])
    assert got["lat"] == 12.5 and got["lng"] == 34.25


def test_patch_non_finite_number_is_400(api):
    u = api.register_user()
    for raw in ('{"lat": Infinity}', '{"lat": NaN}', '{"lat": 1e400}'):
        r = api.patch("/users/me", token=u["token"], data=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, raw
        assert r.json() == error_body(400, r.json()["error"]), raw
    assert me(api, u["token"])["lat"] is None


def test_patch_empty_object_changes_nothing(api):
    u = api.register_user()
    api.patch("/users/me", token=u["token"], json={"lat": 1.5, "lng": 2.5})
    before = me(api, u["token"])
    r = api.patch("/users/me", token=u["token"], json={})
    assert r.status_code == 200, r.text
    assert r.json()["lat"] == 1.5 and r.json()["lng"] == 2.5
    r = api.patch("/users/me", token=u["token"])  # a missing body counts as {}
    assert r.status_code == 200, r.text
    after = me(api, u["token"])
    assert {k: after[k] for k in PROFILE_KEYS} == {k: before[k] for k in PROFILE_KEYS}


def test_patch_empty_object_before_any_set_keeps_nulls(api):
    u = api.register_user()
    r = api.patch("/users/me", token=u["token"], json={})
    assert r.status_code == 200
    assert r.json()["lat"] is None and r.json()["lng"] is None


def test_patch_only_lat_keeps_lng_and_vice_versa(api):
    u = api.register_user()
    api.patch("/users/me", token=u["token"], json={"lat": 10, "lng": 20})
    r = api.patch("/users/me", token=u["token"], json={"lat": 11})
    assert r.status_code == 200
    assert r.json()["lat"] == 11 and r.json()["lng"] == 20
    r = api.patch("/users/me", token=u["token"], json={"lng": -21.5})
    assert r.status_code == 200
    got = me(api, u["token"])
    assert got["lat"] == 11 and got["lng"] == -21.5


def test_patch_only_lat_from_null_leaves_lng_null(api):
    u = api.register_user()
    r = api.patch("/users/me", token=u["token"], json={"lat": 45})
    assert r.status_code == 200
    got = me(api, u["token"])
    assert got["lat"] == 45 and got["lng"] is None


def test_patch_zero_is_stored_as_zero(api):
    u = api.register_user()
    api.patch("/users/me", token=u["token"], json={"lat": 33.3, "lng": 44.4})
    api.patch("/users/me", token=u["token"], json={"lat": 0, "lng": 0.0})
    got = me(api, u["token"])
    assert got["lat"] == 0 and got["lat"] is not None
    assert got["lng"] == 0 and got["lng"] is not None


def test_patch_ignores_other_fields(api):
    u = api.register_user(name="Keep Me")
    r = api.patch("/users/me", token=u["token"],
                  json={"email": "x@example.com", "zip": "99999", "id": "cxxx", "lat": 5, "isPremium": True})
    assert r.status_code == 200, r.text
    got = me(api, u["token"])
    assert got["id"] == u["id"] and got["name"] == "Keep Me" and got["email"] == u["email"]
    assert got["zip"] == "10001" and got["lat"] == 5 and got["isPremium"] is False


def test_patch_affects_only_the_caller(api):
    a, b = api.register_user(), api.register_user()
    api.patch("/users/me", token=a["token"], json={"lat": 1, "lng": 2})
    got = me(api, b["token"])
    assert got["lat"] is None and got["lng"] is None


def test_patch_malformed_body_is_400(api):
    u = api.register_user()
    assert_error(send_raw_json(api, "PATCH", "/users/me", u["token"], "{lat: 1"), 400, "body: malformed JSON")
    r = api.patch("/users/me", token=u["token"], json=[{"lat": 1}])
    assert r.status_code == 400
    assert r.json() == error_body(400, "body: must be a JSON object")
    assert me(api, u["token"])["lat"] is None


def test_patch_without_token_is_401(api):
    r = api.patch("/users/me", json={"lat": 1})
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED


def test_patch_with_provider_token_is_403(api):
    p = api.register_provider()
    r = api.patch("/users/me", token=p["token"], json={"lat": 1})
    assert r.status_code == 403
    assert r.json() == FORBIDDEN
    # role is checked before the body: a bad body from a provider is still 403
    r = api.patch("/users/me", token=p["token"], json={"lat": 1000})
    assert r.status_code == 403


# ---------------------------------------------------------------- PATCH name and phone (issue 24)

def test_patch_sets_name_and_phone(api):
    u = api.register_user(name="Old Name")
    assert me(api, u["token"])["phone"] is None
    r = api.patch("/users/me", token=u["token"], json={"name": "New Name", "phone": "+1 212 555 0100"})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "New Name" and r.json()["phone"] == "+1 212 555 0100"
    got = me(api, u["token"])
    assert got["name"] == "New Name" and got["phone"] == "+1 212 555 0100"
    # a patch without them keeps them; an empty phone clears it
    assert api.patch("/users/me", token=u["token"], json={"lat": 1}).json()["phone"] == "+1 212 555 0100"
    r = api.patch("/users/me", token=u["token"], json={"phone": ""})
    assert r.status_code == 200 and r.json()["phone"] is None and r.json()["name"] == "New Name"
    # the name a login answers with is the new one
    r = api.post("/auth/login", json={"email": u["email"], "password": u["password"]})
    assert r.status_code == 200 and r.json()["user"]["name"] == "New Name"


def test_patch_name_of_100_characters_and_phone_of_20(api):
    u = api.register_user()
    r = api.patch("/users/me", token=u["token"], json={"name": "n" * 100, "phone": "1" * 20})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "n" * 100 and r.json()["phone"] == "1" * 20


NAME_PHONE_BAD = [
    ({"name": ""}, "name: must not be empty"),
    ({"name": "   "}, "name: must not be empty"),
    ({"name": "n" * 101}, "name: must be at most 100 characters"),
    ({"name": 5}, "name: must be a string"),
    ({"phone": "1" * 21}, "phone: must be at most 20 characters"),
    ({"phone": 2125550100}, "phone: must be a string"),
    ({"name": "Fine", "phone": ["1"]}, "phone: must be a string"),
]


@pytest.mark.parametrize("body,error", NAME_PHONE_BAD, ids=[e for _, e in NAME_PHONE_BAD])
def test_patch_bad_name_or_phone_is_400_and_changes_nothing(api, body, error):
    u = api.register_user(name="Stays")
    r = api.patch("/users/me", token=u["token"], json=body)
    assert r.status_code == 400 and r.json()["error"] == error, r.text
    got = me(api, u["token"])
    assert got["name"] == "Stays" and got["phone"] is None
