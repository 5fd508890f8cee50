"""A minimal end-to-end check that the harness and the binary work together."""


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
