"""A minimal end-to-end check that the harness and the binary work together."""

import pytest

pytestmark = pytest.mark.pooler


def test_health(api):
    r = api.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    assert r.headers["X-Request-Id"]


def test_register_and_me(api):
    u = api.register_user()
    r = api.get("/users/me", token=u["token"])
    assert r.status_code == 200
    assert r.json()["email"] == u["email"]


def test_reference_pages_are_served(api):
    """GET /docs and its script on every engine (their own tests are engine-independent)."""
    page = api.get("/docs")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    script = api.get("/docs/redoc.standalone.js")
    assert script.status_code == 200 and len(script.content) > 100_000
